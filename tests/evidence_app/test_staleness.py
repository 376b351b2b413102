"""Staleness reasons: each rule with its sentence, the bulk form without N+1, and the SQL filter
agreeing with both; plus the digits-only version keys the SQL relies on."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from evidence_app.consensus.rules import is_counted
from evidence_app.corroborate.versions import compare
from evidence_app.models import Evidence, SignerClassChange
from evidence_app.services.staleness import (
    AllowlistState,
    CheckSet,
    newest_counted_releases,
    stale_filter,
    staleness_bulk,
    staleness_reasons,
    validator_catalog_version,
)
from evidence_app.services.versions import is_release, version_key
from recipes_app.models import Catalog, Recipe
from recipes_app.services import check_set_digest
from tests.evidence_factories import EvidenceFactory, SignerFactory
from tests.factories import CatalogFactory, RecipeFactory, older_catalog_recipe

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
VERSIONS = [
    "dev",
    "1.2.3",
    "v0.9.0",
    "v0.19.0",
    "v0.19.0-example",
    "v0.19.0-rc.1",
    "v0.19.0-rc.2",
    "v0.19.0-rc.10",
    "v0.19.0-rc.a",
    "v0.19.0-rc",
    "v0.19.0-rc.1.1",
    "v0.19.0-0",
    "v0.19.0-alpha-1",
    "v0.19.0+build.5",
    "v0.19",
    "v0",
    "v1.0.0",
    "v10.0.0",
    "v2.0.0",
    "v1.10.0",
    "v1.9.9",
    "v01.0.0",
    "",
]


def test_version_keys_sort_like_go_semver() -> None:
    for v, w in itertools.product(VERSIONS, repeat=2):
        expected = compare(v, w)
        kv, kw = version_key(v), version_key(w)
        got = (kv > kw) - (kv < kw)
        assert got == expected, (v, w, kv, kw)
        assert kv.isdigit()
    rng = random.Random(7)  # noqa: S311 - test data
    for _ in range(2000):
        parts = [str(rng.choice([0, 1, 2, 9, 10, 11, 100])) for _ in range(3)]
        pre = rng.choice(["", "-rc.1", "-rc.2", "-beta", "-1", "-x.1", "-x.y"])
        v = "v" + ".".join(parts) + pre
        w = rng.choice(VERSIONS)
        kv, kw = version_key(v), version_key(w)
        assert ((kv > kw) - (kv < kw)) == compare(v, w), (v, w)
    assert version_key("1.0.0", assume_v=True) == version_key("v1.0.0")


def _evidence(**kw: object) -> Evidence:
    recipe = RecipeFactory.build(name="r1", digest="a" * 64)
    defaults: dict[str, object] = {
        "recipe_name": "r1",
        "subject_digest": "a" * 64,
        "attested_at": NOW - timedelta(days=1),
        "aicr_version": "v0.19.0",
        "validator_catalog_version": "1.0.0",
    }
    defaults.update(kw)
    evidence = Evidence(recipe=recipe, **defaults)
    evidence.signer_id = 7
    return evidence


CHECKS = ("deployment/operator-health", "performance/nccl-all-reduce-bw")
V1_CHECKS = (*CHECKS, "performance/cre-training-goodput", "performance/nccl-cre-all-reduce-bw")


def _check_set(checks: tuple[str, ...]) -> CheckSet:
    return CheckSet(digest=check_set_digest(sorted(checks)), checks=tuple(sorted(checks)))


def _codes(evidence: Evidence, **facts: object) -> list[str]:
    arguments: dict[str, object] = {
        "current_recipe_digest": "a" * 64,
        "now": NOW,
        "newest_aicr_version": "v0.19.0",
        "allowlist_state": AllowlistState(),
        "validator_checks": _check_set(CHECKS),
        "current_validator_checks": _check_set(CHECKS),
    }
    arguments.update(facts)
    return [r.code for r in staleness_reasons(evidence, **arguments)]  # type: ignore[arg-type]


def test_each_reason_on_its_own() -> None:
    fresh = _evidence()
    assert _codes(fresh) == []
    assert _codes(fresh, current_recipe_digest="b" * 64) == ["recipe-changed"]
    assert _codes(fresh, current_recipe_digest=None) == ["recipe-changed"]
    assert _codes(_evidence(attested_at=NOW - timedelta(days=31))) == ["older-than-30-days"]
    assert _codes(_evidence(attested_at=NOW - timedelta(days=29))) == []
    assert _codes(fresh, newest_aicr_version="v0.20.0") == ["aicr-outdated"]
    assert _codes(fresh, newest_aicr_version="dev") == []
    assert _codes(fresh, current_validator_checks=_check_set(V1_CHECKS)) == [
        "validator-catalog-outdated"
    ]
    assert _codes(fresh, current_validator_checks=CheckSet(digest="")) == []  # unknown
    assert _codes(fresh, validator_checks=None) == []
    # The version label is not compared: AICR left it at "1.0.0" when it added checks.
    assert _codes(_evidence(validator_catalog_version="0.9.0")) == []
    assert _codes(fresh, allowlist_state=AllowlistState(frozenset({7}))) == [
        "signer-not-allowlisted"
    ]
    withdrawn = _evidence(withdrawn_at=NOW, withdrawal_reason="wrong cluster")
    assert _codes(withdrawn) == ["withdrawn"]


def test_every_reason_has_a_sentence() -> None:
    evidence = _evidence(
        attested_at=NOW - timedelta(days=45),
        withdrawn_at=NOW,
        withdrawal_reason="wrong cluster",
    )
    with override_settings(AICR_SUPPORTED_RANGE=">=1.0.0,<2.0.0"):
        reasons = staleness_reasons(
            evidence,
            current_recipe_digest="b" * 64,
            now=NOW,
            newest_aicr_version="v0.20.0",
            allowlist_state=AllowlistState(frozenset({7})),
            validator_checks=_check_set(CHECKS),
            current_validator_checks=_check_set(V1_CHECKS[:-1]),
        )
    details = {r.code: r.detail for r in reasons}
    assert list(details) == [
        "recipe-changed",
        "older-than-30-days",
        "aicr-outdated",
        "aicr-unsupported",
        "validator-catalog-outdated",
        "signer-not-allowlisted",
        "withdrawn",
    ]
    assert details["recipe-changed"].startswith(
        "The recipe changed: this evidence attests sha256:aaaa"
    )
    assert "45 days ago" in details["older-than-30-days"]
    assert "AICR v0.19.0" in details["aicr-outdated"]
    assert "v0.20.0" in details["aicr-outdated"]
    assert details["validator-catalog-outdated"] == (
        "The validator catalog changed: the current one adds performance/cre-training-goodput."
    )
    assert details["aicr-unsupported"].startswith(
        "Made with AICR v0.19.0, outside the supported AICR range (>=1.0.0,<2.0.0)"
    )
    assert "wrong cluster" in details["withdrawn"]
    assert all(d.endswith((".", "cluster")) for d in details.values())


def test_it_reads_the_validator_catalog_version_of_the_catalog(real_catalog: Catalog) -> None:
    assert validator_catalog_version(real_catalog) == "1.0.0"


@pytest.fixture
def mixed(example_recipe: Recipe) -> dict[str, Evidence]:
    """One record per reason (and a fresh one) for the example recipe of the real catalog."""
    now = datetime.now(UTC)
    delisted = SignerFactory(counted=False, signer_class="reported")
    SignerClassChange.objects.create(
        signer=delisted,
        from_class="community",
        to_class="reported",
        from_counted=True,
        to_counted=False,
        reason="removed",
    )
    older_catalog_recipe_row = RecipeFactory(catalog=CatalogFactory(), name=example_recipe.name)
    other_checks_recipe = older_catalog_recipe(
        example_recipe, extra_checks=("performance/cre-training-goodput",)
    )
    Catalog.objects.filter(pk=older_catalog_recipe_row.catalog_id).update(
        imported_at=now - timedelta(days=400)
    )
    maria = get_user_model().objects.create(username="maria")
    rows = {
        "fresh": EvidenceFactory(recipe=example_recipe, aicr_version="v0.20.0"),
        "recipe-changed": EvidenceFactory(recipe=older_catalog_recipe_row, aicr_version="v0.20.0"),
        "older-than-30-days": EvidenceFactory(
            recipe=example_recipe, aicr_version="v0.20.0", attested_at=now - timedelta(days=31)
        ),
        "aicr-outdated": EvidenceFactory(recipe=example_recipe, aicr_version="v0.19.0"),
        "validator-catalog-outdated": EvidenceFactory(
            recipe=other_checks_recipe, aicr_version="v0.20.0", validator_catalog_version="1.0.0"
        ),
        "signer-not-allowlisted": EvidenceFactory(
            recipe=example_recipe, aicr_version="v0.20.0", signer=delisted
        ),
        "withdrawn": EvidenceFactory(
            recipe=example_recipe,
            aicr_version="v0.20.0",
            withdrawn_at=now,
            withdrawn_by=maria,
            withdrawal_reason="duplicate",
        ),
    }
    return rows


def test_the_bulk_form_and_the_sql_filter_agree(mixed: dict[str, Evidence]) -> None:
    evidence = list(Evidence.objects.select_related("signer"))

    with CaptureQueriesContext(connection) as queries:
        reasons = staleness_bulk(evidence)
    assert len(queries) <= 5

    for name, row in mixed.items():
        expected = [] if name == "fresh" else [name]
        assert [r.code for r in reasons[row.pk]] == expected, name
    stale_ids = set(stale_filter(Evidence.objects.all(), stale=True).values_list("pk", flat=True))
    fresh_ids = set(stale_filter(Evidence.objects.all(), stale=False).values_list("pk", flat=True))
    assert stale_ids == {row.pk for name, row in mixed.items() if name != "fresh"}
    assert fresh_ids == {mixed["fresh"].pk}


def test_the_bulk_form_does_not_grow_with_the_list(example_recipe: Recipe) -> None:
    EvidenceFactory.create_batch(3, recipe=example_recipe)
    few = list(Evidence.objects.select_related("signer"))
    with CaptureQueriesContext(connection) as small:
        staleness_bulk(few)
    EvidenceFactory.create_batch(30, recipe=example_recipe)
    many = list(Evidence.objects.select_related("signer"))
    with CaptureQueriesContext(connection) as large:
        staleness_bulk(many)
    assert len(large) == len(small)


def test_an_older_aicr_version_than_the_catalogs_is_outdated(example_recipe: Recipe) -> None:
    evidence = EvidenceFactory(recipe=example_recipe, aicr_version="v0.19.0")
    Catalog.objects.filter(pk=example_recipe.catalog_id).update(aicr_version="v0.21.0")

    reasons = staleness_bulk([evidence])[evidence.pk]

    assert [r.code for r in reasons] == ["aicr-outdated"]
    assert "v0.21.0" in reasons[0].detail
    assert list(stale_filter(Evidence.objects.all(), stale=True)) == [evidence]


def test_only_counted_evidence_sets_the_newest_aicr_version(example_recipe: Recipe) -> None:
    """An unallowlisted signer (or a simulated run) claiming AICR v99 outdates nobody."""
    fresh = EvidenceFactory(recipe=example_recipe, aicr_version="v0.20.0")
    unlisted = SignerFactory(counted=False, signer_class="reported")
    EvidenceFactory(recipe=example_recipe, aicr_version="v99.0.0", signer=unlisted)
    EvidenceFactory(recipe=example_recipe, aicr_version="v98.0.0", is_simulated=True)

    assert staleness_bulk([fresh])[fresh.pk] == []
    fresh_ids = set(stale_filter(Evidence.objects.all(), stale=False).values_list("pk", flat=True))
    assert fresh.pk in fresh_ids

    newer = EvidenceFactory(recipe=example_recipe, aicr_version="v0.21.0")  # counted: it does
    assert [r.code for r in staleness_bulk([fresh])[fresh.pk]] == ["aicr-outdated"]
    assert newer.pk not in set(
        stale_filter(Evidence.objects.all(), stale=True).values_list("pk", flat=True)
    )


def _stale_ids() -> set[int]:
    return set(stale_filter(Evidence.objects.all(), stale=True).values_list("pk", flat=True))


def _fresh_ids() -> set[int]:
    return set(stale_filter(Evidence.objects.all(), stale=False).values_list("pk", flat=True))


def test_it_never_marks_a_dev_run_on_the_current_catalog_stale_at_birth(
    example_recipe: Recipe,
) -> None:
    """The site's own run on the bundled tree is stamped ``dev``; a counted v0.19.0 record of
    the same recipe (the demo data's) must not make it "aicr-outdated" the moment it is
    published, while a v0.18.0 record is outdated against the v0.19.0 one."""
    EvidenceFactory(recipe=example_recipe, aicr_version="v0.19.0")
    older = EvidenceFactory(recipe=example_recipe, aicr_version="v0.18.0")
    dev = EvidenceFactory(recipe=example_recipe, aicr_version="dev")
    unstamped = EvidenceFactory(recipe=example_recipe, aicr_version="")

    reasons = staleness_bulk(list(Evidence.objects.select_related("signer")))

    assert reasons[dev.pk] == []
    assert reasons[unstamped.pk] == []
    assert [r.code for r in reasons[older.pk]] == ["aicr-outdated"]
    assert "v0.19.0 is newer" in reasons[older.pk][0].detail
    assert _stale_ids() == {older.pk}
    assert {dev.pk, unstamped.pk} <= _fresh_ids()


def test_it_never_finds_a_release_older_than_dev(example_recipe: Recipe) -> None:
    """``dev`` sorts below every release in Go semver; it must not set the bar either way."""
    Catalog.objects.filter(pk=example_recipe.catalog_id).update(aicr_version="dev")
    EvidenceFactory(recipe=example_recipe, aicr_version="dev")
    release = EvidenceFactory(recipe=example_recipe, aicr_version="v0.19.0")

    assert staleness_bulk([release])[release.pk] == []
    assert release.pk in _fresh_ids()


VALIDATOR_V1_EXTRA = """\
  - name: nccl-cre-all-reduce-bw
    phase: performance
    description: "Verify NCCL All Reduce bandwidth on CRE"
    image: ghcr.io/nvidia/aicr-validators/performance:latest
    timeout: 30m
    args: ["nccl-cre-all-reduce-bw"]
    env: []
  - name: cre-training-goodput
    phase: performance
    description: "Verify training goodput on CRE (opt-in)"
    image: ghcr.io/nvidia/aicr-validators/performance:latest
    timeout: 30m
    args: ["cre-training-goodput"]
    env: []
"""


def test_it_compares_the_validator_check_sets_of_two_imported_catalogs(
    example_recipe: Recipe, real_tree_files: dict[str, str]
) -> None:
    """The bundled tree, then a copy whose validators/catalog.yaml adds AICR 1.x's two
    performance checks and still says version "1.0.0" (AICR-V1.md §5)."""
    from recipes_app.services import catalog_import

    on_bundled = EvidenceFactory(recipe=example_recipe, aicr_version="dev")
    files = dict(real_tree_files)
    text = files["validators/catalog.yaml"]
    assert 'version: "1.0.0"' in text
    files["validators/catalog.yaml"] = text.replace(
        "validators:\n", "validators:\n" + VALIDATOR_V1_EXTRA, 1
    )
    newer = catalog_import(files=files, source="tests: v1 checks", aicr_version="dev").catalog
    assert newer.validator_catalog_version == example_recipe.catalog.validator_catalog_version
    on_newer = EvidenceFactory(
        recipe=Recipe.objects.get(catalog=newer, name=example_recipe.name), aicr_version="dev"
    )

    reasons = staleness_bulk([on_bundled, on_newer])

    assert [r.code for r in reasons[on_bundled.pk]] == ["validator-catalog-outdated"]
    assert reasons[on_bundled.pk][0].detail == (
        "The validator catalog changed: the current one adds "
        "performance/cre-training-goodput, performance/nccl-cre-all-reduce-bw."
    )
    assert reasons[on_newer.pk] == []
    assert _stale_ids() == {on_bundled.pk}
    assert on_newer.pk in _fresh_ids()


V3 = "https://aicr.run/recipe-evidence/v3"


def test_it_compares_a_v3_statement_with_the_recipes_v3_digest(example_recipe: Recipe) -> None:
    assert example_recipe.digest_v3
    assert example_recipe.digest_v3 != example_recipe.digest
    v3_fresh = EvidenceFactory(
        recipe=example_recipe, predicate_type=V3, subject_digest=example_recipe.digest_v3
    )
    v3_legacy_digest = EvidenceFactory(
        recipe=example_recipe, predicate_type=V3, subject_digest=example_recipe.digest
    )
    v1_fresh = EvidenceFactory(recipe=example_recipe, subject_digest=example_recipe.digest)
    v1_v3_digest = EvidenceFactory(recipe=example_recipe, subject_digest=example_recipe.digest_v3)

    reasons = staleness_bulk(list(Evidence.objects.select_related("signer")))

    assert reasons[v3_fresh.pk] == []
    assert reasons[v1_fresh.pk] == []
    assert [r.code for r in reasons[v3_legacy_digest.pk]] == ["recipe-changed"]
    assert [r.code for r in reasons[v1_v3_digest.pk]] == ["recipe-changed"]
    assert example_recipe.digest_v3[:12] in reasons[v3_legacy_digest.pk][0].detail
    assert _stale_ids() == {v3_legacy_digest.pk, v1_v3_digest.pk}
    assert _fresh_ids() == {v3_fresh.pk, v1_fresh.pk}


def test_the_newest_counted_release_probe_equals_a_scan_of_the_rows(
    example_recipe: Recipe,
) -> None:
    """``newest_counted_releases`` (one index probe per name on PostgreSQL, a ``DISTINCT`` on
    SQLite) names, per recipe, the release ``_newest`` finds over every counted row: only
    counted rows (verified, counted signer, live, real hardware, supported) and only releases."""
    rng = random.Random(22)  # noqa: S311 - test data
    counted = SignerFactory()
    unlisted = SignerFactory(counted=False, signer_class="reported")
    names = ["r-a", "r-b", "r-c", "r-none"]
    for i in range(60):
        EvidenceFactory(
            recipe=example_recipe,
            recipe_name=rng.choice(names[:3]),
            aicr_version=rng.choice([*VERSIONS, "v0.20.0", "v0.21.0-rc.1", "v3.0.0"]),
            signer=counted if rng.random() < 0.6 else unlisted,
            is_simulated=rng.random() < 0.15,
            withdrawn_at=NOW if rng.random() < 0.15 else None,
            withdrawal_reason="test" if i % 2 else "another",
            verdict="verified" if rng.random() < 0.9 else "failed",
        )
    expected: dict[str, str] = {}
    for e in Evidence.objects.select_related("signer"):
        if is_counted(e) and is_release(e.aicr_version):
            old = expected.get(e.recipe_name)
            if old is None or compare(e.aicr_version, old) > 0:
                expected[e.recipe_name] = e.aicr_version

    with CaptureQueriesContext(connection) as queries:
        got = newest_counted_releases(names)

    assert len(queries) == 1
    assert expected
    assert got.keys() == expected.keys()  # "r-none" has no evidence at all
    for name, version in expected.items():
        assert compare(got[name], version) == 0, (name, got[name], version)
