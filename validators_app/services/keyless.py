"""Keyless Sigstore signing of run evidence, when the site has an identity token.

With ``SITE_SIGSTORE_IDENTITY_TOKEN`` (an OIDC JWT) or ``SITE_SIGSTORE_IDENTITY_TOKEN_FILE``
(a file holding one, re-read for every run: such tokens are short-lived, e.g. a projected
service-account token) the statement is signed the way ``aicr evidence publish`` signs:
sigstore-python requests a Fulcio certificate for an ephemeral key, signs the DSSE envelope and
logs it in Rekor. ``SITE_SIGSTORE_TRUST_CONFIG`` (a ClientTrustConfig JSON: trusted root +
signing config) points at a private Sigstore instance; empty means Sigstore's public-good
instance (its TUF repository). The ingest then verifies the bundle against its enabled trusted
roots like any keyless upload, and classifies the identity against the allowlist.
"""

from __future__ import annotations

import requests
from django.conf import settings
from sigstore import dsse
from sigstore._internal.fulcio.client import ExpiredCertificate, FulcioClientError
from sigstore._internal.rekor import RekorClientError
from sigstore.errors import Error as SigstoreError
from sigstore.models import ClientTrustConfig
from sigstore.oidc import ExpiredIdentity, IdentityToken
from sigstore.sign import SigningContext

from aicr_site.lib.env import SecretFileError, read_secret_file

MAX_TOKEN_CHARS = 16 * 1024

# What sigstore-python raises when a signature cannot be made: its own errors, the Fulcio and
# Rekor clients', an expired token or certificate, transport errors, malformed configuration.
_SIGNING_FAILURES = (
    SigstoreError,
    ExpiredIdentity,
    ExpiredCertificate,
    FulcioClientError,
    RekorClientError,
    requests.RequestException,
    ValueError,
)


class KeylessSigningError(RuntimeError):
    """No keyless signature: the message says why (token, Fulcio, Rekor, configuration)."""


def identity_token() -> str:
    """The configured identity token, or "" when keyless signing is not configured."""
    token = (getattr(settings, "SITE_SIGSTORE_IDENTITY_TOKEN", "") or "").strip()
    path = getattr(settings, "SITE_SIGSTORE_IDENTITY_TOKEN_FILE", "") or ""
    if token or not path:
        return token
    try:
        return read_secret_file(
            path, setting="SITE_SIGSTORE_IDENTITY_TOKEN_FILE", max_chars=MAX_TOKEN_CHARS
        )
    except SecretFileError as exc:
        raise KeylessSigningError(str(exc)) from None


def _trust_config() -> ClientTrustConfig:
    raw = getattr(settings, "SITE_SIGSTORE_TRUST_CONFIG", "") or ""
    return ClientTrustConfig.from_json(raw) if raw else ClientTrustConfig.production()


def keyless_sign(statement: bytes, *, token: str) -> bytes:
    """A Sigstore bundle (v0.3 JSON) of ``statement`` signed keyless with ``token``'s identity."""
    try:
        context = SigningContext.from_trust_config(_trust_config())
        # cache=True: the certificate and the signature use the same ephemeral key.
        with context.signer(IdentityToken(token)) as signer:
            bundle = signer.sign_dsse(dsse.Statement(statement))
    except _SIGNING_FAILURES as exc:
        # The token itself is never part of the message.
        raise KeylessSigningError(
            f"keyless signing failed: {type(exc).__name__}: {str(exc)[:500]}"
        ) from None
    return bundle.to_json().encode()
