"""Recipe resolution: AICR.md §1.3 steps 1-10 in query mode, plus step 11 with a snapshot.

``resolve`` follows main-08 ``Builder.BuildFromCriteriaWithProfile`` →
``MetadataStore.BuildRecipeResultWithProfile`` → ``finalizeRecipeResult``:

1. match every overlay's criteria against the query (asymmetric wildcard rule);
2. keep maximal leaves (drop matches that are ``spec.base`` ancestors of other matches);
3. sort them by specificity, then name;
4. OS guard (``require_os_if_needed``);
5. seed with the base spec, ``appliedOverlays = [base]``;
6. merge every surviving chain root→leaf, each overlay once;
7. merge the accumulated mixins (conflicts are errors);
8. profile: the one profile declaration in the matched chains, if any (applied after 9);
9. criteria coverage post-condition;
10. finalize: dependency validation, deployment order (Kahn, sorted queue, disabled components
    left out), component type canonicalisation, registry defaults, health-check hydration,
    coherence checks; then the builder's version stamp and the Slurm accounting configuration
    (``platform: slurm`` recipes get ``configuration.slurm.accounting.mode: disabled`` by
    default and become ``aicr.run/v1alpha3``).

The result is one ``RecipeResult`` document as plain Python data following the yaml tags'
``omitempty`` rules (keys unordered; ``yamlv3.marshal_deterministic`` sorts them). It never
shares mutable containers with the catalog.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .catalog import BASE_NAME, Catalog
from .coverage import require_os_if_needed, verify_criteria_coverage
from .criteria import Criteria, parse_criteria
from .errors import CODE_INTERNAL, CODE_NOT_FOUND, MeasurementMissing, ResolutionError, goq
from .generation import generation_for
from .merge import MergedSpec, canonical_type, topological_sort, validate_dependencies
from .model import (
    COMPONENT_TYPE_HELM,
    COMPONENT_TYPE_KUSTOMIZE,
    PHASES,
    RECIPE_RESULT_KIND,
    ComponentRef,
    Constraint,
    Overlay,
    ProfileDeclaration,
    ValidationConfig,
    ValidationPhase,
)
from .profile import apply_profile, deep_merge, parse_selection
from .yamlload import Ctx, as_any, parse_raw

ACCOUNTING_MODES = ("disabled", "customer-managed", "aicr-provided")
_SLINKY_SLURM = "slinky-slurm"
_MARIADB_COMPONENTS = ("mariadb-operator-crds", "mariadb-operator", "slurm-accounting-mariadb")

#: ``ConstraintEvaluatorFunc``: ``(name, value) -> (satisfied, actual reading)``. It raises
#: ``MeasurementMissing`` when the snapshot lacks the reading (the overlay is then excluded);
#: any other exception is a hard failure, as AICR's fail-closed ``isNotFoundEvalError`` rule.
ConstraintEvaluator = Callable[[str, str], tuple[bool, str]]


@dataclass(frozen=True, slots=True)
class ProfileVariant:
    """One selectable value of a profiled leaf, named like AICR's evidence pointers.

    ``name`` is ``<leaf>-<profile name lowercase>-<value lowercase>`` (AICR.md §4.3/§4.6, e.g.
    ``h100-aks-ubuntu-training-kubeflow-gpustack-operator-managed``); ``profile`` is the
    ``name=value`` selection to pass to ``resolve``.
    """

    name: str
    leaf: str
    profile: str
    is_default: bool
    criteria: Criteria | None = None


# --- selection ------------------------------------------------------------------------------------


def find_matching_overlays(catalog: Catalog, query: Criteria) -> list[Overlay]:
    """Steps 1-3: matching maximal leaves sorted by (specificity, name)."""
    matches = [o for o in catalog.matchable if o.criteria is not None and o.criteria.matches(query)]
    if not matches:
        return matches
    ancestors: set[str] = set()
    for o in matches:
        ancestors |= catalog.ancestors[o.name]
    leaves = [o for o in matches if o.name not in ancestors]
    leaves.sort(key=_specificity_key)
    return leaves


def _specificity_key(o: Overlay) -> tuple[int, str]:
    assert o.criteria is not None
    return o.criteria.specificity(), o.name


def effective_profile(
    catalog: Catalog, overlays: list[Overlay]
) -> tuple[str, ProfileDeclaration] | None:
    """``resolveProfileDeclaration``: the single profile declared along the matched chains."""
    found: dict[str, ProfileDeclaration] = {}
    if catalog.base.profile is not None:
        found[BASE_NAME] = catalog.base.profile
    for o in overlays:
        for link in catalog.chains[o.name]:
            if link.profile is not None:
                found[link.name] = link.profile
    if not found:
        return None
    if len(found) > 1:
        raise ResolutionError(
            "resolved composition has multiple profile declarations from "
            f"[{' '.join(sorted(found))}]"
        )
    return next(iter(found.items()))


# --- merge ----------------------------------------------------------------------------------------


def _merge_mixins(catalog: Catalog, spec: MergedSpec) -> None:
    """Step 7 (``mergeMixins``)."""
    if not spec.mixins:
        return
    constraints = {c.name for c in spec.constraints}
    components = {r.name for r in spec.refs}
    for name in spec.mixins:
        mixin = catalog.mixins.get(name)
        if mixin is None:
            raise ResolutionError(
                f"mixin {goq(name)} not found in recipes/mixins/", code=CODE_NOT_FOUND
            )
        for c in mixin.constraints or ():
            if c.name in constraints:
                raise ResolutionError(
                    f"mixin {goq(name)} constraint {goq(c.name)} conflicts with inheritance chain "
                    "or another mixin"
                )
        for ref in mixin.component_refs or ():
            if ref.name not in components:
                continue
            offending = _mixin_unsafe_field(ref)
            if offending:
                raise ResolutionError(
                    f"mixin {goq(name)} component {goq(ref.name)} sets identity/sourcing field "
                    f"{goq(offending)} which conflicts with the inheritance chain; mixins may only "
                    "contribute Namespace, ManifestFiles, or PreManifestFiles to an existing "
                    "component"
                )
        spec.merge(mixin.constraints, mixin.component_refs)
        constraints.update(c.name for c in mixin.constraints or ())
        components.update(r.name for r in mixin.component_refs or ())
    spec.mixins = []


def _mixin_unsafe_field(ref: ComponentRef) -> str:
    """``mixinComponentRefSafeForMerge``: the first identity/sourcing field a mixin sets."""
    for yaml_name, value in (
        ("chart", ref.chart),
        ("type", ref.type),
        ("source", ref.source),
        ("version", ref.version),
        ("tag", ref.tag),
        ("path", ref.path),
        ("valuesFile", ref.values_file),
        ("overrides", ref.overrides),
        ("patches", ref.patches),
        ("dependencyRefs", ref.dependency_refs),
        ("cleanup", ref.cleanup),
        ("expectedResources", ref.expected_resources),
        ("healthCheckAsserts", ref.health_check_asserts),
        ("healthCheckSkip", ref.health_check_skip),
    ):
        if value:
            return yaml_name
    return ""


def _check_evaluable(catalog: Catalog, overlays: list[Overlay]) -> None:
    """``validateConstraintWarningSource`` on every matched overlay (snapshot/leaf path)."""
    for o in overlays:
        for c in o.constraints or ():
            if not c.name:
                raise ResolutionError("constraint name is required for snapshot evaluation")
            if not c.value:
                raise ResolutionError(
                    f"constraint {goq(c.name)} value is required for snapshot evaluation"
                )


def _evaluate(evaluator: ConstraintEvaluator, c: Constraint) -> tuple[bool, str, str]:
    """``(satisfied, actual, reason)``; a missing reading is unsatisfied, other errors raise."""
    try:
        ok, actual = evaluator(c.name, c.value)
    except MeasurementMissing as exc:
        return False, "", str(exc)
    except Exception as exc:  # fail closed: never a quiet exclusion (AICR PropagateOrWrap)
        raise ResolutionError(
            f"constraint {goq(c.name)} could not be evaluated: {exc}", code=CODE_INTERNAL
        ) from exc
    return ok, actual, "" if ok else f"expected {c.value}, got {actual}"


def _exclude_failing(
    catalog: Catalog,
    overlays: list[Overlay],
    evaluator: ConstraintEvaluator,
    excluded: list[dict[str, str]],
    warnings: list[dict[str, str]],
) -> list[Overlay]:
    """Step 11 (snapshot mode): drop each matched overlay whose own constraints fail, then
    each whose chain brings a mixin whose constraints fail (``excludedOverlays`` reasons
    ``constraint-failed`` / ``mixin-constraint-failed``, one ``constraintWarnings`` entry per
    failing constraint)."""
    kept: list[Overlay] = []
    mixin_verdicts: dict[str, bool] = {}
    for o in overlays:
        failed = False
        for c in o.constraints or ():
            ok, actual, reason = _evaluate(evaluator, c)
            if not ok:
                failed = True
                warnings.append(_warning(o.name, c, actual, reason))
        if failed:
            excluded.append({"name": o.name, "reason": "constraint-failed"})
            continue
        mixin_failed = False
        for name in dict.fromkeys(m for link in catalog.chains[o.name] for m in link.mixins or ()):
            mixin = catalog.mixins.get(name)
            if mixin is None:
                continue  # reported by _merge_mixins with AICR's message
            if name not in mixin_verdicts:
                mixin_verdicts[name] = True
                for c in mixin.constraints or ():
                    ok, actual, reason = _evaluate(evaluator, c)
                    if not ok:
                        mixin_verdicts[name] = False
                        warnings.append(_warning(o.name, c, actual, reason))
            mixin_failed = mixin_failed or not mixin_verdicts[name]
        if mixin_failed:
            excluded.append({"name": o.name, "reason": "mixin-constraint-failed"})
            continue
        kept.append(o)
    return kept


def _warning(overlay: str, c: Constraint, actual: str, reason: str) -> dict[str, str]:
    return {
        "overlay": overlay,
        "constraint": c.name,
        "expected": c.value,
        "actual": actual,
        "reason": reason,
    }


# --- finalize -------------------------------------------------------------------------------------


def _apply_registry_defaults(catalog: Catalog, ref: ComponentRef) -> ComponentRef:
    """``ApplyRegistryDefaults`` + ``hydrateHealthCheckAsserts`` for one ref."""
    entry = catalog.registry.get(ref.name)
    if entry is None:
        return ref
    changes: dict[str, Any] = {}
    rtype = ref.type or entry.type
    if rtype != ref.type:
        changes["type"] = rtype
    if rtype == COMPONENT_TYPE_HELM:
        if not ref.source and entry.helm_repository:
            changes["source"] = entry.helm_repository
        if not ref.version and entry.helm_version:
            changes["version"] = entry.helm_version
        if not ref.namespace and entry.helm_namespace:
            changes["namespace"] = entry.helm_namespace
        if not ref.chart and entry.helm_chart:
            changes["chart"] = entry.helm_chart.rsplit("/", 1)[-1]
    elif rtype == COMPONENT_TYPE_KUSTOMIZE:
        if not ref.source and entry.kustomize_source:
            changes["source"] = entry.kustomize_source
        if not ref.tag and entry.kustomize_tag:
            changes["tag"] = entry.kustomize_tag
        if not ref.path and entry.kustomize_path:
            changes["path"] = entry.kustomize_path
    if not ref.manifest_files and entry.manifest_files:
        changes["manifest_files"] = entry.manifest_files
    if not ref.health_check_skip and not ref.health_check_asserts and entry.assert_file:
        changes["health_check_asserts"] = catalog.health_asserts[ref.name]
    return replace(ref, **changes) if changes else ref


def _is_effective_chart_version(version: str) -> bool:
    v = version.strip()
    return v != "" and v.removeprefix("v") != ""


def _coherence_problem(ref: ComponentRef) -> str:
    """``ComponentRef.coherenceProblem`` (AICR #1584/#1588/#1615)."""
    if ref.patches:
        return (
            f"component {goq(ref.name)} declares patches, but no deployer applies patch files; "
            "remove `patches` (removing it does not change the generated bundle). See #1588."
        )
    low = ref.type.lower()
    if low == "helm":
        if ref.tag or ref.path:
            return (
                f"component {goq(ref.name)} is Helm but carries Kustomize field(s) "
                f"(tag={goq(ref.tag)}, path={goq(ref.path)}); the field-classifying deployers "
                "would treat it as Kustomize while the Type-switching Flux deployer would treat "
                "it as Helm, so the same ref deploys differently — remove the tag/path, or "
                "convert it into a coherent Kustomize ref (which needs a path, and a source if it "
                "sets a tag)"
            )
        for label, value, tail in (
            ("a chart name", ref.chart, "set the exact chart name or omit the field"),
            ("a source", ref.source, "set the exact repository or omit the field"),
            ("a chart version", ref.version, "set the exact chart version"),
        ):
            if value != value.strip():
                return (
                    f"Helm component {goq(ref.name)} has {label} with surrounding whitespace "
                    f"({goq(value)}); {tail} (see #1615)"
                )
        if ref.version and not _is_effective_chart_version(ref.version):
            return (
                f"Helm component {goq(ref.name)} has chart version {goq(ref.version)}, which "
                "Flux/Argo CD normalize to empty for non-OCI outputs and vendored wrappers replace "
                "with a fabricated default; set a full chart version (see #1615)"
            )
        if ref.source:
            if not ref.version:
                return (
                    f"Helm component {goq(ref.name)} has no chart version; set version: on the "
                    "componentRef — criteria-resolved recipes may inherit it from "
                    "helm.defaultVersion in the component registry (see #1615)"
                )
        elif ref.chart:
            return (
                f"Helm component {goq(ref.name)} has a chart name ({goq(ref.chart)}) but no "
                "source repository; the deployers have no repository to pull from — set source:, "
                "or remove the chart for a manifest-only component (see #1615)"
            )
        elif not ref.manifest_files:
            return (
                f"Helm component {goq(ref.name)} has no deployable primary (no source, no chart, "
                "and no primary manifestFiles; preManifestFiles alone are auxiliary to a primary "
                "release) — add a chart source or primary manifest files (see #1615)"
            )
    elif low == "kustomize":
        if not ref.path:
            return (
                f"component {goq(ref.name)} is Kustomize but has no path; a path is required to "
                "build from"
            )
        if ref.tag and not ref.source:
            return (
                f"component {goq(ref.name)} is Kustomize with tag {goq(ref.tag)} but no source; a "
                "tag is only meaningful with a git source"
            )
        if ref.manifest_files:
            return (
                f"component {goq(ref.name)} is Kustomize but also declares manifestFiles; a "
                "component may declare either Kustomize (tag/path) or raw manifest files, not both"
            )
    else:
        return (
            f"component {goq(ref.name)} has unsupported type {goq(ref.type)}; expected "
            f'"{COMPONENT_TYPE_HELM}" or "{COMPONENT_TYPE_KUSTOMIZE}"'
        )
    return ""


def _validate_coherence(refs: list[ComponentRef]) -> None:
    seen: dict[str, int] = {}
    for i, r in enumerate(refs):
        if not r.name:
            continue
        if r.name in seen:
            raise ResolutionError(
                f"recipe has duplicate component ref name {goq(r.name)} "
                f"(refs {seen[r.name]} and {i})"
            )
        seen[r.name] = i
    problems = sorted(p for r in refs if r.is_enabled() and (p := _coherence_problem(r)))
    if problems:
        raise ResolutionError("recipe has incoherent component ref(s): " + "; ".join(problems))


# --- Slurm accounting (builder option; default "disabled" for platform slurm) --------------------


def _accounting_ownership(mode: str) -> dict[str, list[str]]:
    paths = {
        _SLINKY_SLURM: ["accounting.enabled", "enabled"],
        **{name: ["enabled", "install"] for name in _MARIADB_COMPONENTS},
    }
    if mode == "aicr-provided":
        paths[_SLINKY_SLURM] += [
            f"accounting.storageConfig.{k}"
            for k in (
                "database",
                "host",
                "passwordKeyRef.key",
                "passwordKeyRef.name",
                "port",
                "username",
            )
        ]
        paths["slurm-accounting-mariadb"] += [
            "databases",
            "fullnameOverride",
            "grants",
            "mariadb.cleanupPolicy",
            "mariadb.database",
            "mariadb.passwordSecretKeyRef.generate",
            "mariadb.passwordSecretKeyRef.key",
            "mariadb.passwordSecretKeyRef.name",
            "mariadb.rootPasswordSecretKeyRef.generate",
            "mariadb.rootPasswordSecretKeyRef.key",
            "mariadb.rootPasswordSecretKeyRef.name",
            "mariadb.username",
            "namespaceOverride",
            "users",
        ]
    return paths


def _paths_intersect(a: str, b: str) -> bool:
    ap, bp = a.split("."), b.split(".")
    return all(x == y for x, y in zip(ap, bp, strict=False))


def _apply_accounting(
    refs: list[ComponentRef], mode: str, selected: dict[str, Any] | None
) -> list[ComponentRef]:
    """``applyBuildConfig``: stamp the accounting mode into the Slurm components' overrides."""
    if selected is not None:
        owned = selected["ownedPaths"]
        accounting = _accounting_ownership(mode)
        for component in sorted(set(owned) & set(accounting)):
            for p in sorted(owned[component]):
                for q in sorted(accounting[component]):
                    if _paths_intersect(p, q):
                        raise ResolutionError(
                            f'configuration ownership conflict: "profile {selected["name"]}='
                            f'{selected["value"]}" owns {component}.{p}, which intersects '
                            f'"configuration.slurm.accounting.mode={mode}" path {component}.{q}'
                        )
    index = {r.name: i for i, r in enumerate(refs)}
    out = list(refs)

    def set_override(name: str, override: dict[str, Any]) -> None:
        i = index.get(name)
        if i is None:
            raise ResolutionError(
                f"Slurm recipe is missing required accounting component {goq(name)}"
            )
        out[i] = replace(out[i], overrides=deep_merge(out[i].overrides, override))

    enabled = mode != "disabled"
    set_override(_SLINKY_SLURM, {"accounting": {"enabled": enabled}})
    if enabled:
        out[index[_SLINKY_SLURM]] = _append_accounting_health_check(out[index[_SLINKY_SLURM]])
    for name in _MARIADB_COMPONENTS:
        set_override(name, {"install": mode == "aicr-provided"})
    return out


def _append_accounting_health_check(ref: ComponentRef) -> ComponentRef:
    """``appendSlurmAccountingHealthCheck`` (needs the deterministic YAML emitter)."""
    # The accounting step is re-serialised with AICR's deterministic YAML, like upstream.
    from .yamlv3 import marshal_deterministic

    if not ref.health_check_asserts.strip():
        raise ResolutionError("enabled Slurm accounting requires a slinky-slurm health check")
    if not ref.namespace.strip():
        raise ResolutionError("enabled Slurm accounting requires a namespace for slinky-slurm")
    # yaml.v3 typing (not PyYAML's), so the re-serialised check keeps AICR's scalars.
    check = as_any(parse_raw(ref.health_check_asserts, "slinky-slurm healthCheckAsserts"), Ctx(""))
    spec = check.get("spec") if isinstance(check, dict) else None
    if not isinstance(spec, dict):
        raise ResolutionError("slinky-slurm health check has no object spec")
    steps = spec.get("steps")
    if not isinstance(steps, list):
        raise ResolutionError("slinky-slurm health check has no steps list")
    step = {
        "name": "validate-accounting-ready",
        "try": [
            {
                "assert": {
                    "resource": {
                        "apiVersion": "apps/v1",
                        "kind": "StatefulSet",
                        "metadata": {"name": f"{ref.name}-accounting", "namespace": ref.namespace},
                        "status": {"(availableReplicas > `0`)": True},
                    }
                }
            }
        ],
    }
    spec["steps"] = [*steps, step]
    return replace(ref, health_check_asserts=marshal_deterministic(check))


# --- document -------------------------------------------------------------------------------------


def _copy(value: Any) -> Any:
    """Copy containers so the document never aliases catalog data."""
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy(v) for v in value]
    return value


def _constraint_doc(c: Constraint) -> dict[str, Any]:
    d: dict[str, Any] = {"name": c.name, "value": c.value}
    if c.severity:
        d["severity"] = c.severity
    if c.remediation:
        d["remediation"] = c.remediation
    if c.unit:
        d["unit"] = c.unit
    return d


def _ref_doc(r: ComponentRef) -> dict[str, Any]:
    d: dict[str, Any] = {"name": r.name, "type": r.type, "source": r.source}
    if r.namespace:
        d["namespace"] = r.namespace
    if r.chart:
        d["chart"] = r.chart
    if r.version:
        d["version"] = r.version
    if r.tag:
        d["tag"] = r.tag
    if r.values_file:
        d["valuesFile"] = r.values_file
    if r.overrides:
        d["overrides"] = _copy(r.overrides)
    for key, value in (
        ("patches", r.patches),
        ("dependencyRefs", r.dependency_refs),
        ("manifestFiles", r.manifest_files),
        ("preManifestFiles", r.pre_manifest_files),
    ):
        if value:
            d[key] = list(value)
    if r.path:
        d["path"] = r.path
    if r.cleanup:
        d["cleanup"] = True
    if r.expected_resources:
        d["expectedResources"] = [
            {"kind": e.kind, "name": e.name, **({"namespace": e.namespace} if e.namespace else {})}
            for e in r.expected_resources
        ]
    if r.health_check_asserts:
        d["healthCheckAsserts"] = r.health_check_asserts
    if r.health_check_skip:
        d["healthCheckSkip"] = True
    return d


def _phase_doc(p: ValidationPhase) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if p.timeout:
        d["timeout"] = p.timeout
    if p.constraints:
        d["constraints"] = [_constraint_doc(c) for c in p.constraints]
    if p.checks:
        d["checks"] = list(p.checks)
    if p.node_selection is not None:
        ns = p.node_selection
        nd: dict[str, Any] = {}
        if ns.selector:
            nd["selector"] = dict(ns.selector)
        if ns.max_nodes:
            nd["maxNodes"] = ns.max_nodes
        if ns.exclude_nodes:
            nd["excludeNodes"] = list(ns.exclude_nodes)
        d["nodeSelection"] = nd
    if p.infrastructure:
        d["infrastructure"] = p.infrastructure
    return d


def _validation_doc(v: ValidationConfig) -> dict[str, Any]:
    return {phase: _phase_doc(p) for phase in PHASES if (p := getattr(v, phase)) is not None}


# --- entry points ---------------------------------------------------------------------------------


def _build(
    catalog: Catalog,
    query: Criteria,
    *,
    version: str,
    profile: str | None,
    accounting_mode: str | None,
    evaluate: bool,
    evaluator: ConstraintEvaluator | None = None,
) -> dict[str, Any]:
    is_slurm = query.platform == "slurm"
    if accounting_mode is not None:
        if not is_slurm:
            raise ResolutionError(
                "Slurm accounting mode can only be set when recipe platform is slurm"
            )
        mode = accounting_mode.strip().lower()
        if mode not in ACCOUNTING_MODES:
            raise ResolutionError(
                f"invalid Slurm accounting mode {goq(accounting_mode)}: must be one of "
                + ", ".join(ACCOUNTING_MODES)
            )
    else:
        mode = "disabled" if is_slurm else ""

    overlays = find_matching_overlays(catalog, query)
    require_os_if_needed(
        catalog, query, overlays, joint=generation_for(catalog, version).joint_os_coverage
    )
    effective = effective_profile(catalog, overlays)
    if evaluate or evaluator is not None:
        _check_evaluable(catalog, overlays)
    excluded: list[dict[str, str]] = []
    warnings: list[dict[str, str]] = []
    if evaluator is not None:
        overlays = _exclude_failing(catalog, overlays, evaluator, excluded, warnings)

    base = catalog.base
    spec = MergedSpec(
        list(base.constraints or ()), list(base.component_refs or ()), base.validation
    )
    applied = [BASE_NAME]
    processed: set[str] = set()
    for o in overlays:
        for link in catalog.chains[o.name]:
            if link.name in processed:
                continue
            processed.add(link.name)
            spec.merge(link.constraints, link.component_refs, link.validation, link.mixins)
            applied.append(link.name)
    _merge_mixins(catalog, spec)
    try:
        verify_criteria_coverage(catalog, query, applied)
    except ResolutionError as exc:
        exc.excluded_overlays, exc.constraint_warnings = excluded, warnings
        raise

    constraints, refs = spec.constraints, spec.refs
    selected: dict[str, Any] | None = None
    if effective is not None:
        constraints, refs, selected = apply_profile(
            constraints, refs, effective[0], effective[1], profile
        )
    elif profile:
        sel = parse_selection(profile)
        assert sel is not None
        raise ResolutionError(
            f"profile {goq(sel.name)} was selected, but the resolved composition declares no "
            "profile"
        )

    validate_dependencies(refs)
    order = topological_sort(refs)
    refs = [r if (t := canonical_type(r.type)) == r.type else replace(r, type=t) for r in refs]
    refs = [_apply_registry_defaults(catalog, r) for r in refs]
    _validate_coherence(refs)

    results = generation_for(catalog, version).results
    api_version = results.result_profiled if selected is not None else results.result
    configuration = None
    if mode:
        refs = _apply_accounting(refs, mode, selected)
        order = topological_sort(refs)
        configuration = {"slurm": {"accounting": {"mode": mode}}}
        api_version = results.result_profiled
        _validate_coherence(refs)

    metadata: dict[str, Any] = {}
    if version:
        metadata["version"] = version
    metadata["appliedOverlays"] = applied
    if excluded:
        metadata["excludedOverlays"] = excluded
    if warnings:
        metadata["constraintWarnings"] = warnings
    if selected is not None:
        metadata["selectedProfile"] = selected
    doc: dict[str, Any] = {
        "kind": RECIPE_RESULT_KIND,
        "apiVersion": api_version,
        "metadata": metadata,
        "criteria": query.to_dict(),
        "componentRefs": [_ref_doc(r) for r in refs],
        "deploymentOrder": order,
    }
    if configuration is not None:
        doc["configuration"] = configuration
    if constraints:
        doc["constraints"] = [_constraint_doc(c) for c in constraints]
    if spec.validation is not None:
        doc["validation"] = _validation_doc(spec.validation)
    return doc


def resolve(
    catalog: Catalog,
    criteria: Criteria | Mapping[str, Any],
    *,
    version: str,
    profile: str | None = None,
    accounting_mode: str | None = None,
    evaluator: ConstraintEvaluator | None = None,
) -> dict[str, Any]:
    """Resolve one query into a ``RecipeResult`` document (what ``aicr recipe`` outputs).

    ``criteria`` is a ``Criteria`` (used as given) or a mapping parsed with
    ``parse_criteria`` against the catalog's criteria registry. ``version`` is stamped into
    ``metadata.version`` (AICR uses its own version; the parity golden uses
    ``catalog-parity-golden``). ``profile`` selects a profile value (``gpuStack=...``); without
    it a profiled composition gets its default. ``accounting_mode`` is the Slurm accounting mode
    for ``platform: slurm`` (default ``disabled``). ``evaluator`` turns on snapshot mode
    (``aicr recipe --snapshot``, step 11): matched overlays whose constraints fail against the
    snapshot are excluded and reported in ``metadata.excludedOverlays`` /
    ``metadata.constraintWarnings``.

    Raises ``ResolutionError`` (``code``, ``message``, ``uncovered``, ``valid_completions``,
    ``requires_os``) when the query cannot be resolved.
    """
    query = criteria if isinstance(criteria, Criteria) else parse_criteria(criteria, catalog)
    return _build(
        catalog,
        query,
        version=version,
        profile=profile,
        accounting_mode=accounting_mode,
        evaluate=False,
        evaluator=evaluator,
    )


def resolve_leaves(catalog: Catalog, *, version: str) -> dict[str, dict[str, Any]]:
    """Every maximal leaf resolved from its own criteria, like AICR's ``ResolveLeaves``.

    Ordered like AICR (by criteria string, then name). A leaf that fails raises its
    ``ResolutionError`` with the leaf name prefixed.
    """
    entries = []
    for name in catalog.leaves:
        crit = catalog.overlays[name].criteria
        assert crit is not None
        entries.append((str(crit), name, crit))
    entries.sort(key=lambda e: (e[0], e[1]))
    out: dict[str, dict[str, Any]] = {}
    for _, name, crit in entries:
        try:
            out[name] = _build(
                catalog, crit, version=version, profile=None, accounting_mode=None, evaluate=True
            )
        except ResolutionError as exc:
            raise ResolutionError(
                f"leaf {goq(name)}: {exc.message}",
                code=exc.code,
                uncovered=exc.uncovered,
                valid_completions=exc.valid_completions,
                requires_os=exc.requires_os,
            ) from exc
    return out


def profile_variants(catalog: Catalog) -> list[ProfileVariant]:
    """Every (profiled leaf, profile value) pair, sorted by leaf then value."""
    out: list[ProfileVariant] = []
    for leaf in catalog.leaves:
        crit = catalog.overlays[leaf].criteria
        assert crit is not None
        effective = effective_profile(catalog, find_matching_overlays(catalog, crit))
        if effective is None:
            continue
        decl = effective[1]
        for value in sorted(decl.values):
            out.append(
                ProfileVariant(
                    name=f"{leaf}-{decl.name.lower()}-{value.lower()}",
                    leaf=leaf,
                    profile=f"{decl.name}={value}",
                    is_default=value == decl.default,
                    criteria=crit,
                )
            )
    return out


def list_catalog(catalog: Catalog) -> list[dict[str, Any]]:
    """``aicr recipe list``: every overlay with criteria, leaf flag, source and profile summary."""
    out: list[dict[str, Any]] = []
    cache: dict[Criteria, tuple[str, ProfileDeclaration] | None] = {}
    for o in catalog.matchable:
        crit = o.criteria
        assert crit is not None
        if crit not in cache:
            cache[crit] = effective_profile(catalog, find_matching_overlays(catalog, crit))
        entry: dict[str, Any] = {
            "name": o.name,
            "criteria": crit,
            "is_leaf": o.name in catalog.leaves,
            "source": catalog.sources.get(o.name, "embedded"),
        }
        eff = cache[crit]
        if eff is not None:
            decl = eff[1]
            entry["profile"] = {
                "name": decl.name,
                "description": decl.description,
                "default": decl.default,
                "values": sorted(decl.values),
            }
        out.append(entry)
    return out
