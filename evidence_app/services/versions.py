"""Sortable keys for version strings, so "older AICR version" can be asked in SQL.

``version_key(v)`` is a string of ASCII digits whose plain string order is the order of
``corroborate.versions.compare`` (``golang.org/x/mod/semver``, what AICR sorts AICR versions
with): invalid versions are all equal (``"0"``) and below every valid one; a prerelease sorts
below its release; numeric prerelease identifiers sort below alphanumeric ones; build metadata
is ignored. Digits only, because every database collation (PostgreSQL's locale collations
included) orders digit strings the same way, unlike punctuation.

Encoding (each part is prefix-free, so string order is tuple order):
``"1"`` + num(major) + num(minor) + num(patch) + (``"2"`` for a release, or ``"1"`` + one
code per prerelease identifier + ``"0"``); num(n) = two-digit length + the digits; a numeric
identifier = ``"1"`` + num; an alphanumeric one = ``"2"`` + three-digit code of each character
+ ``"000"``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from evidence_app.corroborate.versions import _parse, compare

INVALID_KEY = "0"
MAX_VERSION_CHARS = 100


def _num(digits: str) -> str | None:
    if len(digits) > 99:
        return None
    return f"{len(digits):02d}{digits}"


def _prerelease(prerelease: str) -> str | None:
    if not prerelease:
        return "2"
    out = ["1"]
    for ident in prerelease[1:].split("."):
        if ident.isdigit():
            num = _num(ident)
            if num is None:
                return None
            out.append("1" + num)
        else:
            out.append("2" + "".join(f"{ord(c):03d}" for c in ident) + "000")
    out.append("0")
    return "".join(out)


def version_key(version: str, *, assume_v: bool = False) -> str:
    """The sort key of ``version`` (Go semver order); ``assume_v``: read ``1.2.3`` as ``v1.2.3``
    (validator catalog versions are written without the ``v``)."""
    text = (version or "").strip()[:MAX_VERSION_CHARS]
    if assume_v and text and not text.startswith("v"):
        text = "v" + text
    parsed = _parse(text)
    if parsed is None:
        return INVALID_KEY
    parts = [_num(parsed.major), _num(parsed.minor), _num(parsed.patch)]
    pre = _prerelease(parsed.prerelease)
    if pre is None or any(p is None for p in parts):
        return INVALID_KEY
    return "1" + "".join(p for p in parts if p is not None) + pre


def is_release(version: str) -> bool:
    """Whether ``version`` is one AICR's semver can place (``v1.0.0``, ``v0.19.0-rc.1``):
    ``dev``, an empty version and other labels are not. The same question as
    ``version_key(version) != INVALID_KEY``, which is how SQL asks it."""
    return version_key(version) != INVALID_KEY


# --- the supported AICR range (``AICR_SUPPORTED_RANGE``) --------------------------------------

# Longest first, so ">=" is not read as ">" followed by "=1.0.0".
_OPERATORS = (">=", "<=", "==", ">", "<", "=")


@dataclass(frozen=True)
class Bound:
    """One comparison of a range: ``op`` (``>=``, ``>``, ``<=``, ``<``, ``==``) and the version
    (``v``-prefixed, as AICR writes its versions), with its sort key for SQL."""

    op: str
    version: str
    key: str

    def admits(self, version: str) -> bool:
        order = compare(version, self.version)
        return {
            ">=": order >= 0,
            ">": order > 0,
            "<=": order <= 0,
            "<": order < 0,
            "==": order == 0,
        }[self.op]


@dataclass(frozen=True)
class SupportedRange:
    """The AICR versions this site supports: every ``bounds`` comparison holds (AICR's
    operator policy form, e.g. ``>=1.0.0,<2.0.0``). No bounds: any version, ``dev`` included.

    A non-release (``dev``, empty, a label) is outside every non-empty range: it is not a
    point on the release line, so no comparison can place it (a ``dev`` tree may be older or
    newer than any release)."""

    text: str = ""
    bounds: tuple[Bound, ...] = ()

    @property
    def enabled(self) -> bool:
        return bool(self.bounds)

    def contains(self, version: str) -> bool:
        if not self.bounds:
            return True
        text = (version or "").strip()
        return is_release(text) and all(bound.admits(text) for bound in self.bounds)


def parse_supported_range(text: str) -> SupportedRange:
    """``">=1.0.0,<2.0.0"`` as a ``SupportedRange``; ``""`` is any version. Versions may omit
    the ``v``; ``=`` is ``==``. Raises ``ValueError`` naming the comparison it cannot read."""
    text = (text or "").strip()
    if not text:
        return SupportedRange()
    bounds = []
    for part in text.split(","):
        item = part.strip()
        op = next((o for o in _OPERATORS if item.startswith(o)), None)
        if op is None:
            raise ValueError(
                f"{item!r} is not a comparison (use >=, >, <=, <, == or = and a version, "
                "e.g. >=1.0.0,<2.0.0)"
            )
        version = item[len(op) :].strip()
        if version and not version.startswith("v"):
            version = "v" + version
        key = version_key(version)
        if key == INVALID_KEY:
            raise ValueError(f"{item!r}: {version[1:] or '(nothing)'!r} is not a semver version")
        bounds.append(Bound(op="==" if op == "=" else op, version=version, key=key))
    normalised = ",".join(f"{b.op}{b.version[1:]}" for b in bounds)
    return SupportedRange(text=normalised, bounds=tuple(bounds))


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> SupportedRange:
    return parse_supported_range(text)


def supported_range() -> SupportedRange:
    """The site's ``AICR_SUPPORTED_RANGE`` (validated at startup by the settings module)."""
    from django.conf import settings  # a lazy import: this module is plain Python otherwise

    return _parsed(getattr(settings, "AICR_SUPPORTED_RANGE", "") or "")


def outside_range_label(version: str, *, what: str) -> str:
    """``"catalog AICR dev is outside the supported AICR range (>=1.0.0,<2.0.0)"`` for a
    ``what`` (catalog, run) whose AICR version is outside the site's range; '' inside it (or
    with no range set)."""
    supported = supported_range()
    if supported.contains(version):
        return ""
    shown = (version or "").strip() or "(none)"
    return f"{what} AICR {shown} is outside the supported AICR range ({supported.text})"
