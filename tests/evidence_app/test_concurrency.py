"""The same statement uploaded twice at the same moment (the same bytes, or two wrappers of it)
gives one record and two good answers (PostgreSQL: real concurrent transactions; the unique
``(signer, payload_sha256)`` and ``sha256`` decide)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client

from evidence_app.models import Evidence, Signer, SignerClassChange, UploadLog
from evidence_app.services import ingest as ingest_module
from evidence_app.services import signers, trust_roots
from evidence_app.services.ingest import store as ingest_store
from recipes_app.models import Catalog, Recipe
from tests.evidence_factories import EXAMPLE_RECIPE, GITHUB_ISSUER, UNKNOWN_IDENTITY, statement_for
from tests.sigstore_private import PrivateSigstore

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def racing(monkeypatch: pytest.MonkeyPatch) -> threading.Barrier:
    """Both uploads look for the bytes before either stores them, then go on together."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: SQLite serialises writers, so two uploads cannot race")
    barrier = threading.Barrier(2, timeout=30)
    lookup = ingest_store._existing

    def look_then_wait(*args: Any) -> Any:
        found = lookup(*args)
        barrier.wait()
        return found

    monkeypatch.setattr(ingest_store, "_existing", look_then_wait)
    return barrier


def _in_threads(work: Callable[[], Any]) -> list[Any]:
    results: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(work())
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    return results


def test_two_simultaneous_uploads_of_the_same_bundle_make_one_record(
    racing: threading.Barrier,
    private_sigstore: PrivateSigstore,
    real_catalog: Catalog,
    make_token: Callable[..., str],
) -> None:
    trust_roots.trust_root_add(
        name="race instance", trusted_root_json=private_sigstore.trusted_root_json()
    )
    recipe = Recipe.objects.get(catalog=real_catalog, name=EXAMPLE_RECIPE)
    bundle = private_sigstore.sign_dsse(
        statement_for(recipe), identity=UNKNOWN_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle
    token = make_token("carol", "contributor")

    def upload() -> Any:
        client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
        return client.post(
            "/api/v1/evidence/", {"bundle": SimpleUploadedFile("e.sigstore.json", bundle)}
        )

    responses = _in_threads(upload)

    assert sorted(r.status_code for r in responses) == [200, 201]
    assert len({r.json()["id"] for r in responses}) == 1
    assert all(r.json()["verdict"] == "verified" for r in responses)
    assert Evidence.objects.count() == 1
    assert Signer.objects.count() == 1
    assert SignerClassChange.objects.count() == 1
    assert UploadLog.objects.count() == 2
    assert sorted(UploadLog.objects.values_list("created", flat=True)) == [False, True]


def test_the_service_returns_the_winner_on_a_racing_insert(
    racing: threading.Barrier, private_sigstore: PrivateSigstore, real_catalog: Catalog
) -> None:
    trust_roots.production_root_ensure()
    signers.seeded_allowlist_ensure()
    trust_roots.trust_root_add(
        name="race instance", trusted_root_json=private_sigstore.trusted_root_json()
    )
    recipe = Recipe.objects.get(catalog=real_catalog, name=EXAMPLE_RECIPE)
    bundle = private_sigstore.sign_dsse(
        statement_for(recipe), identity=UNKNOWN_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle

    results = _in_threads(
        lambda: ingest_module.evidence_ingest(
            data=bundle, artifact=None, filename="e.json", user=None, channel="api"
        )
    )

    assert sorted((r.outcome, r.created) for r in results) == [
        ("created", True),
        ("existing", False),
    ]
    assert results[0].evidence.pk == results[1].evidence.pk
    assert Evidence.objects.count() == 1


def test_two_wrappers_of_one_statement_racing_make_one_record(
    racing: threading.Barrier, private_sigstore: PrivateSigstore, real_catalog: Catalog
) -> None:
    """A bundle and the same bundle re-indented (other bytes, same signed statement)."""
    trust_roots.production_root_ensure()
    signers.seeded_allowlist_ensure()
    trust_roots.trust_root_add(
        name="race instance", trusted_root_json=private_sigstore.trusted_root_json()
    )
    recipe = Recipe.objects.get(catalog=real_catalog, name=EXAMPLE_RECIPE)
    bundle = private_sigstore.sign_dsse(
        statement_for(recipe), identity=UNKNOWN_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle
    wrappers = iter([bundle, json.dumps(json.loads(bundle), indent=7).encode()])
    lock = threading.Lock()

    def upload() -> Any:
        with lock:
            data = next(wrappers)
        return ingest_module.evidence_ingest(
            data=data, artifact=None, filename="e.json", user=None, channel="api"
        )

    results = _in_threads(upload)

    assert sorted((r.outcome, r.created) for r in results) == [
        ("created", True),
        ("existing", False),
    ]
    assert results[0].evidence.pk == results[1].evidence.pk
    assert Evidence.objects.count() == 1
    assert UploadLog.objects.count() == 2
