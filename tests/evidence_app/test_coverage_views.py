"""``/check/`` (plain form and htmx, CSRF, size cap, never stored) and the recipe page's note
when a recipe never ran on real hardware."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from evidence_app.coverage import service
from evidence_app.models import Evidence
from recipes_app.models import Recipe
from tests.evidence_app.coverage_data import as_yaml, full_snapshot, publish
from tests.evidence_app.test_coverage_snapshot_input import BILLION_LAUGHS

pytestmark = pytest.mark.usefixtures("evidence_db")
URL = "/check/"
STATED = {"intent": "training", "platform": "kubeflow"}


@pytest.fixture(autouse=True)
def _fresh_identity_cache() -> None:
    cache.clear()
    service._LOCAL.clear()


def _csrf_client() -> tuple[Client, str]:
    client = Client(enforce_csrf_checks=True)
    response = client.get(URL)
    assert response.status_code == 200
    return client, response.cookies["csrftoken"].value


def test_it_shows_the_form_and_is_never_cached() -> None:
    response = Client().get(URL)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    assert b"Does the evidence cover my cluster?" in response.content


def test_it_answers_a_pasted_snapshot(example_recipe: Recipe) -> None:
    publish(example_recipe, full_snapshot(kernel="6.8.0-1030-aws"))
    client, token = _csrf_client()
    response = client.post(
        URL, {"snapshot_text": as_yaml(full_snapshot()), "csrfmiddlewaretoken": token, **STATED}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "Validated on a different tuple (kernel differs)." in html
    assert "kernel 6.8.0-1030-aws (yours 6.8.0-1015-aws)" in html
    assert 'data-constraint-ok="true"' in html
    assert "no-store" in response["Cache-Control"]


def test_it_answers_an_uploaded_file_in_an_htmx_partial(example_recipe: Recipe) -> None:
    publish(example_recipe, full_snapshot())
    client, token = _csrf_client()
    upload = SimpleUploadedFile("snapshot.yaml", as_yaml(full_snapshot()).encode())
    response = client.post(
        URL,
        {"snapshot_file": upload, **STATED},
        headers={"HX-Request": "true", "HX-Target": "result", "X-CSRFToken": token},
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="result"')
    assert "Validated on this exact tuple by 1 signer." in html


def test_it_refuses_a_post_without_the_csrf_token() -> None:
    client, _token = _csrf_client()
    response = client.post(URL, {"snapshot_text": as_yaml(full_snapshot())})
    assert response.status_code == 403


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "Paste a snapshot or upload its file."),
        ({"snapshot_text": BILLION_LAUGHS}, "unreadable snapshot"),
        ({"snapshot_text": "measurements: [{type: Nope, subtypes: []}]"}, "is not an AICR"),
        ({"snapshot_text": "kind: Snapshot\nmeasurements:\n  - type: OS\n"}, "subtypes is missing"),
        ({"snapshot_text": "measurements: []"}, "no measurements"),
    ],
)
def test_it_shows_a_clear_error_for_bad_input(data: dict[str, str], message: str) -> None:
    client, token = _csrf_client()
    response = client.post(URL, {**data, "csrfmiddlewaretoken": token})
    assert response.status_code == 400
    assert message in response.content.decode().replace("&#x27;", "'")


def test_it_refuses_both_a_paste_and_a_file() -> None:
    client, token = _csrf_client()
    upload = SimpleUploadedFile("s.yaml", b"measurements: []")
    response = client.post(
        URL, {"snapshot_text": "x", "snapshot_file": upload, "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 400
    assert b"not both" in response.content


def test_it_refuses_an_oversized_body_before_reading_it() -> None:
    client, token = _csrf_client()
    response = client.post(
        URL, {"snapshot_text": "x" * (3 * 1024 * 1024), "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 413
    assert b"a snapshot may be at most 2,097,152" in response.content


def test_it_stores_nothing(example_recipe: Recipe) -> None:
    client, token = _csrf_client()
    before = Evidence.objects.count()
    client.post(URL, {"snapshot_text": as_yaml(full_snapshot()), "csrfmiddlewaretoken": token})
    assert Evidence.objects.count() == before


# --- the recipe page's qualifications section (its table: test_qualifications.py)


def test_the_recipe_page_says_when_a_recipe_never_ran_on_real_hardware(
    example_recipe: Recipe,
) -> None:
    evidence = publish(example_recipe, full_snapshot())
    Evidence.objects.filter(pk=evidence.pk).update(is_simulated=True)
    response = Client().get(f"/recipes/{example_recipe.name}/")
    html = response.content.decode()
    assert 'data-qualifications="never-on-hardware"' in html
    assert "1 simulated run" in html
