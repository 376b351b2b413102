"""Staleness reasons: each rule with its sentence, the bulk form without N+1, and the SQL filter
agreeing with both; plus the digits-only version keys the SQL relies on."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evidence_app.corroborate.versions import compare
from evidence_app.models import Evidence, SignerClassChange
from evidence_app.services.staleness import (
    AllowlistState,
    stale_filter,
    staleness_bulk,
    staleness_reasons,
    validator_catalog_version,
)
from evidence_app.services.versions import version_key
from recipes_app.models import Catalog, Recipe
from tests.evidence_factories import EvidenceFactory, SignerFactory
from tests.factories import CatalogFactory, RecipeFactory

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


def _codes(evidence: Evidence, **facts: object) -> list[str]:
    arguments: dict[str, object] = {
        "current_recipe_digest": "a" * 64,
        "now": NOW,
        "newest_aicr_version": "v0.19.0",
        "allowlist_state": AllowlistState(),
        "validator_catalog_version": "1.0.0",
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
    assert _codes(fresh, validator_catalog_version="1.1.0") == ["validator-catalog-outdated"]
    assert _codes(fresh, validator_catalog_version="") == []
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
        validator_catalog_version="0.9.0",
    )
    reasons = staleness_reasons(
        evidence,
        current_recipe_digest="b" * 64,
        now=NOW,
        newest_aicr_version="v0.20.0",
        allowlist_state=AllowlistState(frozenset({7})),
        validator_catalog_version="1.0.0",
    )
    details = {r.code: r.detail for r in reasons}
    assert list(details) == [
        "recipe-changed",
        "older-than-30-days",
        "aicr-outdated",
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
    assert "0.9.0" in details["validator-catalog-outdated"]
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
    older_catalog_recipe = RecipeFactory(catalog=CatalogFactory(), name=example_recipe.name)
    Catalog.objects.filter(pk=older_catalog_recipe.catalog_id).update(
        imported_at=now - timedelta(days=400)
    )
    maria = get_user_model().objects.create(username="maria")
    rows = {
        "fresh": EvidenceFactory(recipe=example_recipe, aicr_version="v0.20.0"),
        "recipe-changed": EvidenceFactory(recipe=older_catalog_recipe, aicr_version="v0.20.0"),
        "older-than-30-days": EvidenceFactory(
            recipe=example_recipe, aicr_version="v0.20.0", attested_at=now - timedelta(days=31)
        ),
        "aicr-outdated": EvidenceFactory(recipe=example_recipe, aicr_version="v0.19.0"),
        "validator-catalog-outdated": EvidenceFactory(
            recipe=example_recipe, aicr_version="v0.20.0", validator_catalog_version="0.9.0"
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
