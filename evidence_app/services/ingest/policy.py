"""The verification policy an upload is checked under: trust roots, issuers, keys, allowlist.

Read from the database once per upload through a cached ``PolicySnapshot`` (one query while
nothing changed), then combined with the settings into a ``VerificationPolicy``.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from evidence_app.models import AcceptedIssuer, Allowlist, SigningKey, TrustRoot
from evidence_app.services import signers, trust_roots
from evidence_app.verification.signature import EXTRA_POLICY_NAMES
from evidence_app.verification.trust import TrustRoot as LoadedRoot
from recipes_app.models import Catalog


@dataclass(frozen=True)
class VerificationPolicy:
    """What a signature must satisfy, read from the database and settings once per upload."""

    trusted_roots: list[LoadedRoot]
    issuers: list[str]
    identity_regex: str | None = None
    extra_policies: Mapping[str, str] = field(default_factory=dict)
    public_keys: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PolicySnapshot:
    """What the database says about verification, as of one version (see ``policy_snapshot``).

    Shared between threads and uploads: read only.
    """

    version: tuple[Any, ...] | None
    trusted_roots: list[LoadedRoot]
    root_issuers: list[str]  # enabled roots' issuers, then the maintainers' accepted issuers
    public_keys: Mapping[str, str]
    keys: Mapping[int, SigningKey]
    allowlist_row: Allowlist | None
    allowlist: Any  # corroborate.allowlist.Allowlist | None


_snapshot_cache: dict[tuple[Any, ...], PolicySnapshot] = {}
_snapshot_lock = threading.Lock()


@functools.cache
def _version_sql_for(vendor: str) -> str:
    """One statement: a digest of everything the policy is built from (PostgreSQL).

    Enabled trust roots (name, production flag, JSON and issuers), active keys (every column
    the verifier or the classification reads), the allowlist in force (pk and body), the
    accepted issuers, and the catalog versions (for ``_bind``'s cache): any add, edit,
    enable/disable, revoke, publish or import changes it, so it is picked up on the very next
    upload, in this process or any other.
    """

    def col(model: Any, name: str) -> str:
        return connection.ops.quote_name(model._meta.get_field(name).column)

    def table(model: Any) -> str:
        return connection.ops.quote_name(model._meta.db_table)

    r, k, a, i, c = TrustRoot, SigningKey, Allowlist, AcceptedIssuer, Catalog
    roots = ", ".join(
        [
            f"{col(r, 'id')}",
            f"{col(r, 'name')}",
            f"{col(r, 'is_production')}",
            f"md5({col(r, 'trusted_root_json')})",
            f"md5({col(r, 'accepted_issuers')})",
        ]
    )
    active_keys = ", ".join(
        [
            f"{col(k, 'id')}",
            f"{col(k, 'name')}",
            f"{col(k, 'fingerprint')}",
            f"{col(k, 'algorithm')}",
            f"{col(k, 'is_demo')}",
            f"md5({col(k, 'public_key_pem')})",
        ]
    )
    # Identifiers only, quoted, from the models' metadata; no value is interpolated.
    return (
        "SELECT "  # noqa: S608
        f"(SELECT md5(coalesce(string_agg(concat_ws(':', {roots}), ',' "
        f"ORDER BY {col(r, 'id')}), '')) FROM {table(r)} WHERE {col(r, 'enabled')}), "
        f"(SELECT md5(coalesce(string_agg(concat_ws(':', {active_keys}), ',' "
        f"ORDER BY {col(k, 'id')}), '')) FROM {table(k)} "
        f"WHERE {col(k, 'revoked_at')} IS NULL), "
        f"(SELECT concat_ws(':', {col(a, 'id')}, md5({col(a, 'body')})) FROM {table(a)} "
        f"ORDER BY {col(a, 'created_at')} DESC, {col(a, 'id')} DESC LIMIT 1), "
        f"(SELECT md5(coalesce(string_agg({col(i, 'issuer')}, ',' ORDER BY {col(i, 'issuer')}), "
        f"'')) FROM {table(i)}), "
        # Catalog versions are imported whole and never edited: their count and newest id
        # change with any import or removal (the bind cache's key).
        f"(SELECT concat_ws(':', count(*), max({col(c, 'id')})) FROM {table(c)})"
    )


def _policy_version() -> tuple[Any, ...] | None:
    if connection.vendor != "postgresql":
        return None  # no cache: every upload reads the policy afresh
    with connection.cursor() as cursor:
        cursor.execute(_version_sql_for(connection.vendor))
        row = cursor.fetchone()
    return (connection.alias, connection.settings_dict.get("NAME"), *row)


def _policy_load(version: tuple[Any, ...] | None) -> PolicySnapshot:
    allowlist_row, allowlist = signers.allowlist_in_force()
    roots = list(TrustRoot.objects.enabled().only("name", "trusted_root_json", "accepted_issuers"))
    active = {key.pk: key for key in SigningKey.objects.active().order_by("pk")}
    return PolicySnapshot(
        version=version,
        trusted_roots=trust_roots.roots_load(roots),
        root_issuers=trust_roots.issuers_of(row.accepted_issuers for row in roots)
        + signers.maintainer_issuers(),
        public_keys={str(pk): key.public_key_pem for pk, key in active.items()},
        keys=active,
        allowlist_row=allowlist_row,
        allowlist=allowlist,
    )


def policy_snapshot() -> PolicySnapshot:
    """Trust roots (loaded), their issuers, the active keys and the allowlist in force (parsed).

    Cached in process under the version ``_version_sql_for`` reads: one query per upload while
    nothing changed. A snapshot read while a maintainer's change lands is used for that upload
    but not cached unless the version is the same after reading it.
    """
    version = _policy_version()
    if version is not None:
        with _snapshot_lock:
            cached = _snapshot_cache.get(version)
        if cached is not None:
            return cached
    snapshot = _policy_load(version)
    if version is not None and _policy_version() == version:
        with _snapshot_lock:
            _snapshot_cache.clear()
            _snapshot_cache[version] = snapshot
    return snapshot


def policy_current(
    allowlist: Any = None, *, snapshot: PolicySnapshot | None = None
) -> VerificationPolicy:
    """The verification policy: the snapshot (read now when not given) under the settings."""
    regex = getattr(settings, "EVIDENCE_IDENTITY_REGEX", None) or None
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as exc:
            raise ImproperlyConfigured(f"EVIDENCE_IDENTITY_REGEX is not a regex: {exc}") from None
    extra = dict(getattr(settings, "EVIDENCE_EXTRA_POLICIES", None) or {})
    unknown = sorted(set(extra) - EXTRA_POLICY_NAMES)
    if unknown:
        raise ImproperlyConfigured(f"EVIDENCE_EXTRA_POLICIES: unknown policies {unknown}")
    if snapshot is None:
        snapshot = policy_snapshot()
    if allowlist is None:
        allowlist = snapshot.allowlist
    return VerificationPolicy(
        trusted_roots=snapshot.trusted_roots,
        issuers=signers.issuers_from(allowlist, snapshot.root_issuers),
        identity_regex=regex,
        extra_policies=extra,
        public_keys=snapshot.public_keys,
    )
