"""Whether each profile of a release is qualified: the one place the rule lives (the API, the
page, the feed and the badge all read ``release_profiles``).

AICR's operator support policy, as its "Qualified profiles" table and "When qualification goes
stale" state it: a profile is supported only after it ran on real hardware with the release
and its evidence is published; a qualification covers exact identities and stops applying when
any of them changes, until the affected checks run again. Here a profile is **qualified** when
evidence exists that is

- counted (verified, not withdrawn, from a counted signer, in the supported AICR range),
- on real hardware: not simulated (simulators never prove GPU, fabric, isolation or
  performance) and not demo data,
- keyless: AICR's upstream gate accepts keyless evidence only; key-signed evidence is for own
  use and never qualifies unless ``RELEASES_ACCEPT_KEY_SIGNED`` is set,
- for exactly that recipe (a profile never inherits another profile's evidence: GB200 is never
  qualified by H100 evidence), made for its current plan (the recipe's current digest: a new
  plan needs its own deployment validation),
- recording every identity the release declares (operator image and chart, AICR image,
  validator images) and the profile's tuple, equal to the declared values,
- with every declared check of the recipe passed.

Otherwise, in this order: **unqualified-changed** when evidence passed every check but an
identity it recorded differs ("Unqualified until the profile runs with it: <identity> changed
from … to …"); **in-progress** when evidence exists but not every check passed or an identity
is redacted or not recorded ("Qualification in progress: …"); **not-qualified** when there is
no such evidence ("Not qualified: not yet run on hardware"); **not-claimed** for a recipe the
release does not claim ("Not claimed").
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Count, Q

from evidence_app.consensus.rules import check_statuses, declared_checks
from evidence_app.corroborate import PASS, bucket_status
from evidence_app.coverage.recorded import (
    DIFFERS,
    NOT_RECORDED,
    PLAN,
    PLAN_LABEL,
    REDACTED,
    TUPLE_LABELS,
    Difference,
    Expected,
    differences,
    split_image,
)
from evidence_app.models import Evidence, Release, SignerKind, Verdict
from evidence_app.services.staleness import identity_reasons
from evidence_app.verification.digests import DigestScheme, scheme_for
from recipes_app.models import Catalog, Recipe

QUALIFIED = "qualified"
IN_PROGRESS = "in-progress"
NOT_QUALIFIED = "not-qualified"
NOT_CLAIMED = "not-claimed"
UNQUALIFIED_CHANGED = "unqualified-changed"
STATUSES = (QUALIFIED, IN_PROGRESS, UNQUALIFIED_CHANGED, NOT_QUALIFIED, NOT_CLAIMED)
STATUS_WORDS = {
    QUALIFIED: "Qualified",
    IN_PROGRESS: "Qualification in progress",
    UNQUALIFIED_CHANGED: "Unqualified until the profile runs with it",
    NOT_QUALIFIED: "Not qualified",
    NOT_CLAIMED: "Not claimed",
}
NOT_RUN_SENTENCE = "Not qualified: not yet run on hardware"
UPSTREAM_GATE = "not accepted by AICR's upstream gate"
# The newest candidates read per profile (their identities are JSON): enough to find the
# qualifying run among a recipe's recent ones; the page says how many it read.
CANDIDATES = 200
SHOWN_EVIDENCE = 20


def accepts_key_signed() -> bool:
    return bool(getattr(settings, "RELEASES_ACCEPT_KEY_SIGNED", False))


@dataclass(frozen=True)
class Candidate:
    pk: int
    attested_at: datetime
    differences: list[Difference]
    passed: int
    declared: int
    failing: list[str]  # declared checks not passed: "phase/name (status)"

    @property
    def checks_ok(self) -> bool:
        return self.declared > 0 and not self.failing

    @property
    def qualifies(self) -> bool:
        return self.checks_ok and not self.differences

    @property
    def changed(self) -> list[Difference]:
        return [d for d in self.differences if d.state == DIFFERS]


@dataclass
class ProfileStatus:
    recipe: str
    status: str
    reason: str
    evidence: list[int] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    tuple: dict[str, str] = field(default_factory=dict)
    examined: int = 0

    def as_api(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "status": self.status,
            "reason": self.reason,
            "evidence": self.evidence,
        }


def expected_identities(release: Release, entry: Mapping[str, Any]) -> list[Expected]:
    """What a run must record to qualify the profile ``entry`` (one of ``release.profiles``;
    ``{}`` for the release's own identities only): the release's images, then the profile's
    tuple and workload images."""
    tuple_: Mapping[str, str] = entry.get("tuple") or {}
    out = []
    for key, label, ref in (
        ("operator_image", "operator image", release.operator_image),
        ("operator_chart", "operator chart", release.operator_chart),
        ("aicr_image", "AICR image", release.aicr_image),
    ):
        repository = split_image(ref.split("@", 1)[0])[0]
        out.append(Expected(key, label, ref, image=repository))
    for image in release.validator_images:
        repository = image["image"]
        out.append(
            Expected(
                f"validator_image:{repository}",
                f"validator image {repository}",
                f"{repository}@{image['digest']}",
                image=repository,
            )
        )
    for key, value in tuple_.items():
        out.append(Expected(key, TUPLE_LABELS.get(key, key), value))
    for image in entry.get("workload_images") or ():
        repository = image["image"]
        out.append(
            Expected(
                f"workload_image:{repository}",
                f"workload image {repository}",
                f"{repository}@{image['digest']}",
                image=repository,
            )
        )
    return out


def _current_digest(recipe: Recipe, predicate_type: str) -> str:
    return recipe.digest_v3 if scheme_for(predicate_type) is DigestScheme.V3 else recipe.digest


def _checks(check_results: Any, declared: Sequence[tuple[str, str]]) -> tuple[int, int, list[str]]:
    """(passed, checks, not passed): the recipe's declared checks, or where it declares none
    every check the run reported (a run reporting none passed nothing)."""
    statuses = check_statuses(check_results)
    if not declared:
        declared = [(phase, name) for phase in statuses for name in sorted(statuses[phase])]
    passed, failing = 0, []
    for phase, name in declared:
        status = statuses.get(phase, {}).get(name)
        if status is not None and bucket_status(status) == PASS:
            passed += 1
        else:
            failing.append(f"{phase}/{name} ({status or 'not run'})")
    return passed, len(declared), failing


def _short(value: str | None) -> str:
    return value if value is not None else "(none)"


def _in_progress(best: Candidate) -> str:
    parts = []
    if best.declared == 0:
        parts.append("no check results recorded")
    elif best.failing:
        shown = ", ".join(best.failing[:5]) + (" …" if len(best.failing) > 5 else "")
        parts.append(f"{best.passed} of {best.declared} checks passed (not passed: {shown})")
    changed = [d for d in best.differences if d.state == DIFFERS]
    if changed:
        parts.append(
            "; ".join(f"{d.label} is {_short(d.recorded)}, not {d.expected}" for d in changed)
        )
    redacted = [d.label for d in best.differences if d.state == REDACTED]
    if redacted:
        parts.append(
            f"{', '.join(redacted)} redacted by AICR's policy (publish with aicr validate --full)"
        )
    missing = [d.label for d in best.differences if d.state == NOT_RECORDED]
    if missing:
        parts.append(f"{', '.join(missing)} not recorded by the evidence")
    return f"{STATUS_WORDS[IN_PROGRESS]}: " + "; ".join(parts)


def changed_sentence(changed: Sequence[Difference]) -> str:
    reasons = identity_reasons(changed)
    return f"{STATUS_WORDS[UNQUALIFIED_CHANGED]}: " + "; ".join(r.detail for r in reasons)


def _candidates(recipe: Recipe, expected: Sequence[Expected]) -> tuple[list[Candidate], int]:
    declared = list(declared_checks(recipe.checks))
    kinds = [SignerKind.KEYLESS, SignerKind.KEY] if accepts_key_signed() else [SignerKind.KEYLESS]
    rows = (
        Evidence.objects.counted()
        .filter(recipe_name=recipe.name, is_demo=False, signer__kind__in=kinds)
        .order_by("-attested_at", "-pk")
        .values_list(
            "pk", "attested_at", "subject_digest", "predicate_type", "identities", "check_results"
        )[:CANDIDATES]
    )
    out = []
    for pk, attested_at, subject, ptype, identities, results in rows:
        found = differences(identities, expected)
        current = _current_digest(recipe, ptype)
        if subject != current:
            found.insert(
                0, Difference(PLAN, PLAN_LABEL, DIFFERS, f"sha256:{current}", f"sha256:{subject}")
            )
        passed, total, failing = _checks(results, declared)
        out.append(Candidate(pk, attested_at, found, passed, total, failing))
    return out, len(out)


def _not_run_reason(recipe_name: str) -> str:
    """The sentence when no evidence can qualify, naming what exists and why it cannot."""
    live = Q(verdict=Verdict.VERIFIED, withdrawn_at__isnull=True, recipe_name=recipe_name)
    counts = Evidence.objects.filter(live).aggregate(
        simulated=Count("pk", filter=Q(is_simulated=True)),
        demo=Count("pk", filter=Q(is_demo=True, is_simulated=False)),
        keyed=Count(
            "pk",
            filter=Q(is_simulated=False, is_demo=False, signer__kind=SignerKind.KEY)
            & Q(signer__counted=True),
        ),
    )
    notes = []
    if counts["keyed"] and not accepts_key_signed():
        notes.append(f"{counts['keyed']} key-signed, {UPSTREAM_GATE}")
    if counts["simulated"]:
        notes.append(f"{counts['simulated']} on a simulated cluster, which proves no hardware")
    if counts["demo"]:
        notes.append(f"{counts['demo']} demo")
    return NOT_RUN_SENTENCE + (f" ({'; '.join(notes)})" if notes else "")


def profile_status(
    release: Release, entry: Mapping[str, Any], recipe: Recipe | None
) -> ProfileStatus:
    name = str(entry.get("recipe"))
    tuple_ = dict(entry.get("tuple") or {})
    if recipe is None:
        return ProfileStatus(
            name,
            NOT_QUALIFIED,
            f"Not qualified: {name} is not a recipe of the current catalog",
            tuple=tuple_,
        )
    candidates, examined = _candidates(recipe, expected_identities(release, entry))
    if not candidates:
        return ProfileStatus(name, NOT_QUALIFIED, _not_run_reason(name), tuple=tuple_)
    qualifying = [c for c in candidates if c.qualifies]
    if qualifying:
        return ProfileStatus(
            name,
            QUALIFIED,
            STATUS_WORDS[QUALIFIED],
            [c.pk for c in qualifying[:SHOWN_EVIDENCE]],
            [],
            tuple_,
            examined,
        )
    # Ran in full, but an identity it recorded is not the release's: the policy's "stale".
    changed = [c for c in candidates if c.checks_ok and c.changed]
    if changed:
        best = changed[0]
        return ProfileStatus(
            name,
            UNQUALIFIED_CHANGED,
            changed_sentence(best.changed),
            [best.pk],
            best.differences,
            tuple_,
            examined,
        )
    best = min(
        candidates, key=lambda c: (len(c.failing) + len(c.differences), -c.attested_at.timestamp())
    )
    return ProfileStatus(
        name,
        IN_PROGRESS,
        _in_progress(best),
        [best.pk, *[c.pk for c in candidates if c.pk != best.pk][: SHOWN_EVIDENCE - 1]],
        best.differences,
        tuple_,
        examined,
    )


def current_recipes(catalog: Catalog | None, names: Sequence[str]) -> dict[str, Recipe]:
    """The current catalog's recipes called ``names`` with what a status reads (one query)."""
    if catalog is None:
        return {}
    return {
        r.name: r
        for r in Recipe.objects.filter(catalog=catalog, name__in=list(names)).only(
            "pk", "name", "digest", "digest_v3", "checks"
        )
    }


def computed_profiles(
    release: Release, catalog: Catalog | None, names: Collection[str] | None = None
) -> list[ProfileStatus]:
    """Each claimed profile's status computed now (of ``names``, None: all), in the
    release's order: what ``releases.stored`` keeps in ``ReleaseProfile`` rows."""
    entries = [e for e in release.profiles if names is None or str(e.get("recipe")) in names]
    recipes = current_recipes(catalog, [str(e.get("recipe")) for e in entries])
    return [profile_status(release, e, recipes.get(str(e.get("recipe")))) for e in entries]


def release_profiles(release: Release, *, include_unclaimed: bool = False) -> list[ProfileStatus]:
    """Each claimed profile's status, in the release's order; with ``include_unclaimed``, then
    every other current recipe with counted evidence, ``not-claimed``. Read from the stored
    rows (``releases.stored``): a fixed number of queries whatever the number of records."""
    from evidence_app.releases import stored  # stored imports this module

    catalog = Catalog.objects.current()
    out = stored.stored_profiles(release, catalog)
    if include_unclaimed and catalog is not None:
        out += [
            ProfileStatus(n, NOT_CLAIMED, STATUS_WORDS[NOT_CLAIMED])
            for n in stored.unclaimed(catalog, release.claimed)
        ]
    return out


def summary(statuses: Sequence[ProfileStatus]) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for s in statuses:
        counts[s.status] += 1
    return counts


# --- the consensus lens -----------------------------------------------------------------------

LENS_PREFIX = "release:"  # consensus.grid.LENS_PREFIX
LENS_CANDIDATES = 2000


def lens_release(value: str) -> Release | None:
    """The release a ``release:<id>`` lens names (None for any other value)."""
    if not value.startswith(LENS_PREFIX) or not value[len(LENS_PREFIX) :].isdigit():
        return None
    return Release.objects.filter(pk=int(value[len(LENS_PREFIX) :])).first()


def matching_evidence(release: Release, recipe: Recipe, ids: Sequence[int]) -> set[int]:
    """Of ``ids`` (a recipe's eligible runs), those whose recorded identities equal the
    release's and the profile's tuple, made for the recipe's current plan: what the release
    lens counts. Checks are not asked here (consensus judges them); key-signed runs are kept
    and labelled by the grid ("not accepted by AICR's upstream gate")."""
    entry = next((p for p in release.profiles if p.get("recipe") == recipe.name), {})
    expected = expected_identities(release, entry)
    rows = (
        Evidence.objects.filter(pk__in=list(ids))
        .order_by("-attested_at", "-pk")
        .values_list("pk", "subject_digest", "predicate_type", "identities")[:LENS_CANDIDATES]
    )
    return {
        pk
        for pk, subject, ptype, identities in rows
        if subject == _current_digest(recipe, ptype) and not differences(identities, expected)
    }
