"""Source display labels and the dashboard's timestamp formats.

Every displayed time derives from the signed predicate's ``attestedAt``, never the clock, so
the published output stays byte-reproducible.
"""

from __future__ import annotations

import functools

from .timeutil import format_utc, parse_rfc3339

FIRST_PARTY_LABEL = "NVIDIA UAT"

# Only on code hosts does the subject path start with "<org>/<repo>"; on any other OIDC
# issuer a deep path (tenant/project/...) is not an org/repo and must not be shown as one.
_CODE_HOSTS = frozenset({"github.com", "gitlab.com"})


def source_label(class_: str, identity: str, id_hash: str = "") -> str:
    """Human-readable label of a verified signer (``labelFor``).

    First-party signers get the fixed ``NVIDIA UAT``; github.com/gitlab.com subjects are
    named ``<org>/<repo>``; any other identity by its host (the first segment after the
    scheme); an empty identity falls back to the id hash.
    """
    if class_ == "first-party":
        return FIRST_PARTY_LABEL
    rest = identity
    if (i := rest.find("://")) >= 0:
        rest = rest[i + 3 :]
    segs = [p for p in rest.split("/") if p]
    if len(segs) >= 3 and segs[0].lower() in _CODE_HOSTS:
        return f"{segs[1]}/{segs[2]}"
    if segs:
        return segs[0]
    return id_hash


# Pure functions of one string, called for every signer cell of every grid: memoised.
@functools.lru_cache(maxsize=4096)
def format_when(attested_at: str) -> str:
    """``YYYY-MM-DD HH:MM UTC`` for grid cells; unparseable input passes through verbatim."""
    instant = parse_rfc3339(attested_at)
    return attested_at if instant is None else format_utc(instant, with_time=True)


@functools.lru_cache(maxsize=4096)
def format_when_date(attested_at: str) -> str:
    """``YYYY-MM-DD`` for series build columns; unparseable input passes through verbatim."""
    instant = parse_rfc3339(attested_at)
    return attested_at if instant is None else format_utc(instant, with_time=False)
