"""Run intake: coordinates, meta schema gate, run admission and per-recipe aggregation.

The evidence tree is written by many contributors, so one mislabeled or hostile run must
never abort the dashboard: such a run is *skipped* with a warning (``SkipRun``). Only an
unreadable or malformed file aborts generation (see ``generate``).

The core types (``RunMeta``, ``Run``) are plain dataclasses, so the Django app can build runs
from database rows with ``make_run`` and feed ``aggregate``/``generate.build`` without files.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from recipes_app.resolver.criteria import STATIC_VALUES

from .allowlist import Allowlist, classify_signer, source_id
from .labels import source_label
from .timeutil import parse_rfc3339

logger = logging.getLogger("evidence_app.corroborate")

RUN_META_SCHEMA_VERSION = "aicr-corroboration-meta/v1"
ANY = "any"

# The criteria registry's static OSS lists (pkg/recipe/criteria.go, main-08), sorted like
# AICR's Get*Types(). They order facets and split dashboards/tabs; unknown values are still
# accepted (the taxonomy is open) and sort after these. One copy, shared with the resolver.
SERVICE_TYPES = STATIC_VALUES["service"]
ACCELERATOR_TYPES = STATIC_VALUES["accelerator"]
OS_TYPES = STATIC_VALUES["os"]
INTENT_TYPES = STATIC_VALUES["intent"]
PLATFORM_TYPES = STATIC_VALUES["platform"]

_PROFILE_IDENTIFIER = re.compile(r"[A-Za-z0-9._-]+")


class SkipRun(Exception):
    """The run is dropped (already logged); generation continues."""


def _warn(warnings: list[str] | None, message: str, **context: object) -> None:
    logger.warning("%s %s", message, context)
    if warnings is not None:
        warnings.append(message)


# --- coordinates ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Coordinate:
    """A recipe's dashboard placement: group=service, dashboard=accel-os, tab=intent[-plat]."""

    group: str
    dashboard: str
    tab: str

    @property
    def path(self) -> str:
        return f"{self.group}/{self.dashboard}/{self.tab}"


@dataclass(frozen=True, slots=True)
class Criteria:
    service: str = ""
    accelerator: str = ""
    os: str = ""
    intent: str = ""
    platform: str = ""

    def as_coord(self) -> dict[str, str]:
        """The renderer's ``coord`` map (sorted keys; an empty platform stays ``""``)."""
        return {
            "accelerator": self.accelerator,
            "intent": self.intent,
            "os": self.os,
            "platform": self.platform,
            "service": self.service,
        }


def _concrete(dim: str, value: str) -> str:
    if value in ("", ANY):
        raise ValueError(f'{dim} dimension must be concrete (got empty or "any")')
    return _no_separator(dim, value)


def _no_separator(dim: str, value: str) -> str:
    # A "/" would inject a spurious path segment and silently mis-place the recipe.
    if "/" in value:
        raise ValueError(f'{dim} dimension must not contain "/" (the coordinate path separator)')
    return value


def coordinate_for(criteria: Criteria) -> Coordinate:
    """ADR-012 ``CoordinateFor``: service/accelerator/intent concrete, os optional (``any``)."""
    service = _concrete("service", criteria.service)
    accelerator = _concrete("accelerator", criteria.accelerator)
    intent = _concrete("intent", criteria.intent)
    os_name = _no_separator("os", criteria.os or ANY)
    tab = intent
    if criteria.platform not in ("", ANY):
        tab = f"{intent}-{_no_separator('platform', criteria.platform)}"
    return Coordinate(service, f"{accelerator}-{os_name}", tab)


def _split_dashboard(dashboard: str) -> tuple[str, str]:
    # Prefer the longest known OS suffix so a multi-token accelerator ("rtx-pro-6000") stays
    # intact; fall back to the last hyphen for an unknown but well-formed OS.
    best = ""
    for os_name in OS_TYPES:
        if (
            dashboard.endswith("-" + os_name)
            and len(dashboard) > len(os_name) + 1
            and len(os_name) > len(best)
        ):
            best = os_name
    if best:
        return dashboard[: -len(best) - 1], best
    i = dashboard.rfind("-")
    if i <= 0 or i >= len(dashboard) - 1:
        raise ValueError(f"dashboard {dashboard!r} is not <accelerator>-<os>")
    return dashboard[:i], dashboard[i + 1 :]


def _split_tab(tab: str) -> tuple[str, str]:
    for intent in INTENT_TYPES:
        if tab == intent:
            return intent, ""
        if tab.startswith(intent + "-"):
            return intent, tab[len(intent) + 1 :]
    if tab == "":
        raise ValueError("tab is empty")
    i = tab.find("-")
    if i > 0:
        return tab[:i], tab[i + 1 :]
    return tab, ""


def criteria_from_coordinate(coord: Coordinate) -> Criteria:
    """Invert a coordinate to its criteria, proven by a round trip through ``coordinate_for``.

    Raises ``ValueError`` when the dashboard/tab do not split or the criteria re-map to a
    different path (an inconsistent on-disk coordinate fails closed).
    """
    accelerator, os_name = _split_dashboard(coord.dashboard)
    intent, platform = _split_tab(coord.tab)
    crit = Criteria(coord.group, accelerator, os_name, intent, platform)
    got = coordinate_for(crit)
    if got.path != coord.path:
        raise ValueError(
            f"coordinate {coord.path!r} inverts to criteria that re-map to {got.path!r}"
        )
    return crit


def safe_recipe_slug(name: str) -> bool:
    """Whether a contributor-supplied recipe name is a flat, local file name."""
    return name not in ("", ".", "..") and "/" not in name and "\\" not in name


def parse_pointer_profile(selection: str) -> str:
    """The lowercase ``<name>-<value>`` segment of an exact ``name=value`` profile selection.

    Raises ``ValueError`` for an empty or malformed selection (``[A-Za-z0-9._-]+`` each side).
    """
    if selection == "":
        raise ValueError("profile selection is empty")
    if selection.strip() != selection or selection.count("=") != 1:
        raise ValueError("profile must use the exact name=value form")
    name, value = selection.split("=")
    if not (_PROFILE_IDENTIFIER.fullmatch(name) and _PROFILE_IDENTIFIER.fullmatch(value)):
        raise ValueError("profile name and value must match [A-Za-z0-9._-]+")
    return f"{name.lower()}-{value.lower()}"


# --- run metadata ---------------------------------------------------------------------------


def compatible_meta_schema(version: str) -> bool:
    """Whether a ``meta.json`` schemaVersion may be parsed under the v1 rules.

    Empty is tolerated (the ingest job may omit it); otherwise the ``<family>/v<major>`` part
    must equal v1's, so a future minor loads but a new major (which may repurpose fields such
    as ``allowlisted``) is skipped fail-closed.
    """
    if version == "":
        return True
    return version.split(".", 1)[0] == RUN_META_SCHEMA_VERSION.split(".", 1)[0]


@dataclass(frozen=True, slots=True)
class Signer:
    id_hash: str = ""
    identity: str = ""
    issuer: str = ""
    class_: str = ""
    allowlisted: bool = False


@dataclass(frozen=True, slots=True)
class RunMeta:
    """The verified per-run metadata the ingest job writes beside ``ctrf/`` (meta.json)."""

    coordinate: Coordinate
    recipe: str
    signer: Signer
    run_id: str = ""
    attested_at: str = ""
    aicr_version: str = ""
    k8s_version: str = ""
    evidence_ref: str = ""
    schema_version: str = RUN_META_SCHEMA_VERSION
    profile: str = ""
    profile_selection: str = ""
    k8s_constraint: str = ""
    bundle_digest: str = ""
    rekor_log_index: int | None = None

    @classmethod
    def from_json(cls, doc: Mapping) -> RunMeta:
        """From the zero-filled dict ``gojson.decode(data, RUN_META_TYPE)`` returns."""
        c, s = doc["coordinate"], doc["signer"]
        return cls(
            coordinate=Coordinate(c["group"], c["dashboard"], c["tab"]),
            recipe=doc["recipe"],
            signer=Signer(s["idHash"], s["identity"], s["issuer"], s["class"], s["allowlisted"]),
            run_id=doc["runId"],
            attested_at=doc["attestedAt"],
            aicr_version=doc["aicrVersion"],
            k8s_version=doc["k8sVersion"],
            evidence_ref=doc["evidenceRef"],
            schema_version=doc["schemaVersion"],
            profile=doc["profile"],
            profile_selection=doc["profileSelection"],
            k8s_constraint=doc["k8sConstraint"],
            bundle_digest=doc["bundleDigest"],
            rekor_log_index=doc["rekorLogIndex"],
        )


@dataclass(frozen=True, slots=True)
class Run:
    """One signer's single run for one recipe, admitted and classified.

    ``statuses`` maps phase -> CTRF test name -> raw CTRF status; ``attested`` is the
    ``attestedAt`` instant (``timeutil.parse_rfc3339``) used for ordering.
    """

    meta: RunMeta
    attested: int
    class_: str
    allowlisted: bool
    label: str
    statuses: Mapping[str, Mapping[str, str]]
    source_id: str = field(init=False)
    signer_key: str = field(init=False)

    def __post_init__(self) -> None:
        s = self.meta.signer
        # The public source id and the consensus key both derive from the VERIFIED
        # (issuer, identity), never from the contributor-controlled idHash.
        object.__setattr__(self, "source_id", source_id(s.issuer, s.identity))
        object.__setattr__(self, "signer_key", f"{s.issuer}\n{s.identity}")


def admit_meta(
    meta: RunMeta, allowlist: Allowlist | None, warnings: list[str] | None = None
) -> tuple[str, bool]:
    """Schema and signer gates of ``loadRun``; returns ``(class, allowlisted)``.

    With an allowlist the class is re-derived from the verified (issuer, identity); without
    one ``meta.json``'s class is trusted as written by the trusted ingest job.
    """
    if not compatible_meta_schema(meta.schema_version):
        _warn(
            warnings,
            "skipping run: incompatible meta.json schema major version",
            got=meta.schema_version,
            signer=meta.signer.identity,
        )
        raise SkipRun
    if meta.schema_version not in ("", RUN_META_SCHEMA_VERSION):
        _warn(
            warnings,
            "meta.json schema version differs within the supported major; "
            "parsing under current rules",
            got=meta.schema_version,
        )
    if meta.signer.issuer == "" or meta.signer.identity == "":
        # Every empty signer would otherwise collide on one source key.
        _warn(warnings, "skipping run: signer issuer/identity is empty")
        raise SkipRun
    class_, allowlisted = meta.signer.class_, meta.signer.allowlisted
    if allowlist is not None:
        derived = classify_signer(allowlist, meta.signer.issuer, meta.signer.identity)
        if (derived.class_ != class_ or derived.allowlisted != allowlisted) and class_ != "":
            _warn(
                warnings,
                "meta.json signer class disagrees with allowlist; using allowlist",
                signer=meta.signer.identity,
                metaClass=class_,
                derivedClass=derived.class_,
            )
        class_, allowlisted = derived.class_, derived.allowlisted
    return class_, allowlisted


def attested_instant(meta: RunMeta, warnings: list[str] | None = None) -> int:
    """The run's ordering instant; a non-RFC 3339 ``attestedAt`` skips the run (never zero,
    which would sort it oldest and let a stale run masquerade or hide a newer one)."""
    instant = parse_rfc3339(meta.attested_at)
    if instant is None:
        _warn(
            warnings,
            "skipping run: unparseable attestedAt",
            attestedAt=meta.attested_at,
            signer=meta.signer.identity,
        )
        raise SkipRun
    return instant


def make_run(
    meta: RunMeta,
    statuses: Mapping[str, Mapping[str, str]],
    allowlist: Allowlist | None = None,
    warnings: list[str] | None = None,
) -> Run:
    """Admit one run (raises ``SkipRun`` when the generator would drop it)."""
    class_, allowlisted = admit_meta(meta, allowlist, warnings)
    instant = attested_instant(meta, warnings)
    return Run(
        meta,
        instant,
        class_,
        allowlisted,
        source_label(class_, meta.signer.identity, meta.signer.id_hash),
        statuses,
    )


# --- aggregation ----------------------------------------------------------------------------


@dataclass
class RecipeAgg:
    """Every admitted run of one recipe coordinate, keyed by source id."""

    coord: Coordinate
    criteria: Criteria
    name: str
    profile: str = ""
    profile_selection: str = ""
    by_signer: dict[str, list[Run]] = field(default_factory=dict)
    # Runs sharing the lossy route but disagreeing on the exact profile selection: the whole
    # coordinate is dropped rather than keeping an order-dependent winner.
    conflicted: bool = False


def aggregate(runs: Iterable[Run], warnings: list[str] | None = None) -> dict[str, RecipeAgg]:
    """Group runs by coordinate path, skipping (with a warning) any run whose recipe slug is
    unsafe, whose coordinate does not invert, whose recipe name another coordinate already
    claimed, or whose profile fields contradict its tab. Feed runs in a stable order (the
    generator uses sorted meta.json paths): the first claimant of a name wins."""
    recipes: dict[str, RecipeAgg] = {}
    name_to_coord: dict[str, str] = {}
    for run in runs:
        meta = run.meta
        co = meta.coordinate
        crit_co = co
        if meta.profile:
            suffix = "-" + meta.profile
            if not co.tab.endswith(suffix):
                _warn(
                    warnings,
                    "meta.profile does not match coordinate tab; skipping run",
                    tab=co.tab,
                    profile=meta.profile,
                )
                continue
            crit_co = Coordinate(co.group, co.dashboard, co.tab[: -len(suffix)])
            # The lowercase segment is lossy: the exact selection must re-derive it, or runs
            # whose selections merely collide on it would be conflated.
            try:
                segment = parse_pointer_profile(meta.profile_selection)
            except ValueError:
                segment = None
            if segment != meta.profile:
                _warn(
                    warnings,
                    "meta.profileSelection does not derive meta.profile; skipping run",
                    profile=meta.profile,
                    profileSelection=meta.profile_selection,
                )
                continue
        key = co.path
        agg = recipes.get(key)
        if agg is not None:
            if agg.profile_selection != meta.profile_selection:
                agg.conflicted = True
                _warn(
                    warnings,
                    "conflicting exact profile selections on one coordinate; "
                    "quarantining aggregate",
                    coordinate=key,
                )
                continue
            agg.by_signer.setdefault(run.source_id, []).append(run)
            continue

        name = meta.recipe
        if not safe_recipe_slug(name):
            _warn(
                warnings,
                "skipping run: unsafe recipe slug (not a flat, local filename)",
                recipe=name,
                coordinate=key,
            )
            continue
        try:
            crit = criteria_from_coordinate(crit_co)
        except ValueError as exc:
            _warn(
                warnings,
                "skipping run: coordinate does not invert to valid criteria",
                coordinate=key,
                error=str(exc),
            )
            continue
        claimed = name_to_coord.get(name)
        if claimed is not None and claimed != key:
            _warn(
                warnings,
                "skipping run: recipe name already claimed by another coordinate",
                recipe=name,
                coordinate=key,
                claimedBy=claimed,
            )
            continue
        name_to_coord[name] = key
        recipes[key] = RecipeAgg(
            coord=co,
            criteria=crit,
            name=name,
            profile=meta.profile,
            profile_selection=meta.profile_selection,
            by_signer={run.source_id: [run]},
        )
    for key in [k for k, agg in recipes.items() if agg.conflicted]:
        _warn(
            warnings,
            "dropping quarantined coordinate (conflicting exact profile selections)",
            coordinate=key,
        )
        del recipes[key]
    return recipes
