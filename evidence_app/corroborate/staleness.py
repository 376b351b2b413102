"""Source staleness, as AICR's renderer computes it (no Go code or test covers it).

A source's age is measured against ``meta.generatedAt`` (the newest attestation in the
snapshot), never the viewer's clock, so it is reproducible from the data. Staleness only
de-emphasises a source column; it never changes a consensus state.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .timeutil import days_from_civil

STALE_DAYS = 30
_MS_PER_DAY = 86_400_000
# Unanchored like the renderer's parseWhen: "YYYY-MM-DD" with an optional " HH:MM"/"THH:MM".
_WHEN = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[ T]([0-9]{2}):([0-9]{2}))?")


def parse_when(text: str) -> int | None:
    """Milliseconds since the epoch of a dashboard date (read as UTC), or None.

    Mirrors JavaScript ``Date.UTC``, which normalises out-of-range fields (month 13 is
    January of the next year) instead of rejecting them.
    """
    if not text:
        return None
    m = _WHEN.search(text)
    if m is None:
        return None
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    hour, minute = int(m.group(4) or 0), int(m.group(5) or 0)
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    days = days_from_civil(year, month, 1) + day - 1
    return ((days * 24 + hour) * 60 + minute) * 60_000


def age_days(generated_at: str, latest_when: str) -> int | None:
    """``max(0, round((generatedAt - latest) / 1 day))``; None when either date is missing."""
    ref, when = parse_when(generated_at), parse_when(latest_when)
    if ref is None or when is None:
        return None
    # Math.round rounds half up (towards +inf), unlike Python's banker's round().
    return max(0, math.floor((ref - when) / _MS_PER_DAY + 0.5))


def is_stale(days: int | None) -> bool:
    """Stale when older than ``STALE_DAYS`` (30 days 11 h rounds to 30: not stale)."""
    return days is not None and days > STALE_DAYS


def age_label(days: int | None) -> str:
    if days is None:
        return ""
    if days <= 0:
        return "latest in this snapshot"
    return "1 day ago" if days == 1 else f"{days} days ago"


@dataclass(frozen=True, slots=True)
class SourceAge:
    source_id: str
    label: str
    latest_when: str
    age_days: int | None
    stale: bool
    age_label: str


def source_latest_when(index: Mapping[str, Any]) -> dict[str, str]:
    """Per source, the largest row-signer ``when`` over every recipe's combined grid."""
    latest: dict[str, str] = {}
    for group in index.get("groups", ()):
        for dashboard in group.get("dashboards", ()):
            for tab in dashboard.get("tabs", ()):
                for row in (tab.get("combined") or {}).get("tests", ()):
                    for signer in row.get("signers", ()):
                        src, when = signer["src"], signer.get("when", "")
                        if when > latest.get(src, ""):
                            latest[src] = when
    return latest


def source_staleness(index: Mapping[str, Any]) -> list[SourceAge]:
    """Age and staleness of every source that appears in a combined grid, by source id."""
    generated_at = index.get("meta", {}).get("generatedAt", "")
    sources = index.get("sources", {})
    out = []
    for src, when in sorted(source_latest_when(index).items()):
        days = age_days(generated_at, when)
        label = (sources.get(src) or {}).get("label", src)
        out.append(SourceAge(src, label, when, days, is_stale(days), age_label(days)))
    return out
