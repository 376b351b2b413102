"""Catalog versions and the recipes resolved from them."""

from __future__ import annotations

from django.db import models

from recipes_app.resolver.checks import DeclaredChecks

DIMENSIONS: tuple[str, ...] = ("service", "accelerator", "os", "intent", "platform")
PHASES: tuple[str, ...] = ("readiness", "deployment", "conformance", "performance")
ANY = "any"


class CatalogQuerySet(models.QuerySet["Catalog"]):
    def newest_first(self) -> CatalogQuerySet:
        return self.order_by("-imported_at", "-pk")

    def current(self) -> Catalog | None:
        """The catalog the site shows: the most recently imported version.

        Its resolver input files (a few MB) are only loaded when something resolves.
        """
        return self.defer("files").newest_first().first()


class ApiFamilyName(models.TextChoices):
    ALPHA = "alpha", "aicr.run/v1alpha2 · v1alpha3 (AICR up to v0.21)"
    V1 = "v1", "aicr.run/v1beta1 · v1beta2 (AICR v0.22 and 1.x)"


class Catalog(models.Model):
    """One imported version of an AICR recipe tree, with the exact files the resolver read.

    The files are kept so that any criteria can be resolved later against exactly this
    version (``/api/v1/query/``, ``/v1/recipe``) without the original tree on disk.
    """

    source = models.CharField(max_length=500, help_text="Where the tree came from, as given.")
    aicr_version = models.CharField(
        max_length=100, help_text="Stamped into metadata.version; part of every recipe digest."
    )
    content_digest = models.CharField(
        max_length=64, help_text="sha256 over the sorted (path, sha256 of content) of every file."
    )
    files = models.JSONField(help_text="Relative path → text of every file the resolver reads.")
    file_count = models.PositiveIntegerField()
    validator_catalog_version = models.CharField(
        max_length=100,
        blank=True,
        help_text="metadata.version of validators/catalog.yaml, as written (AICR never bumped "
        "it when checks were added: staleness compares validator_checks_digest).",
    )
    api_family = models.CharField(
        max_length=10,
        choices=ApiFamilyName.choices,
        default=ApiFamilyName.ALPHA,
        help_text="ADR-022 apiVersion family of the tree's files.",
    )
    validator_checks = models.JSONField(
        default=list, help_text="The validator catalog's check set, '<phase>/<name>' sorted."
    )
    validator_checks_digest = models.CharField(
        max_length=64, blank=True, help_text="sha256 of the check set, one entry a line."
    )
    criteria_values = models.JSONField(
        default=dict,
        help_text="Dimension → every value the catalog accepts (its AICR generation's enums and "
        "the values its overlays register).",
    )
    imported_at = models.DateTimeField(auto_now_add=True)

    objects = CatalogQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["content_digest", "aicr_version"], name="catalog_unique_content_version"
            )
        ]

    def __str__(self) -> str:
        return f"catalog #{self.pk} ({self.content_digest[:12]}, aicr {self.aicr_version})"


class RecipeChange(models.TextChoices):
    NEW = "new", "New in this catalog version"
    CHANGED = "changed", "Digest changed since the previous catalog version"
    UNCHANGED = "unchanged", "Same digest as the previous catalog version"


class RecipeQuerySet(models.QuerySet["Recipe"]):
    def in_catalog(self, catalog: Catalog | None) -> RecipeQuerySet:
        if catalog is None:
            return self.none()
        return self.filter(catalog=catalog)

    def current(self) -> RecipeQuerySet:
        return self.in_catalog(Catalog.objects.current())

    def matching_text(self, text: str) -> RecipeQuerySet:
        """Every whitespace-separated term must occur in the recipe's search text."""
        qs = self
        for term in text.lower().split()[:10]:
            qs = qs.filter(search_text__contains=term)
        return qs

    def for_listing(self) -> RecipeQuerySet:
        """The columns a list row needs; the big YAML texts stay in the database."""
        return self.defer("deterministic_yaml", "canonical_yaml", "components", "constraints")


class Recipe(models.Model):
    """One resolved leaf of a catalog version, or one profile variant of a leaf."""

    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name="recipes")
    name = models.CharField(max_length=200)
    leaf = models.CharField(max_length=200, help_text="The overlay this recipe resolves.")
    profile = models.CharField(
        max_length=200, blank=True, help_text='Selected profile, e.g. "gpuStack=operator-managed".'
    )
    is_default_profile = models.BooleanField(default=False)
    service = models.CharField(max_length=50)
    accelerator = models.CharField(max_length=50)
    os = models.CharField(max_length=50)
    intent = models.CharField(max_length=50)
    platform = models.CharField(max_length=50)
    coordinate = models.CharField(max_length=200, blank=True)
    api_version = models.CharField(max_length=50)
    applied_overlays = models.JSONField()
    deployment_order = models.JSONField()
    components = models.JSONField()
    constraints = models.JSONField()
    checks: models.JSONField[DeclaredChecks, DeclaredChecks] = models.JSONField(
        help_text="Declared checks per phase with their thresholds."
    )
    check_count = models.PositiveIntegerField(default=0)
    component_count = models.PositiveIntegerField(default=0)
    deterministic_yaml = models.TextField(help_text="aicr recipe output (indent 2).")
    canonical_yaml = models.TextField(help_text="Canonical form; sha256 of it is the digest.")
    digest = models.CharField(
        max_length=64, help_text="aicr evidence digest (legacy: recipe-evidence v1, v2)."
    )
    digest_v3 = models.CharField(
        max_length=64,
        db_index=True,
        default="",
        help_text="recipe-evidence/v3 digest: the canonical form without metadata.version.",
    )
    parity_digest = models.CharField(max_length=64, help_text="sha256 of deterministic_yaml.")
    change = models.CharField(max_length=10, choices=RecipeChange.choices)
    search_text = models.TextField(help_text="Lower-cased words searched by the free-text box.")

    objects = RecipeQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["catalog", "name"], name="recipe_unique_name_in_catalog"
            )
        ]
        indexes = [
            models.Index(fields=["catalog", "service"]),
            models.Index(fields=["catalog", "accelerator"]),
            models.Index(fields=["catalog", "intent"]),
            models.Index(fields=["name", "catalog"]),
            models.Index(fields=["digest"]),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def criteria(self) -> dict[str, str]:
        return {dim: getattr(self, dim) for dim in DIMENSIONS}


class RecipeConsensusState(models.Model):
    """A recipe's stored consensus badge: ``evidence_app.consensus`` (``recipe_consensus``) over the
    newest counted run of each signer (default lens), with its demo and staleness notes.

    Kept current by ``evidence_app.consensus.stored`` in the services that change what it
    rests on (ingest, withdrawal, signer re-classification, key revocation, catalog import),
    and refreshed when ``expires_at`` passes: the moment its first fresh counted run ages into
    "older than N days", the only change that time alone makes. A recipe without a row has no
    counted evidence: UNTESTED.
    """

    recipe = models.OneToOneField(
        Recipe, on_delete=models.CASCADE, primary_key=True, related_name="consensus"
    )
    state = models.CharField(max_length=16, help_text="The recipe-level consensus state.")
    # Deprecated, no longer written or read: the previous release's encoded badge, kept through
    # one release so its processes can still write it while they drain; then dropped.
    badge = models.CharField(
        max_length=500,
        blank=True,
        default="",
        help_text="Deprecated, no longer written: the typed columns hold the badge.",
    )
    includes_demo = models.BooleanField(
        default=False, help_text="The state rests on evidence signed with a demo key."
    )
    counted_runs = models.PositiveIntegerField(
        default=0, help_text="Counted runs the state rests on (newest per counted signer)."
    )
    stale_runs = models.PositiveIntegerField(default=0, help_text="… of which stale.")
    # Display detail only (never filtered or sorted on), over a fixed handful of codes: a
    # JSON object keeps it in the row the list already reads, where a related table would
    # cost a join or a query per page for a note.
    stale_reasons = models.JSONField(
        default=dict, blank=True, help_text="Stale reason code → how many counted runs it marks."
    )
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="When a counted run ages into staleness (None: never)."
    )
    # Display detail only, like ``stale_reasons``: the list rows and the coverage cells say
    # what a recipe lacks for CONFIRMED without a query per row.
    confirmed_lacks = models.JSONField(
        default=list,
        blank=True,
        help_text="What it lacks for CONFIRMED: [{failing, more, checks}] (empty: nothing).",
    )
    refreshed_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["expires_at"]), models.Index(fields=["state"])]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(stale_runs__lte=models.F("counted_runs")),
                name="consensus_stale_runs_are_counted_runs",
            )
        ]

    def __str__(self) -> str:
        return f"{self.recipe_id}: {self.state}"


class ConsensusRules(models.Model):
    """The settings every stored ``RecipeConsensusState`` was computed under (one row):
    ``evidence_app.consensus.stored.rules_fingerprint()``, the supported AICR range and the
    staleness age limit. A badge rests on them as much as on evidence, yet they change only
    with the environment, at a deploy, where no service runs to refresh anything; the
    expired-badge check before every list read compares this row with the running settings
    and refreshes every badge when they differ (or when the row is missing), so a settings
    change cannot leave stale badges behind silently."""

    SINGLETON = 1

    id = models.PositiveSmallIntegerField(primary_key=True, default=SINGLETON)
    fingerprint = models.CharField(max_length=500)
    refreshed_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.fingerprint
