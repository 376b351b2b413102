"""The AICR publication as a stored artefact (issue 22): built by a task, equal to a fresh build,
never built by a request when a worker is configured, honest about a pending rebuild."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client

from evidence_app import tasks
from evidence_app.exports import artefact
from evidence_app.exports.publication import publication_build
from evidence_app.models import Evidence, PublicationBuild
from evidence_app.services import keys
from recipes_app.models import Recipe
from tests.evidence_app.test_tasks_worker import broker, worker  # noqa: F401 (fixtures)
from tests.evidence_factories import (
    EvidenceFactory,
    SignerFactory,
    example_statement,
    signed_example_tarball,
)
from tests.sigstore_private import generate_key, public_pem, sign_dsse_with_key

pytestmark = pytest.mark.django_db
INDEX = "/aicr/data/index.json"


@pytest.fixture
def evidence(example_recipe: Recipe) -> list[Evidence]:
    cache.clear()
    lab, other = SignerFactory(label="org/lab"), SignerFactory(label="x/y", counted=False)
    return [
        EvidenceFactory(recipe=example_recipe, signer=lab),
        EvidenceFactory(recipe=example_recipe, signer=other),
        EvidenceFactory(recipe=example_recipe, signer=lab, is_demo=True),
        EvidenceFactory(recipe=example_recipe, signer=other, is_simulated=True),
    ]


@pytest.fixture
def with_worker(monkeypatch: pytest.MonkeyPatch, settings: Any) -> list[Any]:
    """A worker builds the publication (a broker is configured): the queued calls."""
    queued: list[Any] = []
    monkeypatch.setattr(tasks.publication_rebuild, "apply_async", lambda **kw: queued.append(kw))
    settings.PUBLICATION_BUILT_BY_WORKER = True
    return queued


def test_the_stored_build_equals_a_fresh_build_for_every_include(evidence: list[Evidence]) -> None:
    artefact.publication_rebuild()
    assert PublicationBuild.objects.count() == len(artefact.include_choices()) == 4
    for include in artefact.include_choices():
        fresh = publication_build(include)
        build = PublicationBuild.objects.get(include=artefact.include_key(include))
        stored = {d.name: bytes(d.body) for d in build.documents.all()}
        expected = {"index.json": fresh.index, "labels.json": fresh.labels}
        expected |= {f"series/{n}.json": body for n, body in fresh.series.items()}
        assert stored == expected
        assert (build.runs, build.left_out) == (fresh.runs, fresh.left_out)


def test_a_request_only_queues_a_build_and_says_it_is_pending(
    client: Client, evidence: list[Evidence], with_worker: list[Any], example_recipe: Recipe
) -> None:
    first = client.get(INDEX)
    assert first.status_code == 503
    assert first["Retry-After"]
    assert first["X-Publication-Pending"] == "true"
    assert not PublicationBuild.objects.exists()  # the request built nothing
    assert client.get(INDEX).status_code == 503
    assert len(with_worker) == 1  # debounced: one queued build for both requests

    tasks.publication_rebuild()  # what the worker runs
    built = client.get(INDEX)
    assert built.status_code == 200
    assert built["X-Publication-Pending"] == "false"
    assert built["X-Publication-Built-At"].endswith("Z")

    EvidenceFactory(recipe=example_recipe, signer=evidence[0].signer)
    stale = client.get(INDEX)
    assert stale.status_code == 200
    assert stale.content == built.content  # the last build, as it was
    assert stale["X-Publication-Pending"] == "true"
    listing = json.loads(client.get("/aicr/data/").content)
    assert listing["rebuildPending"] is True
    assert listing["builtAt"] == built["X-Publication-Built-At"]
    assert len(with_worker) == 2

    tasks.publication_rebuild()
    fresh = client.get(INDEX)
    assert fresh["X-Publication-Pending"] == "false"
    assert fresh.content == publication_build().index


def test_a_withdrawal_asks_for_a_rebuild_after_its_commit(
    evidence: list[Evidence], with_worker: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    from evidence_app.services.withdrawal import evidence_withdraw

    with django_capture_on_commit_callbacks(execute=True):
        evidence_withdraw(evidence=evidence[0], by=None, roles={"maintainer"}, reason="bad run")
    assert len(with_worker) == 1
    assert artefact.rebuild_pending()


def _wait_current(client: Client, log: Path, since: float) -> tuple[Any, float]:
    response = client.get(INDEX)
    deadline = since + 120  # a bound on a hung worker, not a speed target (bench/ has those)
    while time.monotonic() < deadline and response["X-Publication-Pending"] != "false":
        time.sleep(0.1)
        response = client.get(INDEX)
    assert response.status_code == 200, log.read_text()[-4000:]
    assert response["X-Publication-Pending"] == "false", log.read_text()[-4000:]
    return response, time.monotonic() - since


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_rebuilds_it_seconds_after_an_upload(
    worker: Path,  # noqa: F811 (the fixture imported above)
    broker: str,  # noqa: F811
    ingest: Any,
    example_recipe: Recipe,
    client: Client,
    settings: Any,
) -> None:
    """Redis, a real ``celery worker`` process and PostgreSQL: an upload's commit queues the
    build, the worker stores it, and the next read serves it as current."""
    settings.PUBLICATION_BUILT_BY_WORKER = True
    settings.CACHES = {  # the debounce key is shared with the worker, as deployed
        **settings.CACHES,
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": broker},
    }
    cache.delete(artefact.QUEUED_KEY)
    lab_keys = [generate_key("ecdsa-p256") for _ in range(2)]  # two signers, one statement each
    for n, key in enumerate(lab_keys):
        keys.signing_key_register(name=f"lab key {n}", public_key_pem=public_pem(key))
    bundles = [signed_example_tarball(sign_dsse_with_key(example_statement(), k)) for k in lab_keys]
    # The first upload's build also waits for the worker process to start.
    first = time.monotonic()
    assert ingest(bundles[0]).created
    _, started = _wait_current(client, worker, first)
    second = time.monotonic()
    assert ingest(bundles[1]).created
    response, behind = _wait_current(client, worker, second)
    assert response.content == publication_build().index
    assert json.loads(response.content)["meta"]["counts"]["sources"] == 2
    assert "evidence_app.tasks.publication_rebuild" in worker.read_text()
    print(
        f"publication current {behind:.1f} s after an upload's commit "
        f"(the first, with the worker's start: {started:.1f} s)"
    )


def test_a_build_waits_its_turn_while_another_worker_builds(
    evidence: list[Evidence], monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextlib import contextmanager

    from celery.exceptions import Retry

    from aicr_site.lib import locks

    @contextmanager
    def held_elsewhere(name: str) -> Any:
        assert name == tasks.PUBLICATION_LOCK
        yield False

    monkeypatch.setattr(locks, "held_alone", held_elsewhere)
    with pytest.raises(Retry):  # comes back after the debounce: the change is not dropped
        tasks.publication_rebuild()
    assert not PublicationBuild.objects.exists()

    monkeypatch.undo()
    assert tasks.publication_rebuild() == artefact.evidence_version()
    assert PublicationBuild.objects.count() == len(artefact.include_choices())
