"""AICR evidence directories packed as tar / tar.gz: safe in-memory reading and manifest checks."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Iterable

import pytest

from evidence_app.verification import (
    SummaryBundleError,
    load_trust_root,
    parse_statement,
    read_summary_bundle,
)
from evidence_app.verification.pipeline import verify_evidence
from evidence_app.verification.summary_bundle import (
    check_summary_files,
    open_summary_bundle,
    read_archive,
)
from tests.shared_data import GOLDEN
from tests.sigstore_private import GITHUB_ISSUER, PrivateSigstore

EXAMPLE = GOLDEN / "generated/evidence-example-full"


def _example_files(prefix: str = "summary-bundle/") -> dict[str, bytes]:
    files = {
        f"{prefix}{p.relative_to(EXAMPLE / 'summary-bundle').as_posix()}": p.read_bytes()
        for p in sorted((EXAMPLE / "summary-bundle").rglob("*"))
        if p.is_file()
    }
    if prefix:
        files["pointer.yaml"] = (EXAMPLE / "pointer.yaml").read_bytes()
    return files


def _tar(
    files: dict[str, bytes], *, gz: bool = False, extra: Iterable[tarfile.TarInfo] = ()
) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w", format=tarfile.PAX_FORMAT) as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mtime = 1_700_000_000
            tar.addfile(info, io.BytesIO(content))
        for info in extra:
            tar.addfile(info)
    return buf.getvalue()


def _info(name: str, kind: bytes, **attrs: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


@pytest.mark.parametrize(
    ("prefix", "gz"), [("summary-bundle/", False), ("summary-bundle/", True), ("", True)]
)
def test_it_reads_and_checks_the_example_evidence(prefix: str, gz: bool) -> None:
    bundle = read_summary_bundle(_tar(_example_files(prefix), gz=gz))
    assert bundle.root == prefix
    assert bundle.statement.recipe_name == "h100-eks-ubuntu-training-kubeflow"
    assert len(bundle.manifest) == 6
    assert bundle.recipe_yaml_matches_digest
    assert bundle.recipe_yaml.startswith(b"apiVersion: aicr.run/")
    assert set(bundle.ctrf) == {"deployment", "performance", "conformance"}
    assert next(t.name for t in bundle.ctrf["performance"].tests) == "nccl-all-reduce-bw"
    assert bundle.ctrf["conformance"].counts()["skipped"] == 13
    assert bundle.signed_bundle is None
    assert bundle.snapshot_yaml
    assert bundle.bom
    assert (bundle.pointer_yaml is not None) == bool(prefix)


def _expect(files: dict[str, bytes], message: str, file: str | None = None) -> SummaryBundleError:
    with pytest.raises(SummaryBundleError, match=message) as info:
        read_summary_bundle(_tar(files))
    if file is not None:
        assert info.value.file == file, str(info.value)
    return info.value


def test_it_rejects_a_modified_ctrf_report() -> None:
    files = _example_files()
    path = "summary-bundle/ctrf/performance.json"
    files[path] = files[path].replace(b'"duration": 0', b'"duration": 9', 1)  # same size
    _expect(files, "sha256 differs from manifest.json", "ctrf/performance.json")
    files[path] += b"\n"
    _expect(files, "size 1067 differs from manifest.json", "ctrf/performance.json")


def test_it_rejects_a_ctrf_report_changed_together_with_the_manifest() -> None:
    files = _example_files()
    path = "summary-bundle/ctrf/performance.json"
    files[path] = files[path].replace(b'"skipped"', b'"passed"', 1)
    manifest = json.loads(files["summary-bundle/manifest.json"])
    for entry in manifest["files"]:
        if entry["path"] == "ctrf/performance.json":
            entry["sha256"] = "sha256:" + hashlib.sha256(files[path]).hexdigest()
            entry["size"] = len(files[path])
    files["summary-bundle/manifest.json"] = json.dumps(manifest).encode()
    _expect(files, "predicate.manifest.digest", "manifest.json")


def test_it_rejects_a_missing_file() -> None:
    files = _example_files()
    del files["summary-bundle/snapshot.yaml"]
    _expect(files, "listed in manifest.json but missing", "snapshot.yaml")


def test_it_rejects_an_unlisted_file() -> None:
    files = _example_files()
    files["summary-bundle/logs/extra.txt"] = b"hello"
    _expect(files, "not listed in manifest.json", "logs/extra.txt")
    files = _example_files()
    files["other/notes.txt"] = b"hello"
    _expect(files, "outside the summary bundle", "other/notes.txt")


def test_it_rejects_a_statement_that_differs_from_the_signed_one() -> None:
    files = _example_files()
    signed = parse_statement(files["summary-bundle/statement.intoto.json"])
    files["summary-bundle/statement.intoto.json"] = files[
        "summary-bundle/statement.intoto.json"
    ].replace(b'"aicrVersion":"v0.19.0-example"', b'"aicrVersion":"v0.19.1"')
    with pytest.raises(SummaryBundleError, match="differs from the signed statement"):
        check_summary_files(open_summary_bundle(_tar(files)), statement=signed)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("summary-bundle/../../etc/passwd", "'..'"),
        ("../evil.txt", "'..'"),
        ("/etc/passwd", "absolute"),
        ("summary-bundle\\x.txt", "backslash"),
    ],
)
def test_it_rejects_unsafe_member_paths(name: str, message: str) -> None:
    files = _example_files()
    files[name] = b"x"
    _expect(files, message)


@pytest.mark.parametrize(
    ("info", "message"),
    [
        (
            _info("summary-bundle/link.json", tarfile.SYMTYPE, linkname="/etc/passwd"),
            "links are not allowed",
        ),
        (
            _info(
                "summary-bundle/hard.json", tarfile.LNKTYPE, linkname="summary-bundle/recipe.yaml"
            ),
            "links",
        ),
        (_info("summary-bundle/dev", tarfile.CHRTYPE, devmajor=1, devminor=3), "regular files"),
        (_info("summary-bundle/fifo", tarfile.FIFOTYPE), "regular files"),
    ],
    ids=["symlink", "hardlink", "device", "fifo"],
)
def test_it_rejects_links_and_special_members(info: tarfile.TarInfo, message: str) -> None:
    data = _tar(_example_files(), extra=[info])
    with pytest.raises(SummaryBundleError, match=message) as raised:
        read_summary_bundle(data)
    assert raised.value.file == info.name


def test_it_refuses_a_tar_bomb_before_reading_it() -> None:
    header = tarfile.TarInfo("summary-bundle/huge.bin")
    header.size = 10**12  # declared, never present
    data = header.tobuf(format=tarfile.PAX_FORMAT) + _tar(_example_files())
    with pytest.raises(SummaryBundleError, match="declares 1000000000000 bytes") as info:
        read_summary_bundle(data)
    assert info.value.file == "summary-bundle/huge.bin"


def test_it_refuses_a_gzip_bomb() -> None:
    bomb = gzip.compress(b"\0" * (80 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 200_000
    with pytest.raises(SummaryBundleError, match="compression bomb"):
        read_summary_bundle(bomb)


def test_it_refuses_oversized_members_and_too_many_members() -> None:
    files = _example_files()
    data = _tar(files)
    with pytest.raises(SummaryBundleError, match="declares 102382 bytes") as info:
        read_archive(data, max_member_bytes=64 * 1024)
    assert info.value.file == "summary-bundle/recipe.yaml"
    with pytest.raises(SummaryBundleError, match="more than 5 archive members"):
        read_archive(data, max_members=5)
    with pytest.raises(SummaryBundleError, match="exceeds"):
        read_archive(data, max_archive_bytes=1024)


def test_it_rejects_duplicate_members_and_non_archives() -> None:
    data = _tar(_example_files(), extra=[])
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for _ in range(2):
            info = tarfile.TarInfo("summary-bundle/recipe.yaml")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(SummaryBundleError, match="appears twice"):
        read_archive(buf.getvalue())
    with pytest.raises(SummaryBundleError, match="not a tar"):
        read_archive(b"PK\x03\x04 a zip file")
    with pytest.raises(SummaryBundleError, match="truncated gzip"):
        read_archive(gzip.compress(data)[:-200])


def test_it_verifies_a_signed_evidence_tarball_end_to_end() -> None:
    instance = PrivateSigstore(name="tarball.test")
    root = load_trust_root(instance.trusted_root_json(), name="tarball")
    files = _example_files()
    identity = "https://github.com/acme/aicr/.github/workflows/evidence.yaml@refs/heads/main"
    signed = instance.sign_dsse(files["summary-bundle/statement.intoto.json"], identity=identity)
    files["summary-bundle/attestation.intoto.jsonl"] = (
        json.dumps(json.loads(signed.bundle)).encode() + b"\n"
    )
    report = verify_evidence(_tar(files, gz=True), trusted_root=root, issuer=GITHUB_ISSUER)
    assert [(s.step, s.ok) for s in report.transcript] == [
        ("parse", True),
        ("signature", True),
        ("statement", True),
        ("manifest", True),
    ], report.transcript.to_list()
    assert report.status == "verified"
    assert report.summary is not None
    assert set(report.summary.ctrf) == {
        "deployment",
        "performance",
        "conformance",
    }
    assert report.outcome is not None
    assert report.outcome.signer is not None
    assert report.outcome.signer.identity == identity

    files["summary-bundle/ctrf/deployment.json"] += b" "
    report = verify_evidence(_tar(files, gz=True), trusted_root=root, issuer=GITHUB_ISSUER)
    assert report.status == "invalid"
    failed = report.transcript.failed_step
    assert failed is not None
    assert failed.step == "manifest"
    assert "ctrf/deployment.json" in failed.detail

    del files["summary-bundle/attestation.intoto.jsonl"]
    report = verify_evidence(_tar(files), trusted_root=root, issuer=GITHUB_ISSUER)
    assert report.transcript.to_list()[0]["ok"] is False
    assert "unsigned" in report.transcript.to_list()[0]["detail"]


def test_it_reads_the_unsigned_example_directory_as_files() -> None:
    root = EXAMPLE / "summary-bundle"
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    bundle = check_summary_files(files)
    assert bundle.statement.recipe_digest == hashlib.sha256(files["recipe.yaml"]).hexdigest()
    assert bundle.root == ""
