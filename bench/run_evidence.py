"""Run → evidence: what publishing a finished validation run costs, stage by stage.

On a scratch PostgreSQL database with the bundled catalog: N finished runs of
``h100-eks-ubuntu-training-kubeflow`` (15 declared checks over three phases, CTRF from the
orchestrator's own report builder with 40 log lines per check, a realistic snapshot) on a real
cluster row, each published once with the site key (``publish_run``: build + sign + ingest +
store). Each run is also measured through the stages alone, interleaved run by run:

* ``build``    ``bundle_input`` + ``build_summary_bundle`` (snapshot parse and redaction,
               CTRF redaction, BOM, manifest, statement);
* ``sign``     the RFC 6979 key signature and the tar.gz;
* ``publish``  ``publish_run`` end to end, including ``evidence_ingest`` (verify-before-count:
               parse, signature, statement, manifest, bind, classify, one transaction).

Then the same runs published keyless (``--keyless-n``, default 20): sigstore-python against the
loopback Fulcio and Rekor stand-ins of ``tests/sigstore_servers.py`` (HTTP on 127.0.0.1, a
private test CA registered as a trusted root): certificate request, DSSE signature, log entry,
then the keyless verification in the ingest.

Then ``--push-n`` (default 20) of the key-signed runs pushed to a real registry (Debian's
``docker-registry`` on a loopback port, ``tests/oci_registry.py``) with ``push_run_evidence``:
the artifact's blobs and manifest, the statement naming the artifact signed, the referrer and
its referrers-tag index, then the read-back pull and verification.

Needs PostgreSQL (``BENCH_DATABASE_URL``, default a scratch database ``aicr_bench_run_evidence``
on 127.0.0.1:5432, created and dropped here). Prints figures; asserts nothing.
Run: ``.venv/bin/python bench/run_evidence.py [--n 50] [--keyless-n 20] [--push-n 20]``.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BENCH_DB = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aicr_bench_run_evidence"
)
os.environ.update(
    DJANGO_SETTINGS_MODULE="aicr_site.settings",
    DATABASE_URL=BENCH_DB,
    DEBUG="0",
    SECRET_KEY="bench-only-" + "k" * 50,
    ALLOWED_HOSTS="testserver",
    SECURE_SSL_REDIRECT="0",
    LOG_LEVEL="WARNING",
)
os.environ.pop("REDIS_URL", None)
RECIPE = "h100-eks-ubuntu-training-kubeflow"


def ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return f"median {statistics.median(values) * 1000:7.1f} ms, p95 {p95 * 1000:7.1f} ms"


def bench(n: int, keyless_n: int, push_n: int) -> None:
    import yaml
    from django.conf import settings

    from evidence_app.attestation import build_summary_bundle, sign_statement, summary_tarball
    from evidence_app.services.site_key import generate_pem, site_private_key
    from recipes_app.models import Recipe
    from validators_app import orchestrator
    from validators_app.models import Cluster, RunStatus, ValidationRun
    from validators_app.orchestrator.ctrf import build_phase_report, to_bytes
    from validators_app.services.evidence import bundle_input, publish_run

    settings.SITE_SIGNING_KEY = generate_pem().decode()
    key = site_private_key()
    recipe = Recipe.objects.current().get(name=RECIPE, profile="")
    cluster = Cluster.objects.create(
        name="bench",
        environment="real",
        server="https://gpu.example:6443",
        kubeconfig_encrypted="x",
    )
    log = tuple(f"time=2026-12-01T00:00:{i:02d}Z level=INFO msg=line{i} n={i}" for i in range(40))
    reports = {}
    for phase in ("deployment", "conformance", "performance"):
        outcomes = [
            orchestrator.CheckOutcome(
                phase=phase,
                name=str(check["name"]),
                status="passed",
                exit_code=0,
                message="",
                duration_ms=1500,
                stdout=log,
                extra={"nodesValidated": "2", "nodesTotal": "2"},
                job_name="",
            )
            for check in recipe.checks.get(phase, [])
        ]
        report = build_phase_report(
            version="v0.19.0",
            outcomes=outcomes,
            start_ms=1_795_990_000_000,
            stop_ms=1_795_990_060_000,
        )
        reports[phase] = to_bytes(report).decode()
    snapshot = yaml.safe_dump(
        {
            "apiVersion": "aicr.run/v1alpha2",
            "kind": "Snapshot",
            "metadata": {"timestamp": "2026-12-01T00:00:00Z", "version": "v0.19.0"},
            "measurements": [
                {
                    "type": "K8s",
                    "subtypes": [{"subtype": "server", "data": {"version": "v1.33.5"}}],
                },
                {"type": "OS", "subtypes": [{"subtype": "release", "data": {"ID": "ubuntu"}}]},
                {
                    "type": "GPU",
                    "subtypes": [
                        {"subtype": "hardware", "data": {"model": "NVIDIA H100 80GB HBM3"}}
                    ],
                },
            ],
        }
    )
    checks = sum(len(v) for v in recipe.checks.values())
    build, sign, publish, sizes = [], [], [], []
    for i in range(n):
        run = ValidationRun.objects.create(
            cluster=cluster,
            recipe=recipe,
            phases=["deployment", "conformance", "performance"],
            status=RunStatus.PASSED,
            aicr_run_id=f"20261201-000000-{i:016x}",
            aicr_version="v0.19.0",
            snapshot_yaml=snapshot,
            phase_reports=reports,
        )
        t0 = time.perf_counter()
        bundle = build_summary_bundle(bundle_input(run))
        t1 = time.perf_counter()
        data = summary_tarball(bundle.files, sign_statement(bundle.statement, key))
        t2 = time.perf_counter()
        evidence = publish_run(run)
        t3 = time.perf_counter()
        if evidence is None or evidence.verdict != "verified":
            raise SystemExit(f"run {i} was not published as verified evidence")
        run.evidence = evidence  # as run_publish links it (the push below needs it)
        run.save(update_fields=["evidence"])
        build.append(t1 - t0)
        sign.append(t2 - t1)
        publish.append(t3 - t2)
        sizes.append(len(data))
    print(
        f"run evidence: {n} runs of {RECIPE} ({checks} checks, 40 log lines each), "
        f"bundle {statistics.median(sizes) / 1024:.0f} KiB tar.gz"
    )
    print(f"  build    {ms(build)}")
    print(f"  sign     {ms(sign)}")
    print(f"  publish  {ms(publish)}   (build + sign + ingest + store)")
    if push_n:
        bench_push(push_n)
    if keyless_n:
        bench_keyless(keyless_n, recipe, cluster, snapshot, reports)


def bench_push(n: int) -> None:
    import tempfile

    from django.conf import settings

    from evidence_app.attestation import build_summary_bundle
    from evidence_app.services.oci_push import directory_layer
    from tests.oci_registry import running_registry
    from validators_app.models import ValidationRun
    from validators_app.services.evidence import bundle_input
    from validators_app.services.publication import push_run_evidence

    runs = list(ValidationRun.objects.filter(evidence__isnull=False).order_by("pk")[:n])
    times, layers = [], []
    with tempfile.TemporaryDirectory() as root, running_registry(Path(root)) as registry:
        settings.RUN_EVIDENCE_OCI_REPOSITORY = f"{registry}/aicr-bench"
        settings.EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP = True
        for run in runs:
            layers.append(len(directory_layer(build_summary_bundle(bundle_input(run)).files)))
            t0 = time.perf_counter()
            publication = push_run_evidence(run)
            times.append(time.perf_counter() - t0)
            if publication is None or publication.state != "pushed":
                reason = publication.reason if publication else "nothing pushed"
                raise SystemExit(f"run {run.pk} was not pushed: {reason}")
    print(
        f"  push     {ms(times)}   ({len(runs)} runs, key-signed, layer "
        f"{statistics.median(layers) / 1024:.0f} KiB: blobs + manifest + sign + referrer + "
        "read-back verify, docker-registry on loopback)"
    )


def bench_keyless(n: int, recipe: object, cluster: object, snapshot: str, reports: dict) -> None:
    from django.conf import settings

    from evidence_app.services import trust_roots
    from tests.sigstore_private import PrivateSigstore
    from tests.sigstore_servers import OIDC_ISSUER, loopback_sigstore
    from validators_app.models import RunStatus, ValidationRun
    from validators_app.services.evidence import publish_run

    instance = PrivateSigstore(name="aicr-bench-runs.test")
    trust_roots.trust_root_add(
        name="bench private instance",
        trusted_root_json=instance.trusted_root_json(),
        accepted_issuers=OIDC_ISSUER,
    )
    times = []
    with loopback_sigstore(instance) as running:
        settings.SITE_SIGSTORE_TRUST_CONFIG = running.client_trust_config()
        settings.SITE_SIGSTORE_IDENTITY_TOKEN = running.oidc.token()
        for i in range(n):
            run = ValidationRun.objects.create(
                cluster=cluster,
                recipe=recipe,
                phases=["deployment", "conformance", "performance"],
                status=RunStatus.PASSED,
                aicr_run_id=f"20261201-000001-{i:016x}",
                aicr_version="v0.19.0",
                snapshot_yaml=snapshot,
                phase_reports=reports,
            )
            t0 = time.perf_counter()
            evidence = publish_run(run)
            times.append(time.perf_counter() - t0)
            if evidence is None or evidence.verdict != "verified":
                raise SystemExit(f"keyless run {i} was not published as verified evidence")
    print(f"  keyless  {ms(times)}   ({n} runs: Fulcio + Rekor stand-ins on loopback + ingest)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=50, help="runs to publish (default 50)")
    parser.add_argument("--keyless-n", type=int, default=20, help="keyless runs (default 20)")
    parser.add_argument("--push-n", type=int, default=20, help="runs pushed (default 20)")
    args = parser.parse_args()

    import psycopg

    base_url, _, db_name = BENCH_DB.rpartition("/")
    with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db_name}"')
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        call_command("import_catalog", verbosity=0, stdout=io.StringIO())
        print(
            f"python {platform.python_version()} on {platform.machine()}, "
            f"{os.cpu_count()} CPUs, PostgreSQL on loopback, DEBUG=0, one thread\n"
        )
        bench(args.n, args.keyless_n, args.push_n)
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
