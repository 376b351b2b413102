"""``Last-Modified`` beside the ETag on API lists and details: If-Modified-Since answers 304
while the client's bytes are still the answer, 200 once they are not; second resolution; the
ETag wins when both conditions are sent."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.core.cache import caches
from django.test import Client
from django.utils.http import http_date

from evidence_app.models import Evidence
from evidence_app.services.tokens import token_create, user_with_role
from tests.aicr_site.api_objects import ApiObjects
from tests.evidence_factories import EvidenceFactory
from validators_app.models import RunStatus, ValidationRun

pytestmark = pytest.mark.django_db

START = datetime(2030, 1, 2, 3, 4, 5, 250_000, tzinfo=UTC)


@pytest.fixture(autouse=True)
def own_cache(settings: Any) -> None:
    # The answers' times live in the cache: a private one, so other tests' answers do not count.
    settings.CACHES = {
        **settings.CACHES,
        "last-modified": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "last-modified-tests",
            "OPTIONS": {"MAX_ENTRIES": 40},
        },
    }
    caches["last-modified"].clear()


@pytest.fixture
def world(api_objects: ApiObjects) -> dict[str, Any]:
    return {"recipe": api_objects.recipe, "evidence": api_objects.evidence, "run": api_objects.run}


def _change(world: dict[str, Any]) -> None:
    """Something every answer below shows: a withdrawal, a new record, a run's status."""
    evidence: Evidence = world["evidence"]
    EvidenceFactory(recipe=world["recipe"], signer=evidence.signer)
    Evidence.objects.filter(pk=evidence.pk).update(
        withdrawn_at=evidence.attested_at, withdrawal_reason="x"
    )
    ValidationRun.objects.filter(pk=world["run"].pk).update(status=RunStatus.FAILED)


PATHS: dict[str, Callable[[dict[str, Any]], str]] = {
    "evidence-list": lambda w: "/api/v1/evidence/",
    "evidence-detail": lambda w: f"/api/v1/evidence/{w['evidence'].pk}/",
    "signer-list": lambda w: "/api/v1/signers/",
    "signer-detail": lambda w: f"/api/v1/signers/{w['evidence'].signer.slug}/",
    "recipe-list": lambda w: "/api/v1/recipes/",
    "recipe-detail": lambda w: f"/api/v1/recipes/{w['recipe'].name}/",
    "run-list": lambda w: "/api/v1/runs/",
    "run-detail": lambda w: f"/api/v1/runs/{w['run'].pk}/",
}


@pytest.mark.parametrize("name", PATHS)
def test_it_answers_if_modified_since_until_the_answer_changes(
    client: Client, world: dict[str, Any], name: str
) -> None:
    url = PATHS[name](world)
    with time_machine.travel(START, tick=False) as clock:
        first = client.get(url)
        assert first.status_code == 200
        assert "ETag" in first
        # Within the second its bytes were first sent an answer has no time yet: bytes replacing
        # them in the same second would carry the same one.
        assert not first.has_header("Last-Modified")

        clock.shift(timedelta(seconds=1))
        second = client.get(url)
        assert second.status_code == 200
        assert second["Last-Modified"] == http_date(int(START.timestamp()))  # whole seconds
        since = second["Last-Modified"]

        unchanged = client.get(url, HTTP_IF_MODIFIED_SINCE=since)
        assert unchanged.status_code == 304
        assert unchanged.content == b""
        earlier = http_date(int(START.timestamp()) - 1)
        assert client.get(url, HTTP_IF_MODIFIED_SINCE=earlier).status_code == 200

        # The ETag wins when both are sent (RFC 9110 13.2.2), either way round.
        both = {"HTTP_IF_MODIFIED_SINCE": since}
        assert client.get(url, HTTP_IF_NONE_MATCH='"other"', **both).status_code == 200
        old = {"HTTP_IF_MODIFIED_SINCE": earlier}
        assert client.get(url, HTTP_IF_NONE_MATCH=first["ETag"], **old).status_code == 304

        # A change in the very second the time was sent: the client's copy is not the answer.
        _change(world)
        changed = client.get(url, HTTP_IF_MODIFIED_SINCE=since)
        assert changed.status_code == 200
        assert changed["ETag"] != first["ETag"]

        clock.shift(timedelta(seconds=1))
        later = client.get(url, HTTP_IF_MODIFIED_SINCE=since)
        assert later.status_code == 200
        assert later["Last-Modified"] == http_date(int(START.timestamp()) + 1)
        assert client.get(url, HTTP_IF_MODIFIED_SINCE=later["Last-Modified"]).status_code == 304


def test_it_leaves_pages_and_streamed_exports_without_one(
    client: Client, world: dict[str, Any]
) -> None:
    token = token_create(
        user=user_with_role(username="lm-auditor", role="auditor"), role="auditor"
    )[1]
    with time_machine.travel(START, tick=False) as clock:
        for _ in range(2):
            page = client.get("/recipes/")
            export = client.get(
                "/api/v1/export/evidence.ndjson", HTTP_AUTHORIZATION=f"Bearer {token}"
            )
            clock.shift(timedelta(seconds=2))
    assert page.status_code == 200
    assert not page.has_header("Last-Modified")
    assert export.status_code == 200
    assert not export.has_header("Last-Modified")


def test_invented_query_strings_stay_in_the_processs_bounded_memory(
    client: Client, world: dict[str, Any], settings: Any
) -> None:
    # Every query string is an answer of its own; anyone can invent them. They must cost a
    # culled entry of this process's cache (MAX_ENTRIES 40 here), never a key in the shared cache.
    settings.CACHES = {
        **settings.CACHES,
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "shared-stand-in",
        },
    }
    shared = caches["default"]
    shared.clear()
    for n in range(200):
        assert client.get(f"/api/v1/recipes/?junk={n}").status_code == 200
    times = caches["last-modified"]
    assert 0 < len(times._cache) <= 40  # type: ignore[attr-defined]
    assert not [key for key in shared._cache if "last-modified" in key]  # type: ignore[attr-defined]


def test_a_signed_in_user_and_an_anonymous_client_keep_separate_times(
    client: Client, world: dict[str, Any], django_user_model: Any
) -> None:
    url = "/api/v1/recipes/"
    signed_in = Client()
    with time_machine.travel(START, tick=False) as clock:
        # Signed in on the travelled clock: a session from today would have expired by then.
        signed_in.force_login(django_user_model.objects.create_user("lm-reader"))
        client.get(url)
        clock.shift(timedelta(seconds=5))
        signed_in.get(url)  # its first sight of this answer: no time yet, and none taken away
        clock.shift(timedelta(seconds=1))
        assert client.get(url)["Last-Modified"] == http_date(int(START.timestamp()))
        assert signed_in.get(url)["Last-Modified"] == http_date(int(START.timestamp()) + 5)
