"""Output (and documentation-only) serializers of the recipe API."""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import urlencode

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from evidence_app.consensus import STATES, ConsensusGrid, RecipeBadge, recipe_badge
from recipes_app import selectors
from recipes_app.models import PHASES, Catalog, Recipe

CONSENSUS_FIELD = serializers.ChoiceField(choices=STATES)


class CriteriaSerializer(serializers.Serializer):
    """The five criteria dimensions; ``any`` is a wildcard."""

    service = serializers.CharField()
    accelerator = serializers.CharField()
    os = serializers.CharField()
    intent = serializers.CharField()
    platform = serializers.CharField()


class CatalogSummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = Catalog
        fields = ["id", "aicr_version", "content_digest", "imported_at"]


def current_catalog_id(context: dict[str, Any]) -> int | None:
    """The current catalog's id: from the context when the view knew it, else read once per
    response (a list's rows share their root serializer's context)."""
    if "current_catalog_id" not in context:
        context["current_catalog_id"] = (
            Catalog.objects.newest_first().values_list("pk", flat=True).first()
        )
    catalog_id: int | None = context["current_catalog_id"]
    return catalog_id


def recipe_link(recipe: Recipe, request: Any, kind: str, *, pin: bool) -> str:
    """The one way this API links a recipe: ``api`` (this API), ``html`` (the site's page) or
    ``yaml`` (its canonical YAML); ``pin`` adds ``?catalog=<id>``, which a recipe of an
    earlier catalog version needs (without it the link names the current one's)."""
    if kind == "yaml":
        url = selectors.resolved_yaml_url(recipe, pin_catalog=pin)
    else:
        view = "api:recipe-detail" if kind == "api" else "recipes:detail"
        url = reverse(view, kwargs={"name": recipe.name})
        if pin:
            url += "?" + urlencode({"catalog": recipe.catalog_id})
    return request.build_absolute_uri(url) if request is not None else url


class ConsensusStaleSerializer(serializers.Serializer):
    """How many of the counted runs behind the state are stale, and why."""

    stale = serializers.BooleanField()
    counted_runs = serializers.IntegerField()
    stale_runs = serializers.IntegerField()
    reasons = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Stale reason code → number of counted runs with it "
        "(recipe-changed, older-than-30-days, aicr-outdated, …).",
    )
    summary = serializers.CharField(help_text='e.g. "2 of 3 counted runs stale"; "" if none.')


class RecipeListSerializer(serializers.ModelSerializer):
    """One row of the recipe list: identity, criteria, digest and counts."""

    criteria = serializers.SerializerMethodField()
    consensus = serializers.SerializerMethodField(
        help_text="Recipe-level consensus over signed evidence, AICR's rules, each signer's "
        "latest run: CONFIRMED, SINGLE, PARTIAL, CONTESTED, FAILING or UNTESTED. Only counted "
        "signers' runs decide it (reported and simulated ones never change it)."
    )
    consensus_includes_demo = serializers.SerializerMethodField(
        help_text="The state rests on evidence signed with a demo key (labelled DEMO on the "
        "site): it shows how the site works, it is not a real validation."
    )
    consensus_stale = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField(help_text="This recipe in the API.")
    html_url = serializers.SerializerMethodField(help_text="This recipe's page on the site.")

    class Meta:
        model = Recipe
        fields = [
            "name",
            "leaf",
            "profile",
            "criteria",
            "coordinate",
            "digest",
            "digest_v3",
            "component_count",
            "check_count",
            "change",
            "consensus",
            "consensus_includes_demo",
            "consensus_stale",
            "url",
            "html_url",
        ]
        # Which evidence binds by which digest (evidence_app.verification.digests).
        extra_kwargs = {
            "digest": {
                "help_text": "Legacy digest — recipe-evidence v1/v2 records bind by it "
                "(`aicr evidence digest`: sha256 of the canonical YAML, metadata.version "
                "included)."
            },
            "digest_v3": {
                "help_text": "V3 digest — recipe-evidence v3 records bind by it (the same "
                "canonical YAML with metadata.version excluded, so it does not change with "
                "the aicr version that resolved the recipe)."
            },
        }

    @extend_schema_field(CriteriaSerializer)
    def get_criteria(self, recipe: Recipe) -> dict[str, str]:
        return recipe.criteria

    def _badge(self, recipe: Recipe) -> RecipeBadge:
        # One recipe has its computed grid; listed ones their stored row, joined to the page
        # query by RecipeFilter.
        grid = self.context.get("consensus_grid")
        return grid.consensus.badge if grid is not None else recipe_badge(recipe)

    @extend_schema_field(CONSENSUS_FIELD)
    def get_consensus(self, recipe: Recipe) -> str:
        return self._badge(recipe).state

    @extend_schema_field(serializers.BooleanField())
    def get_consensus_includes_demo(self, recipe: Recipe) -> bool:
        return self._badge(recipe).includes_demo

    @extend_schema_field(ConsensusStaleSerializer)
    def get_consensus_stale(self, recipe: Recipe) -> dict[str, Any]:
        return self._badge(recipe).stale.as_dict()

    def _pin(self, recipe: Recipe) -> bool:
        # The stubs type ``context`` read-only; DRF's is the root serializer's own dict.
        return recipe.catalog_id != current_catalog_id(cast(dict[str, Any], self.context))

    @extend_schema_field(serializers.URLField())
    def get_url(self, recipe: Recipe) -> str:
        return recipe_link(recipe, self.context.get("request"), "api", pin=self._pin(recipe))

    @extend_schema_field(serializers.URLField())
    def get_html_url(self, recipe: Recipe) -> str:
        return recipe_link(recipe, self.context.get("request"), "html", pin=self._pin(recipe))


class ComponentSerializer(serializers.Serializer):
    """What one component installs (documentation of the stored summary)."""

    name = serializers.CharField()
    type = serializers.CharField(required=False)
    chart = serializers.CharField(required=False)
    # A field named like ``Field.source``; DRF's metaclass moves declared fields off the class.
    source = serializers.CharField(required=False)  # type: ignore[assignment]
    version = serializers.CharField(required=False)
    tag = serializers.CharField(required=False)
    path = serializers.CharField(required=False)
    namespace = serializers.CharField(required=False)
    valuesFile = serializers.CharField(required=False)
    dependencyRefs = serializers.ListField(child=serializers.CharField())
    enabled = serializers.BooleanField()


class ConstraintSerializer(serializers.Serializer):
    name = serializers.CharField()
    value = serializers.CharField()
    severity = serializers.CharField(required=False)
    remediation = serializers.CharField(required=False)
    unit = serializers.CharField(required=False)


class DeclaredCheckSerializer(serializers.Serializer):
    name = serializers.CharField()
    thresholds = serializers.ListField(child=serializers.DictField(), required=False)


class ChecksByPhaseSerializer(serializers.Serializer):
    """Declared checks per validation phase, with their thresholds."""

    readiness = DeclaredCheckSerializer(many=True, required=False)
    deployment = DeclaredCheckSerializer(many=True, required=False)
    conformance = DeclaredCheckSerializer(many=True, required=False)
    performance = DeclaredCheckSerializer(many=True, required=False)


class EvidenceSummarySerializer(serializers.Serializer):
    """The consensus grid of one recipe, summed up (the recipe page shows it in full; the
    recipe-level state is ``consensus`` beside it)."""

    phase_rollup = serializers.DictField(
        child=serializers.CharField(),
        help_text="deployment, conformance, performance → state (PARTIAL possible).",
    )
    phase_includes_demo = serializers.DictField(
        child=serializers.BooleanField(),
        help_text="deployment, conformance, performance → the phase's state rests on "
        "evidence signed with a demo key.",
    )
    checks = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Rows per state: contested, failing, confirmed, single, untested.",
    )
    counted_signers = serializers.IntegerField()
    reported_signers = serializers.IntegerField()
    simulated_signers = serializers.IntegerField()
    evidence_count = serializers.IntegerField(help_text="Every record, withdrawn included.")
    withdrawn_count = serializers.IntegerField(help_text="Every withdrawn record.")
    aicr_versions = serializers.ListField(
        child=serializers.CharField(), help_text="The AICR-version lens, newest first."
    )
    evidence_url = serializers.CharField(help_text="This recipe's evidence in the API.")


def evidence_summary(grid: ConsensusGrid, request: Any) -> dict[str, Any]:
    rollup = grid.rollup
    url = reverse("api:evidence-list") + "?" + urlencode({"recipe": grid.recipe_name})
    return {
        "phase_rollup": grid.phase_rollup,
        "phase_includes_demo": {phase.phase: phase.demo for phase in grid.phases},
        "checks": {
            "contested": rollup.contested,
            "failing": rollup.failing,
            "confirmed": rollup.confirmed,
            "single": rollup.single,
            "untested": rollup.untested,
        },
        "counted_signers": grid.counts.counted,
        "reported_signers": grid.counts.reported,
        "simulated_signers": grid.counts.simulated,
        "evidence_count": grid.evidence_count,
        "withdrawn_count": grid.withdrawn_count,
        "aicr_versions": [option.value for option in grid.lens_options if option.value],
        "evidence_url": request.build_absolute_uri(url) if request is not None else url,
    }


class RecipeDetailSerializer(RecipeListSerializer):
    """A whole recipe: what it installs, what it checks, and how to reproduce it."""

    apiVersion = serializers.CharField(source="api_version")
    appliedOverlays = serializers.ListField(
        source="applied_overlays", child=serializers.CharField()
    )
    deploymentOrder = serializers.ListField(
        source="deployment_order", child=serializers.CharField()
    )
    components = ComponentSerializer(many=True)
    constraints = ConstraintSerializer(many=True)
    checks = serializers.SerializerMethodField()
    catalog = CatalogSummarySerializer()
    aicr_command = serializers.SerializerMethodField(
        help_text="The `aicr recipe …` command line that reproduces this recipe."
    )
    resolved_yaml_url = serializers.SerializerMethodField(
        help_text="The canonical YAML whose sha256 is `digest`."
    )
    evidence_summary = serializers.SerializerMethodField()

    class Meta(RecipeListSerializer.Meta):
        fields = [
            "name",
            "leaf",
            "profile",
            "is_default_profile",
            "criteria",
            "coordinate",
            "apiVersion",
            "appliedOverlays",
            "deploymentOrder",
            "components",
            "constraints",
            "checks",
            "component_count",
            "check_count",
            "digest",
            "digest_v3",
            "parity_digest",
            "change",
            "catalog",
            "aicr_command",
            "consensus",
            "consensus_includes_demo",
            "consensus_stale",
            "evidence_summary",
            "url",
            "html_url",
            "resolved_yaml_url",
        ]

    @extend_schema_field(EvidenceSummarySerializer)
    def get_evidence_summary(self, recipe: Recipe) -> dict[str, Any] | None:
        grid = self.context.get("consensus_grid")
        return evidence_summary(grid, self.context.get("request")) if grid is not None else None

    @extend_schema_field(ChecksByPhaseSerializer)
    def get_checks(self, recipe: Recipe) -> dict[str, Any]:
        declared = recipe.checks or {}
        return {phase: list(declared[phase]) for phase in PHASES if declared.get(phase)}

    def get_aicr_command(self, recipe: Recipe) -> str:
        return selectors.aicr_recipe_command(recipe)

    @extend_schema_field(serializers.URLField())
    def get_resolved_yaml_url(self, recipe: Recipe) -> str:
        return recipe_link(recipe, self.context.get("request"), "yaml", pin=self._pin(recipe))


class FilterErrorSerializer(serializers.Serializer):
    field = serializers.CharField()
    value = serializers.CharField()
    message = serializers.CharField()


class FilterErrorsSerializer(serializers.Serializer):
    """400 for an unknown filter value: which field, which value, why."""

    detail = serializers.CharField()
    # A field named like ``Serializer.errors``; DRF's metaclass moves it off the class.
    errors = FilterErrorSerializer(many=True)  # type: ignore[assignment]


class NotFoundSerializer(serializers.Serializer):
    detail = serializers.CharField()


class AicrdErrorSerializer(serializers.Serializer):
    """aicrd's error envelope (``Error`` in AICR's server.yaml)."""

    code = serializers.CharField(help_text="INVALID_REQUEST, NOT_FOUND, …")
    message = serializers.CharField(help_text="AICR's own message text.")
    details = serializers.DictField(
        required=False,
        help_text="Context: `uncovered` (dimension, requestedValue, validCompletions), "
        "`requiresOS`, or `error`.",
    )
    requestId = serializers.UUIDField()
    timestamp = serializers.DateTimeField()
    retryable = serializers.BooleanField()


class RecipeResultSerializer(serializers.Serializer):
    """AICR's RecipeResult document, as aicrd's ``GET /v1/recipe`` returns it."""

    kind = serializers.CharField(help_text="RecipeResult")
    apiVersion = serializers.CharField(
        help_text="aicr.run/v1alpha2, or aicr.run/v1alpha3 for a profiled or "
        "Slurm-accounting recipe."
    )
    metadata = serializers.DictField(help_text="version, appliedOverlays, selectedProfile…")
    criteria = serializers.DictField(child=serializers.JSONField())
    componentRefs = serializers.ListField(child=serializers.DictField())
    deploymentOrder = serializers.ListField(child=serializers.CharField())
    constraints = ConstraintSerializer(many=True, required=False)
    validation = serializers.DictField(required=False)
    configuration = serializers.DictField(required=False)


class RecipeQuerySerializer(serializers.Serializer):
    """Criteria for ``/api/v1/query/``; values are checked by the resolver, AICR-style."""

    service = serializers.CharField(required=False)
    accelerator = serializers.CharField(required=False)
    gpu = serializers.CharField(required=False, help_text="Alias of accelerator.")
    intent = serializers.CharField(required=False)
    os = serializers.CharField(required=False)
    platform = serializers.CharField(required=False)
    nodes = serializers.IntegerField(required=False, min_value=0)
    profile = serializers.CharField(
        required=False, help_text='Profile selection, e.g. "gpuStack=operator-managed".'
    )
