"""Trusted roots: the vendored production root, private roots from text, no TUF, no home writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evidence_app.verification import TrustRootError, load_trust_root, production_root
from evidence_app.verification.trust import (
    PRODUCTION_ROOT_PATH,
    client_trust_config_json,
    embedded_sigstore_root_bytes,
)
from tests.shared_data import REPO_ROOT, SHARED
from tests.sigstore_private import PrivateSigstore

FIXTURES = SHARED / "fixtures" / "sigstore"


def test_it_vendors_the_production_root_that_sigstore_embeds() -> None:
    vendored = PRODUCTION_ROOT_PATH.read_bytes()
    assert vendored == embedded_sigstore_root_bytes()
    assert vendored == (FIXTURES / "trusted_root" / "production.trusted_root.json").read_bytes()
    root = production_root()
    assert root.production
    assert root.name == "production"
    assert production_root() is root


def test_it_loads_a_private_root_from_text_once() -> None:
    text = PrivateSigstore(name="maintainers.test").trusted_root_json()
    first = load_trust_root(text, name="maintainers")
    assert load_trust_root(text.encode(), name="maintainers") is first
    assert not first.production
    config = json.loads(client_trust_config_json(first))
    assert config["trustedRoot"] == json.loads(text)
    assert config["mediaType"].startswith("application/vnd.dev.sigstore.clienttrustconfig")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not valid JSON"),
        ("[]", "mediaType"),
        ('{"mediaType": "application/json"}', "mediaType"),
        (
            '{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1", '
            '"tlogs": []}',
            "tlogs",
        ),
    ],
)
def test_it_rejects_unusable_roots(text: str, message: str) -> None:
    with pytest.raises(TrustRootError, match=message):
        load_trust_root(text, name=f"bad {message}")


def test_it_rejects_a_root_with_a_malformed_key() -> None:
    doc = PrivateSigstore(name="broken.test").trusted_root()
    del doc["tlogs"][0]["publicKey"]["validFor"]["start"]
    with pytest.raises(TrustRootError):
        load_trust_root(json.dumps(doc), name="broken")


_SCRIPT = """
import json, sys
from pathlib import Path
from evidence_app.verification import load_trust_root, production_root, verify_signature
from tests.sigstore_private import PrivateSigstore

fixture = Path(sys.argv[1])
expected = json.loads((fixture / "expected.json").read_text())
outcome = verify_signature(
    (fixture / "bundle.sigstore.json").read_bytes(),
    trusted_root=production_root(),
    identity=expected["identity"],
    issuer=expected["issuer"],
    artifact=(fixture / "artifact").read_bytes(),
)
assert outcome.ok, outcome.detail
instance = PrivateSigstore(name="home.test")
root = load_trust_root(instance.trusted_root_json(), name="home")
signed = instance.sign_dsse({"_type": "x"}, identity="alice@example.com")
assert verify_signature(signed.bundle, trusted_root=root, issuer=[
    "https://token.actions.githubusercontent.com"]).ok
print("verified")
"""


def test_it_never_writes_to_the_home_directory(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o555)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("XDG_") and key not in ("HOME", "SIGSTORE_CACHE_DIR")
    }
    env.update(HOME=str(home), PYTHONPATH=str(REPO_ROOT), PYTHONDONTWRITEBYTECODE="1")
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(FIXTURES / "keyless-dsse-happy")],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "verified" in result.stdout
    assert list(home.iterdir()) == []
