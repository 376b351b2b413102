"""The pointer contract (``evidence_app.pointers``) on AICR's real pointer files and on each
way a pointer can break it (AICR CI's ``verifier.CheckEvidenceTree``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evidence_app.corroborate.allowlist import Allowlist, load_allowlist, source_slug
from evidence_app.pointers import (
    FLAT,
    NESTED,
    PointerError,
    check_pointer,
    parse_pointer,
    pointer_rel_path,
    render_pointer,
)
from tests.shared_data import AICR

V019 = AICR / "recipes" / "evidence"
V1 = AICR / "_index-v1" / "recipes" / "evidence"
TREES = [V019, V1]

REAL = (
    "h100-aks-ubuntu-training/5bf9e82f0e90a11528ac85f4bcb866c8/"
    "sha256-c51d0f2dd75b9f397ddc9713150159553f4a8d15982095ea52a28872d7eef479.yaml"
)
V3 = (
    "gb300-generic-ubuntu-training/728b071aed7124418b1fa9c7f0521e24/"
    "sha256-74c42dc3d793da22081a2e9507ca78842fe3795059f245d9b03c2edf4eccd8ab.yaml"
)
PROFILED = (
    "h100-gke-cos-inference-dynamo-gpustack-gcp-managed/3be4483c0c6e439444ba6763efe9a586/"
    "sha256-52dabcc7c0b12cf246f8962f66673685e68b4a95613c41987a5814a2ea01591d.yaml"
)


def pointers_of(tree: Path) -> list[str]:
    return sorted(
        p.relative_to(tree).as_posix() for p in tree.rglob("*.yaml") if p.name != "allowlist.yaml"
    )


def problems(text: str, rel: str = REAL, allowlist: Allowlist | None = None) -> list[str]:
    pointer = parse_pointer(text.encode(), path=rel)
    return check_pointer(
        pointer, rel_path=rel, allowlist=allowlist or load_allowlist(V019 / "allowlist.yaml")
    ).problems


@pytest.fixture
def real_text() -> str:
    return (V019 / REAL).read_text()


def test_it_reads_both_real_allowlists() -> None:
    old, new = (load_allowlist(tree / "allowlist.yaml") for tree in TREES)
    sources = lambda a: {e.source for e in a.entries if e.source}  # noqa: E731
    assert sources(new) - sources(old) == {
        "9d71833b5a62cb2928c1b40fffc6c20f",
        "2e85f8702c6214cafcc0ed714d928720",
    }


@pytest.mark.parametrize("tree", TREES, ids=["v0.19", "v1"])
def test_it_parses_every_real_pointer_and_writes_it_back_byte_for_byte(tree: Path) -> None:
    rels = pointers_of(tree)
    assert len(rels) >= 9
    for rel in rels:
        pointer = parse_pointer((tree / rel).read_bytes(), path=rel)
        assert pointer.recipe == rel.split("/")[0].removesuffix(".yaml")
        if rel.count("/") == 2:
            assert "recipes/evidence/" + rel == pointer_rel_path(pointer)
            assert render_pointer(pointer) == (tree / rel).read_text()
            assert parse_pointer(render_pointer(pointer).encode()) == pointer


def test_every_pointer_of_the_v019_tree_keeps_the_contract_as_community() -> None:
    allowlist = load_allowlist(V019 / "allowlist.yaml")
    for rel in pointers_of(V019):
        result = check_pointer(
            parse_pointer((V019 / rel).read_bytes()), rel_path=rel, allowlist=allowlist
        )
        assert (result.layout, result.claimed_class, result.problems) == (NESTED, "community", [])


def test_it_reads_a_v3_and_a_profiled_pointer() -> None:
    v3 = parse_pointer((V1 / V3).read_bytes())
    assert v3.predicate_type == "https://aicr.run/recipe-evidence/v3"
    assert v3.signer is not None
    assert v3.signer.rekor_log_index == 116117498
    assert v3.attested_at.isoformat() == "2026-09-19T02:57:39+00:00"
    profiled = parse_pointer((V1 / PROFILED).read_bytes())
    assert profiled.profile == "gpuStack=gcp-managed"
    assert profiled.signer is not None
    assert profiled.signer.slug == "3be4483c0c6e439444ba6763efe9a586"


def test_a_flat_pointer_is_an_unsigned_pending_pointer_not_a_violation() -> None:
    rel = "h100-eks-ubuntu-inference-dynamo.yaml"
    result = check_pointer(
        parse_pointer((V1 / rel).read_bytes()),
        rel_path=rel,
        allowlist=load_allowlist(V1 / "allowlist.yaml"),
    )
    assert (result.layout, result.problems) == (FLAT, [])


def test_it_refuses_a_path_whose_source_is_not_the_signer_slug(real_text: str) -> None:
    rel = REAL.replace("5bf9e82f0e90a11528ac85f4bcb866c8", "7c4c0edc8c765a95a0f3afdb3bbb8e91")
    assert problems(real_text, rel) == [
        "path source '7c4c0edc8c765a95a0f3afdb3bbb8e91' is not the slug of "
        "attestations[0].signer (5bf9e82f0e90a11528ac85f4bcb866c8)"
    ]


def test_it_refuses_a_signer_the_tree_does_not_allowlist(real_text: str) -> None:
    identity = "someone@example.org"
    slug = source_slug("https://github.com/login/oauth", identity)
    text = real_text.replace(
        "identity: https://github.com/yuanchen8911/aicr/.github/workflows/evidence-publish.yaml"
        "@refs/heads/evidence/aks-h100-training-inference",
        f"identity: {identity}",
    ).replace(
        "issuer: https://token.actions.githubusercontent.com",
        "issuer: https://github.com/login/oauth",
    )
    found = problems(text, REAL.replace("5bf9e82f0e90a11528ac85f4bcb866c8", slug))
    assert found == [
        f"attestations[0].signer (source {slug}, issuer https://github.com/login/oauth) is not "
        "allowlisted as community or partner in the tree's allowlist.yaml"
    ]


def test_it_refuses_an_unsigned_nested_pointer(real_text: str) -> None:
    head, _, _ = real_text.partition("    signer:")
    text = head + "recipe: h100-aks-ubuntu-training\nschemaVersion: 1.0.0\n"
    assert problems(text)[0].startswith("unsigned nested pointer: attestations[0].signer")


def test_it_refuses_a_tag_only_reference(real_text: str) -> None:
    text = real_text.replace(
        "      digest: sha256:c51d0f2dd75b9f397ddc9713150159553f4a8d15982095ea52a28872d7eef479\n",
        "",
    )
    assert problems(text)[0].startswith(
        "attestations[0].bundle.oci 'ghcr.io/yuanchen8911/aicr-evidence:h100-aks-ubuntu-"
        "training-d836f2ecb370' names a tag only and no bundle.digest is given"
    )


def test_a_digest_in_the_reference_pins_it_without_bundle_digest(real_text: str) -> None:
    digest = "sha256:c51d0f2dd75b9f397ddc9713150159553f4a8d15982095ea52a28872d7eef479"
    text = real_text.replace(f"      digest: {digest}\n", "").replace(
        "training-d836f2ecb370", f"training-d836f2ecb370@{digest}"
    )
    assert problems(text) == []


def test_it_refuses_a_file_name_that_is_not_the_bundle_digest(real_text: str) -> None:
    rel = REAL.replace("sha256-c51d", "sha256-0000")
    assert problems(real_text, rel) == [
        f"file name {rel.rsplit('/', 1)[1]!r} does not match attestations[0].bundle.digest "
        "sha256:c51d0f2dd75b9f397ddc9713150159553f4a8d15982095ea52a28872d7eef479"
    ]


def test_it_refuses_a_folder_that_is_not_the_recipe(real_text: str) -> None:
    rel = REAL.replace("h100-aks-ubuntu-training/", "h100-eks-ubuntu-training/")
    assert problems(real_text, rel) == [
        "path folder 'h100-eks-ubuntu-training' does not match recipe 'h100-aks-ubuntu-training'"
    ]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("schemaVersion: 1.0.0", "schemaVersion: 2.0.0"), "schemaVersion: unsupported pointer"),
        (("    bundle:\n", "    bundle: [\n"), "malformed YAML"),
        (("recipe: h100", "recipe: h100\nrecipe: h100"), "mapping key 'recipe' already defined"),
        (("recipe: h100", "recipes: h100"), "field recipes not found in type pointer"),
        (("attestedAt: 2026-07-23T17:00:38Z", "attestedAt: yesterday"), "not an RFC 3339 time"),
        (("rekorLogIndex: 37337053", "rekorLogIndex: many"), "into an int"),
        (("digest: sha256:c51d", "digest: md5:c51d"), "bundle.digest: must be sha256:"),
    ],
)
def test_it_names_the_field_of_a_malformed_pointer(
    real_text: str, edit: tuple[str, str], message: str
) -> None:
    text = real_text.replace(*edit)
    assert text != real_text
    with pytest.raises(PointerError, match=message.replace("[", r"\[")):
        parse_pointer(text.encode(), path="recipes/evidence/x.yaml")


def test_it_refuses_two_attestations(real_text: str) -> None:
    body = real_text.split("recipe:")[0]
    second = body.removeprefix("attestations:\n")
    with pytest.raises(
        PointerError, match=r"attestations: must list exactly one attestation, not 2"
    ):
        parse_pointer(
            (body + second + "recipe: h100-aks-ubuntu-training\nschemaVersion: 1.0.0\n").encode()
        )


def test_it_refuses_a_yaml_bomb_before_expanding_it() -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb = "\n".join(lines) + "\nschemaVersion: 1.0.0\n"
    with pytest.raises(PointerError, match=r"YAML bomb|aliases"):
        parse_pointer(bomb.encode())


def test_it_refuses_an_oversized_file() -> None:
    with pytest.raises(PointerError, match="larger than"):
        parse_pointer(b"#" * (1 << 20) + b"\n")
