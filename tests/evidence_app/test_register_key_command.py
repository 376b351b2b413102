"""``manage.py register_key --name NAME FILE|- [--by USERNAME]``: prints the fingerprint and
exits 0, or exits non-zero with a message naming the problem and registers nothing."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.core.management import CommandError, call_command

from evidence_app.models import SigningKey
from evidence_app.services import keys
from evidence_app.services.tokens import user_with_role
from tests.sigstore_private import generate_key, public_pem

FIXTURE_KEY = (
    Path(__file__).resolve().parents[1] / "data/fixtures/sigstore/key-dsse-ecdsa-p256/key.pub"
)


def _run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("register_key", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_registers_a_file_and_prints_its_fingerprint(db: None) -> None:
    out, err = _run("--name", "lab KMS key", str(FIXTURE_KEY))

    fingerprint = keys.public_key_inspect(FIXTURE_KEY.read_text()).fingerprint
    assert out.strip() == fingerprint
    assert "lab KMS key" in err
    key = SigningKey.objects.get()
    assert (key.fingerprint, key.name, key.registered_by) == (fingerprint, "lab KMS key", None)


def test_it_reads_stdin_and_records_who(db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    user_with_role(username="ops", role="maintainer")
    pem = public_pem(generate_key("ed25519"))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(pem)))

    out, _ = _run("--name", "ed", "--by", "ops", "-")

    key = SigningKey.objects.get()
    assert out.strip() == key.fingerprint == keys.public_key_inspect(pem).fingerprint
    assert (key.algorithm, key.registered_by.username) == ("ed25519", "ops")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--name", "x", "/nonexistent/key.pub"), "cannot read /nonexistent/key.pub"),
        (("--name", "", str(FIXTURE_KEY)), "--name: Give the key a name"),
        (("--name", "x", "--by", "nobody", str(FIXTURE_KEY)), "no user named 'nobody'"),
    ],
)
def test_it_fails_naming_the_problem(db: None, args: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        _run(*args)

    assert not SigningKey.objects.exists()


def test_it_names_an_unsupported_key(db: None, tmp_path: Path) -> None:
    path = tmp_path / "rsa.pub"
    path.write_bytes(public_pem(rsa.generate_private_key(public_exponent=65537, key_size=2048)))

    with pytest.raises(CommandError, match=r"key: Only ECDSA P-256 and Ed25519.*RSA 2048-bit"):
        _run("--name", "rsa", str(path))

    assert not SigningKey.objects.exists()


def test_it_fails_for_a_key_registered_already(db: None) -> None:
    _run("--name", "first", str(FIXTURE_KEY))

    with pytest.raises(CommandError, match="already registered as 'first'"):
        _run("--name", "second", str(FIXTURE_KEY))

    assert SigningKey.objects.count() == 1


def test_the_process_exits_non_zero_with_the_reason_on_stderr() -> None:
    """As automation runs it: a refused key is refused before the database is asked."""
    manage = Path(__file__).resolve().parents[2] / "manage.py"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "aicr_site.settings_test"}
    bad = subprocess.run(
        [sys.executable, str(manage), "register_key", "--name", "x", "-"],
        env=env,
        input=b"-----BEGIN PRIVATE KEY-----\nMC4CAQ\n-----END PRIVATE KEY-----\n",
        capture_output=True,
        check=False,
        timeout=120,
    )

    assert bad.returncode != 0
    assert b"private key" in bad.stderr
    assert bad.stdout == b""
