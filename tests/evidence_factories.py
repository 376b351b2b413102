"""Evidence test data: AICR statements for real recipes, signed bundles and tarballs, and
factory_boy factories for stored rows (signers, evidence) when verification is not the point."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import tarfile
from datetime import UTC, datetime
from functools import cache
from typing import Any

import factory

from evidence_app.consensus import stored
from evidence_app.corroborate.allowlist import source_id
from evidence_app.coverage.stored import (
    gpu_count_number,
    identities_of_stored,
    identity_key,
    identity_of_stored,
)
from evidence_app.models import Container, Evidence, Signer, SignerClass, SignerKind, Verdict
from evidence_app.services.versions import version_key
from recipes_app.models import Recipe
from tests.shared_data import GOLDEN

EXAMPLE_DIR = GOLDEN / "generated/evidence-example-full/summary-bundle"
EXAMPLE_RECIPE = "h100-eks-ubuntu-training-kubeflow"
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
FIRST_PARTY_IDENTITY = (
    "https://github.com/NVIDIA/aicr/.github/workflows/uat-aws.yaml@refs/heads/main"
)
COMMUNITY_IDENTITY = (
    "https://github.com/acme/gpu-lab/.github/workflows/evidence-publish.yaml@refs/heads/main"
)
UNKNOWN_IDENTITY = "https://github.com/stranger/fork/.github/workflows/x.yaml@refs/heads/main"


@cache
def example_statement_bytes() -> bytes:
    return (EXAMPLE_DIR / "statement.intoto.json").read_bytes()


def example_statement() -> dict[str, Any]:
    return json.loads(example_statement_bytes())


def example_files(prefix: str = "summary-bundle/") -> dict[str, bytes]:
    """The AICR example evidence directory (unsigned), keyed by archive path."""
    files = {}
    for path in sorted(EXAMPLE_DIR.rglob("*")):
        if path.is_file():
            files[prefix + path.relative_to(EXAMPLE_DIR).as_posix()] = path.read_bytes()
    return files


def statement_for(
    recipe: Recipe,
    *,
    attested_at: datetime | None = None,
    aicr_version: str | None = None,
    validator_catalog_version: str | None = None,
    predicate_type: str | None = None,
    digest: str | None = None,
) -> dict[str, Any]:
    """The example AICR statement re-pointed at ``recipe`` (its name and digest)."""
    statement = copy.deepcopy(example_statement())
    digest = digest or recipe.digest
    statement["subject"] = [{"name": f"recipe:{recipe.name}", "digest": {"sha256": digest}}]
    predicate = statement["predicate"]
    predicate["recipe"] = {"name": recipe.name, "digest": digest}
    if attested_at is not None:
        predicate["attestedAt"] = attested_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if aicr_version is not None:
        predicate["aicrVersion"] = aicr_version
    if validator_catalog_version is not None:
        predicate["validatorCatalogVersion"] = validator_catalog_version
    if predicate_type is not None:
        statement["predicateType"] = predicate_type
    return statement


def tarball(files: dict[str, bytes], *, gz: bool = True) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w", format=tarfile.PAX_FORMAT) as tar:
        for name, content in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def signed_example_tarball(bundle: bytes, *, gz: bool = True) -> bytes:
    """The example evidence directory with ``bundle`` as its attestation.intoto.jsonl."""
    files = example_files()
    files["summary-bundle/attestation.intoto.jsonl"] = bundle.replace(b"\n", b"") + b"\n"
    return tarball(files, gz=gz)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class SignerFactory(factory.django.DjangoModelFactory):
    """A keyless signer row (classification is not re-done: pass the class you need)."""

    class Meta:
        model = Signer

    kind = SignerKind.KEYLESS
    issuer = GITHUB_ISSUER
    identity = factory.Sequence(
        lambda n: f"https://github.com/org{n}/lab/.github/workflows/e.yaml@refs/heads/main"
    )
    source_id = factory.LazyAttribute(lambda o: source_id(o.issuer, o.identity))
    slug = factory.LazyAttribute(lambda o: o.source_id[:32])
    signer_class = SignerClass.COMMUNITY
    counted = True
    label = factory.Sequence(lambda n: f"org{n}/lab")


class EvidenceFactory(factory.django.DjangoModelFactory):
    """A stored, verified evidence row for ``recipe`` (bytes are a placeholder, not a bundle)."""

    class Meta:
        model = Evidence
        skip_postgeneration_save = True

    content = factory.Sequence(lambda n: f'{{"placeholder": {n}}}'.encode())
    sha256 = factory.LazyAttribute(lambda o: hashlib.sha256(o.content).hexdigest())
    size = factory.LazyAttribute(lambda o: len(o.content))
    container = Container.BUNDLE
    media_type = "application/vnd.dev.sigstore.bundle.v0.3+json"
    verdict = Verdict.VERIFIED
    transcript = factory.LazyFunction(
        lambda: [
            {"step": s, "ok": True, "detail": "factory"}
            for s in ("parse", "signature", "statement", "bind", "classify")
        ]
    )
    signer = factory.SubFactory(SignerFactory)
    recipe = None  # pass one
    recipe_name = factory.LazyAttribute(lambda o: o.recipe.name)
    subject_digest = factory.LazyAttribute(lambda o: o.recipe.digest)
    predicate_type = "https://aicr.run/recipe-evidence/v1"
    aicr_version = "v0.19.0"
    aicr_version_key = factory.LazyAttribute(lambda o: version_key(o.aicr_version))
    validator_catalog_version = "1.0.0"
    validator_catalog_version_key = factory.LazyAttribute(
        lambda o: version_key(o.validator_catalog_version, assume_v=True)
    )
    k8s_version = "1.33.0"
    attested_at = factory.LazyFunction(lambda: datetime.now(UTC))
    predicate = factory.LazyFunction(lambda: dict(example_statement()["predicate"]))
    certificate = factory.LazyFunction(dict)
    # As ingest stores them: read from the bytes/predicate (coverage.stored), unless passed.
    identity = factory.LazyAttribute(identity_of_stored)
    gpu_model = factory.LazyAttribute(lambda o: (o.identity.get("gpu_model") or "")[:200])
    gpu_count = factory.LazyAttribute(lambda o: gpu_count_number(o.identity.get("gpu_count")))
    identities = factory.LazyAttribute(identities_of_stored)
    identity_key = factory.LazyAttribute(lambda o: identity_key(o.identities, o.identity))

    @factory.post_generation
    def stored_consensus(self, create: bool, extracted: object, **kwargs: object) -> None:
        """What ingest does right after storing a record: refresh its recipe's stored
        consensus badge."""
        if create:
            # Ingest's signer is the row it just classified; a test's copy may predate a
            # re-classification it made since.
            self.signer.refresh_from_db(fields=["counted"])
            stored.evidence_stored(self)
