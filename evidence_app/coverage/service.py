""" "Does the evidence cover my cluster?": a snapshot against the catalog and the counted evidence.

``check_snapshot`` parses the snapshot, derives the criteria the way ``aicr recipe --snapshot``
does (fingerprint → service/accelerator/os, the rest stated), resolves the recipe in snapshot
mode (overlays whose constraints fail are excluded, AICR step 11), evaluates the recipe's
readiness constraints with the validation runs' evaluator (AICR's operators and messages), and
compares the snapshot's identity tuple with every counted evidence of that recipe.

Nothing here stores the snapshot or writes to the database. Each evidence's identities are the
ones recorded at ingest (``Evidence.identities``, with what its redaction removed): nothing is
re-read from the bytes per request, so a recipe's first check costs what a warm one does.
A difference is one of three things: ``differs`` (both sides record it, unequal), ``redacted``
(the evidence's redaction block says AICR's policy removed it: ``--full`` would settle it) and
``not recorded``; every recorded identity matching with only redacted gaps covers the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from django.core.cache import cache

from evidence_app.attestation import fingerprint_of
from evidence_app.models import Evidence
from evidence_app.services.staleness import identity_reasons
from recipes_app import services as recipe_services
from recipes_app.aicrd.errors import AicrdError
from recipes_app.aicrd.resolve import current_catalog
from recipes_app.models import Catalog, Recipe
from recipes_app.resolver import (
    ConstraintEvaluator,
    CriteriaError,
    MeasurementMissing,
    ResolutionError,
    criteria_from_snapshot,
    parse_criteria,
    resolve,
)
from validators_app.orchestrator.readiness import (
    ConstraintError,
    evaluate_constraint,
    lookup,
    readiness_constraints,
)

from .identity import (
    LABELS,
    compare,
    identity_of,
)
from .recorded import DIFFERS, PLAN, PLAN_LABEL, Difference
from .snapshot_input import SnapshotInputError, read_snapshot_input
from .stored import CheckTuple, check_tuple, identity_of_stored

STATED_DIMENSIONS = ("service", "accelerator", "os", "intent", "platform")
MAX_CRITERIA_VALUE = 100
_IDENTITY_CACHE_PREFIX = "evidence-identity:v1:"
_IDENTITY_CACHE_SECONDS = None  # content-addressed: never stale (the key prefix is versioned)
_GPU_NODES_PATH = "NodeTopology.gpu-nodes.label"
# A sha256's identity never changes (the bytes are content-addressed), so each process also
# keeps the ones it has seen: a warm check of 1,000 records then makes no cache round trip.
_LOCAL: dict[str, dict[str, str | None]] = {}
_LOCAL_MAX = 50_000


class CheckInputError(ValueError):
    """The request cannot be answered (bad snapshot, bad criteria, no catalog): a 400."""


@dataclass(frozen=True)
class ConstraintRow:
    name: str
    expected: str
    actual: str
    ok: bool
    message: str = ""


@dataclass(frozen=True)
class EvidenceMatch:
    id: int
    signer_id: int
    signer_label: str
    attested_at: datetime
    aicr_version: str
    same_recipe: bool
    matches: list[str]
    differs: list[str]
    not_recorded: list[str]  # by the evidence (the snapshot has it), not for redaction
    not_in_snapshot: list[str]  # the evidence records it, the snapshot does not
    values: dict[str, dict[str, str | None]]  # per differing identity: both values
    # The snapshot has it; the evidence's own redaction block says AICR's policy removed it.
    redacted: list[str] = field(default_factory=list)
    # What changed between the evidence and this snapshot, each a named staleness reason
    # (``identity-changed``: "<identity> changed from <the evidence's> to <the snapshot's>"),
    # the plan first when the evidence was made for another digest of the recipe.
    reasons: list[dict[str, str]] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return (
            self.same_recipe
            and not self.differs
            and not self.not_recorded
            and not self.redacted
            and not (self.not_in_snapshot)
        )

    @property
    def matches_as_recorded(self) -> bool:
        """Every identity the evidence records matches the snapshot, and the only gaps are
        what AICR's redaction removed (the default for every published bundle)."""
        return (
            self.same_recipe
            and bool(self.matches)
            and not self.differs
            and not self.not_recorded
            and not self.not_in_snapshot
        )


@dataclass
class CheckResult:
    criteria: dict[str, str]
    criteria_origin: dict[str, str]
    identity: dict[str, str | None]
    recipe: str | None = None
    resolution_error: str = ""
    valid_completions: dict[str, list[str]] = field(default_factory=dict)
    excluded_overlays: list[dict[str, str]] = field(default_factory=list)
    constraint_warnings: list[dict[str, str]] = field(default_factory=list)
    constraints: list[ConstraintRow] = field(default_factory=list)
    evidence: list[EvidenceMatch] = field(default_factory=list)
    verdict: str = ""
    covered: bool = False

    def as_api(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "criteria": self.criteria,
            "criteriaOrigin": self.criteria_origin,
            "resolutionError": self.resolution_error,
            "validCompletions": self.valid_completions,
            "excludedOverlays": self.excluded_overlays,
            "constraintWarnings": self.constraint_warnings,
            "constraints": [
                {
                    "name": c.name,
                    "expected": c.expected,
                    "actual": c.actual,
                    "ok": c.ok,
                    "message": c.message,
                }
                for c in self.constraints
            ],
            "identity": self.identity,
            "evidence": [
                {
                    "id": e.id,
                    "signer": e.signer_label,
                    "attestedAt": e.attested_at.isoformat(),
                    "aicrVersion": e.aicr_version,
                    "sameRecipe": e.same_recipe,
                    "exact": e.exact,
                    "matches": e.matches,
                    "differs": e.differs,
                    "notRecorded": e.not_recorded,
                    "redacted": e.redacted,
                    "notInSnapshot": e.not_in_snapshot,
                    "matchesAsRecorded": e.matches_as_recorded,
                    "values": e.values,
                    "reasons": e.reasons,
                }
                for e in self.evidence
            ],
            "verdict": self.verdict,
            "covered": self.covered,
            "settle": self.settle,
        }

    @property
    def settle(self) -> list[str]:
        """What would settle each identity the evidence cannot confirm, in words."""
        out = []
        redacted = sorted({k for e in self.evidence for k in e.redacted})
        if redacted:
            out.append(
                f"{_names([k for k in LABELS if k in redacted])}: redacted by AICR's policy in "
                "the evidence; publish it with `aicr validate --full` to record them"
            )
        unrecorded = sorted({k for e in self.evidence for k in e.not_recorded})
        if unrecorded:
            out.append(
                f"{_names([k for k in LABELS if k in unrecorded])}: not recorded by the "
                "evidence; a run with an AICR version that records them would"
            )
        missing = sorted({k for e in self.evidence for k in e.not_in_snapshot})
        if missing:
            out.append(
                f"{_names([k for k in LABELS if k in missing])}: not in your snapshot; take "
                "it again (aicr snapshot) so they can be compared"
            )
        return out


# --- inputs -----------------------------------------------------------------------------------


def _stated(criteria: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for dimension in STATED_DIMENSIONS:
        value = criteria.get(dimension)
        if value in (None, ""):
            continue
        if not isinstance(value, str) or len(value) > MAX_CRITERIA_VALUE:
            raise CheckInputError(
                f"{dimension} must be a text of at most {MAX_CRITERIA_VALUE} characters"
            )
        out[dimension] = value.strip()
    return out


def _evaluator(snapshot: Mapping[str, Any]) -> ConstraintEvaluator:
    def evaluate(name: str, value: str) -> tuple[bool, str]:
        if name != _GPU_NODES_PATH:
            try:
                lookup(snapshot, name)
            except ConstraintError as exc:
                raise MeasurementMissing(str(exc)) from None
        try:
            return evaluate_constraint(snapshot, name, value)
        except ConstraintError as exc:
            if "not found" in str(exc) or "no GPU nodes" in str(exc):
                raise MeasurementMissing(str(exc)) from None
            raise

    return evaluate


def _constraint_rows(doc: Mapping[str, Any], snapshot: Mapping[str, Any]) -> list[ConstraintRow]:
    rows = []
    for c in readiness_constraints(doc):
        name, expected = str(c.get("name", "")), str(c.get("value", ""))
        try:
            ok, actual = evaluate_constraint(snapshot, name, expected)
        except ConstraintError as exc:
            rows.append(ConstraintRow(name, expected, "", False, f"could not evaluate: {exc}"))
            continue
        message = "" if ok else f"expected {expected}, got {actual}"
        rows.append(ConstraintRow(name, expected, actual, ok, message))
    return rows


def _recipe_rows(catalog: Catalog, doc: Mapping[str, Any]) -> list[Recipe]:
    """The catalog recipes this resolution is, by criteria and selected profile: the leaf,
    and for a profiled leaf the variant of the selected value (the default value's variant
    is the same recipe as the leaf, so evidence named after either counts). Leaf first."""
    criteria = doc.get("criteria") or {}
    selected = (doc.get("metadata") or {}).get("selectedProfile")
    rows = Recipe.objects.filter(
        catalog=catalog, **{d: criteria.get(d) or "any" for d in STATED_DIMENSIONS}
    ).only("pk", "name", "profile", "is_default_profile", "digest")
    if not isinstance(selected, Mapping):
        return [row for row in rows if not row.profile][:1]
    wanted = f"{selected.get('name')}={selected.get('value')}"
    variants = [row for row in rows if row.profile == wanted]
    if variants and variants[0].is_default_profile:
        return [row for row in rows if not row.profile][:1] + variants
    return variants


# --- evidence identities ----------------------------------------------------------------------


def evidence_identities(
    keys: Sequence[tuple[int, str]],
) -> dict[int, dict[str, str | None]]:
    """Identity tuple per evidence id, for ``(id, sha256)`` pairs; stored bytes are read only
    for sha256s not cached yet."""
    cache_keys = {pk: _IDENTITY_CACHE_PREFIX + sha256 for pk, sha256 in keys}
    out = {pk: _LOCAL[key] for pk, key in cache_keys.items() if key in _LOCAL}
    wanted = [key for pk, key in cache_keys.items() if pk not in out]
    cached = cache.get_many(wanted) if wanted else {}
    out.update({pk: cached[key] for pk, key in cache_keys.items() if key in cached})
    _remember(cached)
    missing = [pk for pk in cache_keys if pk not in out]
    if missing:
        fresh = {}
        for e in Evidence.objects.filter(pk__in=missing).only(
            "pk", "sha256", "content", "container", "predicate", "aicr_version"
        ):
            out[e.pk] = identity_of_stored(e)
            fresh[cache_keys[e.pk]] = out[e.pk]
        cache.set_many(fresh, _IDENTITY_CACHE_SECONDS)
        _remember(fresh)
    return out


def _remember(identities: Mapping[str, dict[str, str | None]]) -> None:
    # Bounded: dropped wholesale when full (the shared cache still has every entry).
    if len(_LOCAL) + len(identities) > _LOCAL_MAX:
        _LOCAL.clear()
    _LOCAL.update(identities)


class _Row(NamedTuple):
    """The few columns of one counted evidence the check needs (no model instances: 1,000
    of them would cost more to build than everything else; a tuple, built in C), without its
    identities: those are read once per distinct ``identity_key`` (``_tuples``)."""

    pk: int
    sha256: str
    subject_digest: str
    attested_at: datetime
    aicr_version: str
    signer_id: int
    signer_label: str
    identity_key: str  # '' for a row stored before the key: its identities are read alone


def counted_evidence(recipe_names: Sequence[str]) -> list[_Row]:
    rows = (
        Evidence.objects.counted()
        .filter(recipe_name__in=recipe_names)
        .order_by("-attested_at", "-pk")
        .values_list(
            "pk",
            "sha256",
            "subject_digest",
            "attested_at",
            "aicr_version",
            "signer_id",
            "signer__label",
            "identity_key",
        )
    )
    return list(map(_Row._make, rows))


def _group(row: _Row) -> str:
    return row.identity_key or f"pk:{row.pk}"


def _tuples(rows: Sequence[_Row]) -> dict[str, CheckTuple]:
    """The compared tuple of each group of rows (``_group``: one ``identity_key``, or one row
    stored without a key), read from one row of each: one query, whatever the number of
    records sharing a tuple."""
    first: dict[str, int] = {}
    for row in rows:
        first.setdefault(_group(row), row.pk)
    read = {
        pk: check_tuple(identities, identity or {})
        for pk, identities, identity in Evidence.objects.filter(
            pk__in=list(first.values())
        ).values_list("pk", "identities", "identity")
    }
    return {group: read[pk] for group, pk in first.items()}


@dataclass(frozen=True)
class _Compared:
    """One tuple's comparison with the cluster, shared by every record that recorded it."""

    matches: list[str]
    differs: list[str]
    not_recorded: list[str]
    not_in_snapshot: list[str]
    values: dict[str, dict[str, str | None]]
    redacted: list[str]
    reasons: list[dict[str, str]]


def _changed(key: str, label: str, evidence: str | None, snapshot: str | None) -> dict[str, str]:
    """A change from the evidence to the snapshot, as the release's staleness words say it."""
    found = Difference(key, label, DIFFERS, snapshot or "(none)", evidence)
    return identity_reasons([found])[0].as_dict()


def _compared(cluster: Mapping[str, str | None], found: CheckTuple) -> _Compared:
    theirs, redacted = found
    c = compare(cluster, theirs)
    return _Compared(
        matches=c.matches,
        differs=c.differs,
        not_recorded=[k for k in c.not_recorded if k not in redacted],
        not_in_snapshot=c.not_in_snapshot,
        values={k: {"snapshot": cluster.get(k), "evidence": theirs.get(k)} for k in c.differs},
        redacted=[k for k in c.not_recorded if k in redacted],
        reasons=[_changed(k, LABELS[k], theirs.get(k), cluster.get(k)) for k in c.differs],
    )


def _plan_changed(subject: str, digest: str, reasons: list[dict[str, str]]) -> list[dict[str, str]]:
    """A record made for another digest of the recipe: a new plan needs its own run (AICR's
    policy), named first."""
    plan = _changed(PLAN, PLAN_LABEL, f"sha256:{subject}", f"sha256:{digest}")
    return [plan, *reasons]


def _matches(
    rows: Sequence[_Row], cluster: Mapping[str, str | None], digest: str
) -> list[EvidenceMatch]:
    """One comparison per distinct identity tuple (many records share one), one row each."""
    tuples = _tuples(rows) if rows else {}
    by_tuple: dict[tuple[object, ...], _Compared] = {}
    by_group: dict[str, _Compared] = {}
    for group, (theirs, redacted) in tuples.items():
        key = (*(theirs.get(k) for k in LABELS), redacted)
        if key not in by_tuple:
            by_tuple[key] = _compared(cluster, (theirs, redacted))
        by_group[group] = by_tuple[key]
    out = []
    for row in rows:
        c = by_group[row.identity_key or f"pk:{row.pk}"]
        out.append(
            EvidenceMatch(
                id=row.pk,
                signer_id=row.signer_id,
                signer_label=row.signer_label,
                attested_at=row.attested_at,
                aicr_version=row.aicr_version,
                same_recipe=row.subject_digest == digest,
                matches=c.matches,
                differs=c.differs,
                not_recorded=c.not_recorded,
                not_in_snapshot=c.not_in_snapshot,
                values=c.values,
                redacted=c.redacted,
                reasons=(
                    c.reasons
                    if row.subject_digest == digest
                    else _plan_changed(row.subject_digest, digest, c.reasons)
                ),
            )
        )
    return out


# --- verdict ----------------------------------------------------------------------------------


def _names(keys: Sequence[str]) -> str:
    return ", ".join(LABELS[k] for k in keys)


def verdict_of(result: CheckResult) -> tuple[str, bool]:
    """The answer in words, and whether the evidence covers this cluster exactly."""
    if result.recipe is None and result.constraint_warnings:
        failed = "; ".join(
            f"{w['constraint']} expected {w['expected']}, got {w['actual']}"
            if w["actual"]
            else w["reason"]
            for w in result.constraint_warnings
        )
        return f"not validated: the snapshot fails the recipe's constraints ({failed})", False
    if result.recipe is None:
        why = result.resolution_error or "no catalog recipe has exactly these criteria"
        return f"not validated: no recipe applies ({why})", False
    failing = [c.name for c in result.constraints if not c.ok]
    prefix = f"readiness constraints fail ({', '.join(failing)}); " if failing else ""
    if not result.evidence:
        return f"{prefix}not validated: no counted evidence for {result.recipe}", False
    exact = [e for e in result.evidence if e.exact]
    if exact:
        signers = len({e.signer_id for e in exact})
        text = f"validated on this exact tuple by {signers} signer{'s' * (signers != 1)}"
        return prefix + text, not failing
    as_recorded = [e for e in result.evidence if e.matches_as_recorded]
    if as_recorded:
        signers = len({e.signer_id for e in as_recorded})
        redacted = sorted({k for e in as_recorded for k in e.redacted})
        text = (
            f"validated by {signers} signer{'s' * (signers != 1)} on a tuple whose every "
            f"recorded identity matches; {len(redacted)} redacted by AICR's policy "
            f"({_names([k for k in LABELS if k in redacted])}), which publishing with "
            "`aicr validate --full` would settle"
        )
        return prefix + text, not failing
    same = [e for e in result.evidence if e.same_recipe] or result.evidence
    if all_same := [e for e in same if not e.differs]:
        gaps = sorted({k for e in all_same for k in e.not_recorded + e.not_in_snapshot})
        redacted = sorted({k for e in all_same for k in e.redacted})
        text = (
            prefix + "validated on a tuple that matches as far as it is recorded; not recorded "
            f"on one side: {_names([k for k in LABELS if k in gaps])}"
        )
        if redacted:
            text += f"; redacted by AICR's policy: {_names([k for k in LABELS if k in redacted])}"
        return text, False
    closest = min(same, key=lambda e: (len(e.differs), -e.attested_at.timestamp()))
    what = _names(closest.differs) or "recipe"
    if not closest.same_recipe and not closest.differs:
        what = "recipe version"
    return f"{prefix}validated on a different tuple ({what} differs)", False


# --- entry point ------------------------------------------------------------------------------


def check_snapshot(
    raw: bytes | str, criteria: Mapping[str, Any] | None = None, *, profile: str | None = None
) -> CheckResult:
    """Answer for one snapshot; ``CheckInputError`` naming the problem for bad input."""
    try:
        snapshot = read_snapshot_input(raw)
    except SnapshotInputError as exc:
        raise CheckInputError(str(exc)) from None
    stated = _stated(criteria or {})
    derived = criteria_from_snapshot(fingerprint_of(snapshot), stated)
    result = CheckResult(
        criteria=derived.values, criteria_origin=derived.origin, identity=identity_of(snapshot)
    )
    try:
        catalog = current_catalog()
    except AicrdError as exc:
        raise CheckInputError(exc.message) from None
    loaded = recipe_services.loaded_catalog(catalog)
    try:
        query = parse_criteria(derived.values, loaded)
    except CriteriaError as exc:
        raise CheckInputError(f"criteria: {exc.message}") from None
    if query.specificity() == 0:
        result.resolution_error = (
            "the snapshot tells neither service, accelerator nor OS; state them"
        )
    else:
        try:
            doc = resolve(
                loaded,
                query,
                version=catalog.aicr_version,
                profile=profile,
                evaluator=_evaluator(snapshot),
            )
        except ResolutionError as exc:
            result.resolution_error = exc.message
            result.valid_completions = exc.valid_completions
            result.excluded_overlays = exc.excluded_overlays
            result.constraint_warnings = exc.constraint_warnings
            # What excluded the overlays is what fails: shown as the constraints table.
            result.constraints = [
                ConstraintRow(w["constraint"], w["expected"], w["actual"], False, w["reason"])
                for w in exc.constraint_warnings
            ]
        else:
            _fill(result, catalog, doc, snapshot)
    result.verdict, result.covered = verdict_of(result)
    return result


def _fill(
    result: CheckResult, catalog: Catalog, doc: Mapping[str, Any], snapshot: Mapping[str, Any]
) -> None:
    metadata = doc.get("metadata") or {}
    result.excluded_overlays = list(metadata.get("excludedOverlays") or [])
    result.constraint_warnings = list(metadata.get("constraintWarnings") or [])
    result.constraints = _constraint_rows(doc, snapshot)
    recipes = _recipe_rows(catalog, doc)
    if not recipes:
        result.resolution_error = (
            "these criteria resolve to a composition that is not one of the catalog's recipes "
            f"(applied overlays: {', '.join(metadata.get('appliedOverlays') or [])}); state "
            "more criteria"
        )
        return
    result.recipe = recipes[0].name
    rows = counted_evidence([r.name for r in recipes])
    result.evidence = _matches(rows, result.identity, recipes[0].digest)
