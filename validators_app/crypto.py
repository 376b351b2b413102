"""Cluster kubeconfigs encrypted at rest (Fernet: AES-128-CBC + HMAC-SHA256, with rotation).

Keys come from ``CLUSTER_KUBECONFIG_KEY`` (comma-separated Fernet keys; the first encrypts,
every one decrypts, so a new key goes first and the old one stays until ``manage.py
rotate_cluster_keys`` has re-encrypted every cluster). In development (``DEBUG`` and no key
set) a local key is generated once into ``CLUSTER_KUBECONFIG_LOCAL_KEY_FILE`` (git-ignored):
``manage.py ensure_local_keys`` creates it ahead of time, and the first use does too.

This module is the only place a kubeconfig is decrypted; nothing here logs or returns key
material or plaintext in an exception.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.views.decorators.debug import sensitive_variables


class KeyUnavailable(RuntimeError):
    """No key is configured, or none of the configured keys opens this kubeconfig."""


def ensure_local_key(path: Path) -> bool:
    """Create a Fernet key file at ``path`` (mode 0600) unless one exists; True if created.
    Safe when several processes (web, worker) race: exactly one file wins."""
    if path.exists():
        return False
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".key-")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(Fernet.generate_key() + b"\n")
        try:
            os.link(temporary, path)  # atomic; fails if another process created it first
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(temporary)


def configured_keys() -> list[str]:
    keys = list(settings.CLUSTER_KUBECONFIG_KEYS)
    if keys:
        return keys
    local = settings.CLUSTER_KUBECONFIG_LOCAL_KEY_FILE
    if local is None:
        raise KeyUnavailable(
            "CLUSTER_KUBECONFIG_KEY is not set: cluster kubeconfigs cannot be stored or read "
            "(generate one with: python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())')"
        )
    path = Path(local)
    ensure_local_key(path)
    return [path.read_text().strip()]


def _fernet() -> MultiFernet:
    return MultiFernet([Fernet(key.encode("ascii")) for key in configured_keys()])


@sensitive_variables("text")
def kubeconfig_encrypt(text: str) -> str:
    """The Fernet token (ASCII) of ``text`` under the first configured key."""
    return _fernet().encrypt(text.encode("utf-8")).decode("ascii")


@sensitive_variables()  # all: the token and the plaintext
def _decrypt(token: str, what: str) -> str:
    try:
        return _fernet().decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError):
        raise KeyUnavailable(
            f"{what} cannot be decrypted with the configured "
            "CLUSTER_KUBECONFIG_KEY keys (was the key that encrypted it removed?)"
        ) from None


@sensitive_variables()
def kubeconfig_decrypt(token: str) -> str:
    return _decrypt(token, "the cluster's kubeconfig")


@sensitive_variables("text")
def secret_encrypt(text: str) -> str:
    """A cluster's other secret inputs (the HF token) under the kubeconfig keys."""
    return kubeconfig_encrypt(text)


@sensitive_variables()
def secret_decrypt(token: str) -> str:
    return _decrypt(token, "the cluster's stored token")


def kubeconfig_reencrypt(token: str) -> str:
    """``token`` re-encrypted under the first configured key (for key rotation)."""
    try:
        return _fernet().rotate(token.encode("ascii")).decode("ascii")
    except InvalidToken:
        raise KeyUnavailable(
            "a cluster's kubeconfig cannot be decrypted with the configured keys"
        ) from None
