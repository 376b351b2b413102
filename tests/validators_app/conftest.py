from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.cache import cache

from evidence_app.corroborate.allowlist import source_slug
from evidence_app.services import signers, trust_roots
from tests.sigstore_private import PrivateSigstore
from tests.sigstore_servers import OIDC_ISSUER, RUNS_IDENTITY, LoopbackSigstore, loopback_sigstore


@pytest.fixture(autouse=True)
def cluster_keys(settings: pytest.FixtureRequest) -> list[str]:
    """A fresh kubeconfig encryption key per test (never a file in the checkout)."""
    keys = [Fernet.generate_key().decode("ascii")]
    settings.CLUSTER_KUBECONFIG_KEYS = keys  # type: ignore[attr-defined]
    settings.CLUSTER_KUBECONFIG_LOCAL_KEY_FILE = None  # type: ignore[attr-defined]
    return keys


@pytest.fixture(autouse=True)
def site_signing_key_file(
    settings: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Run evidence signed in tests never writes the development key into the checkout: with no
    SITE_SIGNING_KEY a publish generates its key in a temporary folder instead."""
    settings.SITE_SIGNING_LOCAL_KEY_FILE = (  # type: ignore[attr-defined]
        tmp_path_factory.mktemp("site-key") / "site-signing-key.pem"
    )


@pytest.fixture(autouse=True)
def _no_cluster_test_throttle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests test connections freely (the throttle's counts would otherwise carry across tests
    sharing a cache); ``test_cluster_connection_policy.py`` checks the throttle itself."""
    from validators_app.throttles import CLUSTER_TEST_THROTTLES

    for throttle in CLUSTER_TEST_THROTTLES:
        rates = {"cluster-test": None, "cluster-test-user": None}
        monkeypatch.setattr(throttle, "THROTTLE_RATES", rates)


@pytest.fixture
def eager() -> Iterator[None]:
    """Tasks run in this process even where REDIS_URL is set (CI)."""
    from aicr_site.celery import app as celery_app

    saved = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = saved


# --- keyless signing against the tests' private Sigstore instance (loopback Fulcio, Rekor) ---


@pytest.fixture(scope="module")
def private_instance() -> PrivateSigstore:
    return PrivateSigstore(name="aicr-dashboard-runs.test")


@pytest.fixture
def sigstore(private_instance: PrivateSigstore, settings: Any) -> Iterator[LoopbackSigstore]:
    cache.clear()
    with loopback_sigstore(private_instance) as running:
        settings.SITE_SIGNING_KEY = ""  # keyless must not need (or fall back to) the site key
        settings.SITE_SIGNING_LOCAL_KEY_FILE = None
        settings.SITE_SIGSTORE_TRUST_CONFIG = running.client_trust_config()
        settings.SITE_SIGSTORE_IDENTITY_TOKEN = running.oidc.token()
        settings.SITE_SIGSTORE_IDENTITY_TOKEN_FILE = ""
        settings.VALIDATION_IMAGE_REGISTRY = ""
        settings.VALIDATION_IMAGE_TAG = ""
        yield running


@pytest.fixture
def trusted(private_instance: PrivateSigstore) -> None:
    """The site verifies what the private instance certifies, for the test OIDC issuer."""
    trust_roots.trust_root_add(
        name="runs private instance",
        trusted_root_json=private_instance.trusted_root_json(),
        accepted_issuers=OIDC_ISSUER,
    )


@pytest.fixture
def runs_identity_allowlisted() -> None:
    """The allowlist lists the test OIDC identity runs are signed with, as a community source."""
    slug = source_slug(OIDC_ISSUER, RUNS_IDENTITY)
    signers.allowlist_publish(
        body=(
            "schemaVersion: 1.0.0\nfirstParty: []\npartner: []\ncommunity:\n"
            f"  - issuer: {OIDC_ISSUER}\n    source: {slug}\n    label: This site's runs\n"
        ),
        note="tests",
    )
