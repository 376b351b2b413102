"""The stored release profile statuses (``releases.stored``): each service that changes what a
status rests on refreshes it in its own transaction, a read is a fixed number of queries
whatever the number of records, and a row computed under other settings is recomputed."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from evidence_app.consensus import stored as consensus_stored
from evidence_app.models import Evidence, ReleaseProfile, Role, Signer, SignerKind
from evidence_app.releases.status import profile_status, release_profiles
from evidence_app.services.withdrawal import evidence_withdraw
from recipes_app.models import Catalog, Recipe
from tests.evidence_app.test_releases import declare, run, sha
from tests.evidence_factories import SignerFactory

pytestmark = pytest.mark.usefixtures("evidence_db")


@pytest.fixture
def h100(example_recipe: Recipe) -> Recipe:
    return example_recipe


def _stored(release_pk: int, recipe: str) -> ReleaseProfile:
    return ReleaseProfile.objects.get(release_id=release_pk, recipe_name=recipe)


def _computed(release_pk: int, recipe: Recipe) -> tuple[str, str, list[int]]:
    """The rule run now, bypassing the stored row: what the row must equal."""
    from evidence_app.models import Release

    release = Release.objects.get(pk=release_pk)
    entry = next(e for e in release.profiles if e["recipe"] == recipe.name)
    s = profile_status(release, entry, recipe)
    return s.status, s.reason, s.evidence


def test_declaring_stores_each_profile_and_a_read_is_the_stored_row(h100: Recipe) -> None:
    evidence = run(h100)
    release = declare()
    row = _stored(release.pk, h100.name)
    assert (row.status, row.reason, row.evidence) == ("qualified", "Qualified", [evidence.pk])
    # The read returns what is stored, not a recomputation: a row changed behind the
    # services' back (never done by the product) is what the page shows.
    ReleaseProfile.objects.filter(pk=row.pk).update(reason="stored text")
    assert release_profiles(release)[0].reason == "stored text"


def test_ingest_refreshes_the_stored_status(h100: Recipe) -> None:
    release = declare()
    assert _stored(release.pk, h100.name).status == "not-qualified"
    evidence = run(h100)  # the factory calls ingest's hook, as ingest does
    row = _stored(release.pk, h100.name)
    assert (row.status, row.evidence) == ("qualified", [evidence.pk])
    assert (row.status, row.reason, row.evidence) == _computed(release.pk, h100)


def test_a_simulated_record_refreshes_the_not_yet_run_sentence(h100: Recipe) -> None:
    release = declare()
    run(h100, is_simulated=True)
    assert _stored(release.pk, h100.name).reason == (
        "Not qualified: not yet run on hardware (1 on a simulated cluster, which proves no "
        "hardware)"
    )


def test_withdrawal_refreshes_the_stored_status(h100: Recipe) -> None:
    evidence = run(h100)
    release = declare()
    admin = User.objects.create_superuser("root", password="pw-for-tests")
    evidence_withdraw(evidence=evidence, by=admin, roles={Role.MAINTAINER}, reason="wrong lab")
    row = _stored(release.pk, h100.name)
    assert row.status == "not-qualified"
    assert (row.status, row.reason, row.evidence) == _computed(release.pk, h100)


def test_a_signer_that_stops_counting_refreshes_the_stored_status(h100: Recipe) -> None:
    evidence = run(h100)
    release = declare()
    Signer.objects.filter(pk=evidence.signer_id).update(counted=False)
    consensus_stored.signers_changed([evidence.signer_id])  # what re-classification calls
    assert _stored(release.pk, h100.name).status == "not-qualified"


def test_a_new_catalog_refreshes_every_stored_status(h100: Recipe) -> None:
    run(h100)
    release = declare()
    old = _stored(release.pk, h100.name).fingerprint
    Recipe.objects.filter(pk=h100.pk).update(digest="e" * 64)  # a new plan for the recipe
    consensus_stored.catalog_changed()  # what an import calls
    row = _stored(release.pk, h100.name)
    assert row.status == "unqualified-changed"
    assert "plan (the recipe's digest) changed" in row.reason
    assert row.fingerprint == old  # same catalog row, same settings


def test_a_row_computed_under_other_settings_is_recomputed_when_read(h100: Recipe) -> None:
    keyed = run(h100, signer=SignerFactory(kind=SignerKind.KEY, issuer="", identity=""))
    release = declare()
    assert release_profiles(release)[0].status == "not-qualified"
    with override_settings(RELEASES_ACCEPT_KEY_SIGNED=True):
        assert release_profiles(release)[0].evidence == [keyed.pk]
    assert release_profiles(release)[0].status == "not-qualified"


def test_a_row_of_another_catalog_is_recomputed_when_read(h100: Recipe) -> None:
    run(h100)
    release = declare()
    ReleaseProfile.objects.filter(release=release).update(
        fingerprint="catalog=0", status="not-qualified"
    )
    assert release_profiles(release)[0].status == "qualified"
    assert _stored(release.pk, h100.name).fingerprint.startswith(
        f"catalog={Catalog.objects.current().pk};"  # type: ignore[union-attr]
    )


def _queries(url: str) -> int:
    client = Client()
    assert client.get(url).status_code == 200  # warm: sessions, the site's own first reads
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


@pytest.mark.parametrize(
    "url", ["/releases/{pk}/", "/api/v1/releases/{pk}/profiles/", "/badges/releases/{pk}.svg"]
)
def test_a_read_costs_the_same_queries_whatever_the_number_of_records(
    h100: Recipe, url: str
) -> None:
    run(h100, days_ago=9)
    release = declare()
    few = _queries(url.format(pk=release.pk))
    for days in range(2, 8):
        run(h100, days_ago=days)
    run(h100, aicr=sha("8"))
    assert Evidence.objects.filter(recipe_name=h100.name).count() == 8
    assert _queries(url.format(pk=release.pk)) == few
