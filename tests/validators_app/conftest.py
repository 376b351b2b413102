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
