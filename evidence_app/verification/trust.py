"""Trusted roots for keyless verification, loaded from files or text — never from TUF.

The production root is vendored at ``roots/production.trusted_root.json`` (byte-identical to the
root embedded in sigstore-python 4.5.1, sha256 ``6494e21e…``). Private roots (a maintainer's own
Sigstore instance) are given as JSON text. Nothing here touches the network or the home
directory: ``Verifier.production()`` / ``ClientTrustConfig.production(offline=True)`` are never
called (they refresh TUF metadata or copy the root into ``~/.cache``).

Refresh the vendored file deliberately when Sigstore rotates keys: bundles signed with a new
Fulcio CA or log key fail with ``CertValidationError`` / ``invalid log entry`` until then.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ._json import JSONLimitError, JSONLimits, load_json

ROOTS_DIR = Path(__file__).resolve().parent / "roots"
PRODUCTION_ROOT_PATH = ROOTS_DIR / "production.trusted_root.json"
PRODUCTION_ROOT_SHA256 = "6494e21ea73fa7ee769f85f57d5a3e6a08725eae1e38c755fc3517c9e6bc0b66"
TRUSTED_ROOT_MEDIA_TYPE = "application/vnd.dev.sigstore.trustedroot+json;version=0.1"
MAX_ROOT_BYTES = 512 * 1024
_ROOT_LIMITS = JSONLimits(max_bytes=MAX_ROOT_BYTES, max_depth=32, max_object_keys=64)
_CLIENT_TRUST_CONFIG_MEDIA_TYPE = "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json"

if TYPE_CHECKING:
    from sigstore.verify import Verifier


class TrustRootError(ValueError):
    """A trusted root that cannot be loaded (not JSON, wrong shape, unusable keys)."""


@dataclass(frozen=True, eq=False)
class TrustRoot:
    """A loaded trusted root and the sigstore ``Verifier`` built from it (built once)."""

    name: str
    sha256: str
    json_bytes: bytes
    production: bool
    verifier: Verifier

    def __repr__(self) -> str:
        return f"TrustRoot(name={self.name!r}, sha256={self.sha256[:12]}…)"


_cache: dict[tuple[str, str], TrustRoot] = {}
_cache_lock = threading.Lock()


def _build(name: str, data: bytes, *, production: bool) -> TrustRoot:
    from pydantic import ValidationError
    from sigstore.errors import Error as SigstoreError
    from sigstore.models import TrustedRoot
    from sigstore.verify import Verifier
    from sigstore_models.trustroot import v1 as trustroot_v1

    try:
        doc = load_json(data, what=f"trusted root {name!r}", limits=_ROOT_LIMITS)
    except JSONLimitError as exc:
        raise TrustRootError(str(exc)) from None
    if not isinstance(doc, dict) or doc.get("mediaType") != TRUSTED_ROOT_MEDIA_TYPE:
        raise TrustRootError(
            f"trusted root {name!r}: mediaType must be {TRUSTED_ROOT_MEDIA_TYPE!r}"
        )
    for key in ("tlogs", "ctlogs", "certificateAuthorities"):
        if not isinstance(doc.get(key), list) or not doc[key]:
            raise TrustRootError(f"trusted root {name!r}: {key} must be a non-empty list")
    try:
        # Same as TrustedRoot.from_file(path), from bytes instead of a path.
        trusted_root = TrustedRoot(trustroot_v1.TrustedRoot.from_json(data))
        verifier = Verifier(trusted_root=trusted_root)
    except ValidationError as exc:
        first = str(exc).splitlines()[0]
        raise TrustRootError(f"trusted root {name!r}: invalid ({first})") from None
    except (SigstoreError, ValueError, TypeError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise TrustRootError(f"trusted root {name!r}: unusable ({first})") from None
    return TrustRoot(
        name=name,
        sha256=hashlib.sha256(data).hexdigest(),
        json_bytes=data,
        production=production,
        verifier=verifier,
    )


def load_trust_root(text: str | bytes, *, name: str) -> TrustRoot:
    """Load a (private) trusted root given as JSON text. Cached by (name, sha256)."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    if not name or len(name) > 200:
        raise ValueError("a trusted root needs a short name")
    if len(data) > MAX_ROOT_BYTES:
        raise TrustRootError(f"trusted root {name!r}: larger than {MAX_ROOT_BYTES} bytes")
    key = (name, hashlib.sha256(data).hexdigest())
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    root = _build(name, data, production=key[1] == PRODUCTION_ROOT_SHA256)
    with _cache_lock:
        _cache.setdefault(key, root)
        return _cache[key]


def load_trust_root_file(path: str | Path, *, name: str | None = None) -> TrustRoot:
    """Load a trusted root JSON file (no TUF); ``name`` defaults to the file name."""
    p = Path(path)
    if p.stat().st_size > MAX_ROOT_BYTES:
        raise TrustRootError(f"trusted root {p.name!r}: larger than {MAX_ROOT_BYTES} bytes")
    return load_trust_root(p.read_bytes(), name=name or p.name)


@functools.cache
def production_root() -> TrustRoot:
    """The vendored Sigstore public-good production root."""
    data = PRODUCTION_ROOT_PATH.read_bytes()
    if hashlib.sha256(data).hexdigest() != PRODUCTION_ROOT_SHA256:
        # A deliberate refresh must update PRODUCTION_ROOT_SHA256 in the same change.
        raise TrustRootError("vendored production trusted root does not match its pinned sha256")
    return load_trust_root(data, name="production")


def embedded_sigstore_root_bytes() -> bytes:
    """The production root shipped inside the installed sigstore package (read-only, no TUF)."""
    from importlib.resources import files

    resource = (
        files("sigstore._store") / "https%3A%2F%2Ftuf-repo-cdn.sigstore.dev" / "trusted_root.json"
    )
    return resource.read_bytes()


def client_trust_config_json(root: TrustRoot) -> str:
    """A ClientTrustConfig wrapping ``root``, for ``python -m sigstore --trust-config FILE``.

    sigstore-python's CLI takes a ClientTrustConfig, not a bare trusted_root.json; the signing
    config is empty (verification only).
    """
    config = {
        "mediaType": _CLIENT_TRUST_CONFIG_MEDIA_TYPE,
        "trustedRoot": json.loads(root.json_bytes),
        "signingConfig": {
            "mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json",
            "caUrls": [],
            "oidcUrls": [],
            "rekorTlogUrls": [],
            "tsaUrls": [],
            "rekorTlogConfig": {"selector": "ANY"},
            "tsaConfig": {"selector": "ANY"},
        },
    }
    return json.dumps(config, indent=2, sort_keys=False) + "\n"
