"""Reading, decoding and validating an AICR recipe tree into an immutable ``Catalog``.

``read_tree`` collects the files the resolver needs (refusing symlinks that leave the tree and
oversized files); ``load_catalog`` decodes them with yaml.v3 typing (``yamlload``), validates
them, and precomputes everything a resolution needs so resolving is cheap and never touches
the file mapping again except through precomputed lookups:

- inheritance chains root→leaf for every overlay (``spec.base`` resolved, cycles refused),
  ancestor sets and the leaf set (``ListCatalog``'s ``IsLeaf``);
- the component registry by name and every ``healthCheck.assertFile`` text (hydration);
- the criteria registry (values the overlays introduce beyond AICR's static enums).

Validation goes beyond what AICR checks at load time so a broken tree fails here, naming the
file and the field, instead of failing some queries later: unknown ``spec.base``/mixins/
components/dependencies/validator checks, missing values/manifest/assert files, per-chain
dependency cycles, profile declarations, constraint measurement paths.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from .criteria import Criteria, CriteriaRegistry
from .errors import CatalogError
from .merge import find_cycle
from .model import (
    ALPHA,
    COMPONENT_REGISTRY_KIND,
    COMPONENT_TYPE_KUSTOMIZE,
    FAMILIES,
    PHASES,
    RECIPE_METADATA_KIND,
    RECIPE_MIXIN_KIND,
    VALIDATOR_API_VERSION,
    VALIDATOR_CATALOG_KIND,
    ApiFamily,
    ComponentRef,
    Constraint,
    ExpectedResource,
    Mixin,
    NodeSelection,
    Overlay,
    ProfileComponentRef,
    ProfileDeclaration,
    ProfileValue,
    RegistryEntry,
    ValidationConfig,
    ValidationPhase,
    Validator,
    family_of_catalog_api,
)
from .profile import ProfileDeclarationError, validate_declaration
from .yamlload import (
    MAX_FILE_BYTES,
    Ctx,
    RawMap,
    RawNode,
    as_any,
    as_bool,
    as_fields,
    as_int,
    as_seq,
    as_str,
    as_str_list,
    as_str_map,
    as_string_string_map,
    is_null,
    parse_raw,
)

REGISTRY_FILE = "registry.yaml"
VALIDATOR_CATALOG_FILE = "validators/catalog.yaml"
# Where a recipe's own NCCL benchmark runtimes live in a --data tree (AICR
# pkg/validator/benchmark_runtime_ref.go); the orchestrator reads them from the catalog.
BENCHMARK_RUNTIME_DIR = "validators/performance/testdata"
BASE_FILE = "overlays/base.yaml"
BASE_NAME = "base"
#: Upper bounds for a whole tree (the real one: ~270 files, ~2.5 MB).
MAX_TREE_FILES = 20_000
MAX_TREE_BYTES = 256 * 1024 * 1024
RESERVED_DEPLOYER_KEY = "deployer"

# --- known fields (yaml.v3 KnownFields(true) for mixins and v1alpha3 overlays) ------------------
_TOP = frozenset(("kind", "apiVersion", "metadata", "spec"))
_META = frozenset(("name",))
_SPEC = frozenset(
    ("base", "criteria", "mixins", "constraints", "componentRefs", "validation", "profile")
)
_MIXIN_SPEC = frozenset(("constraints", "componentRefs"))
_CRITERIA = frozenset(("service", "accelerator", "intent", "os", "platform", "nodes"))
_CONSTRAINT = frozenset(("name", "value", "severity", "remediation", "unit"))
_REF = frozenset(
    (
        "name",
        "namespace",
        "chart",
        "type",
        "source",
        "version",
        "tag",
        "valuesFile",
        "overrides",
        "patches",
        "dependencyRefs",
        "manifestFiles",
        "preManifestFiles",
        "path",
        "cleanup",
        "expectedResources",
        "healthCheckAsserts",
        "healthCheckSkip",
    )
)
_EXPECTED = frozenset(("kind", "name", "namespace"))
_VALIDATION = frozenset(PHASES)
_PHASE = frozenset(("timeout", "constraints", "checks", "nodeSelection", "infrastructure"))
_NODE_SELECTION = frozenset(("selector", "maxNodes", "excludeNodes"))
_PROFILE = frozenset(("name", "description", "default", "values"))
_PROFILE_VALUE = frozenset(("advertiser", "constraints", "componentRefs"))
_PROFILE_REF = frozenset(("name", "overrides"))


@dataclass(frozen=True, slots=True, eq=False)
class Catalog:
    """A loaded, validated recipe catalog plus the lookups resolution needs.

    Treat it as immutable; one catalog can serve any number of concurrent resolutions. It
    compares and hashes by identity, so it can key caches.
    """

    base: Overlay
    overlays: dict[str, Overlay]
    mixins: dict[str, Mixin]
    registry: dict[str, RegistryEntry]
    validators: dict[str, Validator]
    validator_catalog_version: str
    criteria_registry: CriteriaRegistry
    #: overlay name -> its chain root→leaf, ``base`` excluded (``resolveInheritanceChain``).
    chains: dict[str, tuple[Overlay, ...]]
    #: overlay name -> names of its transitive ``spec.base`` ancestors (``base`` excluded).
    ancestors: dict[str, frozenset[str]]
    #: names of overlays no other overlay inherits from, sorted.
    leaves: tuple[str, ...]
    #: component name -> hydrated ``healthCheck.assertFile`` text.
    health_asserts: dict[str, str]
    #: overlays that carry criteria, sorted by name (candidates for matching).
    matchable: tuple[Overlay, ...]
    #: overlay name -> "embedded" | "external" (``--data`` layering).
    sources: dict[str, str] = field(default_factory=dict)
    #: every input file (relative path -> text), for values lookups by consumers.
    files: Mapping[str, str] = field(default_factory=dict)
    #: the ADR-022 apiVersion family every catalog file of the tree uses.
    api_family: ApiFamily = ALPHA

    def criteria_values(self) -> dict[str, list[str]]:
        """Every value each criteria dimension accepts with this catalog (its AICR version's
        static enum and the values its overlays register), sorted; ``any`` not included."""
        return self.criteria_registry.all_values_by_dimension()

    def validator_checks(self) -> list[str]:
        """The validator catalog's check set, ``<phase>/<name>`` sorted: what "validator
        catalog outdated" compares (AICR never bumped ``metadata.version`` when adding checks,
        AICR-V1.md §5)."""
        return sorted(f"{v.phase}/{v.name}" for v in self.validators.values())

    def overlay(self, name: str) -> Overlay | None:
        """``GetRecipeByName``: ``""``/``base`` give the base overlay."""
        if name in ("", BASE_NAME):
            return self.base
        return self.overlays.get(name)


# --- read_tree ----------------------------------------------------------------------------------


def _read_text(root: Path, rel: str, full: Path, budget: list[int]) -> str:
    try:
        st = full.lstat()
    except OSError as exc:
        raise CatalogError(rel, "<file>", f"cannot stat: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        target = Path(os.path.realpath(full))
        if not target.is_relative_to(root):
            raise CatalogError(rel, "<file>", "symlink points outside the recipe tree")
        st = target.stat()
        full = target
    if not stat.S_ISREG(st.st_mode):
        raise CatalogError(rel, "<file>", "not a regular file")
    if st.st_size > MAX_FILE_BYTES:
        raise CatalogError(rel, "<file>", f"file is larger than {MAX_FILE_BYTES} bytes")
    budget[0] += st.st_size
    budget[1] += 1
    if budget[0] > MAX_TREE_BYTES or budget[1] > MAX_TREE_FILES:
        raise CatalogError(rel, "<file>", "recipe tree exceeds the size/file-count limit")
    data = full.read_bytes()[: MAX_FILE_BYTES + 1]
    if len(data) > MAX_FILE_BYTES:
        raise CatalogError(rel, "<file>", f"file is larger than {MAX_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CatalogError(rel, "<file>", "file is not valid UTF-8") from None


def _walk(root: Path, sub: str) -> list[str]:
    """Relative POSIX paths of the regular files under ``root/sub`` (symlinked dirs refused
    when they leave the tree, otherwise not followed)."""
    base = root / sub
    if not base.is_dir():
        return []
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        here = Path(dirpath)
        for d in list(dirnames):
            full = here / d
            if full.is_symlink():
                dirnames.remove(d)
                if not Path(os.path.realpath(full)).is_relative_to(root):
                    rel = full.relative_to(root).as_posix()
                    raise CatalogError(rel, "<file>", "symlink points outside the recipe tree")
        dirnames.sort()
        for name in sorted(filenames):
            out.append((here / name).relative_to(root).as_posix())
    return out


def read_tree(path: str | os.PathLike[str]) -> dict[str, str]:
    """The resolver's input files of an AICR recipe tree, keyed by relative POSIX path.

    Reads ``registry.yaml``, ``overlays/*.yaml``, ``mixins/*.yaml``,
    ``validators/catalog.yaml``, every file under ``components/``, the ``checks/`` files the
    registry names as ``healthCheck.assertFile`` and the benchmark runtimes
    ``validators/performance/testdata/<accelerator>/<service>/runtime.yaml``. Symlinks may
    point anywhere inside the tree; one that leaves it is refused, as is any file over
    ``MAX_FILE_BYTES``.
    """
    root = Path(os.path.realpath(path))
    if not root.is_dir():
        raise CatalogError(str(path), "<tree>", "recipe tree is not a directory")
    budget = [0, 0]
    files: dict[str, str] = {}

    def add(rel: str) -> None:
        files[rel] = _read_text(root, rel, root / rel, budget)

    if (root / REGISTRY_FILE).exists() or (root / REGISTRY_FILE).is_symlink():
        add(REGISTRY_FILE)
    if (root / VALIDATOR_CATALOG_FILE).exists():
        add(VALIDATOR_CATALOG_FILE)
    for sub in ("overlays", "mixins"):
        for rel in _walk(root, sub):
            if rel.count("/") == 1 and rel.endswith(".yaml"):
                add(rel)
    for rel in _walk(root, "components"):
        add(rel)
    for rel in _assert_files(files.get(REGISTRY_FILE)):
        clean = PurePosixPath(rel)
        if clean.is_absolute() or ".." in clean.parts or not rel.startswith("checks/"):
            continue  # load_catalog reports the bad reference against registry.yaml
        full = root / rel
        if full.exists() or full.is_symlink():
            add(rel)
    for rel in _walk(root, BENCHMARK_RUNTIME_DIR):
        # <accelerator>/<service>/runtime.yaml: what a recipe's nccl-benchmark-runtime-ref names.
        if rel.count("/") == BENCHMARK_RUNTIME_DIR.count("/") + 3 and rel.endswith("/runtime.yaml"):
            add(rel)
    return files


def _assert_files(text: str | None) -> list[str]:
    """Best-effort list of ``healthCheck.assertFile`` paths (errors surface in load_catalog)."""
    if not text:
        return []
    try:
        doc = as_any(parse_raw(text, REGISTRY_FILE), Ctx(REGISTRY_FILE))
    except CatalogError:
        return []
    out: list[str] = []
    comps = doc.get("components") if isinstance(doc, dict) else None
    for comp in comps if isinstance(comps, list) else []:
        hc = comp.get("healthCheck") if isinstance(comp, dict) else None
        af = hc.get("assertFile") if isinstance(hc, dict) else None
        if isinstance(af, str) and af:
            out.append(af)
    return out


# --- decoding -----------------------------------------------------------------------------------


def _constraint(node: RawNode, ctx: Ctx, strict: bool) -> Constraint:
    f = as_fields(node, ctx, _CONSTRAINT, strict, "recipe.Constraint")
    return Constraint(
        name=as_str(f.get("name"), ctx.child("name")),
        value=as_str(f.get("value"), ctx.child("value")),
        severity=as_str(f.get("severity"), ctx.child("severity")),
        remediation=as_str(f.get("remediation"), ctx.child("remediation")),
        unit=as_str(f.get("unit"), ctx.child("unit")),
    )


def _constraints(node: RawNode | None, ctx: Ctx, strict: bool) -> tuple[Constraint, ...] | None:
    items = as_seq(node, ctx)
    if items is None:
        return None
    return tuple(_constraint(item, ctx.index(i), strict) for i, item in enumerate(items))


def _tuple(values: list[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


def _component_ref(node: RawNode, ctx: Ctx, strict: bool) -> ComponentRef:
    f = as_fields(node, ctx, _REF, strict, "recipe.ComponentRef")
    expected = None
    items = as_seq(f.get("expectedResources"), ctx.child("expectedResources"))
    if items is not None:
        ectx = ctx.child("expectedResources")
        res = []
        for i, item in enumerate(items):
            ef = as_fields(item, ectx.index(i), _EXPECTED, strict, "recipe.ExpectedResource")
            res.append(
                ExpectedResource(
                    kind=as_str(ef.get("kind"), ectx.index(i).child("kind")),
                    name=as_str(ef.get("name"), ectx.index(i).child("name")),
                    namespace=as_str(ef.get("namespace"), ectx.index(i).child("namespace")),
                )
            )
        expected = tuple(res)

    def s(key: str) -> str:
        return as_str(f.get(key), ctx.child(key))

    def lst(key: str) -> tuple[str, ...] | None:
        return _tuple(as_str_list(f.get(key), ctx.child(key)))

    return ComponentRef(
        name=s("name"),
        namespace=s("namespace"),
        chart=s("chart"),
        type=s("type"),
        source=s("source"),
        version=s("version"),
        tag=s("tag"),
        values_file=s("valuesFile"),
        overrides=as_str_map(f.get("overrides"), ctx.child("overrides")),
        patches=lst("patches"),
        dependency_refs=lst("dependencyRefs"),
        manifest_files=lst("manifestFiles"),
        pre_manifest_files=lst("preManifestFiles"),
        path=s("path"),
        cleanup=as_bool(f.get("cleanup"), ctx.child("cleanup")),
        expected_resources=expected,
        health_check_asserts=s("healthCheckAsserts"),
        health_check_skip=as_bool(f.get("healthCheckSkip"), ctx.child("healthCheckSkip")),
    )


def _component_refs(
    node: RawNode | None, ctx: Ctx, strict: bool
) -> tuple[ComponentRef, ...] | None:
    items = as_seq(node, ctx)
    if items is None:
        return None
    return tuple(_component_ref(item, ctx.index(i), strict) for i, item in enumerate(items))


def _criteria(node: RawNode | None, ctx: Ctx, strict: bool) -> Criteria | None:
    if node is None or is_null(node):
        return None  # absent or ``criteria: null``: a nil pointer, the overlay never matches
    f = as_fields(node, ctx, _CRITERIA, strict, "recipe.Criteria")
    return Criteria(
        service=as_str(f.get("service"), ctx.child("service")),
        accelerator=as_str(f.get("accelerator"), ctx.child("accelerator")),
        intent=as_str(f.get("intent"), ctx.child("intent")),
        os=as_str(f.get("os"), ctx.child("os")),
        platform=as_str(f.get("platform"), ctx.child("platform")),
        nodes=as_int(f.get("nodes"), ctx.child("nodes")),
    )


def _phase(node: RawNode | None, ctx: Ctx, strict: bool) -> ValidationPhase | None:
    if node is None or is_null(node):
        return None
    f = as_fields(node, ctx, _PHASE, strict, "recipe.ValidationPhase")
    ns = None
    ns_node = f.get("nodeSelection")
    if ns_node is not None and not is_null(ns_node):
        nctx = ctx.child("nodeSelection")
        nf = as_fields(ns_node, nctx, _NODE_SELECTION, strict, "recipe.NodeSelection")
        ns = NodeSelection(
            selector=as_string_string_map(nf.get("selector"), nctx.child("selector")),
            max_nodes=as_int(nf.get("maxNodes"), nctx.child("maxNodes")),
            exclude_nodes=_tuple(as_str_list(nf.get("excludeNodes"), nctx.child("excludeNodes"))),
        )
    return ValidationPhase(
        timeout=as_str(f.get("timeout"), ctx.child("timeout")),
        constraints=_constraints(f.get("constraints"), ctx.child("constraints"), strict),
        checks=_tuple(as_str_list(f.get("checks"), ctx.child("checks"))),
        node_selection=ns,
        infrastructure=as_str(f.get("infrastructure"), ctx.child("infrastructure")),
    )


def _validation(node: RawNode | None, ctx: Ctx, strict: bool) -> ValidationConfig | None:
    if node is None or is_null(node):
        return None
    f = as_fields(node, ctx, _VALIDATION, strict, "recipe.ValidationConfig")
    return ValidationConfig(**{p: _phase(f.get(p), ctx.child(p), strict) for p in PHASES})


def _profile(node: RawNode | None, ctx: Ctx) -> ProfileDeclaration | None:
    if node is None or is_null(node):
        return None
    f = as_fields(node, ctx, _PROFILE, True, "recipe.ProfileDeclaration")
    values: dict[str, ProfileValue] = {}
    vnode = f.get("values")
    vctx = ctx.child("values")
    if vnode is not None and not is_null(vnode):
        if not isinstance(vnode, RawMap):
            raise vctx.error("cannot unmarshal into map[string]recipe.ProfileValue")
        for knode, value in vnode.pairs:
            name = as_str(knode, vctx)
            ictx = vctx.child(name)
            pf = as_fields(value, ictx, _PROFILE_VALUE, True, "recipe.ProfileValue")
            refs = []
            for i, item in enumerate(
                as_seq(pf.get("componentRefs"), ictx.child("componentRefs")) or ()
            ):
                rctx = ictx.child("componentRefs").index(i)
                rf = as_fields(item, rctx, _PROFILE_REF, True, "recipe.ProfileComponentRef")
                refs.append(
                    ProfileComponentRef(
                        name=as_str(rf.get("name"), rctx.child("name")),
                        overrides=as_str_map(rf.get("overrides"), rctx.child("overrides")),
                    )
                )
            values[name] = ProfileValue(
                advertiser=as_str(pf.get("advertiser"), ictx.child("advertiser")),
                constraints=_constraints(pf.get("constraints"), ictx.child("constraints"), True)
                or (),
                component_refs=tuple(refs),
            )
    decl = ProfileDeclaration(
        name=as_str(f.get("name"), ctx.child("name")),
        default=as_str(f.get("default"), ctx.child("default")),
        description=as_str(f.get("description"), ctx.child("description")),
        values=values,
    )
    try:
        owned = validate_declaration(decl)
    except ProfileDeclarationError as exc:
        raise ctx.error(f"invalid profile declaration: {exc}") from None
    return ProfileDeclaration(
        name=decl.name,
        default=decl.default,
        description=decl.description,
        values=values,
        owned_paths=owned,
    )


def _header(root: RawNode, path: str) -> tuple[dict[str, RawNode], str, str, str]:
    ctx = Ctx(path)
    f = as_fields(root, ctx, None, False, "document")
    kind = as_str(f.get("kind"), ctx.child("kind"))
    api = as_str(f.get("apiVersion"), ctx.child("apiVersion"))
    meta = as_fields(f.get("metadata"), ctx.child("metadata"), None, False, "metadata")
    name = as_str(meta.get("name"), ctx.child("metadata").child("name"))
    return f, kind, api, name


def _catalog_api(ctx: Ctx, api: str, kind: str, *, profiled_ok: bool) -> tuple[ApiFamily, bool]:
    """The ADR-022 family of a catalog file's apiVersion, refusing an empty or unknown one
    (AICR v0.21+ refuses a catalog kind without an apiVersion)."""
    expected = " or ".join(
        repr(v)
        for family in FAMILIES
        for v in ((family.catalog, family.catalog_profiled) if profiled_ok else (family.catalog,))
    )
    actx = ctx.child("apiVersion")
    if not api:
        raise actx.error(f"{kind} has no apiVersion; expected {expected}")
    found = family_of_catalog_api(api)
    if found is None or (found[1] and not profiled_ok):
        raise actx.error(f"unsupported apiVersion {api!r} for {kind}; expected {expected}")
    return found


def decode_overlay(path: str, text: str) -> Overlay:
    """Decode one ``overlays/*.yaml`` file (``RecipeMetadata``)."""
    root = parse_raw(text, path)
    f, kind, api, name = _header(root, path)
    ctx = Ctx(path)
    if kind != RECIPE_METADATA_KIND:
        raise ctx.child("kind").error(f"expected kind {RECIPE_METADATA_KIND!r}, got {kind!r}")
    family, strict = _catalog_api(ctx, api, RECIPE_METADATA_KIND, profiled_ok=True)
    if strict:
        as_fields(root, ctx, _TOP, True, "recipe.RecipeMetadata")
        as_fields(f.get("metadata"), ctx.child("metadata"), _META, True, "metadata")
    if not name:
        raise ctx.child("metadata.name").error("metadata.name is required")
    sctx = ctx.child("spec")
    spec = as_fields(f.get("spec"), sctx, _SPEC, strict, "recipe.RecipeMetadataSpec")
    profile = _profile(spec.get("profile"), sctx.child("profile"))
    if strict and profile is None:
        raise sctx.child("profile").error(
            f"RecipeMetadata uses apiVersion {api!r} but has no spec.profile declaration"
        )
    if profile is not None and not strict:
        raise ctx.child("apiVersion").error(
            f"RecipeMetadata declares spec.profile but uses apiVersion {api!r}; expected "
            f"{family.catalog_profiled!r}"
        )
    return Overlay(
        name=name,
        path=path,
        api_version=api,
        base=as_str(spec.get("base"), sctx.child("base")),
        criteria=_criteria(spec.get("criteria"), sctx.child("criteria"), strict),
        mixins=_tuple(as_str_list(spec.get("mixins"), sctx.child("mixins"))),
        constraints=_constraints(spec.get("constraints"), sctx.child("constraints"), strict),
        component_refs=_component_refs(
            spec.get("componentRefs"), sctx.child("componentRefs"), strict
        ),
        validation=_validation(spec.get("validation"), sctx.child("validation"), strict),
        profile=profile,
    )


def decode_mixin(path: str, text: str) -> Mixin:
    """Decode one ``mixins/*.yaml`` file (``RecipeMixin``, strict like AICR)."""
    root = parse_raw(text, path)
    f, kind, api, name = _header(root, path)
    ctx = Ctx(path)
    as_fields(root, ctx, _TOP, True, "recipe.RecipeMixin")
    as_fields(f.get("metadata"), ctx.child("metadata"), _META, True, "metadata")
    if kind != RECIPE_MIXIN_KIND:
        raise ctx.child("kind").error(f"expected kind {RECIPE_MIXIN_KIND!r}, got {kind!r}")
    _catalog_api(ctx, api, RECIPE_MIXIN_KIND, profiled_ok=False)
    if not name:
        raise ctx.child("metadata.name").error("metadata.name is required")
    sctx = ctx.child("spec")
    spec = as_fields(f.get("spec"), sctx, _MIXIN_SPEC, True, "recipe.RecipeMixin.spec")
    return Mixin(
        name=name,
        path=path,
        constraints=_constraints(spec.get("constraints"), sctx.child("constraints"), True),
        component_refs=_component_refs(
            spec.get("componentRefs"), sctx.child("componentRefs"), True
        ),
        api_version=api,
    )


def _registry_entries(
    path: str, text: str, *, layered: bool = False
) -> tuple[list[tuple[RegistryEntry, Ctx]], str]:
    """``registry.yaml``'s entries and apiVersion. ``layered``: a ``--data`` registry merged
    over a tree's, which AICR v0.19 read without an apiVersion (its own ``profile-overlay``
    test data has none); it then takes the tree's family."""
    root = parse_raw(text, path)
    ctx = Ctx(path)
    f = as_fields(root, ctx, None, False, "recipe.ComponentRegistry")
    kind = as_str(f.get("kind"), ctx.child("kind"))
    if kind and kind != COMPONENT_REGISTRY_KIND:
        raise ctx.child("kind").error(f"expected kind {COMPONENT_REGISTRY_KIND!r}, got {kind!r}")
    api = as_str(f.get("apiVersion"), ctx.child("apiVersion"))
    if api or not layered:
        _catalog_api(ctx, api, COMPONENT_REGISTRY_KIND, profiled_ok=False)
    out = []
    cctx = ctx.child("components")
    for i, item in enumerate(as_seq(f.get("components"), cctx) or ()):
        ictx = cctx.index(i)
        c = as_fields(item, ictx, None, False, "recipe.ComponentConfig")
        helm = as_fields(c.get("helm"), ictx.child("helm"), None, False, "recipe.HelmConfig")
        kus = as_fields(c.get("kustomize"), ictx.child("kustomize"), None, False, "KustomizeConfig")
        hc = as_fields(c.get("healthCheck"), ictx.child("healthCheck"), None, False, "HealthCheck")
        hctx, kctx = ictx.child("helm"), ictx.child("kustomize")
        entry = RegistryEntry(
            name=as_str(c.get("name"), ictx.child("name")),
            display_name=as_str(c.get("displayName"), ictx.child("displayName")),
            helm_repository=as_str(helm.get("defaultRepository"), hctx.child("defaultRepository")),
            helm_chart=as_str(helm.get("defaultChart"), hctx.child("defaultChart")),
            helm_version=as_str(helm.get("defaultVersion"), hctx.child("defaultVersion")),
            helm_namespace=as_str(helm.get("defaultNamespace"), hctx.child("defaultNamespace")),
            kustomize_source=as_str(kus.get("defaultSource"), kctx.child("defaultSource")),
            kustomize_path=as_str(kus.get("defaultPath"), kctx.child("defaultPath")),
            kustomize_tag=as_str(kus.get("defaultTag"), kctx.child("defaultTag")),
            manifest_files=_tuple(as_str_list(c.get("manifestFiles"), ictx.child("manifestFiles"))),
            assert_file=as_str(hc.get("assertFile"), ictx.child("healthCheck.assertFile")),
            value_override_keys=tuple(
                as_str_list(c.get("valueOverrideKeys"), ictx.child("valueOverrideKeys")) or ()
            ),
            raw=as_any(item, ictx),
        )
        out.append((entry, ictx))
    return out, api


def _validator_entries(path: str, text: str) -> tuple[list[tuple[Validator, Ctx]], str]:
    root = parse_raw(text, path)
    ctx = Ctx(path)
    f = as_fields(root, ctx, None, False, "ValidatorCatalog")
    kind = as_str(f.get("kind"), ctx.child("kind"))
    if kind != VALIDATOR_CATALOG_KIND:
        raise ctx.child("kind").error(f"expected kind {VALIDATOR_CATALOG_KIND!r}, got {kind!r}")
    api = as_str(f.get("apiVersion"), ctx.child("apiVersion"))
    if api != VALIDATOR_API_VERSION:
        raise ctx.child("apiVersion").error(
            f"unsupported apiVersion {api!r}; expected {VALIDATOR_API_VERSION!r}"
        )
    meta = as_fields(f.get("metadata"), ctx.child("metadata"), None, False, "metadata")
    version = as_str(meta.get("version"), ctx.child("metadata.version"))
    out = []
    vctx = ctx.child("validators")
    for i, item in enumerate(as_seq(f.get("validators"), vctx) or ()):
        ictx = vctx.index(i)
        v = as_fields(item, ictx, None, False, "Validator")
        validator = Validator(
            name=as_str(v.get("name"), ictx.child("name")),
            phase=as_str(v.get("phase"), ictx.child("phase")),
            description=as_str(v.get("description"), ictx.child("description")),
            image=as_str(v.get("image"), ictx.child("image")),
            timeout=as_str(v.get("timeout"), ictx.child("timeout")),
            raw=as_any(item, ictx),
        )
        if not validator.name:
            raise ictx.child("name").error("validator name is required")
        if validator.phase not in PHASES[1:]:
            raise ictx.child("phase").error(f"unknown validation phase {validator.phase!r}")
        out.append((validator, ictx))
    return out, version


def _merge_by_name(
    base: list[tuple[Any, Ctx]], extra: list[tuple[Any, Ctx]]
) -> list[tuple[Any, Ctx]]:
    """``mergeByName``: external entries replace same-named ones in place, new ones append."""
    index = {e.name: i for i, (e, _) in enumerate(base)}
    out = list(base)
    for item in extra:
        i = index.get(item[0].name)
        if i is None:
            index[item[0].name] = len(out)
            out.append(item)
        else:
            out[i] = item
    return out


# --- measurement paths (pkg/measurement catalog, scalar paths) ---------------------------------

_OPEN = None  # any key allowed
_MEASUREMENTS: dict[str, dict[str, frozenset[str] | None] | None] = {
    "K8s": {
        "server": frozenset(("version", "platform", "goVersion")),
        "node": frozenset(
            (
                "source-node",
                "provider",
                "provider-id",
                "container-runtime-id",
                "container-runtime-name",
                "container-runtime-version",
                "kubelet-version",
                "kernel-version",
                "operating-system",
                "os-image",
            )
        ),
        "aks-gpu-pools": frozenset(("gpu-pool-count", "gpu-pools", "gpu-driver")),
        "image": _OPEN,
        "policy": _OPEN,
        "slinky-slurm": _OPEN,
        "mariadb-operator": frozenset(("collection-state", "api-available", "api-version")),
    },
    "GPU": {"hardware": _OPEN},
    "OS": {"release": _OPEN, "sysctl": _OPEN, "grub": _OPEN, "kmod": _OPEN, "extensions": _OPEN},
    "SystemD": None,  # open subtypes (unit names contain dots)
    "NodeTopology": {
        "summary": frozenset(("node-count", "taint-count", "label-count")),
        "label": _OPEN,
        "taint": _OPEN,
    },
    "NetworkTopology": {
        "identity": frozenset(("pf-count", "rail-count")),
        "capabilities": frozenset(("sriov", "rdma", "ib")),
        "pfs": _OPEN,
        "kernel-modules": _OPEN,
    },
}
_VIRTUAL_PATHS = frozenset(("NodeTopology.gpu-nodes.label",))


def measurement_path_problem(name: str) -> str | None:
    """Why a readiness constraint name is not an addressable measurement path (or ``None``).

    A simplified ``measurement.ValidatePath``: ``{Type}.{Subtype}[selector].{Key}`` with the
    type, subtype and (for closed subtypes) key checked against AICR's measurement catalog.
    """
    if name in _VIRTUAL_PATHS:
        return None
    if not name:
        return "constraint path cannot be empty"
    mtype, dot, rest = name.partition(".")
    if not dot:
        return "invalid constraint path: expected format {Type}.{Subtype}[selector].{Key}"
    if mtype not in _MEASUREMENTS:
        return f"invalid measurement type {mtype!r} in constraint path"
    subtypes = _MEASUREMENTS[mtype]
    if subtypes is None:
        return None if "." in rest else "invalid constraint path: missing key"
    bracket, dot_i = rest.find("["), rest.find(".")
    if bracket >= 0 and (dot_i < 0 or bracket < dot_i):
        subtype = rest[:bracket]
        end = rest.find("]", bracket)
        if end < 0 or not rest[end + 1 :].startswith(".") or len(rest) <= end + 2:
            return "invalid constraint path: malformed item selector"
        key = rest[end + 2 :]
    else:
        subtype, dot2, key = rest.partition(".")
        if not dot2 or not key:
            return "invalid constraint path: missing key"
    if subtype not in subtypes:
        return f"unknown subtype {subtype!r} for measurement type {mtype!r}"
    keys = subtypes[subtype]
    if keys is not None and key not in keys:
        return f"unknown key {key!r} for {mtype}.{subtype}"
    return None


def _check_paths(constraints: tuple[Constraint, ...] | None, ctx: Ctx) -> None:
    for i, c in enumerate(constraints or ()):
        problem = measurement_path_problem(c.name)
        if problem:
            raise ctx.index(i).child("name").error(f"{problem}: {c.name!r}")


# --- load_catalog -------------------------------------------------------------------------------


def load_catalog(files: Mapping[str, str], *, external: Mapping[str, str] | None = None) -> Catalog:
    """Parse and validate a recipe tree (``read_tree`` output) into a ``Catalog``.

    ``external`` layers a second tree over it like AICR's ``--data`` provider: its files
    replace same-path files, except ``registry.yaml`` and ``validators/catalog.yaml`` whose
    entries replace or extend the base ones by name. Overlays from it are "external" (they may
    not gate on ``criteria.nodes``).

    Raises ``CatalogError(path, field, message)`` on the first problem found.
    """
    merged: dict[str, str] = dict(files)
    external_paths: set[str] = set()
    if external:
        for p, text in external.items():
            if p in (REGISTRY_FILE, VALIDATOR_CATALOG_FILE):
                continue
            merged[p] = text
            external_paths.add(p)
    for p, text in merged.items():
        if len(text) > MAX_FILE_BYTES:
            raise CatalogError(p, "<file>", f"file is larger than {MAX_FILE_BYTES} bytes")

    # Registry (merged by name with an external one).
    if REGISTRY_FILE not in merged:
        raise CatalogError(REGISTRY_FILE, "<file>", "registry.yaml is missing")
    reg_entries, registry_api = _registry_entries(REGISTRY_FILE, merged[REGISTRY_FILE])
    apis: list[tuple[str, str]] = [(REGISTRY_FILE, registry_api)]
    if external and REGISTRY_FILE in external:
        extra_entries, extra_api = _registry_entries(
            REGISTRY_FILE, external[REGISTRY_FILE], layered=True
        )
        reg_entries = _merge_by_name(reg_entries, extra_entries)
        if extra_api:
            apis.append((REGISTRY_FILE, extra_api))
    registry = _validate_registry(reg_entries, merged)

    # Validator catalog (optional; merged by name with an external one).
    validators: dict[str, Validator] = {}
    catalog_version = ""
    if VALIDATOR_CATALOG_FILE in merged:
        ventries, catalog_version = _validator_entries(
            VALIDATOR_CATALOG_FILE, merged[VALIDATOR_CATALOG_FILE]
        )
        if external and VALIDATOR_CATALOG_FILE in external:
            extra, _ = _validator_entries(VALIDATOR_CATALOG_FILE, external[VALIDATOR_CATALOG_FILE])
            ventries = _merge_by_name(ventries, extra)
        for v, vctx in ventries:
            if v.name in validators:
                raise vctx.child("name").error(f"duplicate validator {v.name!r}")
            validators[v.name] = v

    # Mixins.
    mixins: dict[str, Mixin] = {}
    for p in sorted(merged):
        if p.startswith("mixins/") and p.count("/") == 1 and p.endswith(".yaml"):
            m = decode_mixin(p, merged[p])
            apis.append((p, m.api_version))
            if m.name in mixins:
                raise CatalogError(p, "metadata.name", f"duplicate mixin name {m.name!r}")
            _check_paths(m.constraints, Ctx(p, "spec.constraints"))
            mixins[m.name] = m

    # Overlays.
    base: Overlay | None = None
    overlays: dict[str, Overlay] = {}
    sources: dict[str, str] = {}
    for p in sorted(merged):
        if not (p.startswith("overlays/") and p.count("/") == 1 and p.endswith(".yaml")):
            continue
        o = decode_overlay(p, merged[p])
        apis.append((p, o.api_version))
        source = "external" if p in external_paths else "embedded"
        _check_paths(o.constraints, Ctx(p, "spec.constraints"))
        if o.validation and o.validation.readiness:
            _check_paths(
                o.validation.readiness.constraints, Ctx(p, "spec.validation.readiness.constraints")
            )
        if o.profile:
            for vname in sorted(o.profile.values):
                _check_paths(
                    o.profile.values[vname].constraints,
                    Ctx(p, f"spec.profile.values.{vname}.constraints"),
                )
        if p == BASE_FILE:
            base = o
            continue
        if o.name in overlays or o.name == BASE_NAME:
            raise CatalogError(p, "metadata.name", f"duplicate overlay name {o.name!r}")
        if source == "external" and o.criteria is not None and o.criteria.nodes != 0:
            raise CatalogError(
                p,
                "spec.criteria.nodes",
                f"external overlay {o.name!r} sets criteria.nodes={o.criteria.nodes} which is no "
                "longer used for overlay selection (#1781)",
            )
        overlays[o.name] = o
        sources[o.name] = source
    if base is None:
        raise CatalogError(BASE_FILE, "<file>", "base.yaml not found")
    family = _one_family(apis)

    everything = [base, *overlays.values()]
    for o in everything:
        _validate_overlay_refs(o, registry, mixins, validators, merged)
    for m in mixins.values():
        for i, ref in enumerate(m.component_refs or ()):
            _validate_ref(ref, Ctx(m.path, f"spec.componentRefs[{i}]"), registry, merged)

    chains, ancestors = _chains(overlays)
    base_cycle = find_cycle([(r.name, r.dependency_refs or ()) for r in base.component_refs or ()])
    if base_cycle:
        raise CatalogError(
            base.path,
            "spec.componentRefs",
            f"circular dependency detected: {' -> '.join(base_cycle)}",
        )
    known_in_base = {r.name for r in base.component_refs or ()}
    for i, ref in enumerate(base.component_refs or ()):
        for dep in ref.dependency_refs or ():
            if dep not in known_in_base:
                raise CatalogError(
                    base.path,
                    f"spec.componentRefs[{i}].dependencyRefs",
                    f"component {ref.name!r} references unknown dependency {dep!r}",
                )
    for name in sorted(overlays):
        _check_chain_dependencies(base, chains[name], mixins)

    inherited = {o.base for o in overlays.values() if o.base not in ("", BASE_NAME)}
    leaves = tuple(
        sorted(n for n, o in overlays.items() if o.criteria is not None and n not in inherited)
    )
    criteria_registry = CriteriaRegistry(family=family.name)
    for name in sorted(overlays):
        criteria_registry.register(overlays[name].criteria)
    health = {name: merged[e.assert_file] for name, e in registry.items() if e.assert_file}
    return Catalog(
        base=base,
        overlays=overlays,
        mixins=mixins,
        registry=registry,
        validators=validators,
        validator_catalog_version=catalog_version,
        criteria_registry=criteria_registry,
        chains=chains,
        ancestors=ancestors,
        leaves=leaves,
        health_asserts=health,
        matchable=tuple(overlays[n] for n in sorted(overlays) if overlays[n].criteria is not None),
        sources=sources,
        files=merged,
        api_family=family,
    )


def _one_family(apis: list[tuple[str, str]]) -> ApiFamily:
    """The one ADR-022 family every catalog file uses. AICR reads one generation at a time
    from v0.23 (and a mixed tree is a half-done migration), so a tree mixing them is refused
    naming the first file that differs from ``registry.yaml``'s family."""
    first_path, first_api = apis[0]
    found = family_of_catalog_api(first_api)
    assert found is not None  # each file's apiVersion was checked as it was decoded
    family = found[0]
    for path, api in apis[1:]:
        other = family_of_catalog_api(api)
        assert other is not None
        if other[0] is not family:
            raise CatalogError(
                path,
                "apiVersion",
                f"{api!r} is of the {other[0].name} apiVersion family but {first_path} uses "
                f"{first_api!r} ({family.name}); a catalog uses one family (ADR-022: "
                f"{ALPHA.catalog}/{ALPHA.catalog_profiled} up to AICR v0.21, "
                f"{FAMILIES[1].catalog}/{FAMILIES[1].catalog_profiled} from v0.22)",
            )
    return family


def _safe_relpath(value: str) -> bool:
    p = PurePosixPath(value)
    return bool(value) and not p.is_absolute() and ".." not in p.parts and "\\" not in value


def _require_file(value: str, ctx: Ctx, files: Mapping[str, str]) -> None:
    if not _safe_relpath(value):
        raise ctx.error(f"{value!r} is not a relative path inside the recipe tree")
    if value not in files:
        raise ctx.error(f"file {value!r} does not exist in the recipe tree")


def _validate_registry(
    entries: list[tuple[RegistryEntry, Ctx]], files: Mapping[str, str]
) -> dict[str, RegistryEntry]:
    registry: dict[str, RegistryEntry] = {}
    override_keys: dict[str, str] = {}
    for e, ctx in entries:
        if not e.name:
            raise ctx.child("name").error("name is required")
        if not e.display_name:
            raise ctx.child("displayName").error(f"displayName is required for {e.name!r}")
        if e.name in registry:
            raise ctx.child("name").error(f"duplicate component name {e.name!r}")
        if e.name == RESERVED_DEPLOYER_KEY or RESERVED_DEPLOYER_KEY in e.value_override_keys:
            raise ctx.child("name").error(
                f"component {e.name!r} uses the reserved deployer override key "
                f"{RESERVED_DEPLOYER_KEY!r}"
            )
        for key in e.value_override_keys:
            other = override_keys.get(key)
            if other is not None:
                raise ctx.child("valueOverrideKeys").error(
                    f"duplicate valueOverrideKey {key!r}: used by both {other} and {e.name}"
                )
            override_keys[key] = e.name
        if (e.helm_repository or e.helm_chart) and e.kustomize_source:
            raise ctx.error(
                f"component {e.name!r} cannot have both helm and kustomize configuration"
            )
        if e.type == COMPONENT_TYPE_KUSTOMIZE and e.manifest_files:
            raise ctx.child("manifestFiles").error(
                f"component {e.name!r} is Kustomize but declares manifestFiles"
            )
        if not e.assert_file:
            raise ctx.child("healthCheck.assertFile").error(
                f"healthCheck.assertFile is required for {e.name!r}"
            )
        _require_file(e.assert_file, ctx.child("healthCheck.assertFile"), files)
        for i, m in enumerate(e.manifest_files or ()):
            _require_file(m, ctx.child("manifestFiles").index(i), files)
        registry[e.name] = e
    return registry


def _validate_ref(
    ref: ComponentRef, ctx: Ctx, registry: dict[str, RegistryEntry], files: Mapping[str, str]
) -> None:
    if not ref.name:
        raise ctx.child("name").error("component name is required")
    if ref.name not in registry:
        raise ctx.child("name").error(f"unknown component {ref.name!r} (not in registry.yaml)")
    for i, dep in enumerate(ref.dependency_refs or ()):
        if dep not in registry:
            raise (
                ctx.child("dependencyRefs")
                .index(i)
                .error(f"component {ref.name!r} depends on unknown component {dep!r}")
            )
    if ref.values_file:
        _require_file(ref.values_file, ctx.child("valuesFile"), files)
    for key, attr in (
        ("manifestFiles", "manifest_files"),
        ("preManifestFiles", "pre_manifest_files"),
    ):
        for i, m in enumerate(getattr(ref, attr) or ()):
            _require_file(m, ctx.child(key).index(i), files)


def _validate_overlay_refs(
    o: Overlay,
    registry: dict[str, RegistryEntry],
    mixins: dict[str, Mixin],
    validators: dict[str, Validator],
    files: Mapping[str, str],
) -> None:
    seen: set[str] = set()
    for i, ref in enumerate(o.component_refs or ()):
        ctx = Ctx(o.path, f"spec.componentRefs[{i}]")
        _validate_ref(ref, ctx, registry, files)
        if ref.name in seen:
            raise ctx.child("name").error(f"duplicate component ref {ref.name!r}")
        seen.add(ref.name)
    for i, m in enumerate(o.mixins or ()):
        if m not in mixins:
            raise CatalogError(o.path, f"spec.mixins[{i}]", f"mixin {m!r} not found in mixins/")
    if o.profile:
        for vname, value in o.profile.values.items():
            for i, pref in enumerate(value.component_refs):
                if pref.name not in registry:
                    raise CatalogError(
                        o.path,
                        f"spec.profile.values.{vname}.componentRefs[{i}].name",
                        f"unknown component {pref.name!r} (not in registry.yaml)",
                    )
    if o.validation and validators:
        for phase in PHASES:
            ph = getattr(o.validation, phase)
            for i, check in enumerate((ph.checks if ph else None) or ()):
                v = validators.get(check)
                if v is None or v.phase != phase:
                    raise CatalogError(
                        o.path,
                        f"spec.validation.{phase}.checks[{i}]",
                        f"check {check!r} is not a {phase} validator in {VALIDATOR_CATALOG_FILE}",
                    )


def _chains(
    overlays: dict[str, Overlay],
) -> tuple[dict[str, tuple[Overlay, ...]], dict[str, frozenset[str]]]:
    """Every overlay's inheritance chain (root→leaf, ``base`` excluded) and ancestor set."""
    chains: dict[str, tuple[Overlay, ...]] = {}
    ancestors: dict[str, frozenset[str]] = {}
    for name in sorted(overlays):
        chain: list[Overlay] = []
        seen: list[str] = []
        current = name
        while current not in ("", BASE_NAME):
            if current in seen:
                # Report the overlay whose ``spec.base`` closes the loop.
                closing = overlays[seen[-1]]
                cycle = " -> ".join([*seen[seen.index(current) :], current])
                raise CatalogError(closing.path, "spec.base", f"circular inheritance: {cycle}")
            seen.append(current)
            o = overlays.get(current)
            if o is None:
                child = overlays[seen[-2]] if len(seen) > 1 else overlays[name]
                raise CatalogError(
                    child.path, "spec.base", f"unknown base overlay {current!r} (no such overlay)"
                )
            chain.append(o)
            current = o.base
        chain.reverse()
        chains[name] = tuple(chain)
        ancestors[name] = frozenset(o.name for o in chain[:-1])
    return chains, ancestors


def _check_chain_dependencies(
    base: Overlay, chain: tuple[Overlay, ...], mixins: dict[str, Mixin]
) -> None:
    """Refuse a dependency cycle any single chain would produce once merged.

    Merging only ever adds ``dependencyRefs`` (union), so the union over base, the chain and
    its mixins is exactly the merged dependency graph of that chain.
    """
    graph: dict[str, list[str]] = {}
    where: dict[str, str] = {}
    sources: list[tuple[str, tuple[ComponentRef, ...] | None]] = [(base.path, base.component_refs)]
    mixin_names: list[str] = []
    for o in chain:
        sources.append((o.path, o.component_refs))
        mixin_names.extend(o.mixins or ())
    for m in dict.fromkeys(mixin_names):
        if m in mixins:
            sources.append((mixins[m].path, mixins[m].component_refs))
    for path, refs in sources:
        for ref in refs or ():
            deps = graph.setdefault(ref.name, [])
            for d in ref.dependency_refs or ():
                if d not in deps:
                    deps.append(d)
                    where.setdefault(f"{ref.name}->{d}", path)
    cycle = find_cycle(sorted(graph.items()))
    if cycle:
        path = where.get(f"{cycle[-2]}->{cycle[-1]}", chain[-1].path)
        raise CatalogError(
            path,
            "spec.componentRefs.dependencyRefs",
            f"circular dependency detected in chain of {chain[-1].name!r}: {' -> '.join(cycle)}",
        )
