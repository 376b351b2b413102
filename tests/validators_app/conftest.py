from __future__ import annotations

import pytest
from cryptography.fernet import Fernet


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
