"""``manage.py seed_demo``: labelled, key-signed demo evidence through the real ingest."""

from __future__ import annotations

import io
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from evidence_app.consensus import CONFIRMED, STATES, consensus_grid, recipe_badge
from evidence_app.models import Evidence, SigningKey, UploadLog
from evidence_app.services import demo
from evidence_app.services.ingest import evidence_ingest
from recipes_app.models import Catalog, Recipe


@pytest.fixture(autouse=True)
def development_mode(settings: Any) -> None:
    settings.DEBUG = True  # the test runner turns it off; `make run` has it on


def _seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_it_seeds_labelled_verified_demo_evidence(real_catalog: Catalog) -> None:
    output = _seed()

    keys = SigningKey.objects.all()
    assert keys.count() == 3
    assert all(k.is_demo and "DEMO" in k.name and k.algorithm == "ecdsa-p256" for k in keys)
    evidence = list(Evidence.objects.select_related("signer", "recipe"))
    assert len(evidence) == len(demo.RUNS)
    assert f"{len(demo.RUNS)} new" in output
    assert {e.recipe.catalog_id for e in evidence} == {real_catalog.pk}
    assert len({e.recipe_name for e in evidence}) == demo.RECIPE_COUNT
    assert len({e.signer_id for e in evidence}) == 3
    assert {e.aicr_version for e in evidence} == {"v0.19.0", "v0.18.2"}
    for e in evidence:
        assert e.is_demo
        assert not e.is_simulated
        assert e.verdict == "verified"
        assert "DEMO" in e.signer.label
        assert e.signer.signer_class == "registered-key"
        assert set(e.check_results) == {"deployment", "conformance", "performance"}
        assert e.container == "summary-bundle"
    statuses = [c["status"] for e in evidence for p in e.check_results.values() for c in p.values()]
    assert "failed" in statuses
    assert "passed" in statuses
    metrics = [
        m for e in evidence for c in e.check_results["performance"].values() for m in c["metrics"]
    ]
    assert metrics
    assert all(m["unit"] for m in metrics)
    assert Evidence.objects.counted().count() == len(evidence)
    assert set(UploadLog.objects.values_list("channel", flat=True)) == {"seed"}


def test_it_shows_every_consensus_state_through_the_real_rules(real_catalog: Catalog) -> None:
    output = _seed()

    # Counted over the whole catalog from the stored badges the list and home pages read
    # (written by consensus.stored from the ingested runs: the seeder writes no state).
    recipes = Recipe.objects.filter(catalog=real_catalog).select_related("consensus")
    counts = Counter(recipe_badge(recipe).state for recipe in recipes)
    print("demo states:", dict(counts))
    assert set(counts) == set(STATES)
    assert counts[CONFIRMED] == 1
    names = [r.name for r in demo.demo_recipes(real_catalog)]
    by_name = {r.name: recipe_badge(r).state for r in recipes if r.name in names}
    assert by_name == {n: s.expected_state for n, s in zip(names, demo.SCENARIOS, strict=True)}
    assert all(recipe_badge(r).includes_demo for r in recipes if r.name in names)
    confirmed = names[0]
    assert f"CONFIRMED  {confirmed} (DEMO)" in output
    # The CONFIRMED one rests on two distinct counted signers passing on every row.
    grid = consensus_grid(recipe=Recipe.objects.get(catalog=real_catalog, name=confirmed))
    rows = [row for row in grid.consensus.rows if row.in_rollup]
    assert rows
    assert all(row.consensus.pass_allow >= 2 and not row.consensus.fail_allow for row in rows)


def test_it_is_idempotent(real_catalog: Catalog) -> None:
    _seed()
    count = Evidence.objects.count()

    output = _seed()

    assert Evidence.objects.count() == count
    assert SigningKey.objects.count() == 3
    assert "0 new" in output


def test_demo_bytes_are_deterministic(real_catalog: Catalog) -> None:
    recipe = demo.demo_recipes(real_catalog)[0]
    when = datetime(2026, 11, 1, tzinfo=UTC)
    first = demo.demo_evidence_directory(
        recipe, demo.LABS[0], demo.RUNS[0], attested_at=when, validator_version="1.0.0"
    )
    again = demo.demo_evidence_directory(
        recipe, demo.LABS[0], demo.RUNS[0], attested_at=when, validator_version="1.0.0"
    )
    assert first == again


def test_it_refuses_production_mode_full_stop(real_catalog: Catalog, settings: Any) -> None:
    settings.DEBUG = False

    with pytest.raises(CommandError, match="only runs with DEBUG on"):
        _seed()
    with pytest.raises(CommandError):  # the old escape hatch is gone
        call_command("seed_demo", "--allow-production", stdout=io.StringIO())
    assert not Evidence.objects.exists()


def test_evidence_signed_with_a_demo_key_is_demo_whoever_uploads_it(
    real_catalog: Catalog, django_user_model: Any
) -> None:
    recipe = demo.demo_recipes(real_catalog)[0]
    demo.demo_key_ensure(demo.LABS[0])
    data = demo.demo_evidence_directory(
        recipe,
        demo.LABS[0],
        demo.RUNS[0],
        attested_at=datetime.now(UTC) - timedelta(days=1),
        validator_version="1.0.0",
    )
    someone = django_user_model.objects.create(username="someone")

    result = evidence_ingest(
        data=data, artifact=None, filename="run.tar.gz", user=someone, channel="api"
    )

    assert result.ok, result.reason
    assert result.evidence is not None
    assert result.evidence.is_demo
    classify = next(s for s in result.transcript if s["step"] == "classify")
    assert "signed with a demo key" in classify["detail"]
