"""A million records, ten thousand signers (issue 22): a reproducible data set, and the read
path's figures on it.

The data set (``build``), on a scratch PostgreSQL database with the bundled catalog:

1. a few real keyless bundles (``--seed``, default 40) are signed by a private Sigstore
   instance (tests/sigstore_private.py, registered as a ``TrustRoot``) and ingested through the
   product (``evidence_ingest``): real rows, real upload log, real consensus refresh;
2. an allowlist naming every third generated signer is published through the product, then
   ``--signers`` signers are inserted in one ``INSERT … SELECT generate_series``, each classified
   as ``signer_upsert`` would against that allowlist (community and counted exactly when
   listed) with its first-seen ``SignerClassChange`` row;
3. ``--records`` evidence rows are inserted in SQL, ``--chunk`` at a time: each copies the
   stored shape of a real ingested row (transcript, certificate with the signer's identity,
   verify commands, identity columns) for a recipe of the current catalog (every recipe in
   turn), with per-check CTRF results for that recipe's declared checks (four variants per
   recipe, made by bench/evidence.py's ``_check_results``), one of four AICR versions, an
   attestation 3-93 days old, a placeholder content whose sha256 is ``sha256`` (the unique
   ``sha256`` and ``(signer, payload_sha256)`` hold), 1 in 97 withdrawn with a reason, 1 in 151
   simulated, and its ``UploadLog`` row; signers are skewed (a tenth of the rows go to 1 % of
   the signers);
4. the derived tables are refreshed through the product's services
   (``consensus.stored.consensus_refresh``, ``signer_tallies.tallies_rebuild``,
   ``facet_tallies.facets_rebuild``), then
   ``VACUUM ANALYZE``.

Then (``measure``) each page and API list: ``--requests`` requests in process (Django's test
client, DEBUG off: server time), p50/p95, SQL queries, bytes; and ``EXPLAIN (ANALYZE, BUFFERS)``
of the evidence-list and home-page queries (``--explain``).

Run: ``.venv/bin/python bench/scale.py --records 100000 --signers 10000 [--keep]``
(``BENCH_DATABASE_URL``, default a scratch ``aicr_bench_scale`` on 127.0.0.1:5432, dropped at
the end unless ``--keep``; ``--reuse`` measures a kept database without building, and keeps
it). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aicr_bench_scale")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import evidence as bench_evidence  # sets the scratch database's settings first

SCALE_PREFIX = "scale"
VARIANTS = 4  # CTRF result variants per recipe


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def scale_identity(n: int) -> str:
    return (
        f"https://github.com/{SCALE_PREFIX}{n}/gpu-lab/.github/workflows/aicr.yaml@refs/heads/main"
    )


# --- 1. real bundles through the product ------------------------------------------------------


def seed_real(count: int) -> list[int]:
    """``count`` keyless bundles signed and ingested through ``evidence_ingest``; their ids."""
    from evidence_app.services import signers, trust_roots
    from recipes_app.models import Recipe
    from tests.sigstore_private import PrivateSigstore

    instance = PrivateSigstore(name="bench-scale.test")
    trust_roots.production_root_ensure()
    trust_roots.trust_root_add(
        name="bench scale instance", trusted_root_json=instance.trusted_root_json()
    )
    signers.allowlist_publish(
        body=bench_evidence._allowlist_body(), note="bench: community labs 0-9"
    )
    recipes = list(Recipe.objects.current().order_by("name"))
    ids = []
    for i, statement in enumerate(bench_evidence._statements(recipes, count, offset=0)):
        bundle = instance.sign_dsse(
            statement,
            identity=bench_evidence._keyless_identity(i),
            issuer=bench_evidence.GITHUB_ISSUER,
        ).bundle
        ids.append(bench_evidence._ingest(bundle).evidence.pk)
    return ids


# --- 2. signers -------------------------------------------------------------------------------


def allowlist_for(count: int) -> str:
    """The allowlist in force plus every third generated signer as a community source."""
    import yaml

    from evidence_app.corroborate.allowlist import source_slug
    from evidence_app.services import signers

    data = yaml.safe_load(signers.allowlist_in_force()[0].body)
    community = list(data.get("community") or [])
    for n in range(0, count, 3):
        community.append(
            {
                "issuer": bench_evidence.GITHUB_ISSUER,
                "source": source_slug(bench_evidence.GITHUB_ISSUER, scale_identity(n)),
                "label": f"{SCALE_PREFIX}{n}",
            }
        )
    data["community"] = community
    return yaml.safe_dump(data, sort_keys=False)


def make_signers(count: int) -> None:
    """``count`` keyless signers in SQL, classified against the allowlist just published."""
    from django.db import connection

    from evidence_app.services import signers

    row = signers.allowlist_publish(body=allowlist_for(count), note="bench: scale signers")
    identity = (
        f"'https://github.com/{SCALE_PREFIX}' || g || "
        "'/gpu-lab/.github/workflows/aicr.yaml@refs/heads/main'"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO evidence_app_signer
                (kind, issuer, identity, key_id, source_id, slug, signer_class, counted, label,
                 first_seen)
            SELECT 'keyless', %(issuer)s, ident, NULL, sid, left(sid, 32),
                   CASE WHEN g %% 3 = 0 THEN 'community' ELSE 'reported' END, g %% 3 = 0,
                   CASE WHEN g %% 3 = 0 THEN '{SCALE_PREFIX}' || g
                        ELSE '{SCALE_PREFIX}' || g || '/gpu-lab' END,
                   now() - interval '120 days'
            FROM (SELECT g, {identity} AS ident,
                         encode(sha256(convert_to(%(issuer)s || E'\\n' || {identity}, 'UTF8')),
                                'hex') AS sid
                  FROM generate_series(0, %(count)s - 1) AS g) AS s
            """,  # noqa: S608 (constants of this file; values are parameters)
            {"issuer": bench_evidence.GITHUB_ISSUER, "count": count},
        )
        cursor.execute(
            """
            INSERT INTO evidence_app_signerclasschange
                (signer_id, from_class, to_class, from_counted, to_counted, allowlist_id,
                 reason, at)
            SELECT id, '', signer_class, NULL, counted, %s, 'first seen', first_seen
            FROM evidence_app_signer WHERE identity LIKE %s
            """,
            [row.pk, f"https://github.com/{SCALE_PREFIX}%"],
        )
    # Check a sample against the product's own classification.
    from evidence_app.models import Signer

    _, allowlist = signers.allowlist_in_force()
    for n in (0, 1, 2, count - 1):
        decision = signers.classify_keyless(
            bench_evidence.GITHUB_ISSUER, scale_identity(n), allowlist, issuer_listed=True
        )
        stored = Signer.objects.get(source_id=decision.source_id)
        assert (stored.signer_class, stored.counted, stored.slug) == (
            decision.signer_class,
            decision.counted,
            decision.slug,
        ), (n, stored.signer_class, decision)


# --- 3. evidence rows -------------------------------------------------------------------------


def make_templates(cursor: Any) -> int:
    """``bench_tpl``: per recipe of the current catalog, ``VARIANTS`` CTRF variants."""
    from evidence_app.services.versions import version_key
    from recipes_app.models import Recipe

    cursor.execute(
        "CREATE UNLOGGED TABLE bench_tpl (slot int, recipe_id int, recipe_name text, "
        "digest text, predicate jsonb, check_results jsonb)"
    )
    cursor.execute("CREATE UNLOGGED TABLE bench_versions (slot int, version text, vkey text)")
    for i, v in enumerate(bench_evidence.AICR_VERSIONS):
        cursor.execute("INSERT INTO bench_versions VALUES (%s, %s, %s)", [i, v, version_key(v)])
    recipes = list(Recipe.objects.current().order_by("name"))
    rng = random.Random(22)
    base = dict(bench_evidence.EvidenceMaker().predicate)
    rows = []
    for r, recipe in enumerate(recipes):
        for v in range(VARIANTS):
            results, phases = bench_evidence._check_results(
                recipe, rng, fail_rate=(0, 0, 0.05, 0.2)[v]
            )
            named = {"name": recipe.name, "digest": recipe.digest}
            predicate = dict(base, recipe=named, phases=phases)
            rows.append(
                [
                    r * VARIANTS + v,
                    recipe.pk,
                    recipe.name,
                    recipe.digest,
                    json.dumps(predicate),
                    json.dumps(results),
                ]
            )
    cursor.executemany("INSERT INTO bench_tpl VALUES (%s, %s, %s, %s, %s, %s)", rows)
    return len(recipes)


EVIDENCE_SQL = """
INSERT INTO evidence_app_evidence
    (sha256, payload_sha256, content, size, container, media_type, artifact, oci_ref, verdict,
     transcript, signer_id, recipe_id, recipe_name, subject_digest, predicate_type,
     aicr_version, aicr_version_key, validator_catalog_version, validator_catalog_version_key,
     k8s_version, identity, identities, identity_key, gpu_model, gpu_count, attested_at,
     predicate, check_results,
     certificate, rekor_log_index, integrated_time, trusted_root_name, verify_commands, is_demo,
     is_simulated, uploaded_by_id, uploaded_at, withdrawn_at, withdrawn_by_id, withdrawal_reason)
SELECT encode(sha256(c), 'hex'), encode(sha256(c || '/payload'::bytea), 'hex'), c, length(c),
       r.container, r.media_type, NULL, '', 'verified', r.transcript, s.id, t.recipe_id,
       t.recipe_name, t.digest, r.predicate_type, v.version, v.vkey,
       r.validator_catalog_version, r.validator_catalog_version_key, r.k8s_version,
       r.identity, r.identities, r.identity_key, r.gpu_model, r.gpu_count, att,
       jsonb_set(jsonb_set(t.predicate, '{aicrVersion}', to_jsonb(v.version)),
                 '{attestedAt}', to_jsonb(to_char(att AT TIME ZONE 'UTC',
                                                  'YYYY-MM-DD"T"HH24:MI:SS"Z"'))),
       t.check_results,
       jsonb_set(r.certificate, '{identity}', to_jsonb(s.identity)),
       10000000 + g, att + interval '2 minutes', r.trusted_root_name, r.verify_commands, false,
       g %% 151 = 0, NULL, up, CASE WHEN g %% 97 = 0 THEN up + interval '1 day' END, NULL,
       CASE WHEN g %% 97 = 0 THEN 'bench: withdrawn by its contributor' ELSE '' END
FROM (
    SELECT g,
           convert_to('{"bench-scale": ' || g || '}', 'UTF8') AS c,
           -- every recipe in turn; a tenth of the rows from 1 %% of the signers
           (g %% %(recipes)s) * %(variants)s + (g / %(recipes)s) %% %(variants)s AS slot,
           CASE WHEN g %% 10 = 0 THEN (g / 10) %% greatest(1, %(signers)s / 100)
                ELSE (g * 7919) %% %(signers)s END AS signer_n,
           (g / 7) %% 4 AS vslot,
           now() - interval '3 days' - ((g * 37) %% (90 * 1440)) * interval '1 minute' AS att,
           now() - interval '2 days' - (%(top)s - g) * interval '1 second' * %(spread)s AS up
    FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS g
) AS x
JOIN bench_tpl AS t ON t.slot = x.slot
JOIN bench_versions AS v ON v.slot = x.vslot
JOIN bench_signers AS s ON s.n = x.signer_n
CROSS JOIN (SELECT * FROM evidence_app_evidence WHERE id = %(template)s) AS r
"""

UPLOAD_SQL = """
INSERT INTO evidence_app_uploadlog
    (at, user_id, channel, state, oci_ref, attempts, sha256, size, filename, verdict,
     failed_step, reason, transcript, signer, created, outcome, completed_at, evidence_id)
SELECT e.uploaded_at, NULL, 'api', 'done', '', 0, e.sha256, e.size, 'evidence.sigstore.json',
       'verified', '', '', e.transcript,
       jsonb_build_object('class', s.signer_class, 'counted', s.counted, 'label', s.label,
                          'slug', s.slug),
       true, 'created', e.uploaded_at, e.id
FROM evidence_app_evidence e JOIN evidence_app_signer s ON s.id = e.signer_id
WHERE e.rekor_log_index BETWEEN 10000000 + %(lo)s AND 10000000 + %(hi)s
"""


def make_records(count: int, signers: int, template: int, chunk: int) -> None:
    from django.db import connection, transaction

    with connection.cursor() as cursor:
        recipes = make_templates(cursor)
        cursor.execute(
            "CREATE UNLOGGED TABLE bench_signers AS SELECT (row_number() OVER (ORDER BY id)) - 1 "
            "AS n, id, identity FROM evidence_app_signer WHERE identity LIKE %s",
            [f"https://github.com/{SCALE_PREFIX}%"],
        )
        cursor.execute("CREATE UNIQUE INDEX ON bench_signers (n)")
        cursor.execute("ANALYZE bench_signers")
        cursor.execute("ANALYZE bench_tpl")
        # A bulk load: the secondary indexes are dropped and built again after (a sort per
        # index instead of a descent per row and index), and the tally trigger is paused (the
        # tallies are rebuilt after by the product's own recount, ``refresh_derived``).
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'evidence_app_evidence' "
            "AND indexname NOT IN (SELECT conname FROM pg_constraint "
            "WHERE conrelid = 'evidence_app_evidence'::regclass)"
        )
        secondary = cursor.fetchall()
        for name, _ in secondary:
            cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute("ALTER TABLE evidence_app_evidence DISABLE TRIGGER USER")
        cursor.execute("SET synchronous_commit = off")
    for lo in range(0, count, chunk):
        hi = min(count, lo + chunk) - 1
        start = time.perf_counter()
        params = {
            "lo": lo,
            "hi": hi,
            "recipes": recipes,
            "variants": VARIANTS,
            "signers": signers,
            "template": template,
            "top": count,
            "spread": max(1, 30 * 86400 // max(1, count)),
        }
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(EVIDENCE_SQL, params)
            cursor.execute(UPLOAD_SQL, params)
        print(f"    rows {lo:>9,}-{hi:>9,} in {time.perf_counter() - start:5.1f} s", flush=True)
    start = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE bench_tpl, bench_versions, bench_signers")
        cursor.execute("ALTER TABLE evidence_app_evidence ENABLE TRIGGER USER")
        cursor.execute("SET maintenance_work_mem = '256MB'")
        for _, definition in secondary:
            cursor.execute(definition)
    print(f"    {len(secondary)} indexes built again in {time.perf_counter() - start:.0f} s")


def build(records: int, signers: int, seed: int, chunk: int) -> dict[str, float]:
    from django.db import connection

    times: dict[str, float] = {}
    start = time.perf_counter()
    real = seed_real(seed)
    times["real bundles ingested"] = time.perf_counter() - start
    start = time.perf_counter()
    make_signers(signers)
    times["signers"] = time.perf_counter() - start
    start = time.perf_counter()
    make_records(records, signers, template=real[0], chunk=chunk)
    times["evidence + upload log rows"] = time.perf_counter() - start
    start = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    times["VACUUM ANALYZE"] = time.perf_counter() - start
    start = time.perf_counter()
    refresh_derived()
    times["derived tables (badges, tallies)"] = time.perf_counter() - start
    return times


def refresh_derived() -> None:
    """Every table the product derives from evidence, through its own services."""
    from evidence_app.consensus import stored

    stored.consensus_refresh()
    try:
        from evidence_app.services import signer_tallies
    except ImportError:  # before the tallies existed (the "before" figures)
        return
    signer_tallies.tallies_rebuild()
    try:
        from evidence_app.services import facet_tallies
    except ImportError:  # before the facet tallies existed
        return
    facet_tallies.facets_rebuild()


# --- measuring --------------------------------------------------------------------------------


def pages() -> dict[str, str]:
    from evidence_app.models import Evidence, Signer

    recipe = bench_evidence.GRID_RECIPE
    newest = Evidence.objects.filter(recipe_name=recipe).order_by("-attested_at", "-pk").first()
    busy = Signer.objects.get(identity=scale_identity(0))  # one of the 1 % with most rows
    busiest = {"signer__slug": busy.slug, "n": Evidence.objects.filter(signer=busy).count()}
    assert newest is not None
    return {
        "/": "home",
        "/recipes/": "recipe list",
        f"/recipes/{recipe}/": "a recipe page",
        f"/recipes/{recipe}/?lens=v0.19.0": "a recipe page, one AICR version",
        f"/api/v1/recipes/{recipe}/": "API recipe",
        "/evidence/": "evidence list",
        "/evidence/?page=5": "evidence list, page 5",
        f"/evidence/?recipe={recipe}&verdict=verified": "evidence list, recipe + verdict",
        f"/evidence/?signer={busy.slug}": "evidence list, a busy signer",
        "/evidence/?suggest=signer&signer_other=lab": "evidence list, signer suggestions",
        "/api/v1/evidence/": "API evidence list",
        f"/evidence/{newest.pk}/": "an evidence page",
        "/signers/": "signers",
        "/signers/?page=3": "signers, page 3",
        f"/signers/{busiest['signer__slug']}/": f"a signer ({busiest['n']} records)",
        "/feeds/evidence.atom": "Atom feed",
        "/check/": "check a cluster",
        "/qualifications/": "qualifications",
        f"/qualifications/?recipe={recipe}": "qualifications, one recipe",
        f"/badges/{recipe}.svg": "badge",
    }


def bundles_for(instance: Any, recipe: Any, n: int, rng: random.Random) -> list[bytes]:
    statements = bench_evidence._statements([recipe], n, offset=rng.randrange(10**6))
    return [
        instance.sign_dsse(
            st,
            identity=scale_identity(
                3 * (i + 100) + int(os.environ.get("BENCH_PROFILE_REPORTED", 0))
            ),
            issuer=bench_evidence.GITHUB_ISSUER,
        ).bundle
        for i, st in enumerate(statements)
    ]


def measure_uploads(n: int) -> None:
    """``n`` counted and ``n`` reported keyless uploads of the grid's recipe through
    ``evidence_ingest`` into the data set, interleaved with the bare ``verify_dsse`` of each
    bundle: CPU of this thread per bundle (medians), and the consensus refresh's part of a
    counted one. Each upload is its signer's newest run, so it replaces that signer's column."""
    from sigstore.models import Bundle

    from evidence_app.services import trust_roots
    from evidence_app.verification import load_trust_root
    from recipes_app.models import Recipe
    from tests.sigstore_private import PrivateSigstore

    instance = PrivateSigstore(name="bench-scale-uploads.test")
    root_name = f"bench uploads {time.time_ns()}"
    trust_roots.trust_root_add(name=root_name, trusted_root_json=instance.trusted_root_json())
    private = load_trust_root(instance.trusted_root_json(), name=root_name)
    recipe = Recipe.objects.current().get(name=bench_evidence.GRID_RECIPE)
    warm = 5
    rng = random.Random(time.time_ns())
    offset = rng.randrange(10**6)
    statements = bench_evidence._statements([recipe], 2 * (n + warm), offset=offset)
    # Generated signers: every third one is allowlisted (counted), the others reported.
    identities = [scale_identity(3 * (i + 1)) for i in range(n + warm)]
    identities += [scale_identity(3 * (i + 1) + 1) for i in range(n + warm)]
    bundles = [
        instance.sign_dsse(st, identity=who, issuer=bench_evidence.GITHUB_ISSUER).bundle
        for st, who in zip(statements, identities, strict=True)
    ]
    counted, reported = bundles[: n + warm], bundles[n + warm :]
    for data in counted[:warm] + reported[:warm]:
        bench_evidence._ingest(data)
    if os.environ.get("BENCH_PROFILE"):
        import cProfile
        import pstats

        from evidence_app.consensus import stored

        profiler = cProfile.Profile(time.thread_time)
        extra = bundles_for(instance, recipe, 20, rng)
        profiler.enable()
        for data in extra:
            bench_evidence._ingest(data)
        profiler.disable()
        del stored
        pstats.Stats(profiler).sort_stats("cumulative").print_stats("evidence_app|recipes_app", 60)
    rows = []
    for label, batch in (("counted", counted[warm:]), ("reported", reported[warm:])):
        timer = bench_evidence.Timer(["ingest", "bare"])
        for data in batch:
            parsed = Bundle.from_json(data)
            pol = bench_evidence._keyless_policy(
                bench_evidence._identity_of(parsed), bench_evidence.GITHUB_ISSUER
            )
            timer.run("ingest", lambda d=data: bench_evidence._ingest(d))
            timer.run("bare", lambda b=parsed, p=pol: private.verifier.verify_dsse(b, p))
        rows.append((label, timer))
    print(f"\n  uploads of {recipe.name} ({n} each, CPU of this thread per bundle, medians):")
    for label, t in rows:
        ingest, bare = statistics.median(t.cpu["ingest"]), statistics.median(t.cpu["bare"])
        refresh = statistics.median(t.refresh_cpu) if label == "counted" else 0.0
        print(
            f"    {label:<9} ingest {ingest * 1000:6.2f} ms  bare verify_dsse {bare * 1000:5.2f} ms"
            f"  ingest/bare {ingest / bare:5.2f}x  refresh {refresh * 1000:5.2f} ms"
            f"  wall p50 {statistics.median(t.times['ingest']) * 1000:6.1f} ms"
            f"  SQL statements {min(t.queries)}-{max(t.queries)}"
        )


def measure(requests: int, only: set[str] | None) -> None:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    print(f"  {'page':<40} {'p50':>9} {'p95':>9} {'SQL':>5} {'bytes':>9}")
    for url, label in pages().items():
        if only and url not in only:
            continue
        first = time.perf_counter()
        response = client.get(url)
        first = time.perf_counter() - first
        if response.status_code != 200:
            print(f"  {label:<40} HTTP {response.status_code}")
            continue
        times = []
        for _ in range(requests):
            with CaptureQueriesContext(connection) as ctx:
                start = time.perf_counter()
                client.get(url)
                times.append(time.perf_counter() - start)
        p50 = statistics.median(times)
        p95 = bench_evidence.percentile(times, 95)
        print(
            f"  {label:<40} {p50 * 1000:7.1f}ms {p95 * 1000:7.1f}ms {len(ctx.captured_queries):5d}"
            f" {len(response.content):9,}  (first {first * 1000:.0f} ms)",
            flush=True,
        )


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def measure_audit(filters_list: list[dict[str, str]]) -> None:
    """Audit packages built as a worker builds them (``export_job_build`` in this process):
    records/s, bytes, and the peak RSS over the RSS before (``clear_refs`` resets the peak)."""
    from django.contrib.auth.models import User

    from evidence_app.exports.jobs import export_job_build
    from evidence_app.models import ExportChunk, ExportJob

    os.environ.setdefault("SITE_SIGNING_KEY", _site_key_pem())
    from django.conf import settings

    settings.SITE_SIGNING_KEY = os.environ["SITE_SIGNING_KEY"]
    user, _ = User.objects.get_or_create(username="bench-auditor")
    print("\n  audit packages (export_job_build, in process):")
    for filters in filters_list:
        job = ExportJob.objects.create(
            format="audit", site="http://testserver/", requested_by=user, filters=filters
        )
        Path("/proc/self/clear_refs").write_text("5")
        before = _rss_kib("VmRSS")
        started = time.perf_counter()
        state = export_job_build(job.pk)
        seconds = time.perf_counter() - started
        peak = _rss_kib("VmHWM")
        job.refresh_from_db()
        print(
            f"    {filters or 'every record'}: {state}, {job.done:,} records in {seconds:.1f} s = "
            f"{job.done / seconds:,.0f} records/s, {job.size / 2**20:.0f} MiB; RSS "
            f"{before / 1024:.0f} MiB before, peak +{(peak - before) / 1024:.0f} MiB; {load()}"
        )
        ExportChunk.objects.filter(job=job).delete()


def _site_key_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def explain() -> None:
    from django.db import connection

    from evidence_app.models import Evidence

    queries = {
        "evidence list page": Evidence.objects.for_listing().order_by("-attested_at", "-pk")[:25],
        "home: newest uploads": Evidence.objects.for_listing().order_by("-uploaded_at", "-pk")[:10],
    }
    for label, qs in queries.items():
        sql, params = qs.query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", params)
            plan = [row[0] for row in cursor.fetchall()]
        print(f"\n  EXPLAIN ANALYZE, {label}:")
        for line in plan[:12]:
            print("    " + line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--signers", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=40, help="real bundles through ingest")
    parser.add_argument("--chunk", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="leave the database for --reuse")
    parser.add_argument("--reuse", action="store_true", help="measure a kept database")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--only", action="append", help="measure only these URLs")
    parser.add_argument("--uploads", type=int, default=0, help="counted and reported uploads")
    parser.add_argument(
        "--audit",
        action="append",
        metavar="FILTERS",
        help='audit package of these /api/v1/evidence/ filters, as JSON (\'{"recipe": "…"}\')',
    )
    args = parser.parse_args()

    import psycopg

    base_url, _, db_name = bench_evidence.BENCH_DB.rpartition("/")
    if not args.reuse:
        with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{db_name}"')
    try:
        bench_evidence.setup()
        from evidence_app.models import Evidence, Signer

        print(f"python {platform.python_version()}, {os.cpu_count()} CPUs; {load()}")
        if not args.reuse:
            start = time.perf_counter()
            times = build(args.records, args.signers, args.seed, args.chunk)
            total = time.perf_counter() - start
            parts = ", ".join(f"{k} {v:.0f} s" for k, v in times.items())
            print(f"  built in {total:.0f} s: {parts}")
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            size = cursor.fetchone()[0]
        print(
            f"  {Evidence.objects.count():,} evidence records, {Signer.objects.count():,} signers, "
            f"database {size / 2**30:.2f} GiB; {load()}\n"
        )
        if args.requests:
            measure(args.requests, set(args.only) if args.only else None)
        if args.uploads:
            measure_uploads(args.uploads)
        if args.audit:
            measure_audit([json.loads(text) for text in args.audit])
        if args.explain:
            explain()
        print(f"\n  {load()}")
    finally:
        from django.db import connections

        connections.close_all()
        if not (args.keep or args.reuse):  # a reused database was kept on purpose: keep it
            with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
