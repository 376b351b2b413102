"""Stored consensus badges (``consensus.stored``): every service that changes what a badge
rests on leaves the stored rows exactly as a full recomputation would, the list page and its
``?consensus=`` filter read them, and time alone (a run ageing into staleness) is honoured."""

from __future__ import annotations

import io
import random
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from evidence_app import consensus
from evidence_app.consensus import columns
from evidence_app.consensus import stored as stored_consensus
from evidence_app.consensus.rules import tally_runs
from evidence_app.corroborate import CONFIRMED, SINGLE, UNTESTED
from evidence_app.corroborate.allowlist import source_slug
from evidence_app.models import ConsensusColumn, Evidence, Signer, SignerClass, SignerKind
from evidence_app.services import keys, signers
from evidence_app.services.withdrawal import evidence_withdraw
from recipes_app.models import Catalog, Recipe, RecipeConsensusState
from recipes_app.selectors import PAGE_SIZE
from recipes_app.services import catalog_import
from tests.evidence_factories import (
    COMMUNITY_IDENTITY,
    GITHUB_ISSUER,
    EvidenceFactory,
    SignerFactory,
    statement_for,
)
from tests.factories import CatalogFactory, RecipeFactory
from tests.sigstore_private import PrivateSigstore, generate_key, public_pem

pytestmark = pytest.mark.django_db

CHECKS = {
    "deployment": [{"name": "operator-health", "thresholds": []}],
    "conformance": [{"name": "dra-support", "thresholds": []}],
}
STATUSES = ("passed", "failed", "skipped", "pending", "other")


def stored() -> dict[int, consensus.RecipeBadge]:
    return {
        row.recipe_id: consensus.RecipeBadge.stored(row)
        for row in RecipeConsensusState.objects.all()
    }


def recomputed() -> dict[int, consensus.RecipeBadge]:
    return {pk: badge for (pk, _), badge in consensus.recipe_badges_computed().badges.items()}


def _grid_rows(grid: consensus.ConsensusGrid) -> list[tuple[object, ...]]:
    return [
        (r.phase, r.name, r.consensus, r.in_rollup, r.demo, r.voters, r.stale_voters)
        for r in grid.rows
    ]


def assert_columns_current(steps: list[str] | None = None) -> None:
    """The stored grid columns and row tallies are what the evidence gives now."""
    names = sorted(set(Evidence.objects.values_list("recipe_name", flat=True)))
    fresh = columns.columns_computed(names)

    def facts(c: ConsensusColumn) -> tuple[object, ...]:
        return (c.recipe_name, c.lens, c.signer_id, c.slot, c.evidence_id, c.counted, c.demo)

    assert sorted(map(facts, ConsensusColumn.objects.all())) == sorted(map(facts, fresh)), steps
    kept = {(c.recipe_name, c.lens, c.signer_id, c.slot): c for c in ConsensusColumn.objects.all()}
    for c in fresh:
        stored_column = kept[(c.recipe_name, c.lens, c.signer_id, c.slot)]
        assert (stored_column.statuses, stored_column.stale_codes) == (c.statuses, c.stale_codes)
    for lens in {c.lens for c in fresh} | {""}:
        by_name: dict[str, list[ConsensusColumn]] = {}
        for c in fresh:
            if c.lens == lens:
                by_name.setdefault(c.recipe_name, []).append(c)
        expected = {
            name: {k: t for k, t in tally_runs(map(columns.column_run, cs)).items() if not t.empty}
            for name, cs in by_name.items()
        }
        kept_tallies = columns.stored_tallies(names, lens)
        assert kept_tallies == {n: t for n, t in expected.items() if t}, (lens, steps)


def assert_current(recipes: list[Recipe], steps: list[str] | None = None) -> None:
    """The stored rows are the full recomputation, and each is the recipe page's badge; the
    page's default view (stored columns) shows what reading every run gives."""
    rows = stored()
    assert rows == recomputed(), steps
    assert_columns_current(steps)
    for recipe in recipes:
        grid = consensus.consensus_grid(recipe=recipe)
        shown = rows.get(recipe.pk, consensus.RecipeBadge.untested())
        assert shown == grid.consensus.badge, (recipe.name, steps)
        every_run = consensus.consensus_grid(recipe=recipe, signers="all")  # reads the runs
        assert _grid_rows(grid) == _grid_rows(every_run), (recipe.name, steps)
        assert grid.counts == every_run.counts, (recipe.name, steps)
        assert grid.phase_rollup == every_run.phase_rollup, (recipe.name, steps)
        assert grid.consensus.badge == every_run.consensus.badge, (recipe.name, steps)
        for option in grid.lens_options:  # each AICR version's lens, stored and from the runs
            if not option.value or option.value.startswith("release:"):
                continue
            lens = consensus.consensus_grid(recipe=recipe, lens=option.value)
            runs = consensus.consensus_grid(recipe=recipe, lens=option.value, signers="all")
            assert lens.lens == option.value
            assert _grid_rows(lens) == _grid_rows(runs), (recipe.name, option.value, steps)
            assert lens.counts == runs.counts, (recipe.name, option.value, steps)
            assert lens.consensus.badge == runs.consensus.badge, (recipe.name, option.value)


def _allowlist(slugs: list[str]) -> str:
    body = "schemaVersion: 1.0.0\n"
    if slugs:
        body += "community:\n" + "".join(
            f"  - issuer: {GITHUB_ISSUER}\n    source: {slug}\n" for slug in slugs
        )
    return body


def _key_signer(name: str) -> Signer:
    key = keys.signing_key_register(name=name, public_key_pem=public_pem(generate_key("ed25519")))
    return SignerFactory(
        kind=SignerKind.KEY,
        issuer="",
        identity="",
        key=key,
        source_id=signers.key_source_id(key.fingerprint),
        signer_class=SignerClass.REGISTERED_KEY,
        label=name,
    )


@pytest.mark.parametrize("seed", range(10))
def test_every_change_path_leaves_what_a_full_recomputation_gives(
    seed: int, evidence_db: None
) -> None:
    """Random sequences of ingest, withdrawal, allowlist re-classification, key revocation
    and new catalog versions, compared against a full recompute after every step."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible sequence, not a secret
    catalog = CatalogFactory(aicr_version="v0.19.0")
    recipes = [RecipeFactory(catalog=catalog, checks=CHECKS) for _ in range(3)]
    keyless = [SignerFactory() for _ in range(4)]
    keyed = [_key_signer(f"lab key {i}") for i in range(2)]
    slugs = {s.pk: source_slug(s.issuer, s.identity) for s in keyless}
    signers.allowlist_publish(body=_allowlist([slugs[s.pk] for s in keyless[:2]]))
    now = timezone.now()
    steps: list[str] = []
    most_rows = 0
    for _ in range(30):
        roll = rng.random()
        live = list(Evidence.objects.filter(withdrawn_at__isnull=True))
        if roll < 0.55 or not live:
            recipe = rng.choice(recipes)
            statuses = {
                phase: [
                    {"name": name, "status": rng.choice(STATUSES)}
                    for name in (checks[0]["name"], f"extra-{rng.randrange(3)}")
                    if rng.random() < 0.8
                ]
                for phase, checks in CHECKS.items()
            }
            EvidenceFactory(
                recipe=recipe,
                signer=rng.choice(keyless + keyed),
                attested_at=now - timedelta(days=rng.choice((0, 5, 29, 31, 60))),
                aicr_version=rng.choice(("v0.18.2", "v0.19.0", "v0.20.1")),
                subject_digest=recipe.digest if rng.random() < 0.8 else "0" * 64,
                is_simulated=rng.random() < 0.1,
                is_demo=rng.random() < 0.2,
                check_results=statuses,
            )
            steps.append("ingest")
        elif roll < 0.7:
            evidence_withdraw(
                evidence=rng.choice(live), by=None, roles={"maintainer"}, reason="wrong driver"
            )
            steps.append("withdraw")
        elif roll < 0.85:
            chosen = [slugs[s.pk] for s in keyless if rng.random() < 0.5]
            signers.allowlist_publish(body=_allowlist(chosen))
            steps.append("reclassify")
        elif roll < 0.95:
            key = rng.choice(keyed).key
            keys.signing_key_revoke(key=key)
            steps.append("revoke")
        else:
            catalog = CatalogFactory(aicr_version=rng.choice(("v0.19.0", "v0.20.1")))
            recipes = [
                RecipeFactory(catalog=catalog, name=r.name, digest=r.digest, checks=CHECKS)
                for r in recipes
            ]
            steps.append("catalog")
        assert_current(recipes, steps)
        most_rows = max(most_rows, RecipeConsensusState.objects.count())
    assert most_rows > 0  # the sequence did store badges, not only compare empty tables


def test_a_real_ingest_refreshes_the_badge_in_its_transaction(
    ingest: Callable[..., Any],
    private_root: object,
    private_sigstore: PrivateSigstore,
    example_recipe: Recipe,
    publish_allowlist: Callable[[str], object],
) -> None:
    """Through ``evidence_ingest`` (no factory): a counted upload writes the stored badge; a
    reported one (not on the allowlist) changes nothing."""
    publish_allowlist(_allowlist([source_slug(GITHUB_ISSUER, COMMUNITY_IDENTITY)]))
    assert not RecipeConsensusState.objects.filter(recipe=example_recipe).exists()

    reported = private_sigstore.sign_dsse(
        statement_for(example_recipe),
        identity="https://github.com/stranger/x/.github/workflows/e.yaml@refs/heads/main",
        issuer=GITHUB_ISSUER,
    )
    assert ingest(reported.bundle).verdict == "verified"
    assert not RecipeConsensusState.objects.filter(recipe=example_recipe).exists()

    counted = private_sigstore.sign_dsse(
        statement_for(example_recipe), identity=COMMUNITY_IDENTITY, issuer=GITHUB_ISSUER
    )
    assert ingest(counted.bundle).verdict == "verified"
    row = RecipeConsensusState.objects.get(recipe=example_recipe)
    grid = consensus.consensus_grid(recipe=example_recipe)
    assert consensus.RecipeBadge.stored(row) == grid.consensus.badge
    assert row.state == grid.state
    assert stored() == recomputed()


def test_a_new_catalog_version_refreshes_every_badge(
    real_catalog: Catalog, real_tree_files: dict[str, str], example_recipe: Recipe
) -> None:
    """Through ``catalog_import``: the new version's recipes get their badges, and the old
    version's runs now read as made for another recipe digest, and the release run with an
    outdated AICR version (a ``dev`` run is judged by its content alone)."""
    EvidenceFactory(recipe=example_recipe, aicr_version="v0.19.0")
    EvidenceFactory(recipe=example_recipe, aicr_version="dev")
    before = stored()[example_recipe.pk]
    assert before.stale.reasons == ()

    # The newest AICR release that still reads this (v1alpha2) tree (ADR-022).
    newer = catalog_import(files=real_tree_files, source="tests", aicr_version="v0.21.0").catalog

    moved = Recipe.objects.get(catalog=newer, name=example_recipe.name)
    rows = stored()
    assert rows == recomputed()
    assert set(rows) == {example_recipe.pk, moved.pk}
    assert rows[moved.pk].stale.reasons == (("recipe-changed", 2), ("aicr-outdated", 1))
    assert rows[example_recipe.pk] == rows[moved.pk]


def test_a_badge_is_refreshed_once_a_run_ages_into_staleness(evidence_db: None) -> None:
    """Time alone: the stored row expires when its fresh run turns 30 days old, and the next
    list read (or the periodic task) stores the stale badge."""
    recipe = RecipeFactory(checks=CHECKS)
    start = timezone.now()
    with time_machine.travel(start - timedelta(days=29), tick=False):
        EvidenceFactory(
            recipe=recipe,
            attested_at=timezone.now(),
            check_results={"deployment": [{"name": "operator-health", "status": "passed"}]},
        )
    row = RecipeConsensusState.objects.get(recipe=recipe)
    assert row.expires_at == start - timedelta(days=29) + timedelta(days=30)
    assert (row.counted_runs, row.stale_runs, row.stale_reasons) == (1, 0, {})

    with time_machine.travel(start + timedelta(days=1, seconds=1), tick=False):
        page = Client().get("/recipes/?consensus=PARTIAL")
        row.refresh_from_db()
        assert row.expires_at is None  # nothing left to age
        assert (row.counted_runs, row.stale_runs) == (1, 1)
        assert row.stale_reasons == {"older-than-30-days": 1}
        assert stored() == recomputed()
    assert recipe.name in page.content.decode()
    assert 'data-consensus-stale="1/1"' in page.content.decode()


def test_runs_ageing_one_by_one_leave_what_a_full_recomputation_gives(
    evidence_db: None,
) -> None:
    """Time alone, step by step: each expiry ages only the columns that crossed the line
    (``columns.columns_age``), in every lens, and leaves the stored columns, tallies and
    badges equal to judging everything again."""
    rng = random.Random(7)  # noqa: S311 - a reproducible sequence, not a secret
    recipes = [RecipeFactory(checks=CHECKS) for _ in range(2)]
    start = timezone.now()
    for _ in range(12):
        EvidenceFactory(
            recipe=rng.choice(recipes),
            signer=SignerFactory(),
            attested_at=start - timedelta(days=20 + rng.random() * 15),
            aicr_version=rng.choice(("v0.18.2", "v0.19.0")),
            check_results={
                "deployment": [
                    {"name": "operator-health", "status": rng.choice(("passed", "failed"))}
                ]
            },
        )
    aged_steps = 0
    for day in range(1, 13):
        with time_machine.travel(start + timedelta(days=day), tick=False):
            aged_steps += stored_consensus.consensus_refresh_expired() > 0
            assert stored() == recomputed(), day
            assert_current(recipes, [f"day {day}"])
    assert aged_steps >= 3  # runs did age on several of those days
    assert ConsensusColumn.objects.filter(stale_codes__contains="older-than-30-days").exists()


def test_the_periodic_task_refreshes_expired_rows_only(evidence_db: None) -> None:
    from evidence_app.tasks import consensus_refresh_expired

    fresh, ageing = RecipeFactory.create_batch(2, catalog=CatalogFactory(), checks=CHECKS)
    EvidenceFactory(recipe=fresh)
    EvidenceFactory(recipe=ageing, attested_at=timezone.now() - timedelta(days=29, hours=23))
    refreshed = dict(RecipeConsensusState.objects.values_list("recipe_id", "refreshed_at"))

    with time_machine.travel(timezone.now() + timedelta(hours=2), tick=False):
        assert consensus_refresh_expired() == 1  # the task body, run in-process
        assert stored() == recomputed()
    after = dict(RecipeConsensusState.objects.values_list("recipe_id", "refreshed_at"))
    assert after[fresh.pk] == refreshed[fresh.pk]
    assert after[ageing.pk] > refreshed[ageing.pk]


def test_the_list_filter_reads_the_stored_state_in_a_constant_number_of_queries(
    evidence_db: None,
) -> None:
    catalog = CatalogFactory()
    client = Client()

    def listing(count: int) -> tuple[int, set[str]]:
        made = []
        for recipe in RecipeFactory.create_batch(count, catalog=catalog, checks=CHECKS):
            for _ in range(2):
                EvidenceFactory(
                    recipe=recipe,
                    check_results={
                        "deployment": [{"name": "operator-health", "status": "passed"}],
                        "conformance": [{"name": "dra-support", "status": "passed"}],
                    },
                )
            made.append(recipe.name)
        with CaptureQueriesContext(connection) as ctx:
            response = client.get("/recipes/?consensus=CONFIRMED")
        assert response.status_code == 200
        return len(ctx.captured_queries), {n for n in made if n in response.content.decode()}

    few, shown_few = listing(2)
    many, shown_many = listing(PAGE_SIZE - 2)  # all of them on the first page
    assert few == many
    assert len(shown_few) == 2
    assert len(shown_many) == PAGE_SIZE - 2


def test_the_list_filter_and_badges_follow_a_withdrawal(evidence_db: None) -> None:
    recipe, untouched = RecipeFactory.create_batch(2, catalog=CatalogFactory(), checks=CHECKS)
    passed = {
        "deployment": [{"name": "operator-health", "status": "passed"}],
        "conformance": [{"name": "dra-support", "status": "passed"}],
    }
    first = EvidenceFactory(recipe=recipe, check_results=passed)
    EvidenceFactory(recipe=recipe, check_results=passed)
    client = Client()

    def names(state: str) -> set[str]:
        body = client.get(f"/api/v1/recipes/?consensus={state}").json()
        return {row["name"] for row in body["results"]}

    assert recipe.name in names(CONFIRMED)
    evidence_withdraw(evidence=first, by=None, roles={"maintainer"}, reason="bad run")
    assert recipe.name not in names(CONFIRMED)
    assert recipe.name in names(SINGLE)
    assert untouched.name in names(UNTESTED)
    assert recipe.name not in names(UNTESTED)


def test_it_backfills_an_empty_table_once(evidence_db: None) -> None:
    recipe = RecipeFactory(checks=CHECKS)
    EvidenceFactory(recipe=recipe)
    RecipeConsensusState.objects.all().delete()  # as migrated from before the table

    assert stored_consensus.backfill_if_empty() == 1
    assert stored() == recomputed()
    assert stored_consensus.backfill_if_empty() == 0


@pytest.mark.django_db(transaction=True)
def test_two_uploads_at_once_both_reach_the_stored_badge(
    evidence_db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two counted uploads for one recipe, each in its own transaction, refreshing at the same
    moment: neither sees the other's uncommitted row, so without the per-recipe lock the
    later commit would store a badge missing the earlier run."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises the two writers before either refreshes")
    recipe = RecipeFactory(catalog=CatalogFactory(), checks=CHECKS)
    pair = [SignerFactory(), SignerFactory()]
    both_stored = threading.Barrier(2, timeout=20)
    real_lock = stored_consensus._lock

    def lock_after_both_stored(names: Any) -> None:
        both_stored.wait()
        real_lock(names)

    monkeypatch.setattr(stored_consensus, "_lock", lock_after_both_stored)
    errors: list[BaseException] = []

    def upload(signer: Signer) -> None:
        try:
            with transaction.atomic():
                EvidenceFactory(
                    recipe=recipe,
                    signer=signer,
                    check_results={
                        "deployment": [{"name": "operator-health", "status": "passed"}],
                        "conformance": [{"name": "dra-support", "status": "passed"}],
                    },
                )
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=upload, args=(signer,)) for signer in pair]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    row = RecipeConsensusState.objects.get(recipe=recipe)
    assert row.state == CONFIRMED  # two counted signers pass every declared check
    assert stored() == recomputed()


def test_the_refresh_command_restores_every_badge(evidence_db: None) -> None:
    recipe = RecipeFactory(checks=CHECKS)
    EvidenceFactory(recipe=recipe)
    RecipeConsensusState.objects.update(state=CONFIRMED, counted_runs=9)  # drifted
    out = io.StringIO()

    call_command("refresh_consensus", stdout=out)

    assert out.getvalue().startswith("1 recipe badges stored")
    assert stored() == recomputed()


@pytest.mark.parametrize("seed", range(4))
def test_late_runs_and_last_withdrawals_leave_what_a_full_recomputation_gives(
    seed: int, evidence_db: None
) -> None:
    """The incremental refresh's edge cases, at random: a run older than its signer's newest
    (it must not replace it), runs tied on ``attested_at`` (stored and grid pick alike), the same
    recipe name in two catalog versions, and withdrawals of a recipe's last counted runs (its
    rows must go, in both versions)."""
    rng = random.Random(1000 + seed)  # noqa: S311 - a reproducible sequence, not a secret
    old = CatalogFactory(aicr_version="v0.18.0")
    new = CatalogFactory(aicr_version="v0.19.0")
    recipes = [RecipeFactory(catalog=old, checks=CHECKS) for _ in range(2)]
    recipes += [
        RecipeFactory(catalog=new, name=r.name, digest=r.digest, checks=CHECKS) for r in recipes
    ]
    keyless = [SignerFactory() for _ in range(3)]
    signers.allowlist_publish(
        body=_allowlist([source_slug(s.issuer, s.identity) for s in keyless[:2]])
    )
    now = timezone.now()
    moments = [now - timedelta(days=d) for d in (0, 0, 3, 12, 40)]  # a tie on purpose
    steps: list[str] = []
    seen = {"late": 0, "dropped": 0}
    for _ in range(25):
        live = list(Evidence.objects.filter(withdrawn_at__isnull=True).select_related("signer"))
        if live and rng.random() < 0.35:
            before = RecipeConsensusState.objects.count()
            evidence_withdraw(
                evidence=rng.choice(live), by=None, roles={"maintainer"}, reason="bad run"
            )
            seen["dropped"] += RecipeConsensusState.objects.count() < before
            steps.append("withdraw")
        else:
            recipe, signer = rng.choice(recipes), rng.choice(keyless)
            attested = rng.choice(moments)
            newest = (
                Evidence.objects.counted()
                .filter(recipe_name=recipe.name, signer=signer)
                .order_by("-attested_at")
                .values_list("attested_at", flat=True)
                .first()
            )
            seen["late"] += newest is not None and attested < newest
            EvidenceFactory(
                recipe=recipe,
                signer=signer,
                attested_at=attested,
                aicr_version=rng.choice(("v0.18.0", "v0.19.0", "v0.20.0")),
                check_results={
                    phase: [{"name": checks[0]["name"], "status": rng.choice(STATUSES)}]
                    for phase, checks in CHECKS.items()
                },
            )
            steps.append("ingest")
        assert_current(recipes, steps)
    assert seen["late"] > 0, "the sequence never sent a run older than its signer's newest"
    assert seen["dropped"] > 0, "the sequence never withdrew a recipe's last counted run"


def test_a_counted_ingest_refreshes_in_the_same_queries_whatever_the_runs(
    evidence_db: None,
) -> None:
    """The refresh a counted ingest pays reads the newest run per signer and the staleness
    facts in a fixed number of statements: 2 runs or 40 of the recipe cost the same."""
    signer_pool = [SignerFactory() for _ in range(4)]

    def refresh_queries(runs: int) -> int:
        recipe = RecipeFactory(checks=CHECKS)
        for i in range(runs):
            EvidenceFactory(
                recipe=recipe,
                signer=signer_pool[i % len(signer_pool)],
                attested_at=timezone.now() - timedelta(hours=i),
            )
        last = EvidenceFactory.build(recipe=recipe, signer=signer_pool[0])
        last.save()
        with CaptureQueriesContext(connection) as ctx, transaction.atomic():
            stored_consensus.evidence_stored(last)
        assert stored() == recomputed()
        return len(ctx.captured_queries)

    assert refresh_queries(2) == refresh_queries(40)


def test_a_stored_badge_lists_its_stale_reasons_in_code_order() -> None:
    # A JSON object keeps no key order (PostgreSQL's jsonb sorts keys), so the order is the
    # badge's own: that of the staleness codes.
    row = RecipeConsensusState(
        state=SINGLE,
        counted_runs=3,
        stale_runs=2,
        stale_reasons={"withdrawn": 1, "recipe-changed": 2},
    )

    reasons = consensus.RecipeBadge.stored(row).stale.reasons

    assert reasons == (("recipe-changed", 2), ("withdrawn", 1))


def test_a_row_cannot_have_more_stale_runs_than_counted_ones() -> None:
    recipe = RecipeFactory(checks=CHECKS)
    row = RecipeConsensusState(
        recipe=recipe, state=SINGLE, counted_runs=1, stale_runs=2, refreshed_at=timezone.now()
    )

    with pytest.raises(IntegrityError), transaction.atomic():
        row.save()
