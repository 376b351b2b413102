"""A finished run becomes signed AICR evidence through the verify-before-count ingest."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.cache import cache
from django.core.management import call_command
from django.test import Client

from evidence_app.attestation import redact_ctrf
from evidence_app.models import Evidence, SigningKey, UploadLog
from evidence_app.services.ingest import evidence_ingest
from evidence_app.services.keys import signing_key_revoke
from evidence_app.services.site_key import KEY_NAME, generate_pem
from evidence_app.verification.summary_bundle import read_archive
from recipes_app.models import Catalog, Recipe
from tests.consensus_reads import recipe_consensus_states
from tests.validators_app.evidence_support import (
    PHASES,
    finished_run,
)
from tests.validators_app.runs_support import RECIPE
from validators_app import orchestrator
from validators_app.models import Environment, RunStatus
from validators_app.orchestrator.ctrf import build_phase_report, to_bytes
from validators_app.services import runs
from validators_app.services.evidence import (
    PublishError,
    is_v1_catalog,
    publish_run,
    run_bundle,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def site_key(settings: Any) -> bytes:
    """A fresh site key per test, from the environment setting (never a file in the checkout)."""
    pem = generate_pem()
    cache.clear()  # consensus badges are cached per evidence generation, across tests
    settings.SITE_SIGNING_KEY = pem.decode()
    settings.SITE_SIGNING_LOCAL_KEY_FILE = None
    settings.VALIDATION_IMAGE_REGISTRY = ""
    settings.VALIDATION_IMAGE_TAG = ""
    return pem


@pytest.fixture
def recipe(real_catalog: Any) -> Recipe:
    return Recipe.objects.current().get(name=RECIPE, profile="")


def _members(evidence: Evidence) -> dict[str, bytes]:
    files = read_archive(bytes(evidence.content))
    return {path.removeprefix("summary-bundle/"): data for path, data in files.items()}


def _statement(files: dict[str, bytes]) -> dict[str, Any]:
    return json.loads(files["statement.intoto.json"])


def test_a_passed_run_becomes_verified_evidence_bound_to_the_recipe(recipe: Recipe) -> None:
    run = finished_run(recipe)

    evidence = publish_run(run)

    assert evidence is not None
    assert evidence.verdict == "verified"
    assert evidence.recipe_id == recipe.pk
    assert evidence.subject_digest == recipe.digest
    assert not evidence.is_simulated
    assert evidence.signer.signer_class == "registered-key"
    assert evidence.signer.key is not None
    assert evidence.signer.key.name == KEY_NAME
    assert [s["step"] for s in evidence.transcript if s["ok"]] == [
        "parse",
        "signature",
        "statement",
        "manifest",
        "bind",
        "classify",
    ]
    files = _members(evidence)
    predicate = _statement(files)["predicate"]
    assert predicate["recipe"] == {"digest": recipe.digest, "name": recipe.name}
    assert hashlib.sha256(files["recipe.yaml"]).hexdigest() == recipe.digest
    for phase, original in run.phase_report_bytes().items():
        # The bundle carries exactly the orchestrator's CTRF after AICR's redaction …
        assert files[f"ctrf/{phase}.json"] == redact_ctrf(original)
        digest = hashlib.sha256(files[f"ctrf/{phase}.json"]).hexdigest()
        assert predicate["phases"][phase]["ctrfDigest"] == f"sha256:{digest}"
        declared = len(recipe.checks.get(phase, []))
        assert predicate["phases"][phase] == {
            "ctrfDigest": f"sha256:{digest}",
            "failed": 0,
            "passed": declared,
            "skipped": 0,
        }
    assert UploadLog.objects.get(evidence=evidence).channel == "run"
    assert Evidence.objects.counted().filter(pk=evidence.pk).exists()
    assert RECIPE in recipe_consensus_states(catalog=recipe.catalog)


def test_the_redacted_ctrf_is_what_the_orchestrator_writes_without_logs(recipe: Recipe) -> None:
    """An independent oracle: the orchestrator's own CTRF of outcomes with nothing to redact."""
    run = finished_run(recipe, status=RunStatus.FAILED, failing="operator-health")
    files = _members(publish_run(run))  # type: ignore[arg-type]

    names = [str(c["name"]) for c in recipe.checks["deployment"]]
    clean = [
        orchestrator.CheckOutcome(
            phase="deployment",
            name=name,
            status="failed" if name == "operator-health" else "passed",
            exit_code=0,
            message="",
            duration_ms=1234,
            stdout=(),
            extra={"nodesValidated": "2"},
            job_name="",
        )
        for name in names
    ]
    start = 1_795_990_000_000
    expected = to_bytes(
        build_phase_report(
            version="v0.19.0", outcomes=clean, start_ms=start, stop_ms=start + 30_000
        )
    )
    assert files["ctrf/deployment.json"] == expected


def test_a_failed_run_is_published_with_its_failures(recipe: Recipe) -> None:
    run = finished_run(recipe, status=RunStatus.FAILED, failing="operator-health")

    evidence = publish_run(run)

    assert evidence is not None
    assert evidence.verdict == "verified"
    phases = evidence.predicate["phases"]
    assert phases["deployment"]["failed"] == 1
    assert evidence.check_results["deployment"]["operator-health"]["status"] == "failed"
    # The failure's message stays on the run (CheckRun), never in the published bundle.
    assert evidence.check_results["deployment"]["operator-health"]["message"] in ("", None)


def test_simulated_evidence_is_labelled_and_never_counts(recipe: Recipe, client: Client) -> None:
    run = finished_run(recipe, environment=Environment.SIMULATED)

    evidence = publish_run(run)

    assert evidence is not None
    assert evidence.is_simulated
    assert evidence.verdict == "verified"
    assert not Evidence.objects.counted().filter(pk=evidence.pk).exists()
    assert RECIPE not in recipe_consensus_states(catalog=recipe.catalog)
    page = client.get(f"/evidence/{evidence.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "SIMULATED" in html
    assert "Key-signed." in html
    assert "upstream evidence gate accepts keyless signatures only" in html


def test_hostile_logs_and_cluster_details_never_reach_the_bundle(
    recipe: Recipe, client: Client
) -> None:
    run = finished_run(recipe, status=RunStatus.FAILED, failing="operator-health")

    evidence = publish_run(run)

    assert evidence is not None
    raw = gzip.decompress(bytes(evidence.content))
    for secret in (b"s3cr3t", b"pwned", b"10-1-2-3", b"10.1.2.3", b"onerror", b"6.8.0-1015"):
        assert secret not in raw, secret
    files = _members(evidence)
    for phase in PHASES:
        for test in json.loads(files[f"ctrf/{phase}.json"])["results"]["tests"]:
            assert "stdout" not in test
            assert "message" not in test
            assert test["extra"] == {"nodesValidated": "2"}
    snapshot = yaml.safe_load(files["snapshot.yaml"])
    assert snapshot["metadata"] == {"timestamp": "2026-12-01T00:00:00Z", "version": "v0.19.0"}
    assert "helm" not in files["snapshot.yaml"].decode()
    page = client.get(f"/evidence/{evidence.pk}/")
    assert page.status_code == 200


def test_the_bundle_layout_matches_aicrs_example(recipe: Recipe) -> None:
    from tests.shared_data import EVIDENCE_EXAMPLE_BUNDLE

    files = _members(publish_run(finished_run(recipe)))  # type: ignore[arg-type]

    example = sorted(
        str(p.relative_to(EVIDENCE_EXAMPLE_BUNDLE))
        for p in EVIDENCE_EXAMPLE_BUNDLE.rglob("*")
        if p.is_file()
    )
    assert sorted(files) == sorted([*example, "attestation.intoto.jsonl"])
    statement = _statement(files)
    golden = json.loads((EVIDENCE_EXAMPLE_BUNDLE / "statement.intoto.json").read_bytes())
    assert list(statement) == list(golden)
    assert list(statement["predicate"]) == list(golden["predicate"])
    assert list(statement["predicate"]["fingerprint"]) == list(golden["predicate"]["fingerprint"])
    manifest = json.loads(files["manifest.json"])
    assert [f["path"] for f in manifest["files"]] == [
        f["path"]
        for f in json.loads((EVIDENCE_EXAMPLE_BUNDLE / "manifest.json").read_bytes())["files"]
    ]
    assert statement["predicate"]["fingerprint"]["k8sVersion"]["value"] == "1.33.5"
    assert statement["predicate"]["fingerprint"]["accelerator"]["value"] == "h100"
    assert statement["predicate"]["criteriaMatch"]["matched"] is True
    assert statement["predicate"]["validatorImages"] == [
        {"digest": "", "image": f"ghcr.io/nvidia/aicr-validators/{name}:v0.19.0"}
        for name in ("conformance", "deployment", "performance")
    ]
    bom = json.loads(files["bom.cdx.json"])
    component_names = {c["name"] for c in bom["components"] if c["type"] == "application"}
    assert {c["name"] for c in recipe.components} | {"validators"} == component_names


def _retar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(f"summary-bundle/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue())


def test_a_tampered_file_is_refused_at_manifest(recipe: Recipe) -> None:
    run = finished_run(recipe)
    files = _members(publish_run(run))  # type: ignore[arg-type]
    report = json.loads(files["ctrf/deployment.json"])
    report["results"]["tests"][0]["status"] = "failed"  # was passed: a run made to look worse
    files["ctrf/deployment.json"] = json.dumps(report).encode()

    result = evidence_ingest(
        data=_retar(files), artifact=None, filename="tampered.tar.gz", user=None, channel="api"
    )

    assert result.verdict == "invalid"
    assert result.failed_step == "manifest"
    assert "ctrf/deployment.json" in result.reason


def test_runs_that_did_not_finish_publish_nothing(recipe: Recipe) -> None:
    for i, status in enumerate((RunStatus.ERROR, RunStatus.CANCELLED)):
        run = finished_run(recipe, status=status, run_id=f"20261201-00000{i}-0123456789abcdef")
        assert publish_run(run) is None
    assert not Evidence.objects.exists()


def test_publishing_twice_finds_the_same_evidence(recipe: Recipe) -> None:
    run = finished_run(recipe)

    first = publish_run(run)
    again = publish_run(run)

    assert first is not None
    assert again is not None
    assert again.pk == first.pk
    assert Evidence.objects.count() == 1
    assert SigningKey.objects.count() == 1


def test_publishing_through_the_run_service_links_the_evidence(recipe: Recipe) -> None:
    run = finished_run(recipe)

    runs.run_publish(run=run)

    run.refresh_from_db()
    assert run.evidence is not None
    assert run.evidence.verdict == "verified"
    assert run.publish_error == ""


def test_no_or_a_bad_site_key_is_a_clear_error(recipe: Recipe, settings: Any) -> None:
    run = finished_run(recipe)

    settings.SITE_SIGNING_KEY = ""
    with pytest.raises(PublishError, match="no site signing key: set SITE_SIGNING_KEY"):
        publish_run(run)
    settings.SITE_SIGNING_KEY = "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----"
    with pytest.raises(PublishError, match="not an unencrypted PEM private key"):
        publish_run(run)
    assert not Evidence.objects.exists()


def test_a_revoked_site_key_stops_publishing(recipe: Recipe) -> None:
    first = publish_run(finished_run(recipe))
    assert first is not None
    signing_key_revoke(key=SigningKey.objects.get())

    with pytest.raises(PublishError, match="was revoked"):
        publish_run(finished_run(recipe, run_id="20261201-000001-0123456789abcdef"))
    assert SigningKey.objects.count() == 1
    assert Evidence.objects.count() == 1


def test_a_snapshot_bomb_is_refused_with_the_reason(recipe: Recipe) -> None:
    run = finished_run(recipe)
    run.snapshot_yaml = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"b{i}: &b{i} [" + ", ".join([f"*{'a' if i == 0 else f'b{i - 1}'}"] * 10) + "]\n"
        for i in range(8)
    )

    with pytest.raises(PublishError, match="unreadable snapshot"):
        run_bundle(run)


def test_a_corrupted_phase_report_is_refused_with_the_reason(recipe: Recipe) -> None:
    run = finished_run(recipe)
    run.phase_reports = {**run.phase_reports, "conformance": '{"results": "not a report"'}

    with pytest.raises(PublishError, match=r"ctrf/conformance.json: not a CTRF report"):
        publish_run(run)
    assert not Evidence.objects.exists()


def _v1_catalog(recipe: Recipe) -> Recipe:
    """``recipe`` with its catalog marked as the v1beta1/v1beta2 family. No v1.x recipe tree is
    available offline (AICR-V1.md §10); what is tested is the publishing rule, which reads the
    catalog's family, so the bundled tree's row stands in for one."""
    Catalog.objects.filter(pk=recipe.catalog_id).update(api_family="v1")
    return Recipe.objects.select_related("catalog").get(pk=recipe.pk)


def test_a_profiled_recipe_of_an_older_catalog_publishes_v2_with_its_profile(
    real_catalog: Any,
) -> None:
    profiled = Recipe.objects.current().exclude(profile="").first()
    assert profiled is not None

    evidence = publish_run(finished_run(profiled))

    assert evidence is not None
    assert (evidence.verdict, evidence.recipe_id) == ("verified", profiled.pk)
    assert evidence.predicate_type == "https://aicr.run/recipe-evidence/v2"
    assert evidence.subject_digest == profiled.digest
    profile = evidence.predicate["profile"]
    assert profile["selection"] == profiled.profile
    assert profile["policyDescriptorIdentity"].startswith("sha256:")
    assert "selectedProfile" in profiled.canonical_yaml


def test_a_recipe_of_a_v1_catalog_publishes_v3_bound_by_the_v3_digest(recipe: Recipe) -> None:
    recipe = _v1_catalog(recipe)

    evidence = publish_run(finished_run(recipe))

    assert evidence is not None
    assert evidence.verdict == "verified"
    assert evidence.predicate_type == "https://aicr.run/recipe-evidence/v3"
    assert evidence.subject_digest == recipe.digest_v3 != recipe.digest
    assert "profile" not in evidence.predicate
    statement = _statement(_members(evidence))
    assert statement["subject"][0]["digest"]["sha256"] == recipe.digest_v3
    bind = next(s["detail"] for s in evidence.transcript if s["step"] == "bind")
    assert "V3 digest (metadata.version excluded)" in bind


def test_a_profiled_recipe_of_a_v1_catalog_publishes_v3_with_its_profile(
    real_catalog: Any,
) -> None:
    profiled = _v1_catalog(Recipe.objects.current().exclude(profile="").first())  # type: ignore[arg-type]

    evidence = publish_run(finished_run(profiled))

    assert evidence is not None
    assert evidence.predicate_type == "https://aicr.run/recipe-evidence/v3"
    assert evidence.predicate["profile"]["selection"] == profiled.profile
    assert evidence.subject_digest == profiled.digest_v3


@pytest.mark.parametrize(
    ("family", "aicr_version", "v1"),
    [
        ("alpha", "dev", False),
        ("alpha", "v0.22.0", False),
        ("alpha", "v1.0.0", True),
        ("alpha", "1.2.3-rc.1", True),
        ("v1", "dev", True),
    ],
)
def test_a_v1_catalog_is_the_v1_family_or_a_release_from_v1(
    family: str, aicr_version: str, v1: bool
) -> None:
    assert is_v1_catalog(Catalog(api_family=family, aicr_version=aicr_version)) is v1


def test_ensure_site_key_creates_a_private_key_file_once(settings: Any, tmp_path: Path) -> None:
    settings.SITE_SIGNING_KEY = ""
    settings.SITE_SIGNING_LOCAL_KEY_FILE = tmp_path / ".local" / "site-signing-key.pem"
    out = io.StringIO()

    call_command("ensure_site_key", stdout=out)
    pem = settings.SITE_SIGNING_LOCAL_KEY_FILE.read_bytes()
    call_command("ensure_site_key", stdout=out)

    assert "Created" in out.getvalue()
    assert "Kept" in out.getvalue()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    assert settings.SITE_SIGNING_LOCAL_KEY_FILE.read_bytes() == pem
    assert stat.S_IMODE(os.stat(settings.SITE_SIGNING_LOCAL_KEY_FILE).st_mode) == 0o600


def test_development_generates_the_local_key_on_first_publish(
    recipe: Recipe, settings: Any, tmp_path: Path
) -> None:
    settings.SITE_SIGNING_KEY = ""
    settings.SITE_SIGNING_LOCAL_KEY_FILE = tmp_path / ".local" / "site-signing-key.pem"

    evidence = publish_run(finished_run(recipe))

    assert evidence is not None
    assert evidence.verdict == "verified"
    assert settings.SITE_SIGNING_LOCAL_KEY_FILE.exists()


def test_ensure_site_key_refuses_production_without_a_key(settings: Any) -> None:
    settings.SITE_SIGNING_KEY = ""
    settings.SITE_SIGNING_LOCAL_KEY_FILE = None
    printed = io.StringIO()

    with pytest.raises(SystemExit):
        call_command("ensure_site_key", stdout=io.StringIO(), stderr=io.StringIO())
    call_command("ensure_site_key", "--print", stdout=printed)

    assert printed.getvalue().startswith("-----BEGIN PRIVATE KEY-----")


def test_a_run_on_the_simulated_cluster_publishes_its_own_ctrf(
    real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """End to end: service → task (in-process) → orchestrator → simulator → publish → ingest."""
    from aicr_site.celery import app as celery_app
    from evidence_app.attestation import redact_snapshot
    from evidence_app.attestation.snapshot import parse_snapshot
    from recipes_app.resolver import marshal_deterministic
    from tests.k8s_sim import SCENARIOS, SimulatedCluster
    from validators_app.models import CheckRun
    from validators_app.services import clusters

    saved = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        with SimulatedCluster(SCENARIOS["gpu-operator-missing"]) as sim:
            cluster = clusters.cluster_register(
                name="sim-evidence", kubeconfig_text=sim.kubeconfig, environment="simulated"
            )
            with django_capture_on_commit_callbacks(execute=True):
                run = runs.run_start(cluster=cluster, recipe_name=RECIPE, phases=None)
    finally:
        celery_app.conf.task_always_eager = saved
    run.refresh_from_db()

    assert run.status == RunStatus.FAILED
    assert run.publish_error == ""
    evidence = run.evidence
    assert evidence is not None
    assert evidence.verdict == "verified"
    assert evidence.is_simulated
    files = _members(evidence)
    predicate = _statement(files)["predicate"]
    for phase, data in run.phase_report_bytes().items():
        assert files[f"ctrf/{phase}.json"] == redact_ctrf(data)
        failed = CheckRun.objects.filter(run=run, phase=phase, status="failed").count()
        assert predicate["phases"][phase]["failed"] == failed
    assert predicate["phases"]["deployment"]["failed"] >= 1
    snapshot = parse_snapshot(run.snapshot_yaml)
    assert files["snapshot.yaml"] == marshal_deterministic(redact_snapshot(snapshot)).encode()
    assert predicate["fingerprint"]["k8sVersion"]["value"]
    assert predicate["fingerprint"]["accelerator"]["value"] == "h100"
    assert predicate["fingerprint"]["service"]["value"] == "eks"
    assert predicate["criteriaMatch"]["matched"] is True


def test_a_run_with_aicrs_inputs_gives_aicrs_bundle_byte_for_byte(
    recipe: Recipe, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path publish_run takes (run row → bundle_input → builder), fed what AICR's example
    bundle was emitted from, writes that bundle's 8 files exactly."""
    from evidence_app.attestation import build_summary_bundle
    from evidence_app.corroborate.gojson import marshal_indent
    from tests.shared_data import EVIDENCE_EXAMPLE_BUNDLE, SNAPSHOT_EXAMPLE
    from validators_app.services import evidence as run_evidence

    golden = {
        str(p.relative_to(EVIDENCE_EXAMPLE_BUNDLE)): p.read_bytes()
        for p in EVIDENCE_EXAMPLE_BUNDLE.rglob("*")
        if p.is_file()
    }
    reports = {}
    for phase in PHASES:
        doc = json.loads(golden[f"ctrf/{phase}.json"])
        for test in doc["results"]["tests"]:
            test["message"] = "skipped - no-cluster mode"  # what AICR's redaction removed
        reports[phase] = marshal_indent(doc).decode()
    run = finished_run(recipe)
    run.aicr_version = "v0.19.0-example"
    run.snapshot_yaml = SNAPSHOT_EXAMPLE.read_text()
    run.phase_reports = reports
    run.finished_at = datetime(2026, 11, 29, 22, 13, 13, tzinfo=UTC)
    serial = json.loads(golden["bom.cdx.json"])["serialNumber"]
    monkeypatch.setattr(run_evidence, "_bom_serial", lambda run: serial)  # AICR's was random

    bundle = build_summary_bundle(run_evidence.bundle_input(run))

    assert sorted(bundle.files) == sorted(golden)
    for name, data in golden.items():
        assert bundle.files[name] == data, name


def test_the_largest_logs_aicr_keeps_never_reach_the_bundle(recipe: Recipe) -> None:
    """Every check at AICR's log bound (1000 lines of 512 bytes): megabytes on the run, a small
    bundle well under the ingest's upload limit."""
    from evidence_app.services.ingest import max_upload_bytes

    line = "x" * 500 + " <b>&amp;</b>"
    reports = {}
    for phase in PHASES:
        outcomes = [
            orchestrator.CheckOutcome(
                phase=phase,
                name=str(check["name"]),
                status="passed",
                exit_code=0,
                message="",
                duration_ms=1,
                stdout=(line,) * 1000,
                extra={},
                job_name="",
            )
            for check in recipe.checks.get(phase, [])
        ]
        report = build_phase_report(version="v0.19.0", outcomes=outcomes, start_ms=0, stop_ms=1)
        reports[phase] = to_bytes(report).decode()
    run = finished_run(recipe)
    run.phase_reports = reports

    evidence = publish_run(run)

    assert sum(len(r) for r in reports.values()) > 5_000_000
    assert evidence is not None
    assert evidence.verdict == "verified"
    assert len(evidence.content) < max_upload_bytes() // 100
    assert b"xxxxxxxx" not in gzip.decompress(bytes(evidence.content))


def test_publish_runs_publishes_what_failed_before_once_a_key_exists(
    recipe: Recipe, settings: Any
) -> None:
    run = finished_run(recipe)
    settings.SITE_SIGNING_KEY = ""
    runs.run_publish(run=run)
    run.refresh_from_db()
    assert run.evidence is None
    assert "no site signing key" in run.publish_error

    settings.SITE_SIGNING_KEY = generate_pem().decode()
    out = io.StringIO()
    call_command("publish_runs", stdout=out)
    call_command("publish_runs", stdout=out)  # nothing left to do

    run.refresh_from_db()
    assert run.evidence is not None
    assert run.evidence.verdict == "verified"
    assert run.publish_error == ""
    assert "1 published, 0 failed." in out.getvalue()
    assert "0 published, 0 failed." in out.getvalue()
