"""AICR-version lens ordering: semantic version newest first.

The dashboard's default per-version view is ``versions[0]``, which must be the newest tool
*release* (a re-run of an older release must not jump the queue because it was attested
later). AICR sorts with ``golang.org/x/mod/semver``; this module ports its ``Compare``
exactly: a ``v`` prefix is required, ``v1``/``v1.2`` are shorthands of ``v1.0.0``/``v1.2.0``,
a prerelease sorts below its release, build metadata is ignored, and every invalid version
compares equal to the others and below every valid one.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .timeutil import ZERO_INSTANT


@dataclass(frozen=True, slots=True)
class _Parsed:
    major: str
    minor: str
    patch: str
    prerelease: str


def _is_num(s: str) -> bool:
    return s != "" and all("0" <= c <= "9" for c in s)


def _parse_int(v: str) -> tuple[str, str] | None:
    i = 0
    while i < len(v) and "0" <= v[i] <= "9":
        i += 1
    if i == 0 or (v[0] == "0" and i != 1):
        return None
    return v[:i], v[i:]


def _is_ident_char(c: str) -> bool:
    return "0" <= c <= "9" or "a" <= c <= "z" or "A" <= c <= "Z" or c == "-"


def _parse_prerelease(v: str) -> tuple[str, str] | None:
    # "-" then dot-separated non-empty [0-9A-Za-z-] identifiers, numeric ones without a
    # leading zero; stops at "+" (build metadata).
    i = start = 1
    while i < len(v) and v[i] != "+":
        if not _is_ident_char(v[i]) and v[i] != ".":
            return None
        if v[i] == ".":
            if start == i or _bad_num(v[start:i]):
                return None
            start = i + 1
        i += 1
    if start == i or _bad_num(v[start:i]):
        return None
    return v[:i], v[i:]


def _bad_num(ident: str) -> bool:
    return _is_num(ident) and len(ident) > 1 and ident[0] == "0"


def _parse(v: str) -> _Parsed | None:
    if not v or v[0] != "v":
        return None
    got = _parse_int(v[1:])
    if got is None:
        return None
    major, rest = got
    if rest == "":
        return _Parsed(major, "0", "0", "")
    if rest[0] != ".":
        return None
    got = _parse_int(rest[1:])
    if got is None:
        return None
    minor, rest = got
    if rest == "":
        return _Parsed(major, minor, "0", "")
    if rest[0] != ".":
        return None
    got = _parse_int(rest[1:])
    if got is None:
        return None
    patch, rest = got
    prerelease = ""
    if rest.startswith("-"):
        got = _parse_prerelease(rest)
        if got is None:
            return None
        prerelease, rest = got
    if rest.startswith("+"):
        # Build metadata: any non-empty dotted identifiers, no numeric rule, ignored.
        idents = rest[1:].split(".")
        if any(not i or not all(_is_ident_char(c) for c in i) for i in idents):
            return None
        rest = ""
    if rest != "":
        return None
    return _Parsed(major, minor, patch, prerelease)


def _cmp_int(x: str, y: str) -> int:
    if x == y:
        return 0
    if len(x) != len(y):
        return -1 if len(x) < len(y) else 1
    return -1 if x < y else 1


def _cmp_prerelease(x: str, y: str) -> int:
    # "" (a release) sorts above any prerelease.
    if x == y:
        return 0
    if x == "":
        return 1
    if y == "":
        return -1
    xs, ys = x[1:].split("."), y[1:].split(".")
    for dx, dy in zip(xs, ys, strict=False):
        if dx == dy:
            continue
        nx, ny = _is_num(dx), _is_num(dy)
        if nx != ny:
            return -1 if nx else 1  # numeric identifiers sort below alphanumeric ones
        if nx:
            return _cmp_int(dx, dy)
        return -1 if dx < dy else 1
    return (len(xs) > len(ys)) - (len(xs) < len(ys))


def is_valid(version: str) -> bool:
    """Whether ``version`` is a valid semantic version in the ``x/mod/semver`` sense."""
    return _parse(version) is not None


def compare(v: str, w: str) -> int:
    """``semver.Compare``: -1, 0 or +1; invalid versions are equal and below valid ones."""
    pv, pw = _parse(v), _parse(w)
    if pv is None and pw is None:
        return 0
    if pv is None:
        return -1
    if pw is None:
        return 1
    for a, b in ((pv.major, pw.major), (pv.minor, pw.minor), (pv.patch, pw.patch)):
        if c := _cmp_int(a, b):
            return c
    return _cmp_prerelease(pv.prerelease, pw.prerelease)


def order_versions_newest_first(
    versions: Iterable[str], newest_attested: Mapping[str, int] | None = None
) -> list[str]:
    """Order AICR versions for the lens: semver descending, then the newest attestation at
    that version (instants as from ``timeutil.parse_rfc3339``; a missing one is Go's zero
    time), then the version string descending, so the order is total and deterministic."""
    newest = newest_attested or {}

    def cmp(v: str, w: str) -> int:
        if c := compare(v, w):
            return -c
        tv, tw = newest.get(v, ZERO_INSTANT), newest.get(w, ZERO_INSTANT)
        if tv != tw:
            return -1 if tv > tw else 1
        return -1 if v > w else (1 if v < w else 0)

    return sorted(versions, key=functools.cmp_to_key(cmp))
