"""The qualification ledger of one recipe (or profile variant): which exact identity tuples
counted evidence covers, newest first.

AICR's support policy: a qualification holds for the exact identities it ran on. So evidence
is grouped by its full identity tuple (``identity.IDENTITIES``; an identity the evidence does
not record stays "not recorded" and is part of the tuple), and each tuple's state is computed
from its own evidence only: a tuple never inherits another tuple's freshness. Simulated runs
never count; a recipe that only ran on the simulator says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from evidence_app.json_shapes import Predicate
from evidence_app.models import Evidence, Verdict
from evidence_app.services.staleness import StaleReason, staleness_bulk
from recipes_app.models import Recipe

from .identity import IDENTITIES
from .service import evidence_identities


@dataclass(frozen=True)
class LedgerEvidence:
    evidence: Evidence
    stale: list[StaleReason]


@dataclass(frozen=True)
class LedgerTuple:
    identity: list[tuple[str, str | None]]  # (label, value or None = not recorded)
    rows: list[LedgerEvidence]
    newest: datetime
    signers: int
    aicr_versions: list[str]
    validator_images: list[str]
    state: str  # "current" or "stale"
    state_detail: str


@dataclass(frozen=True)
class Ledger:
    recipe_name: str
    tuples: list[LedgerTuple]
    simulated: int

    @property
    def never_on_hardware(self) -> bool:
        return not self.tuples


def _images(predicate: Predicate) -> list[str]:
    # validatorImages is the signer's text: each item is checked before it is shown.
    images = predicate.get("validatorImages")
    out = []
    for item in images if isinstance(images, list) else ():
        if isinstance(item, Mapping) and isinstance(item.get("image"), str):
            digest = item.get("digest") if isinstance(item.get("digest"), str) else ""
            out.append(f"{item['image']}@{digest}" if digest else f"{item['image']} (no digest)")
    return out


def _tuple(key: tuple[str | None, ...], rows: list[LedgerEvidence]) -> LedgerTuple:
    fresh = [r for r in rows if not r.stale]
    if fresh:
        signers = len({r.evidence.signer_id for r in fresh})
        state, detail = "current", f"{len(fresh)} fresh evidence from {signers} signer(s)"
    else:
        reasons = sorted({reason.detail for r in rows for reason in r.stale})
        state, detail = "stale", " ".join(reasons)
    return LedgerTuple(
        identity=[(label, key[i]) for i, (_name, label) in enumerate(IDENTITIES)],
        rows=rows,
        newest=max(r.evidence.attested_at for r in rows),
        signers=len({r.evidence.signer_id for r in rows}),
        aicr_versions=sorted({r.evidence.aicr_version or "not recorded" for r in rows}),
        validator_images=sorted({i for r in rows for i in _images(r.evidence.predicate)}),
        state=state,
        state_detail=detail,
    )


def qualification_ledger(recipe: Recipe) -> Ledger:
    """Counted evidence of ``recipe.name`` grouped by exact identity tuple, newest first."""
    evidences = list(
        Evidence.objects.counted()
        .filter(recipe_name=recipe.name)
        .for_listing()
        .order_by("-attested_at", "-pk")
    )
    identities = evidence_identities([(e.pk, e.sha256) for e in evidences])
    stale = staleness_bulk(evidences)
    groups: dict[tuple[str | None, ...], list[LedgerEvidence]] = {}
    for e in evidences:
        key = tuple(identities[e.pk].get(name) for name, _label in IDENTITIES)
        groups.setdefault(key, []).append(LedgerEvidence(e, stale.get(e.pk, [])))
    tuples = sorted(
        (_tuple(key, rows) for key, rows in groups.items()), key=lambda t: t.newest, reverse=True
    )
    simulated = Evidence.objects.filter(
        recipe_name=recipe.name, is_simulated=True, verdict=Verdict.VERIFIED
    ).count()
    return Ledger(recipe_name=recipe.name, tuples=tuples, simulated=simulated)
