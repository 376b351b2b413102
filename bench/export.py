"""`bench/export.py`: the auditor export figures docs/benchmarks.md reports.

1. Audit package of ``--package`` records (default 10,000): real key-signed DSSE bundles (three
   registered ECDSA P-256 keys, distinct statements for the current catalog's recipes) stored
   through ``evidence_ingest``, then ``GET /api/v1/export/audit.tar.gz`` (time, size) and
   ``verify_audit`` of that file (time; it re-verifies every signature).
2. ``GET /api/v1/export/evidence.ndjson`` of ``--records`` rows (default 100,000: the rows of
   part 1 plus placeholder-byte rows as bench/evidence.py writes them), in a fresh child process
   so its memory is the web process's alone: records/s, and peak RSS against the RSS after a
   warm-up request. Beside it, in the same child, ``COPY (SELECT …) TO STDOUT`` of the same rows
   and columns (the evidence, signer, key and recipe columns the export reads): the physical
   limit of getting them out of PostgreSQL.

3. The same two built by the worker's task body (``exports.jobs.export_job_build``, in process:
   what an ``export_build`` task does on a worker) into ``ExportChunk`` rows: the audit package
   of part 1's records (its file re-verified with ``verify_audit``) and, in part 2's child, the
   NDJSON of every row, with its own peak RSS (``clear_refs`` resets the high-water mark).

Needs PostgreSQL (``BENCH_DATABASE_URL``, default a scratch database ``aicr_bench_export`` on
127.0.0.1:5432, created and dropped here). Prints figures; asserts nothing.
Run: ``.venv/bin/python bench/export.py [--records 100000] [--package 10000]``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BENCH_DB = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aicr_bench_export"
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

COPY_SQL = """
COPY (
  SELECT e.id, e.sha256, e.size, e.container, e.media_type, e.recipe_name, e.subject_digest,
         e.predicate_type, r.catalog_id, e.aicr_version, e.validator_catalog_version,
         e.k8s_version, e.attested_at, e.predicate, e.rekor_log_index, e.integrated_time,
         e.trusted_root_name, e.verdict, e.is_demo, e.is_simulated, e.uploaded_at,
         e.withdrawn_at, e.withdrawal_reason, e.artifact IS NOT NULL,
         s.slug, s.kind, s.identity, s.issuer, s.signer_class, s.counted, s.label, k.fingerprint
  FROM evidence_app_evidence e
  JOIN evidence_app_signer s ON s.id = e.signer_id
  LEFT JOIN evidence_app_signingkey k ON k.id = s.key_id
  JOIN recipes_app_recipe r ON r.id = e.recipe_id
  ORDER BY e.id
) TO STDOUT
"""


def rss_kib(field: str = "VmRSS") -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def setup() -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("import_catalog", verbosity=0, stdout=io.StringIO())


def token(role: str) -> str:
    from evidence_app.services.tokens import token_create, user_with_role

    return token_create(user=user_with_role(username=f"bench-{role}", role=role), role=role)[1]


def make_signed(count: int) -> float:
    """``count`` real key-signed bundles through the ingest; returns the seconds it took."""
    from evidence_app.services import demo
    from evidence_app.services.ingest import evidence_ingest
    from recipes_app.models import Catalog, Recipe
    from tests.evidence_factories import statement_for

    labs = demo.LABS[:3]
    for lab in labs:
        demo.demo_key_ensure(lab)
    keys = [demo.demo_private_key(lab) for lab in labs]
    recipes = list(Recipe.objects.filter(catalog=Catalog.objects.current()).order_by("name"))
    base = datetime.now(UTC) - timedelta(days=1)
    started = time.perf_counter()
    for i in range(count):
        recipe = recipes[i % len(recipes)]
        statement = statement_for(recipe, attested_at=base - timedelta(seconds=i))
        data = json.dumps(statement, sort_keys=True).encode()
        result = evidence_ingest(
            data=demo.sign_statement(data, keys[i % len(keys)]),
            artifact=None,
            filename="bench.sigstore.json",
            user=None,
            channel="api",
        )
        if result.verdict != "verified":
            raise RuntimeError(f"bench bundle {i} not verified: {result.reason}")
    return time.perf_counter() - started


def fill_placeholders(total: int) -> float:
    import random

    from django.db import connection

    from bench.evidence import EvidenceMaker
    from evidence_app.models import Evidence
    from recipes_app.models import Catalog, Recipe

    recipes = list(Recipe.objects.filter(catalog=Catalog.objects.current()).order_by("name"))
    maker = EvidenceMaker()
    maker.serial = 10**7
    signers = maker.signers(500, prefix="lab", counted_every=3)
    rng = random.Random(3)
    started = time.perf_counter()
    made, i, batch = Evidence.objects.count(), 0, []
    while made < total:
        recipe = recipes[i % len(recipes)]
        signer = signers[(i // len(recipes)) % len(signers)]
        batch.append(maker.evidence(recipe, signer, i // (len(recipes) * len(signers)), rng))
        i += 1
        made += 1
        if len(batch) == 2000:
            Evidence.objects.bulk_create(batch)
            batch = []
    if batch:
        Evidence.objects.bulk_create(batch)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return time.perf_counter() - started


def build_job(format: str) -> tuple[float, int, int, bytes | None]:
    """An export job of every record built as a worker builds it: (seconds, records, bytes,
    the file when ``keep`` formats want it back)."""
    from django.contrib.auth.models import User

    from evidence_app.exports.jobs import export_job_body, export_job_build
    from evidence_app.models import ExportJob

    job = ExportJob.objects.create(
        format=format,
        site="http://testserver/",
        requested_by=User.objects.get(username="bench-auditor"),
    )
    started = time.perf_counter()
    state = export_job_build(job.pk)
    seconds = time.perf_counter() - started
    job.refresh_from_db()
    assert state == "done", (state, job.error)
    body = b"".join(export_job_body(job)) if format == "audit" else None
    return seconds, job.done, job.size, body


def bench_package(auditor: str, count: int) -> None:
    from django.test import Client

    from evidence_app.exports.audit import audit_verify
    from evidence_app.exports.signing import site_private_key

    ingest_s = make_signed(count)
    print(f"  stored {count} signed bundles through evidence_ingest in {ingest_s:.1f} s")
    client = Client()
    out = Path(tempfile.mkdtemp()) / "audit.tar.gz"
    started = time.perf_counter()
    response = client.get("/api/v1/export/audit.tar.gz", HTTP_AUTHORIZATION=f"Bearer {auditor}")
    assert response.status_code == 200, response.content[:300]
    with out.open("wb") as handle:
        for chunk in response.streaming_content:
            handle.write(chunk)
    package_s = time.perf_counter() - started
    size = out.stat().st_size
    started = time.perf_counter()
    report = audit_verify(out, pinned_key=site_private_key().public_key())
    verify_s = time.perf_counter() - started
    print(
        f"  audit package of {count} records: {package_s:.1f} s "
        f"({count / package_s:,.0f} records/s), {size / 2**20:.1f} MiB "
        f"({size / count:,.0f} B/record), {report.files} files"
    )
    print(
        f"  verify_audit: {verify_s:.1f} s ({count / verify_s:,.0f} records/s), ok={report.ok}, "
        f"{report.bundles_verified} signatures verified, {report.consensus_recipes} consensus "
        f"recipes; problems: {[p.code for p in report.problems][:5]}"
    )
    job_s, records, size, body = build_job("audit")
    assert body is not None
    out.write_bytes(body)
    report = audit_verify(out, pinned_key=site_private_key().public_key())
    print(
        f"  the same package as a worker's export job: {job_s:.1f} s "
        f"({records / job_s:,.0f} records/s), {size / 2**20:.1f} MiB in the database; "
        f"verify_audit ok={report.ok}, {report.bundles_verified} signatures verified"
    )


def child_export(auditor: str) -> None:
    """In a fresh process: the NDJSON export's rate and memory, then COPY of the same rows."""
    import django

    django.setup()
    from django.db import connection
    from django.test import Client

    client = Client()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {auditor}"}
    warm = client.get("/api/v1/export/evidence.ndjson", {"recipe": "no-such-recipe"}, **auth)
    b"".join(warm.streaming_content)
    idle = rss_kib()
    started = time.perf_counter()
    profiler = cProfile.Profile() if os.environ.get("BENCH_PROFILE") else None
    if profiler is not None:
        profiler.enable()
    response = client.get("/api/v1/export/evidence.ndjson", **auth)
    lines = size = 0
    for chunk in response.streaming_content:
        lines += chunk.count(b"\n")
        size += len(chunk)
    export_s = time.perf_counter() - started
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(35)
    peak = rss_kib("VmHWM")

    Path("/proc/self/clear_refs").write_text("5")  # the peak RSS from here on
    before_job = rss_kib()
    job_s, job_records, job_bytes, _ = build_job("ndjson")
    job_peak = rss_kib("VmHWM")

    connection.ensure_connection()
    raw = connection.connection
    started = time.perf_counter()
    copied = rows = 0
    with raw.cursor() as cursor, cursor.copy(COPY_SQL) as copy:
        for block in copy:
            copied += len(block)
            rows += bytes(block).count(b"\n")
    copy_s = time.perf_counter() - started
    print(
        json.dumps(
            {
                "records": lines,
                "bytes": size,
                "export_s": export_s,
                "idle_rss_kib": idle,
                "peak_rss_kib": peak,
                "copy_rows": rows,
                "copy_bytes": copied,
                "copy_s": copy_s,
                "job_s": job_s,
                "job_records": job_records,
                "job_bytes": job_bytes,
                "job_rss_before_kib": before_job,
                "job_peak_rss_kib": job_peak,
            }
        )
    )


def bench_ndjson(auditor: str, total: int) -> None:
    fill_s = fill_placeholders(total)
    print(f"  filled to {total:,} records with placeholder rows in {fill_s:.0f} s")
    out = subprocess.run(
        [sys.executable, __file__, "--child-export", auditor],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    rate = figures["records"] / figures["export_s"]
    copy_rate = figures["copy_rows"] / figures["copy_s"]
    growth = (figures["peak_rss_kib"] - figures["idle_rss_kib"]) / 1024
    print(
        f"  NDJSON export: {figures['records']:,} records, {figures['bytes'] / 2**20:.0f} MiB in "
        f"{figures['export_s']:.1f} s = {rate:,.0f} records/s"
    )
    print(
        f"  COPY TO STDOUT: {figures['copy_rows']:,} rows, {figures['copy_bytes'] / 2**20:.0f} MiB "
        f"in {figures['copy_s']:.2f} s = {copy_rate:,.0f} rows/s; export/COPY = "
        f"{rate / copy_rate:.2f}x"
    )
    job_rate = figures["job_records"] / figures["job_s"]
    job_growth = (figures["job_peak_rss_kib"] - figures["job_rss_before_kib"]) / 1024
    print(
        f"  the same as a worker's export job: {figures['job_records']:,} records, "
        f"{figures['job_bytes'] / 2**20:.0f} MiB stored in {figures['job_s']:.1f} s = "
        f"{job_rate:,.0f} records/s; job/COPY = {job_rate / copy_rate:.2f}x; RSS "
        f"+{job_growth:.0f} MiB over {figures['job_rss_before_kib'] / 1024:.0f} MiB"
    )
    print(
        f"  web process RSS: {figures['idle_rss_kib'] / 1024:.0f} MiB after warm-up, peak "
        f"{figures['peak_rss_kib'] / 1024:.0f} MiB during the export (+{growth:.0f} MiB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--package", type=int, default=10_000)
    parser.add_argument("--child-export", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_export:
        child_export(args.child_export)
        return

    import psycopg

    base_url, _, db_name = BENCH_DB.rpartition("/")
    with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db_name}"')
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    os.environ["SITE_SIGNING_KEY"] = (
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )
    try:
        setup()
        auditor = token("auditor")
        print(
            f"python {platform.python_version()} on {platform.machine()}, "
            f"{os.cpu_count()} CPUs, PostgreSQL on loopback, DEBUG=0, one thread\n"
        )
        print("1. audit package")
        bench_package(auditor, args.package)
        print("2. NDJSON export vs COPY")
        bench_ndjson(auditor, args.records)
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
