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

from evidence_app.corroborate.versions import _parse

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
