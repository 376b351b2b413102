"""Demo data for a fresh site (``manage.py seed_demo``): clearly-labelled, key-signed evidence.

Three demo labs, each with a DEMO signing key (ECDSA P-256) derived deterministically from a
public seed string — anyone can re-derive these private keys, so they prove nothing. They are
registered as ``SigningKey(is_demo=True)`` named "… (DEMO key)", and every record they sign is
``is_demo`` (the ingest marks evidence signed by a demo key as demo, whoever uploads it).

For a handful of the current catalog's recipes each lab "ran" AICR evidence directories
(``summary-bundle``: recipe.yaml = the recipe's canonical YAML, snapshot, per-phase CTRF from
the recipe's declared checks — with some failures and performance numbers near the recipe's
thresholds — manifest.json, the statement and its signed bundle). They go through the same
verify-before-count ingest as any upload (channel ``seed``). Runs differ in AICR version and
date (one is older than 30 days, one uses an older AICR), so consensus and staleness have
something to show.

Idempotent: a run already stored (same demo key, recipe and AICR version) is skipped; the
bytes themselves are deterministic (RFC 6979 signatures, fixed archive metadata).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import random
import re
import tarfile
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.utils import timezone

from evidence_app.models import Evidence, SigningKey
from evidence_app.services import keys, signers, trust_roots
from evidence_app.services.ingest import evidence_ingest
from evidence_app.services.staleness import validator_catalog_version
from evidence_app.verification.signature import pae
from recipes_app.models import Catalog, Recipe

IN_TOTO = "application/vnd.in-toto+json"
BUNDLE_V03 = "application/vnd.dev.sigstore.bundle.v0.3+json"
PREDICATE_V1 = "https://aicr.run/recipe-evidence/v1"
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
RECIPE_COUNT = 5
GPU_MODELS = {
    "h100": "NVIDIA H100 80GB HBM3",
    "h200": "NVIDIA H200",
    "gb200": "NVIDIA GB200",
    "b200": "NVIDIA B200",
    "a100": "NVIDIA A100-SXM4-80GB",
    "l40s": "NVIDIA L40S",
}


@dataclass(frozen=True)
class DemoLab:
    code: str
    name: str


@dataclass(frozen=True)
class DemoRun:
    lab: str
    aicr_version: str
    days_ago: int
    fail_rate: float
    performance_fails: bool = False


LABS = (
    DemoLab("a", "Demo lab A (DEMO key)"),
    DemoLab("b", "Demo lab B (DEMO key)"),
    DemoLab("c", "Demo lab C (DEMO key)"),
)
RUNS = (
    DemoRun("a", "v0.19.0", 2, 0.0),
    DemoRun("a", "v0.18.2", 12, 0.08),
    DemoRun("b", "v0.19.0", 5, 0.15, performance_fails=True),
    DemoRun("c", "v0.18.2", 45, 0.05),
)


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


def _hint(key: ec.EllipticCurvePrivateKey) -> str:
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def sign_statement(statement: bytes, key: ec.EllipticCurvePrivateKey) -> bytes:
    """A cosign-style v0.3 key-signed DSSE bundle (publicKey hint, no tlog), RFC 6979."""
    signature = key.sign(
        pae(IN_TOTO, statement), ec.ECDSA(hashes.SHA256(), deterministic_signing=True)
    )
    bundle = {
        "mediaType": BUNDLE_V03,
        "verificationMaterial": {
            "publicKey": {"hint": _hint(key)},
            "tlogEntries": [],
            "timestampVerificationData": {},
        },
        "dsseEnvelope": {
            "payload": base64.b64encode(statement).decode(),
            "payloadType": IN_TOTO,
            "signatures": [{"sig": base64.b64encode(signature).decode(), "keyid": ""}],
        },
    }
    return json.dumps(bundle, separators=(",", ":")).encode()


def _json(value: object) -> bytes:
    return json.dumps(value, indent=2, sort_keys=True).encode() + b"\n"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _threshold(thresholds: list[dict[str, object]]) -> tuple[str, float] | None:
    for item in thresholds:
        m = re.fullmatch(r"\s*(>=|>|<=|<)\s*([0-9]+(?:\.[0-9]+)?)\s*", str(item.get("value", "")))
        if m:
            return m.group(1), float(m.group(2))
    return None


def _unit(name: str) -> str:
    if "nccl" in name or "bw" in name:
        return "GB/s"
    if "inference" in name or "throughput" in name:
        return "tokens/sec"
    return "ops/s"


def _ctrf(
    recipe: Recipe, phase: str, run: DemoRun, rng: random.Random, start_ms: int
) -> tuple[bytes, dict[str, int]]:
    checks = recipe.checks.get(phase, []) if isinstance(recipe.checks, dict) else []
    tests = []
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for check in checks:
        name = str(check.get("name"))
        roll = rng.random()
        status = "failed" if roll < run.fail_rate else ("skipped" if roll > 0.97 else "passed")
        if phase == "performance" and run.performance_fails:
            status = "failed"
        test: dict[str, object] = {
            "name": name,
            "status": status,
            "duration": rng.randint(800, 90_000),
            "suite": [phase],
        }
        threshold = _threshold(list(check.get("thresholds") or []))
        if phase == "performance" and status != "skipped":
            op, bound = threshold or (">=", 100.0)
            better = op.startswith(">")
            factor = rng.uniform(1.03, 1.25) if status == "passed" else rng.uniform(0.7, 0.95)
            value = bound * factor if better else bound / factor
            test["stdout"] = [f"RESULT: {name}: {value:.2f} {_unit(name)}"]
        if status == "failed":
            test["message"] = (
                "demo: below the recipe's threshold"
                if phase == "performance"
                else ("demo: check failed")
            )
        counts[status] += 1
        tests.append(test)
    report = {
        "reportFormat": "CTRF",
        "specVersion": "0.0.1",
        "generatedBy": "aicr-validation-dashboard seed_demo (DEMO data)",
        "results": {
            "tool": {"name": "aicr", "version": run.aicr_version},
            "summary": {
                "tests": len(tests),
                **counts,
                "pending": 0,
                "other": 0,
                "start": start_ms,
                "stop": start_ms + 60_000,
            },
            "tests": tests,
        },
    }
    return _json(report), counts


def _tarball(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(f"summary-bundle/{name}")
            info.size = len(files[name])
            info.mtime = 0
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(files[name]))
    return gzip.compress(buf.getvalue(), mtime=0)


def demo_evidence_directory(
    recipe: Recipe, lab: DemoLab, run: DemoRun, *, attested_at: datetime, validator_version: str
) -> bytes:
    """The signed evidence directory (tar.gz) of one demo run."""
    rng = random.Random(f"{recipe.name}|{lab.code}|{run.aicr_version}")  # noqa: S311 - demo data
    start_ms = int(attested_at.timestamp() * 1000) - 600_000
    files: dict[str, bytes] = {
        "recipe.yaml": recipe.canonical_yaml.encode(),
        "snapshot.yaml": (
            "# DEMO snapshot: no real cluster was measured\n"
            f"kind: Snapshot\nmetadata:\n  source: seed_demo\n  lab: {lab.name}\n"
        ).encode(),
    }
    phases: dict[str, dict[str, object]] = {}
    for phase in PHASES:
        report, counts = _ctrf(recipe, phase, run, rng, start_ms)
        files[f"ctrf/{phase}.json"] = report
        phases[phase] = {**counts, "ctrfDigest": f"sha256:{_sha(report)}"}
    manifest = {
        "schemaVersion": "1.0.0",
        "files": [
            {
                "path": path,
                "size": len(content),
                "sha256": f"sha256:{_sha(content)}",
                "mediaType": "application/json" if path.endswith(".json") else "application/yaml",
            }
            for path, content in sorted(files.items())
        ],
    }
    files["manifest.json"] = _json(manifest)
    k8s = "1.33.4" if run.aicr_version == "v0.19.0" else "1.32.6"
    criteria = recipe.criteria
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": f"recipe:{recipe.name}", "digest": {"sha256": recipe.digest}}],
        "predicateType": PREDICATE_V1,
        "predicate": {
            "schemaVersion": "1.0.0",
            "attestedAt": attested_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "aicrVersion": run.aicr_version,
            "validatorCatalogVersion": validator_version or "1.0.0",
            "validatorImages": [],
            "recipe": {"name": recipe.name, "digest": recipe.digest},
            "fingerprint": {
                "service": {"value": criteria["service"]},
                "accelerator": {"value": criteria["accelerator"]},
                "gpuModel": {
                    "value": GPU_MODELS.get(criteria["accelerator"], criteria["accelerator"])
                },
                "os": {"value": criteria["os"], "source": "os.release"},
                "k8sVersion": {"value": k8s, "source": "k8s.server.version"},
                "region": {"value": "demo"},
                "nodeCount": {"value": 4},
                "gpuNodeCount": {"value": 2},
            },
            "criteriaMatch": {
                "matched": True,
                "perDimension": [
                    {
                        "dimension": dim,
                        "match": "matched",
                        "recipeRequires": criteria[dim],
                        "fingerprintProvides": criteria[dim],
                    }
                    for dim in ("service", "accelerator", "os", "intent", "platform")
                ],
            },
            "phases": phases,
            "manifest": {
                "digest": f"sha256:{_sha(files['manifest.json'])}",
                "fileCount": len(manifest["files"]),
            },
        },
    }
    statement_bytes = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
    files["statement.intoto.json"] = statement_bytes
    files["attestation.intoto.jsonl"] = (
        sign_statement(statement_bytes, demo_private_key(lab)) + b"\n"
    )
    return _tarball(files)


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
    for recipe in demo_recipes(catalog):
        for run in RUNS:
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
    return result
