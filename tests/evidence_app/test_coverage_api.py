"""``POST /api/v1/check/`` and ``manage.py check_snapshot``: the answer for automation, a 400
naming the problem for bad input, never a 500."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client

from evidence_app.coverage import service
from recipes_app.models import Recipe
from tests.evidence_app.coverage_data import as_yaml, full_snapshot, publish
from tests.evidence_app.test_coverage_snapshot_input import BILLION_LAUGHS
from tests.shared_data import SNAPSHOT_EXAMPLE

pytestmark = pytest.mark.usefixtures("evidence_db")
URL = "/api/v1/check/"
STATED = {"intent": "training", "platform": "kubeflow"}


@pytest.fixture(autouse=True)
def _fresh_identity_cache() -> None:
    cache.clear()
    service._LOCAL.clear()


def _json(client: Client, body: object) -> tuple[int, dict]:
    response = client.post(URL, data=json.dumps(body), content_type="application/json")
    return response.status_code, response.json()


def test_it_answers_a_json_post_with_the_documented_shape(example_recipe: Recipe) -> None:
    evidence = publish(example_recipe, full_snapshot(driver="570.86.15"))
    status, body = _json(Client(), {"snapshot": as_yaml(full_snapshot()), **STATED})
    assert status == 200
    assert body["recipe"] == example_recipe.name
    assert body["criteria"]["service"] == "eks"
    assert {"name", "expected", "actual", "ok"} <= set(body["constraints"][0])
    assert body["evidence"][0]["id"] == evidence.pk
    assert body["evidence"][0]["differs"] == ["driver"]
    assert "kernel" in body["evidence"][0]["matches"]
    assert body["verdict"] == "validated on a different tuple (GPU driver differs)"
    assert body["covered"] is False


def test_it_answers_a_multipart_file(example_recipe: Recipe) -> None:
    publish(example_recipe, full_snapshot())
    upload = SimpleUploadedFile("snapshot.yaml", as_yaml(full_snapshot()).encode())
    response = Client().post(URL, data={"snapshot": upload, **STATED})
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    assert response.json()["verdict"] == "validated on this exact tuple by 1 signer"
    assert response.json()["covered"] is True


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({}, "snapshot: This field is required."),
        ({"snapshot": ""}, "snapshot: This field may not be blank."),
        ({"snapshot": 7}, "the document is not a mapping"),
        ({"snapshot": BILLION_LAUGHS}, "unreadable snapshot"),
        ({"snapshot": "measurements: [{type: Bogus, subtypes: []}]"}, "'Bogus' is not an AICR"),
        ({"snapshot": "{}"}, "the snapshot has no measurements"),
        ({"snapshot": "x", "os": "windows"}, "the document is not a mapping"),
        ({"snapshot": as_yaml(full_snapshot()), "os": "windows"}, "windows"),
        ({"snapshot": as_yaml(full_snapshot()), "service": "x" * 101}, "service:"),
        ([1, 2], "Invalid data"),
    ],
)
def test_it_answers_400_naming_the_problem(body: object, detail: str) -> None:
    status, answer = _json(Client(), body)
    assert status == 400
    assert detail in answer["detail"]


def test_it_answers_400_for_broken_json_and_binary_files() -> None:
    response = Client().post(URL, data="{not json", content_type="application/json")
    assert response.status_code == 400
    binary = SimpleUploadedFile("snapshot.yaml", b"\x00\x01\x02binary")
    response = Client().post(URL, data={"snapshot": binary})
    assert response.status_code == 400
    assert "binary, not YAML text" in response.json()["detail"]


def test_it_refuses_an_oversized_body_with_413() -> None:
    big = "measurements: []\n#" + "x" * (3 * 1024 * 1024)
    status, answer = _json(Client(), {"snapshot": big})
    assert status == 413
    assert "at most 2097152" in answer["detail"]


def test_it_stores_nothing(example_recipe: Recipe) -> None:
    from evidence_app.models import Evidence, UploadLog

    before = (Evidence.objects.count(), UploadLog.objects.count())
    _json(Client(), {"snapshot": as_yaml(full_snapshot()), **STATED})
    assert (Evidence.objects.count(), UploadLog.objects.count()) == before


def _command(*args: str) -> tuple[int, str]:
    from io import StringIO

    out, err = StringIO(), StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("check_snapshot", *args, stdout=out, stderr=err)
    return int(exit_.value.code or 0), out.getvalue() + err.getvalue()


def test_the_command_exits_0_only_when_covered(example_recipe: Recipe, tmp_path: Path) -> None:
    path = tmp_path / "snapshot.yaml"
    path.write_text(as_yaml(full_snapshot()))
    code, out = _command(str(path), "--intent", "training", "--platform", "kubeflow")
    assert code == 1
    assert "verdict: not validated: no counted evidence" in out
    publish(example_recipe, full_snapshot())
    code, out = _command(str(path), "--intent", "training", "--platform", "kubeflow")
    assert code == 0
    assert "verdict: validated on this exact tuple by 1 signer" in out
    code, out = _command(str(path), "--intent", "training", "--platform", "kubeflow", "--json")
    assert code == 0
    assert json.loads(out)["covered"] is True


def test_the_command_exits_0_when_every_recorded_identity_matches_and_counts_the_redacted(
    example_recipe: Recipe, tmp_path: Path
) -> None:
    path = tmp_path / "snapshot.yaml"
    path.write_text(as_yaml(full_snapshot()))
    publish(example_recipe, full_snapshot(), redact=True)  # AICR's default: minimal policy
    code, out = _command(str(path), "--intent", "training", "--platform", "kubeflow")
    assert code == 0, out
    assert (
        "redacted by AICR's policy (4): GPU driver, GPU Operator, DRA driver, instance type" in out
    )
    assert "to settle: GPU driver, GPU Operator, DRA driver, instance type: redacted" in out
    assert "4 redacted by AICR's policy" in out
    code, out = _command(str(path), "--intent", "training", "--platform", "kubeflow", "--json")
    answer = json.loads(out)
    assert answer["evidence"][0]["redacted"] == [
        "driver",
        "gpu_operator",
        "dra_driver",
        "instance_type",
    ]
    assert answer["evidence"][0]["notRecorded"] == []
    # A recorded identity that differs is still a difference: exit 1.
    path.write_text(as_yaml(full_snapshot(kernel="6.8.0-1030-aws")))
    code, out = _command(str(path), "--intent", "training", "--platform", "kubeflow")
    assert code == 1
    assert "differs: kernel" in out


def test_the_command_exits_2_for_invalid_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(BILLION_LAUGHS.encode())
    code, out = _command(str(bad))
    assert code == 2
    assert "invalid: unreadable snapshot" in out
    code, out = _command(str(tmp_path / "missing.yaml"))
    assert code == 2
    assert "cannot read" in out
    code, out = _command(str(SNAPSHOT_EXAMPLE), "--os", "windows")
    assert code == 2
    assert "windows" in out
