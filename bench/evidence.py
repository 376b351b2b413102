"""`make bench`: the evidence speed figures docs/benchmarks.md reports.

1. Ingest throughput vs bare verification (bundles per second per core, one thread). On a
   scratch PostgreSQL database with the bundled catalog, a private Sigstore instance
   (tests/sigstore_private.py) registered as a ``TrustRoot``, an allowlist counting some of its
   signers, and a registered ECDSA P-256 key, N distinct AICR recipe-evidence statements for
   real recipe digests are signed keyless and N key-signed. Each bundle is measured once per
   path, the paths interleaved bundle by bundle (background load hits them alike):

   * ``ingest``     ``evidence_ingest`` from the uploaded bytes: parse, signature, statement,
                    bind, classify, store (one transaction) and the ``UploadLog`` row;
   * ``product``    ``verify_signature`` + ``parse_statement`` (no database);
   * ``bare``       ``Verifier.verify_dsse`` on an already parsed ``Bundle`` with the same
                    identity + issuer policy (keyless), or one ``cryptography`` verify over the
                    PAE with an already loaded key (key-signed);
   * ``parse+bare`` ``Bundle.from_json`` + ``verify_dsse`` (what any verifier of uploaded bytes
                    has to do).

   Keyless ingest is measured twice: with the private root as the only enabled root, and with
   the vendored production root enabled too (the deployed default, tried first, so a bundle of
   another instance pays one failed verification). The shared fixtures' keyless DSSE happy
   bundle goes through ``product`` and ``bare`` as in bench/verification.py.
   ``--profile`` adds a cProfile of keyless ingest: time per stage and the top functions.

2. Consensus at 1,000 evidence records: one real recipe, 250 signers x 4 runs over four AICR
   versions with per-check CTRF results for the recipe's declared checks; 200 requests of the
   recipe detail page and 200 calls of ``consensus_grid``, p50/p95 and SQL queries per request;
   the same with 10 records.

3. ``/recipes/`` with 100,000 records over the whole catalog (bulk-written, then every stored
   consensus badge computed once, as the backfill does): the list with no change in between;
   the refresh a counted ingest adds (its recipe's badge, in its transaction) and the list
   request right after each such ingest; a withdrawal; a re-classified signer whose runs span
   every recipe; the expiry check every list read makes.

Needs PostgreSQL (``BENCH_DATABASE_URL``, default a scratch database ``aicr_bench_evidence`` on
127.0.0.1:5432, created and dropped here). Prints figures; asserts nothing.
Run: ``.venv/bin/python bench/evidence.py [--n 150] [--list-rows 100000] [--profile]``
(``--skip-ingest``, ``--skip-grid``, ``--skip-consensus`` leave parts out).
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import os
import platform
import pstats
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BENCH_DB = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aicr_bench_evidence"
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

FIXTURES = REPO / "tests" / "data" / "fixtures" / "sigstore"
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
FIRST_PARTY = "https://github.com/NVIDIA/aicr/.github/workflows/uat-aws.yaml@refs/heads/main"
COMMUNITY_LABS = 10  # lab0..lab9 are allowlisted as community signers
AICR_VERSIONS = ("v0.17.3", "v0.18.2", "v0.19.0", "v0.20.1")
GRID_RECIPE = "h100-eks-ubuntu-training-kubeflow"


def lab_identity(n: int) -> str:
    return f"https://github.com/lab{n}/gpu-evidence/.github/workflows/aicr.yaml@refs/heads/main"


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))
    return ordered[index]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.2f}"


# --- scratch database -------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=150, help="bundles per kind (default 150)")
    parser.add_argument("--list-rows", type=int, default=100_000, help="evidence for /recipes/")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--profile", action="store_true", help="cProfile keyless ingest")
    parser.add_argument("--skip-ingest", action="store_true")
    parser.add_argument("--skip-consensus", action="store_true")
    parser.add_argument("--skip-grid", action="store_true", help="part 3 without part 2")
    args = parser.parse_args()

    import psycopg

    base_url, _, db_name = BENCH_DB.rpartition("/")
    with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db_name}"')
    try:
        setup()
        print(
            f"python {platform.python_version()} on {platform.machine()}, "
            f"{os.cpu_count()} CPUs, PostgreSQL on loopback, DEBUG=0, one thread\n"
        )
        if not args.skip_ingest:
            section(lambda: bench_ingest(args.n, profile=args.profile))
        if not args.skip_consensus:
            if not args.skip_grid:
                section(lambda: bench_consensus(args.requests))
            section(lambda: bench_list(args.requests, list_rows=args.list_rows))
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


def section(fn: Callable[[], None]) -> None:
    """Run one part; a failure is printed (the figures of the other parts still come)."""
    import traceback

    try:
        fn()
    except Exception:
        print("  FAILED:\n" + traceback.format_exc(limit=-3))


def setup() -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("collectstatic", verbosity=0, interactive=False)
    call_command("import_catalog", verbosity=0, stdout=io.StringIO())


# --- 1. ingest vs bare verification ------------------------------------------------------------


def _allowlist_body() -> str:
    import yaml

    from evidence_app.corroborate.allowlist import source_slug
    from evidence_app.services import signers

    data = yaml.safe_load(signers.vendored_allowlist_text())
    community = list(data.get("community") or [])
    for n in range(COMMUNITY_LABS):
        community.append(
            {
                "issuer": GITHUB_ISSUER,
                "source": source_slug(GITHUB_ISSUER, lab_identity(n)),
                "label": f"lab{n}",
            }
        )
    data["community"] = community
    return yaml.safe_dump(data, sort_keys=False)


def _keyless_identity(i: int) -> str:
    """A mix: first-party CI, allowlisted community labs (counted), unknown labs (reported)."""
    if i % 4 == 0:
        return FIRST_PARTY
    if i % 4 == 1:
        return lab_identity(i % COMMUNITY_LABS)
    return lab_identity(COMMUNITY_LABS + i % 40)


def _statements(recipes: list[Any], n: int, offset: int) -> list[dict[str, Any]]:
    from tests.evidence_factories import statement_for

    now = datetime.now(UTC)
    return [
        statement_for(
            recipes[(offset + i) % len(recipes)],
            attested_at=now - timedelta(hours=1, minutes=offset + i),
            aicr_version=AICR_VERSIONS[i % len(AICR_VERSIONS)],
        )
        for i in range(n)
    ]


class Timer:
    """Per-bundle seconds of several paths, measured interleaved."""

    def __init__(self, names: list[str]) -> None:
        self.times: dict[str, list[float]] = {name: [] for name in names}
        # CPU seconds of this thread per call: what the web process itself spends, without the
        # waits on PostgreSQL (which a loaded database server stretches; see docs/benchmarks.md).
        self.cpu: dict[str, list[float]] = {name: [] for name in names}
        self.sql: list[float] = []  # of each ingest: seconds inside cursor.execute (no COMMIT)
        self.queries: list[int] = []  # of each ingest: SQL statements
        # Of each ingest: CPU seconds of its consensus refresh (0 for a run that cannot move a
        # badge: reported, simulated), to say what the ingest costs with and without it.
        self.refresh_cpu: list[float] = []
        self._sql = 0.0
        self._queries = 0

    def _wrapper(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self._sql += time.perf_counter() - start
            self._queries += not sql.lstrip().upper().startswith(("SAVEPOINT", "RELEASE"))

    def run(self, name: str, fn: Callable[[], object]) -> object:
        from unittest import mock

        from django.db import connection

        from evidence_app import consensus
        from evidence_app.services.ingest import store as ingest

        refresh = ingest.refresh_consensus
        refresh_cpu = [0.0]

        def timed_refresh(evidence: Any) -> None:
            if not consensus.is_counted(evidence):  # nothing to refresh: not a cost to show
                refresh(evidence)
                return
            cpu = time.thread_time()
            refresh(evidence)
            refresh_cpu[0] += time.thread_time() - cpu

        self._sql, self._queries = 0.0, 0
        with (
            connection.execute_wrapper(self._wrapper),
            mock.patch.object(ingest, "refresh_consensus", timed_refresh),
        ):
            start, cpu = time.perf_counter(), time.thread_time()
            result = fn()
            self.times[name].append(time.perf_counter() - start)
            self.cpu[name].append(time.thread_time() - cpu)
        if name == "ingest":
            self.sql.append(self._sql)
            self.queries.append(self._queries)
            self.refresh_cpu.append(refresh_cpu[0])
        return result

    def rate(self, name: str) -> float:
        """Bundles per second: N over the summed time."""
        values = self.times[name]
        return len(values) / sum(values)


def _ingest(data: bytes) -> Any:
    from evidence_app.services.ingest import evidence_ingest

    result = evidence_ingest(
        data=data, artifact=None, filename="evidence.sigstore.json", user=None, channel="api"
    )
    if not (result.ok and result.created):
        raise SystemExit(f"bench bundle not ingested: {result.verdict} {result.reason}")
    return result


def _product(raw: bytes, **kwargs: Any) -> Callable[[], object]:
    from evidence_app.verification import StatementError, parse_statement, verify_signature

    def run() -> object:
        outcome = verify_signature(raw, **kwargs)
        if not outcome.ok:
            raise SystemExit(f"bench bundle did not verify: {outcome.detail}")
        try:
            return parse_statement(outcome.payload, payload_type=outcome.payload_type)
        except StatementError:
            return None  # the shared fixtures are not AICR evidence

    return run


def _keyless_policy(identity: str, issuer: str) -> Any:
    """The policy the product builds for a certificate with both issuer extensions."""
    from sigstore.verify import policy

    return policy.AllOf(
        [policy.Identity(identity=identity, issuer=issuer), policy.OIDCIssuerV2(issuer)]
    )


def bench_ingest(n: int, *, profile: bool) -> None:
    import base64

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from sigstore.models import Bundle

    from evidence_app.models import Evidence, TrustRoot
    from evidence_app.services import keys, signers, trust_roots
    from evidence_app.verification import load_trust_root
    from evidence_app.verification.keyed import pae
    from recipes_app.models import Recipe
    from tests.sigstore_private import PrivateSigstore, generate_key, public_pem, sign_dsse_with_key

    instance = PrivateSigstore(name="bench.test")
    trust_roots.production_root_ensure()
    root_name = "bench private instance"
    trust_roots.trust_root_add(name=root_name, trusted_root_json=instance.trusted_root_json())
    private = load_trust_root(instance.trusted_root_json(), name=root_name)
    signers.allowlist_publish(body=_allowlist_body(), note="bench: community labs 0-9")
    key = generate_key("ecdsa-p256")
    keys.signing_key_register(name="bench lab key", public_key_pem=public_pem(key))
    public_key = key.public_key()

    recipes = list(Recipe.objects.current().order_by("name"))
    warm = 5
    n_keyless = warm + 2 * n + (60 if profile else 0)  # warm-up, two rows, the profile
    statements = _statements(recipes, n_keyless + warm + n, offset=0)
    t0 = time.perf_counter()
    keyless = [
        instance.sign_dsse(s, identity=_keyless_identity(i), issuer=GITHUB_ISSUER).bundle
        for i, s in enumerate(statements[:n_keyless])
    ]
    keyed = [sign_dsse_with_key(s, key) for s in statements[n_keyless:]]
    sign_s = time.perf_counter() - t0
    assert len({hashlib.sha256(b).digest() for b in keyless + keyed}) == len(keyless) + len(keyed)

    for data in keyless[:warm] + keyed[:warm]:  # warm up: caches, connection, imports
        _ingest(data)
    keyless_only, keyless_both = keyless[warm : warm + n], keyless[warm + n : warm + 2 * n]
    profiled = keyless[warm + 2 * n :]
    keyed = keyed[warm:]

    print(
        f"## 1. Ingest vs bare verification ({n} distinct bundles per row, each measured once "
        f"per path, interleaved; {len(keyless) + len(keyed)} bundles signed in {sign_s:.1f} s)"
    )

    # Keyless, private root only: ingest | product | bare | parse+bare, bundle by bundle.
    production = TrustRoot.objects.filter(is_production=True)
    production.update(enabled=False)
    issuers = signers.accepted_issuers()
    timer = Timer(["ingest", "product", "bare", "parse+bare"])
    for data in keyless_only:
        parsed = Bundle.from_json(data)
        pol = _keyless_policy(_identity_of(parsed), GITHUB_ISSUER)
        timer.run("ingest", lambda d=data: _ingest(d))
        timer.run("product", _product(data, trusted_root=[private], issuer=issuers))
        timer.run("bare", lambda b=parsed, p=pol: private.verifier.verify_dsse(b, p))
        timer.run(
            "parse+bare", lambda d=data, p=pol: private.verifier.verify_dsse(Bundle.from_json(d), p)
        )
    rows = [("keyless, private root only", timer)]

    # Keyless, production root enabled too (tried first, as deployed).
    production.update(enabled=True)
    timer = Timer(["ingest", "product", "bare", "parse+bare"])
    from evidence_app.services.trust_roots import enabled_roots

    both = enabled_roots()
    for data in keyless_both:
        parsed = Bundle.from_json(data)
        pol = _keyless_policy(_identity_of(parsed), GITHUB_ISSUER)
        timer.run("ingest", lambda d=data: _ingest(d))
        timer.run("product", _product(data, trusted_root=both, issuer=issuers))
        timer.run("bare", lambda b=parsed, p=pol: private.verifier.verify_dsse(b, p))
        timer.run(
            "parse+bare", lambda d=data, p=pol: private.verifier.verify_dsse(Bundle.from_json(d), p)
        )
    rows.append(("keyless, production + private root", timer))

    # Key-signed (registered ECDSA P-256 key).
    public_keys = keys.active_public_keys()
    timer = Timer(["ingest", "product", "bare"])
    for data in keyed:
        envelope = json.loads(data)["dsseEnvelope"]
        message = pae(envelope["payloadType"], base64.b64decode(envelope["payload"]))
        sig = base64.b64decode(envelope["signatures"][0]["sig"])
        timer.run("ingest", lambda d=data: _ingest(d))
        timer.run("product", _product(data, public_keys=public_keys))
        timer.run(
            "bare",
            lambda s=sig, m=message: public_key.verify(s, m, ec.ECDSA(hashes.SHA256())),
        )
    rows.append(("key-signed (ECDSA P-256)", timer))

    stored = Evidence.objects.count()
    print(
        f"  {'bundles':<36} {'ingest/s':>9} {'product/s':>10} {'bare/s':>8} "
        f"{'parse+bare/s':>12}  {'ingest/bare':>11} {'ingest/(parse+bare)':>19} "
        f"{'product/bare':>12}"
    )
    for label, t in rows:
        ingest, product, bare = t.rate("ingest"), t.rate("product"), t.rate("bare")
        pb = t.rate("parse+bare") if "parse+bare" in t.times else None
        pb_rate = f"{pb:12.0f}" if pb else f"{'-':>12}"
        pb_ratio = f"{pb / ingest:18.2f}x" if pb else f"{'-':>19}"
        print(
            f"  {label:<36} {ingest:9.0f} {product:10.0f} {bare:8.0f} {pb_rate}  "
            f"{bare / ingest:10.2f}x {pb_ratio} {bare / product:11.2f}x"
        )
    print("  per-bundle median (ms); sql = inside cursor.execute during ingest (no COMMIT):")
    for label, t in rows:
        parts = "  ".join(f"{k} {ms(statistics.median(v))}" for k, v in t.times.items())
        print(f"    {label:<36} {parts}  sql {ms(statistics.median(t.sql))}")
    print("  per-bundle median CPU of this process (ms; without waiting on PostgreSQL):")
    for label, t in rows:
        parts = "  ".join(f"{k} {ms(statistics.median(v))}" for k, v in t.cpu.items())
        ratio = statistics.median(t.cpu["ingest"]) / statistics.median(t.cpu["bare"])
        print(f"    {label:<36} {parts}  ingest/bare {ratio:5.2f}x")
    print(
        "  the consensus refresh inside those ingests (CPU, ms; counted runs only refresh), and "
        "the ingest without it:"
    )
    for label, t in rows:
        paid = [r for r in t.refresh_cpu if r > 0]
        without = [c - r for c, r in zip(t.cpu["ingest"], t.refresh_cpu, strict=True)]
        bare = statistics.median(t.cpu["bare"])
        refresh = f"{ms(statistics.median(paid))}" if paid else "   -"
        print(
            f"    {label:<36} refreshed {len(paid):3d}/{len(t.refresh_cpu)}  refresh {refresh}  "
            f"ingest without it {ms(statistics.median(without))}  "
            f"ingest without it/bare {statistics.median(without) / bare:5.2f}x"
        )
    counts = ", ".join(
        f"{label.split(',')[0].split(' (')[0]} {min(t.queries)}-{max(t.queries)}"
        for label, t in rows[::2]
    )
    print(
        f"  SQL statements per ingest (savepoints aside; more when the signer is new): {counts}; "
        f"{stored} evidence rows stored"
    )
    print("  ratio = how many times longer than bare (time per bundle); target: ingest/bare <= 3x")

    _bench_fixture()

    if profile:
        production.update(enabled=False)
        profiler = cProfile.Profile(time.thread_time)  # CPU: what ingest itself costs
        profiler.enable()
        for data in profiled:
            _ingest(data)
        profiler.disable()
        production.update(enabled=True)
        _print_profile(profiler, len(profiled))


STAGES = (  # (file, function, label): evidence_ingest's stages, in order
    (
        "evidence_app/services/ingest/policy.py",
        "policy_snapshot",
        "policy: version query (+ cache)",
    ),
    ("evidence_app/services/ingest/policy.py", "policy_current", "policy: roots, issuers, keys"),
    ("evidence_app/services/ingest/service.py", "_verify", "parse + signature + statement (no DB)"),
    ("sigstore/verify/verifier.py", "verify_dsse", "  of which sigstore Verifier.verify_dsse"),
    ("evidence_app/services/signers.py", "classify", "classify (allowlist match)"),
    ("evidence_app/services/ingest/bind.py", "bind_recipe", "bind: recipe by digest (queries)"),
    (
        "evidence_app/services/ingest/store.py",
        "store_evidence",
        "store: transaction + rows + UploadLog",
    ),
    ("evidence_app/services/signers.py", "signer_upsert", "  of which signer upsert"),
    ("evidence_app/services/ingest/store.py", "_existing", "  of which known-statement lookup"),
    ("evidence_app/services/ingest/upload_log.py", "log_upload", "  of which UploadLog row"),
    ("django/db/backends/base/base.py", "commit", "  of which COMMIT"),
    ("evidence_app/services/ingest/record.py", "verify_commands", "verify commands"),
    ("evidence_app/services/ingest/record.py", "check_results_from", "check results"),
    ("django/db/backends/utils.py", "execute", "all SQL round trips (CursorWrapper.execute)"),
)


def _print_profile(profiler: cProfile.Profile, bundles: int) -> None:
    out = io.StringIO()
    if os.environ.get("BENCH_PROFILE_OUT"):  # the raw profile, for pstats / snakeviz
        profiler.dump_stats(os.environ["BENCH_PROFILE_OUT"])
    stats = pstats.Stats(profiler, stream=out)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]

    def cumulative(suffix: str, func: str) -> tuple[int, float]:
        found = [
            (v[1], v[3]) for (f, _, name), v in raw.items() if name == func and f.endswith(suffix)
        ]
        return sum(n for n, _ in found), sum(c for _, c in found)

    _, total = cumulative("evidence_app/services/ingest/service.py", "evidence_ingest")
    print(
        f"\n## cProfile of keyless ingest ({bundles} bundles, private root only; "
        f"{total / bundles * 1000:.1f} ms per bundle under the profiler)"
    )
    print("  stage: cumulative time per bundle, share of evidence_ingest")
    for suffix, func, label in STAGES:
        calls, seconds = cumulative(suffix, func)
        extra = f"  ({calls / bundles:.0f} per bundle)" if func == "execute" else ""
        print(f"    {label:<46} {seconds / bundles * 1000:6.2f} ms  {seconds / total:4.0%}{extra}")
    print("  top 10 functions by own time:")
    stats.sort_stats("tottime").print_stats(10)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("ncalls"))
    for line in lines[start : start + 11]:
        print("    " + line.replace(str(REPO) + "/.venv/lib/python3.12/site-packages/", ""))


def _identity_of(bundle: Any) -> str:
    from evidence_app.verification.certificate import certificate_identities

    (identity,) = certificate_identities(bundle.signing_certificate)
    return identity


def _rates(fns: list[Callable[[], object]], seconds: float = 2.0, rounds: int = 7) -> list[float]:
    """Best-of-rounds operations per second, interleaved: bench/verification.py's measure."""
    from bench.verification import rates

    return rates(fns, seconds, rounds)


def _bench_fixture() -> None:
    from sigstore.models import Bundle
    from sigstore.verify import policy

    from evidence_app.verification import production_root

    case = "keyless-dsse-happy"
    d = FIXTURES / case
    expected = json.loads((d / "expected.json").read_text())
    root = production_root()
    raw = (d / "bundle.sigstore.json").read_bytes()
    pol = policy.Identity(identity=expected["identity"], issuer=expected["issuer"])
    parsed = Bundle.from_json(raw)
    ours, bare, parse_bare = _rates(
        [
            _product(
                raw, trusted_root=root, identity=expected["identity"], issuer=expected["issuer"]
            ),
            lambda: root.verifier.verify_dsse(parsed, pol),
            lambda: root.verifier.verify_dsse(Bundle.from_json(raw), pol),
        ]
    )
    print(
        f"  shared fixture {case} (production root, best of 7 rounds, 2 s): product "
        f"{ours:.0f}/s, bare {bare:.0f}/s, parse+bare {parse_bare:.0f}/s, "
        f"product/bare {bare / ours:.2f}x (no ingest: not AICR evidence)"
    )


# --- 2. consensus -------------------------------------------------------------------------------


def _check_results(recipe: Any, rng: random.Random, fail_rate: float) -> tuple[dict, dict]:
    """``check_results`` as ingest stores them (from CTRF) for the recipe's declared checks,
    and the predicate's per-phase counts."""
    results: dict[str, Any] = {}
    phases: dict[str, Any] = {}
    checks = recipe.checks if isinstance(recipe.checks, dict) else {}
    for phase in ("deployment", "conformance", "performance"):
        entries: dict[str, Any] = {}
        counts = {"passed": 0, "failed": 0, "skipped": 0}
        for check in checks.get(phase) or []:
            name = str(check.get("name"))
            roll = rng.random()
            status = "failed" if roll < fail_rate else ("skipped" if roll > 0.96 else "passed")
            metrics = []
            if phase == "performance" and status != "skipped":
                metrics = [
                    {"label": name, "value": round(rng.uniform(300, 900), 2), "unit": "GB/s"}
                ]
            entries[name] = {
                "status": status,
                "raw_status": status,
                "duration_ms": float(rng.randint(800, 90_000)),
                "message": "check failed" if status == "failed" else "",
                "metrics": metrics,
                "thresholds": list(check.get("thresholds") or []),
            }
            counts[status] += 1
        results[phase] = entries
        phases[phase] = {
            **counts,
            "ctrfDigest": "sha256:"
            + hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest(),
        }
    return results, phases


class EvidenceMaker:
    """Verified evidence rows as ingest stores them (bulk_create; bytes are a placeholder)."""

    def __init__(self) -> None:
        from tests.evidence_factories import example_statement

        self.predicate = example_statement()["predicate"]
        self.serial = 0
        self.now = datetime.now(UTC)

    def signers(self, count: int, *, prefix: str, counted_every: int = 2) -> list[Any]:
        from evidence_app.corroborate.allowlist import source_id
        from evidence_app.models import Signer, SignerClass, SignerKind

        rows = []
        for n in range(count):
            identity = (
                f"https://github.com/{prefix}{n}/gpu-lab/.github/workflows/e.yaml@refs/heads/main"
            )
            sid = source_id(GITHUB_ISSUER, identity)
            counted = n % counted_every == 0
            rows.append(
                Signer(
                    kind=SignerKind.KEYLESS,
                    issuer=GITHUB_ISSUER,
                    identity=identity,
                    source_id=sid,
                    slug=sid[:32],
                    signer_class=SignerClass.COMMUNITY if counted else SignerClass.REPORTED,
                    counted=counted,
                    label=f"{prefix}{n}/gpu-lab",
                )
            )
        return Signer.objects.bulk_create(rows, batch_size=1000)

    def evidence(self, recipe: Any, signer: Any, run: int, rng: random.Random) -> Any:
        from evidence_app.models import Container, Evidence, Verdict
        from evidence_app.services.versions import version_key

        self.serial += 1
        version = AICR_VERSIONS[run % len(AICR_VERSIONS)]
        attested = self.now - timedelta(days=3 + 9 * (3 - run % 4), minutes=rng.randint(0, 1440))
        check_results, phases = _check_results(recipe, rng, fail_rate=rng.choice((0, 0, 0.05, 0.2)))
        predicate = dict(self.predicate)
        predicate.update(
            recipe={"name": recipe.name, "digest": recipe.digest},
            aicrVersion=version,
            attestedAt=attested.strftime("%Y-%m-%dT%H:%M:%SZ"),
            phases=phases,
        )
        content = f'{{"bench-placeholder": {self.serial}}}'.encode()
        withdrawn = self.serial % 97 == 0
        return Evidence(
            sha256=hashlib.sha256(content).hexdigest(),
            content=content,
            size=len(content),
            container=Container.SUMMARY_BUNDLE,
            media_type="application/gzip",
            verdict=Verdict.VERIFIED,
            transcript=[
                {"step": s, "ok": True, "detail": "bench"}
                for s in ("parse", "signature", "statement", "manifest", "bind", "classify")
            ],
            signer=signer,
            recipe=recipe,
            recipe_name=recipe.name,
            subject_digest=recipe.digest,
            predicate_type="https://aicr.run/recipe-evidence/v1",
            aicr_version=version,
            aicr_version_key=version_key(version),
            validator_catalog_version="1.0.0",
            validator_catalog_version_key=version_key("1.0.0", assume_v=True),
            k8s_version="1.33.4",
            attested_at=attested,
            predicate=predicate,
            check_results=check_results,
            certificate={
                "mode": "keyless",
                "identity": signer.identity,
                "issuer": signer.issuer,
                "claims": {"source_repository_uri": "https://github.com/example/gpu-lab"},
                "trusted_root": "production",
                "production_root": True,
                "tlog_kind": "dsse/0.0.1",
            },
            rekor_log_index=1_000_000 + self.serial,
            integrated_time=attested,
            trusted_root_name="production",
            verify_commands=[],
            is_simulated=self.serial % 151 == 0,
            withdrawn_at=attested + timedelta(days=1) if withdrawn else None,
            withdrawal_reason="bench: withdrawn by its contributor" if withdrawn else "",
        )


def _measure(label: str, fn: Callable[[], Any], requests: int) -> tuple[float, float, list[int]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    fn()  # warm
    times: list[float] = []
    counts: set[int] = set()
    for _ in range(requests):
        with CaptureQueriesContext(connection) as ctx:
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        counts.add(len(ctx.captured_queries))
    p50, p95 = percentile(times, 50), percentile(times, 95)
    print(f"  {label:<58} p50 {ms(p50)} ms  p95 {ms(p95)} ms  SQL queries {sorted(counts)}")
    return p50, p95, sorted(counts)


def bench_consensus(requests: int) -> None:
    from django.db import connection
    from django.test import Client

    from evidence_app import consensus
    from evidence_app.models import Evidence
    from recipes_app.models import Recipe

    recipe = Recipe.objects.current().get(name=GRID_RECIPE)
    declared = sum(
        len(v or [])
        for k, v in (recipe.checks or {}).items()
        if k in ("deployment", "conformance", "performance")
    )
    # Part 1's ingested rows are removed so the figures below are about these rows only.
    from evidence_app.models import UploadLog

    UploadLog.objects.all().delete()
    Evidence.objects.all().delete()

    maker = EvidenceMaker()
    rng = random.Random(1)
    grid_signers = maker.signers(250, prefix="grid", counted_every=2)
    client = Client()
    url = f"/recipes/{recipe.name}/"
    print(
        f"\n## 2. Consensus grid of {recipe.name} ({declared} declared checks in the grid's "
        f"phases; {requests} requests/calls each, server time in-process)"
    )
    figures = {}
    for total in (10, 1000):
        have = Evidence.objects.filter(recipe_name=recipe.name).count()
        rows = []
        index = have
        while len(rows) < total - have:
            signer = grid_signers[index % len(grid_signers)]
            rows.append(maker.evidence(recipe, signer, index // len(grid_signers), rng))
            index += 1
        Evidence.objects.bulk_create(rows, batch_size=500)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        n_signers = Evidence.objects.filter(recipe_name=recipe.name).values("signer").distinct()
        print(
            f"  -- {total} evidence records, {n_signers.count()} signers "
            f"(half counted), {len(AICR_VERSIONS) if total > 250 else 1} AICR version(s)"
        )
        response = client.get(url)
        assert response.status_code == 200, response.status_code
        grid = consensus.consensus_grid(recipe=recipe)
        print(
            f"     grid: {len(grid.columns)} columns ({len(grid.shown_columns)} shown), "
            f"{len(grid.rows)} rows, state {grid.state}; page {len(response.content) // 1024} KiB"
        )
        figures[total] = (
            _measure(f"GET {url}", lambda: client.get(url), requests),
            _measure(
                "consensus_grid(recipe)", lambda: consensus.consensus_grid(recipe=recipe), requests
            ),
        )
        if total == 1000:
            lens = AICR_VERSIONS[-2]
            lens_url = f"{url}?lens={lens}"
            _measure(f"GET {lens_url}", lambda: client.get(lens_url), requests)  # noqa: B023
            all_url = f"{url}?signers=all"
            response = client.get(all_url)
            print(f"     {all_url}: page {len(response.content) // 1024} KiB")
            _measure(f"GET {all_url}", lambda: client.get(all_url), requests // 4)  # noqa: B023


def bench_list(requests: int, *, list_rows: int) -> None:
    """``/recipes/`` with ``list_rows`` evidence records over the whole current catalog (the
    grid recipe's rows from part 2 included)."""
    from django.db import connection, transaction
    from django.test import Client

    from evidence_app.consensus import stored
    from evidence_app.models import Evidence
    from evidence_app.services.withdrawal import evidence_withdraw
    from recipes_app.models import Catalog, Recipe

    catalog = Catalog.objects.current()
    recipes = list(Recipe.objects.filter(catalog=catalog).order_by("name"))
    have = Evidence.objects.count()
    maker = EvidenceMaker()
    maker.serial = 10**7  # distinct placeholder bytes from part 2's rows
    client = Client()
    signers = maker.signers(500, prefix="lab", counted_every=3)
    rng = random.Random(2)
    start = time.perf_counter()
    batch: list[Any] = []
    made = have
    i = 0
    while made < list_rows:
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
        cursor.execute("VACUUM ANALYZE evidence_app_evidence")
    setup_s = time.perf_counter() - start
    total = Evidence.objects.count()
    n_signers = Evidence.objects.values("signer").distinct().count()
    n_counted = Evidence.objects.filter(signer__counted=True).values("signer").distinct().count()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_total_relation_size('evidence_app_evidence')")
        size = cursor.fetchone()[0]
    print(
        f"\n## 3. Recipe list with {total:,} evidence records over the {len(recipes)} recipes "
        f"of the current catalog ({total / len(recipes):.0f} per recipe, {n_signers} "
        f"signers, {n_counted} counted; table {size / 2**20:.0f} MiB; made in {setup_s:.0f} s)"
    )
    start = time.perf_counter()
    badged = stored.consensus_refresh()
    print(
        f"  full recompute and store of every badge (the backfill, a new catalog version): "
        f"{ms(time.perf_counter() - start)} ms ({badged} recipes with counted evidence)"
    )
    filter_sets = [
        "",
        "?service=eks",
        "?accelerator=h100&intent=training",
        "?consensus=CONFIRMED",
        "?consensus=UNTESTED",
        "?intent=inference&platform=dynamo",
        "?q=gpu-operator",
    ]
    counter = iter(range(10**9))
    per_filter: dict[str, set[int]] = {}

    def get() -> None:
        from django.test.utils import CaptureQueriesContext

        query = filter_sets[next(counter) % len(filter_sets)]
        with CaptureQueriesContext(connection) as ctx:
            response = client.get("/recipes/" + query)
        assert response.status_code == 200, (query, response.status_code)
        per_filter.setdefault(query or "(none)", set()).add(len(ctx.captured_queries))

    steady = _measure("GET /recipes/ (7 filter sets, no change in between)", get, requests)
    print(
        "     SQL queries per filter set: "
        + ", ".join(f"{q} {sorted(c)}" for q, c in per_filter.items())
    )

    # What an ingest of a counted record adds: its recipe's refresh, in the same transaction.
    counted = [s for s in signers if s.counted]
    refresh_times: list[float] = []
    refresh_queries: set[int] = set()
    after_times: list[float] = []

    def ingest_one() -> None:
        from django.test.utils import CaptureQueriesContext

        evidence = maker.evidence(rng.choice(recipes), rng.choice(counted), 0, rng)
        evidence.withdrawn_at, evidence.withdrawal_reason, evidence.is_simulated = None, "", False
        with transaction.atomic():
            evidence.save(force_insert=True)
            with CaptureQueriesContext(connection) as ctx:
                start = time.perf_counter()
                stored.evidence_stored(evidence)
                refresh_times.append(time.perf_counter() - start)
        refresh_queries.add(len(ctx.captured_queries))

    for _ in range(requests):
        ingest_one()
        start = time.perf_counter()
        get()
        after_times.append(time.perf_counter() - start)
    print(
        f"  refresh per counted ingest (its recipe, ~{total / len(recipes):.0f} records):"
        f"{'':<9} p50 {ms(percentile(refresh_times, 50))} ms  "
        f"p95 {ms(percentile(refresh_times, 95))} ms  SQL queries {sorted(refresh_queries)}"
    )
    p95_after = percentile(after_times, 95)
    print(
        f"  GET /recipes/ right after each of those ingests{'':<11} "
        f"p50 {ms(percentile(after_times, 50))} ms  p95 {ms(p95_after)} ms  "
        f"({p95_after / steady[1]:.2f}x the p95 without a change)"
    )

    live = list(
        Evidence.objects.counted()
        .select_related("signer")
        .only("pk", "recipe_name", "withdrawn_at", "uploaded_by_id", "signer__counted")
        .order_by("?")[: max(1, requests // 4)]
    )
    withdrawals = iter(live)
    _measure(
        f"evidence_withdraw (refresh included; {len(live)} calls)",
        lambda: evidence_withdraw(
            evidence=next(withdrawals), by=None, roles={"maintainer"}, reason="bench"
        ),
        len(live) - 1,
    )
    busiest = counted[0]
    spans = Evidence.objects.filter(signer=busiest).values("recipe_name").distinct().count()
    _measure(
        f"signers_changed(one counted signer with runs in {spans} recipes)",
        lambda: stored.signers_changed([busiest.pk]),
        max(3, requests // 20),
    )
    _measure(
        "consensus_refresh_expired(catalog), nothing expired (every list read)",
        lambda: stored.consensus_refresh_expired(catalog=catalog),
        requests,
    )


if __name__ == "__main__":
    main()
