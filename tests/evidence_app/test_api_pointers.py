"""``GET /api/v1/pointers/`` and the ``/evidence/pointers/`` page: the imported pointers, their
state and reason, filtered by state."""

from __future__ import annotations

import pytest
from django.test import Client

from evidence_app.models import EvidencePointer
from evidence_app.services import pointers
from tests.evidence_app.test_pointer_contract import V1

pytestmark = pytest.mark.django_db

FLAT = "recipes/evidence/h100-eks-ubuntu-inference-dynamo.yaml"


@pytest.fixture
def imported(evidence_db: None) -> None:
    pointers.pointer_import(path=V1)


def test_it_lists_pending_pointers_in_the_documented_shape(imported: None, client: Client) -> None:
    body = client.get("/api/v1/pointers/", {"state": "pending"}).json()

    pending = EvidencePointer.objects.filter(state="pending")
    assert body["count"] == pending.count() == 7
    assert {r["state"] for r in body["results"]} == {"pending"}
    row = EvidencePointer.objects.get(profile="gpuStack=bundle-installer", recipe__contains="slurm")
    [item] = [r for r in body["results"] if r["path"] == row.path]
    assert item == {
        "path": row.path,
        "recipe": "gb200-gke-cos-training-slurm-gpustack-bundle-installer",
        "profile": "gpuStack=bundle-installer",
        "signer": {"identity": row.signer_identity, "issuer": "https://github.com/login/oauth"},
        "class": "community",
        "predicate_type": "https://aicr.run/recipe-evidence/v2",
        "oci": row.oci,
        "state": "pending",
        "reason": "registry ghcr.io not allowed on this site",
        "last_tried": item["last_tried"],
    }
    assert item["last_tried"].startswith(row.last_tried.strftime("%Y-%m-%dT%H:%M"))


def test_it_filters_by_state_and_refuses_an_unknown_one(imported: None, client: Client) -> None:
    refused = client.get("/api/v1/pointers/", {"state": "refused"}).json()
    assert refused["count"] == 3
    assert all("not allowlisted" in r["reason"] for r in refused["results"])
    assert client.get("/api/v1/pointers/").json()["count"] == 10
    assert client.get("/api/v1/pointers/", {"state": "counted"}).status_code == 400


def test_the_page_lists_pointers_with_state_and_reason(imported: None, client: Client) -> None:
    html = client.get("/evidence/pointers/", {"state": "pending"}).content.decode()

    assert html.count("<tr data-pointer=") == 7
    assert f'data-pointer="{FLAT}"' in html
    assert "registry ghcr.io not allowed on this site" in html
    assert "not allowlisted as community or partner" not in html
    every = client.get("/evidence/pointers/").content.decode()
    assert every.count("<tr data-pointer=") == 10
    assert "not allowlisted as community or partner" in every


def test_the_evidence_list_links_to_the_pointers_page(evidence_db: None, client: Client) -> None:
    assert 'href="/evidence/pointers/"' in client.get("/evidence/").content.decode()
