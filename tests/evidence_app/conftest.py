"""Fixtures for the evidence app's database tests: trusted roots, a private Sigstore instance,
registered keys, allowlists, API tokens."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import oras.client
import pytest
from django.test import Client

from evidence_app.models import Allowlist, TrustRoot
from evidence_app.services import signers, trust_roots
from evidence_app.services.ingest import IngestResult, evidence_ingest
from evidence_app.services.tokens import token_create, user_with_role
from recipes_app.models import Catalog, Recipe
from tests.evidence_factories import (
    EXAMPLE_RECIPE,
    FIRST_PARTY_IDENTITY,
    GITHUB_ISSUER,
    statement_for,
)
from tests.sigstore_private import PrivateSigstore

BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
EMPTY_ALLOWLIST = "schemaVersion: 1.0.0\nfirstParty: []\ncommunity: []\npartner: []\n"


@pytest.fixture(autouse=True)
def _no_upload_throttle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests upload freely (the throttle's counts would otherwise carry across tests sharing a
    cache); ``test_permissions.py`` checks the throttle itself."""
    from evidence_app.auth import EvidenceUploadThrottle

    monkeypatch.setattr(EvidenceUploadThrottle, "THROTTLE_RATES", {"evidence-upload": None})


@pytest.fixture
def evidence_db(db: None) -> None:
    """The rows migration 0002 seeds (gone after a transactional test flushed them)."""
    trust_roots.production_root_ensure()
    signers.seeded_allowlist_ensure()


@pytest.fixture(scope="session")
def private_sigstore() -> PrivateSigstore:
    return PrivateSigstore(name="aicr-dashboard-tests.test")


@pytest.fixture
def private_root(evidence_db: None, private_sigstore: PrivateSigstore) -> TrustRoot:
    return trust_roots.trust_root_add(
        name="tests private instance", trusted_root_json=private_sigstore.trusted_root_json()
    )


@pytest.fixture
def example_recipe(real_catalog: Catalog) -> Recipe:
    return Recipe.objects.get(catalog=real_catalog, name=EXAMPLE_RECIPE)


@pytest.fixture
def publish_allowlist(evidence_db: None) -> Callable[[str], Allowlist]:
    def publish(body: str, note: str = "tests") -> Allowlist:
        return signers.allowlist_publish(body=body, note=note)

    return publish


@pytest.fixture
def ingest(evidence_db: None) -> Callable[..., IngestResult]:
    def run(data: bytes, artifact: bytes | None = None, **kw: Any) -> IngestResult:
        kw.setdefault("filename", "evidence.sigstore.json")
        kw.setdefault("user", None)
        kw.setdefault("channel", "api")
        return evidence_ingest(data=data, artifact=artifact, **kw)

    return run


@pytest.fixture
def make_token(evidence_db: None) -> Callable[..., str]:
    """``make_token("alice", "contributor") -> "aicr_…"`` (user created when needed)."""

    def make(username: str, role: str) -> str:
        user = user_with_role(username=username, role=role)
        return token_create(user=user, role=role)[1]

    return make


@pytest.fixture
def api() -> Callable[..., Client]:
    """A client that sends ``Authorization: Bearer <token>``."""

    def with_token(token: str | None) -> Client:
        c = Client()
        if token:
            c.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token}"
        return c

    return with_token


@pytest.fixture
def contributor(make_token: Callable[..., str]) -> str:
    """A contributor's API token (user ``carol``)."""
    return make_token("carol", "contributor")


@pytest.fixture
def bundle(private_sigstore: PrivateSigstore, example_recipe: Recipe) -> bytes:
    """A first-party keyless bundle for the example recipe, signed two hours ago."""
    statement = statement_for(example_recipe, attested_at=datetime.now(UTC) - timedelta(hours=2))
    return private_sigstore.sign_dsse(
        statement, identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle


# --- pushing to the real OCI registry (``registry``, tests/conftest.py) -----------------------


@pytest.fixture
def push(registry: str, tmp_path: Path) -> Callable[..., str]:
    """Push one file as an artifact (``oras push REF FILE:MEDIATYPE``); returns the pinned ref."""

    def run(
        content: bytes, *, name: str, media_type: str, repo: str = "aicr-evidence", tag: str = "t"
    ) -> str:
        path = tmp_path / name
        path.write_bytes(content)
        client = oras.client.OrasClient(hostname=registry, insecure=True)
        client.session.trust_env = False  # loopback only, never a proxy
        response = client.push(
            target=f"{registry}/{repo}:{tag}",
            files=[f"{path}:{media_type}"],
            disable_path_validation=True,
            quiet=True,
        )
        digest = response.headers["Docker-Content-Digest"]
        return f"{registry}/{repo}@{digest}"

    return run
