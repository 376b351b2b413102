"""Pointer tree import: N AICR pointers whose bundles are in a local registry, taken in.

On a scratch PostgreSQL database with the bundled catalog and Debian's ``docker-registry`` on a
loopback port: N distinct recipe-evidence statements for ``h100-eks-ubuntu-training-kubeflow``,
each signed keyless by the tests' private Sigstore instance as one community signer, pushed as
a Sigstore-bundle artifact (oras), and a pointer tree like AICR's (``recipes/evidence/<recipe>/
<src>/sha256-<digest>.yaml`` + ``allowlist.yaml`` listing the source). Then ``pointer_import``
with the pulls run in process (Celery eager, one thread): the contract check and row per
pointer, the OCI pull, verification pinned to the pointer's signer, bind, classify and store,
then ``pointers_settle``. Time spent in the pull (``oci_pull``) and in ``evidence_ingest`` is
measured around those two functions; the rest is the import's own work (file walk, contract,
rows, enqueue, settle). A second import of the same tree measures the no-op path.

Needs PostgreSQL (``BENCH_DATABASE_URL``, default a scratch database ``aicr_bench_pointers``
on 127.0.0.1:5432, created and dropped here) and ``docker-registry``. Prints figures; asserts
nothing. Run: ``.venv/bin/python bench/pointers.py [--n 1000]``.
"""

from __future__ import annotations

import argparse
import copy
import io
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BENCH_DB = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aicr_bench_pointers"
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
ISSUER = "https://token.actions.githubusercontent.com"
IDENTITY = (
    "https://github.com/example-lab/aicr/.github/workflows/evidence-publish.yaml@refs/heads/main"
)
BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"


def start_registry(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("docker-registry") or "/usr/bin/docker-registry"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root.mkdir(parents=True, exist_ok=True)
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: error\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    process = subprocess.Popen(
        [binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 15
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1):
                return process, f"127.0.0.1:{port}"
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("docker-registry did not start") from None
            time.sleep(0.1)


def bench(n: int, work: Path) -> None:
    import oras.client
    from django.conf import settings
    from django.db.models import Count

    from aicr_site.celery import app as celery_app
    from evidence_app.corroborate.allowlist import source_slug
    from evidence_app.models import Evidence, EvidencePointer
    from evidence_app.services import ingest, oci, pointers, trust_roots
    from recipes_app.models import Recipe
    from tests.evidence_factories import statement_for
    from tests.sigstore_private import PrivateSigstore

    process, registry = start_registry(work / "registry")
    try:
        settings.EVIDENCE_OCI_ENABLED = True
        settings.EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP = True
        settings.EVIDENCE_OCI_ALLOWED_REGISTRIES = [registry]
        celery_app.conf.task_always_eager = True
        instance = PrivateSigstore(name="aicr-bench.test")
        trust_roots.trust_root_add(name="bench", trusted_root_json=instance.trusted_root_json())
        recipe = Recipe.objects.current().get(name=RECIPE, profile="")
        slug = source_slug(ISSUER, IDENTITY)
        folder = work / "tree" / "recipes" / "evidence" / RECIPE / slug
        folder.mkdir(parents=True)
        (folder.parent.parent / "allowlist.yaml").write_text(
            f"schemaVersion: 1.0.0\ncommunity:\n  - issuer: {ISSUER}\n    source: {slug}\n"
        )
        client = oras.client.OrasClient(hostname=registry, insecure=True)
        client.session.trust_env = False
        base = datetime.now(UTC) - timedelta(days=1)
        statement = statement_for(recipe)
        t0 = time.perf_counter()
        for i in range(n):
            doc = copy.deepcopy(statement)
            doc["predicate"]["attestedAt"] = f"{base + timedelta(seconds=i):%Y-%m-%dT%H:%M:%SZ}"
            bundle = instance.sign_dsse(doc, identity=IDENTITY, issuer=ISSUER).bundle
            path = work / "bundle.json"
            path.write_bytes(bundle)
            response = client.push(
                target=f"{registry}/aicr-evidence:b{i}",
                files=[f"{path}:{BUNDLE_MEDIA_TYPE}"],
                disable_path_validation=True,
                quiet=True,
            )
            digest = response.headers["Docker-Content-Digest"]
            (folder / f"sha256-{digest.removeprefix('sha256:')}.yaml").write_text(
                "schemaVersion: 1.0.0\n"
                f"recipe: {RECIPE}\n"
                "attestations:\n"
                f"  - attestedAt: {doc['predicate']['attestedAt']}\n"
                "    bundle:\n"
                f"      oci: {registry}/aicr-evidence:b{i}\n"
                f"      digest: {digest}\n"
                "      predicateType: https://aicr.run/recipe-evidence/v1\n"
                "    signer:\n"
                f"      identity: {IDENTITY}\n"
                f"      issuer: {ISSUER}\n"
            )
        print(f"setup: {n} bundles signed and pushed in {time.perf_counter() - t0:.1f} s\n")

        spent = {"pull": 0.0, "ingest": 0.0}

        def timed(name: str, fn: Any) -> Any:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    spent[name] += time.perf_counter() - start

            return wrapper

        oci.oci_pull = timed("pull", oci.oci_pull)
        oci.evidence_ingest = timed("ingest", ingest.evidence_ingest)
        t0 = time.perf_counter()
        report = pointers.pointer_import(path=work / "tree")
        settled = pointers.pointers_settle()
        total = time.perf_counter() - t0
        states = dict(
            EvidencePointer.objects.order_by().values_list("state").annotate(n=Count("pk"))
        )
        print(f"first import of {n} pointers: {total:.1f} s, {n / total:.1f} pointers/s")
        print(
            f"  states: {states}; evidence records: {Evidence.objects.count()}; settled {settled}"
        )
        rest = total - spent["pull"] - spent["ingest"]
        for name, seconds in (*spent.items(), ("import, contract, rows, settle", rest)):
            share = seconds / total * 100
            print(
                f"  {name:32s} {seconds:7.2f} s  {share:5.1f} %  {seconds / n * 1000:6.1f} ms each"
            )
        print(f"  outcomes: {dict(report.outcomes)}")
        t0 = time.perf_counter()
        again = pointers.pointer_import(path=work / "tree")
        second = time.perf_counter() - t0
        print(
            f"second import (nothing changed): {second:.2f} s, {n / second:.0f} pointers/s, "
            f"outcomes {dict(again.outcomes)}, evidence records {Evidence.objects.count()}"
        )
    finally:
        process.terminate()
        process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="pointers (default 1000)")
    args = parser.parse_args()

    import psycopg

    base_url, _, db_name = BENCH_DB.rpartition("/")
    with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db_name}"')
    work = Path(tempfile.mkdtemp(prefix="aicr-bench-pointers-"))
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        call_command("import_catalog", verbosity=0, stdout=io.StringIO())
        print(
            f"python {platform.python_version()} on {platform.machine()}, "
            f"{os.cpu_count()} CPUs, PostgreSQL and docker-registry on loopback, DEBUG=0, "
            "one thread\n"
        )
        bench(args.n, work)
    finally:
        from django.db import connections

        connections.close_all()
        shutil.rmtree(work, ignore_errors=True)
        with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
