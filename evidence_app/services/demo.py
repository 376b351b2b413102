"""Demo data for a fresh site (``manage.py seed_demo``): clearly-labelled, key-signed evidence.

Three demo labs, each with a DEMO signing key (ECDSA P-256) derived deterministically from a
public seed string — anyone can re-derive these private keys, so they prove nothing. They are
registered as ``SigningKey(is_demo=True)`` named "… (DEMO key)", and every record they sign is
``is_demo`` (the ingest marks evidence signed by a demo key as demo, whoever uploads it).

For five of the current catalog's recipes the labs "ran" AICR evidence directories
(``summary-bundle``: recipe.yaml = the recipe's canonical YAML, a DEMO snapshot, the BOM,
per-phase CTRF from the recipe's declared checks, performance numbers near the recipe's
thresholds, manifest.json, the statement and its signed bundle), built by
``evidence_app.attestation``, the builder validation runs use, unredacted (AICR's ``--full``).
They go through the same verify-before-count ingest as any upload (channel ``seed``).

Each of the five recipes is a scenario (``SCENARIOS``) whose runs are chosen so that the
site's own consensus rules give it one state: CONFIRMED (two labs pass everything), SINGLE
(one lab), PARTIAL (one lab ran only the first check), CONTESTED (two labs disagree on one
check), FAILING (one lab fails one check); every other recipe stays UNTESTED. No state is
written: the ingest stores the runs and ``consensus.stored`` computes the badges, so a page
showing a demo CONFIRMED shows what the rules made of signed runs. Runs differ in AICR version
and date (one older than 30 days, one from an older AICR, one superseded by its lab's newer
run), so the lens and staleness have something to show.

Idempotent: a run already stored (same demo key, recipe and AICR version) is skipped; the
bytes themselves are deterministic (RFC 6979 signatures, fixed archive metadata).
"""

from __future__ import annotations

import hashlib
import random
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.utils import timezone

from evidence_app.attestation import (
    BundleInput,
    RecipeInput,
    build_summary_bundle,
    rfc3339,
    sign_statement,
    summary_tarball,
)
from evidence_app.consensus import recipe_badge
from evidence_app.corroborate import CONFIRMED, CONTESTED, FAILING, PARTIAL, SINGLE
from evidence_app.corroborate.gojson import marshal_indent
from evidence_app.models import Evidence, SigningKey
from evidence_app.services import keys, signers, trust_roots
from evidence_app.services.ingest import evidence_ingest
from evidence_app.services.staleness import validator_catalog_version
from recipes_app.models import Catalog, Recipe
from recipes_app.resolver.checks import Threshold

P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
SEED_PREFIX = b"aicr-validation-dashboard DEMO signing key, not a secret: "
PHASES = ("deployment", "conformance", "performance")
PREFERRED_RECIPES = (
    "h100-eks-ubuntu-training-kubeflow",
    "h100-eks-ubuntu-inference-dynamo",
    "gb200-eks-ubuntu-training-kubeflow",
    "h100-gke-cos-training-kubeflow",
    "h100-aks-ubuntu-training-kubeflow",
)
GPU_MODELS = {
    "h100": "NVIDIA H100 80GB HBM3",
    "h200": "NVIDIA H200",
    "gb200": "NVIDIA GB200",
    "b200": "NVIDIA B200",
    "a100": "NVIDIA A100-SXM4-80GB",
    "l40s": "NVIDIA L40S",
}
VALIDATOR_IMAGES = ("deployment", "performance", "conformance")
GENERATED_BY = "aicr-validation-dashboard seed_demo (DEMO data)"


@dataclass(frozen=True)
class DemoLab:
    code: str
    name: str


# What a demo run reports for the recipe's declared checks (in phase order):
ALL_PASS = "all-pass"  # noqa: S105 - an outcome name, not a password
FAIL_LAST = "fail-last"  # every check passes but the last one (a performance check if any)
FIRST_ONLY = "first-only"  # only the first check ran; the others are skipped (not run)
OUTCOMES = (ALL_PASS, FAIL_LAST, FIRST_ONLY)


@dataclass(frozen=True)
class DemoRun:
    lab: str
    aicr_version: str
    days_ago: int
    outcome: str = ALL_PASS


@dataclass(frozen=True)
class DemoScenario:
    """One demo recipe: its runs and the state AICR's rules give them (checked by tests)."""

    expected_state: str
    runs: tuple[DemoRun, ...]


LABS = (
    DemoLab("a", "Demo lab A (DEMO key)"),
    DemoLab("b", "Demo lab B (DEMO key)"),
    DemoLab("c", "Demo lab C (DEMO key)"),
)
# In PREFERRED_RECIPES order (the first five recipes with checks when those are missing).
SCENARIOS = (
    # Two independent labs pass every check; lab A's older failing run is superseded by its
    # newer one (latest run per signer), lab C's 45-day-old pass is a stale third signer.
    DemoScenario(
        CONFIRMED,
        (
            DemoRun("a", "v0.19.0", 2),
            DemoRun("a", "v0.18.2", 12, FAIL_LAST),
            DemoRun("b", "v0.19.0", 5),
            DemoRun("c", "v0.18.2", 45),
        ),
    ),
    DemoScenario(SINGLE, (DemoRun("a", "v0.19.0", 3),)),
    DemoScenario(PARTIAL, (DemoRun("b", "v0.19.0", 4, FIRST_ONLY),)),
    DemoScenario(CONTESTED, (DemoRun("a", "v0.19.0", 1), DemoRun("b", "v0.19.0", 6, FAIL_LAST))),
    DemoScenario(FAILING, (DemoRun("c", "v0.19.0", 8, FAIL_LAST),)),
)
RECIPE_COUNT = len(SCENARIOS)
RUNS = tuple(run for scenario in SCENARIOS for run in scenario.runs)


def demo_private_key(lab: DemoLab) -> ec.EllipticCurvePrivateKey:
    """The lab's DEMO key, derived from a public seed (so: worthless as a secret)."""
    digest = hashlib.sha256(SEED_PREFIX + lab.code.encode()).digest()
    scalar = int.from_bytes(digest, "big") % (P256_ORDER - 1) + 1
    return ec.derive_private_key(scalar, ec.SECP256R1())


def _public_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def _threshold(thresholds: list[Threshold]) -> tuple[str, float] | None:
    for item in thresholds:
        m = re.fullmatch(r"\s*(>=|>|<=|<)\s*([0-9]+(?:\.[0-9]+)?)\s*", item["value"])
        if m:
            return m.group(1), float(m.group(2))
    return None


def _unit(name: str) -> str:
    if "nccl" in name or "bw" in name:
        return "GB/s"
    if "inference" in name or "throughput" in name:
        return "tokens/sec"
    return "ops/s"


def _statuses(recipe: Recipe, outcome: str) -> dict[tuple[str, str], str]:
    """(phase, check) → CTRF status of every declared check for ``outcome``."""
    keys = [(phase, check["name"]) for phase in PHASES for check in recipe.checks.get(phase, [])]
    statuses = dict.fromkeys(keys, "passed")
    if outcome == FAIL_LAST and keys:
        statuses[keys[-1]] = "failed"
    elif outcome == FIRST_ONLY:
        statuses.update(dict.fromkeys(keys[1:], "skipped"))
    return statuses


def _ctrf(
    recipe: Recipe,
    phase: str,
    run: DemoRun,
    statuses: dict[tuple[str, str], str],
    rng: random.Random,
    start_ms: int,
) -> bytes:
    """A phase report in AICR's CTRF layout (field order and Go JSON bytes), DEMO results."""
    checks = recipe.checks.get(phase, [])
    tests = []
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for check in checks:
        name = check["name"]
        status = statuses[(phase, name)]
        test: dict[str, object] = {
            "name": name,
            "status": status,
            "duration": rng.randint(800, 90_000),
            "suite": [phase],
        }
        if status == "failed":
            test["message"] = (
                "demo: below the recipe's threshold"
                if phase == "performance"
                else "demo: check failed"
            )
        threshold = _threshold(check["thresholds"])
        if phase == "performance" and status != "skipped":
            op, bound = threshold or (">=", 100.0)
            better = op.startswith(">")
            factor = rng.uniform(1.03, 1.25) if status == "passed" else rng.uniform(0.7, 0.95)
            value = bound * factor if better else bound / factor
            test["stdout"] = [f"RESULT: {name}: {value:.2f} {_unit(name)}"]
        counts[status] += 1
        tests.append(test)
    stop_ms = start_ms + 60_000
    report = {
        "reportFormat": "CTRF",
        "specVersion": "0.0.1",
        "timestamp": rfc3339(datetime.fromtimestamp(stop_ms / 1000, tz=UTC)),
        "generatedBy": GENERATED_BY,
        "results": {
            "tool": {"name": "aicr", "version": run.aicr_version},
            "summary": {
                "tests": len(tests),
                **counts,
                "pending": 0,
                "other": 0,
                "start": start_ms,
                "stop": stop_ms,
            },
            "tests": tests,
        },
    }
    return marshal_indent(report)


def _snapshot(recipe: Recipe, lab: DemoLab, run: DemoRun, taken_at: datetime) -> dict[str, Any]:
    """What the lab's cluster "measured": the recipe's own criteria (DEMO, nothing was)."""
    criteria = recipe.criteria
    k8s = "v1.33.4" if run.aicr_version == "v0.19.0" else "v1.32.6"
    model = GPU_MODELS.get(criteria["accelerator"], criteria["accelerator"])
    return {
        "apiVersion": "aicr.run/v1alpha2",
        "kind": "Snapshot",
        "metadata": {
            "source": f"seed_demo, {lab.name}: DEMO data, no cluster was measured",
            "timestamp": rfc3339(taken_at),
            "version": run.aicr_version,
        },
        "measurements": [
            {
                "type": "K8s",
                "subtypes": [
                    {"subtype": "server", "data": {"version": k8s}},
                    {"subtype": "node", "data": {"provider": criteria["service"]}},
                ],
            },
            {"type": "OS", "subtypes": [{"subtype": "release", "data": {"ID": criteria["os"]}}]},
            {
                "type": "GPU",
                "subtypes": [
                    {
                        "subtype": "hardware",
                        "data": {"gpu-count": 8, "model": model},
                    }
                ],
            },
            {
                "type": "NodeTopology",
                "subtypes": [
                    {"subtype": "summary", "data": {"node-count": 4}},
                    {"subtype": "label", "data": {"nvidia.com/gpu.present": "true|demo-1,demo-2"}},
                ],
            },
        ],
    }


def demo_evidence_directory(
    recipe: Recipe, lab: DemoLab, run: DemoRun, *, attested_at: datetime, validator_version: str
) -> bytes:
    """The signed evidence directory (tar.gz) of one demo run, in AICR's bundle layout.

    Unredacted (AICR's ``--full``) so the performance numbers in ``stdout`` stay visible.
    """
    rng = random.Random(f"{recipe.name}|{lab.code}|{run.aicr_version}")  # noqa: S311 - demo data
    start_ms = int(attested_at.timestamp() * 1000) - 600_000
    statuses = _statuses(recipe, run.outcome)
    reports = {phase: _ctrf(recipe, phase, run, statuses, rng, start_ms) for phase in PHASES}
    bundle = build_summary_bundle(
        BundleInput(
            recipe=RecipeInput.of(recipe),
            snapshot=_snapshot(recipe, lab, run, attested_at - timedelta(minutes=15)),
            phase_reports=reports,
            aicr_version=run.aicr_version,
            validator_catalog_version=validator_version or "1.0.0",
            validator_images=[
                f"ghcr.io/nvidia/aicr-validators/{image}:{run.aicr_version}"
                for image in VALIDATOR_IMAGES
            ],
            attested_at=attested_at,
            bom_serial=f"urn:uuid:{uuid.UUID(int=rng.getrandbits(128), version=4)}",
            redact=False,
        )
    )
    return summary_tarball(bundle.files, sign_statement(bundle.statement, demo_private_key(lab)))


def demo_recipes(catalog: Catalog) -> list[Recipe]:
    current = Recipe.objects.filter(catalog=catalog, profile="").exclude(checks={})
    by_name = {r.name: r for r in current.filter(name__in=PREFERRED_RECIPES)}
    chosen = [by_name[n] for n in PREFERRED_RECIPES if n in by_name]
    if len(chosen) < RECIPE_COUNT:
        chosen += list(
            current.exclude(name__in=[r.name for r in chosen]).order_by("name")[
                : RECIPE_COUNT - len(chosen)
            ]
        )
    return chosen[:RECIPE_COUNT]


@dataclass
class DemoResult:
    keys_created: int = 0
    created: int = 0
    existing: int = 0
    failed: list[str] = field(default_factory=list)
    # Each demo recipe's consensus state as the stored badges now say (what the rules made of
    # the runs, read back after the ingest, not the scenario's expectation).
    states: dict[str, str] = field(default_factory=dict)


def demo_key_ensure(lab: DemoLab) -> SigningKey:
    info = keys.public_key_inspect(_public_pem(demo_private_key(lab)))
    existing = SigningKey.objects.filter(fingerprint=info.fingerprint).first()
    if existing is not None:
        return existing
    return keys.signing_key_register(name=lab.name, public_key_pem=info.pem, is_demo=True)


def seed_demo(*, now: datetime | None = None) -> DemoResult:
    """Register the demo keys and ingest the demo runs that are not stored yet."""
    result = DemoResult()
    catalog = Catalog.objects.current()
    if catalog is None:
        result.failed.append("no catalog imported: run `manage.py import_catalog` first")
        return result
    trust_roots.production_root_ensure()
    signers.seeded_allowlist_ensure()
    now = (now or timezone.now()).replace(minute=0, second=0, microsecond=0)
    validator_version = validator_catalog_version(catalog)
    labs = {lab.code: lab for lab in LABS}
    lab_keys = {}
    for lab in LABS:
        before = SigningKey.objects.count()
        lab_keys[lab.code] = demo_key_ensure(lab)
        result.keys_created += SigningKey.objects.count() - before
    recipes = demo_recipes(catalog)
    for recipe, scenario in zip(recipes, SCENARIOS, strict=False):
        for run in scenario.runs:
            key = lab_keys[run.lab]
            if Evidence.objects.filter(
                is_demo=True,
                signer__key=key,
                recipe_name=recipe.name,
                aicr_version=run.aicr_version,
            ).exists():
                result.existing += 1
                continue
            attested_at = now - timedelta(days=run.days_ago, hours=3 * (ord(run.lab) - ord("a")))
            data = demo_evidence_directory(
                recipe,
                labs[run.lab],
                run,
                attested_at=attested_at,
                validator_version=validator_version,
            )
            outcome = evidence_ingest(
                data=data,
                artifact=None,
                filename=f"demo-{recipe.name}-{run.lab}-{run.aicr_version}.tar.gz",
                user=None,
                channel="seed",
                is_demo=True,
            )
            if outcome.created:
                result.created += 1
            elif outcome.ok:
                result.existing += 1
            else:
                result.failed.append(f"{recipe.name} / {labs[run.lab].name}: {outcome.reason}")
    stored = Recipe.objects.filter(pk__in=[r.pk for r in recipes]).select_related("consensus")
    badges = {recipe.name: recipe_badge(recipe).state for recipe in stored}
    result.states = {recipe.name: badges[recipe.name] for recipe in recipes}
    return result
