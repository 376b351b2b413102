"""One AICR summary bundle (``aicr validate --emit-attestation``, AICR.md §4.2, AICR-VALIDATE §10).

Files, as ``pkg/evidence/attestation.Emit`` writes them (checked byte for byte against AICR's
example bundle in ``tests/evidence_app/test_attestation.py``):

``recipe.yaml``            the recipe's canonical YAML (its sha256 is the subject digest)
``snapshot.yaml``          the snapshot (redacted), AICR's deterministic YAML
``bom.cdx.json``           the synthesized CycloneDX BOM (``bom.py``)
``ctrf/<phase>.json``      one per phase in the results (redacted), Go ``MarshalIndent`` + ``\\n``
``manifest.json``          every file above: path, size, ``sha256:<hex>``, media type, by path
``statement.intoto.json``  the in-toto Statement, Go ``json.Marshal`` (compact, no newline)

The statement's predicate is a Go map, so its keys are sorted at every level.

Predicate type (``BundleInput.predicate_type``, chosen by the caller): recipe-evidence v1 for an
unprofiled recipe, v2 (with ``predicate.profile``) for a profiled one, or v3 (AICR 1.x: profile
when the recipe has one). The recipe and subject digest is the one that type is checked with
(``verification.digests``): the legacy digest for v1/v2, the V3 digest for v3.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from evidence_app.corroborate.gojson import marshal, marshal_indent
from evidence_app.verification.digests import (
    PREDICATE_V3,
    DigestScheme,
    recipe_yaml_digests,
    scheme_for,
)
from evidence_app.verification.statement import PREDICATE_V1 as PREDICATE_V1  # re-exported
from evidence_app.verification.statement import PREDICATE_V2
from recipes_app.resolver import CatalogError, marshal_canonical, marshal_deterministic
from recipes_app.resolver.yamlload import Ctx, as_any, parse_raw

from .bom import FORMAT, SPEC_VERSION, synthesize_bom
from .fingerprint import criteria_match, fingerprint_of
from .redact import redact_ctrf, redact_snapshot, redaction_predicate

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
SCHEMA_VERSION = "1.0.0"
MANIFEST = "manifest.json"
STATEMENT = "statement.intoto.json"
_MEDIA_TYPES = {"bom.cdx.json": "application/vnd.cyclonedx+json"}


class BundleError(ValueError):
    """An input cannot go into a bundle; the message names the file."""


@dataclass(frozen=True)
class RecipeInput:
    """What a bundle needs of a recipe (a ``recipes_app.models.Recipe`` has all of it)."""

    name: str
    canonical_yaml: str
    criteria: Mapping[str, Any]
    components: Sequence[Mapping[str, Any]]
    profile: str = ""  # the selected profile, "<name>=<value>"; "" for an unprofiled recipe

    @classmethod
    def of(cls, recipe: Any) -> RecipeInput:
        return cls(
            name=recipe.name,
            canonical_yaml=recipe.canonical_yaml,
            criteria=dict(recipe.criteria),
            components=list(recipe.components or []),
            profile=recipe.profile or "",
        )

    @property
    def digest(self) -> str:
        """The legacy digest (recipe.yaml is the canonical form, so its plain sha256)."""
        return hashlib.sha256(self.canonical_yaml.encode()).hexdigest()

    def digest_under(self, scheme: DigestScheme) -> str:
        if scheme is DigestScheme.LEGACY:
            return self.digest
        return recipe_yaml_digests(self.canonical_yaml).v3


@dataclass(frozen=True)
class BundleInput:
    recipe: RecipeInput
    snapshot: Mapping[str, Any]  # the parsed snapshot document, as the run took it
    phase_reports: Mapping[str, bytes]  # phase → CTRF bytes as the orchestrator wrote them
    aicr_version: str
    validator_catalog_version: str
    validator_images: Sequence[str]  # resolved, catalog order
    attested_at: datetime
    bom_serial: str  # urn:uuid:…
    redact: bool = True  # False = AICR's --full (demo data keeps its performance lines)
    predicate_type: str = PREDICATE_V1
    # image → the sha256 repository digests the run's containers of it reported; an image not
    # here (not run, or its runtime reported none) keeps AICR's empty digest.
    image_digests: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class SummaryBundleFiles:
    files: Mapping[str, bytes] = field(repr=False)  # bundle-relative path → bytes
    statement: bytes = field(repr=False)
    recipe_digest: str = ""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [_sorted_keys(v) for v in value]
    return value


def _phase_summary(report: bytes) -> dict[str, int]:
    summary = json.loads(report)["results"]["summary"]
    return {key: int(summary.get(key, 0)) for key in ("passed", "failed", "skipped")}


def profile_predicate(recipe: RecipeInput) -> dict[str, str]:
    """``predicate.profile`` of a profiled recipe: ``selection`` "<name>=<value>", the profile's
    ``advertiser`` when it declares one, and ``policyDescriptorIdentity``.

    How AICR computes ``policyDescriptorIdentity`` is not known offline (no v2/v3 predicate
    with one is reachable, AICR-V1.md §10). This site derives it deterministically from the
    recipe's own profile declaration (``metadata.selectedProfile``: name, value, advertiser,
    ownedPaths), as ``sha256:`` of its canonical YAML: a site-derived identity, stable for the
    same declaration, not a value AICR would reproduce.
    """
    try:
        doc = as_any(parse_raw(recipe.canonical_yaml, "recipe.yaml"), Ctx("recipe.yaml"))
    except CatalogError as exc:
        raise BundleError(f"recipe.yaml: {str(exc)[:200]}") from None
    metadata = doc.get("metadata") if isinstance(doc, dict) else None
    declared = metadata.get("selectedProfile") if isinstance(metadata, dict) else None
    if not isinstance(declared, dict) or not declared.get("name"):
        raise BundleError(
            f"recipe.yaml: recipe {recipe.name} selects profile {recipe.profile!r} but declares "
            "no metadata.selectedProfile"
        )
    selection = recipe.profile or f"{declared['name']}={declared.get('value', '')}"
    identity = hashlib.sha256(marshal_canonical(declared).encode()).hexdigest()
    block = {"selection": selection, "policyDescriptorIdentity": f"sha256:{identity}"}
    if isinstance(declared.get("advertiser"), str) and declared["advertiser"]:
        block["advertiser"] = declared["advertiser"]
    return block


def rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_summary_bundle(inputs: BundleInput) -> SummaryBundleFiles:
    """The bundle's files and statement (unsigned)."""
    recipe = inputs.recipe
    attested_at = rfc3339(inputs.attested_at)
    snapshot = redact_snapshot(inputs.snapshot) if inputs.redact else dict(inputs.snapshot)
    bom, component_count = synthesize_bom(
        recipe_name=recipe.name,
        components=recipe.components,
        images=inputs.validator_images,
        aicr_version=inputs.aicr_version,
        timestamp=attested_at,
        serial_number=inputs.bom_serial,
        digests=inputs.image_digests,
    )
    try:
        snapshot_yaml = marshal_deterministic(snapshot).encode()
    except (ValueError, TypeError) as exc:
        raise BundleError(f"snapshot.yaml: cannot be written ({str(exc)[:200]})") from None
    files: dict[str, bytes] = {
        "recipe.yaml": recipe.canonical_yaml.encode(),
        "snapshot.yaml": snapshot_yaml,
        "bom.cdx.json": bom,
    }
    phases = _add_ctrf_reports(files, inputs)
    manifest, file_count = _manifest(files)
    fingerprint = fingerprint_of(inputs.snapshot)
    if inputs.predicate_type not in (PREDICATE_V1, PREDICATE_V2, PREDICATE_V3):
        raise BundleError(f"predicate type {inputs.predicate_type!r} is not one this site writes")
    digest = recipe.digest_under(scheme_for(inputs.predicate_type))
    predicate: dict[str, Any] = {
        "aicrVersion": inputs.aicr_version,
        "attestedAt": attested_at,
        "bom": {
            "digest": f"sha256:{_sha(bom)}",
            "format": FORMAT,
            "imageCount": component_count,
            "version": SPEC_VERSION,
        },
        "criteriaMatch": criteria_match(recipe.criteria, fingerprint),
        "fingerprint": fingerprint,
        "manifest": {"digest": f"sha256:{_sha(manifest)}", "fileCount": file_count},
        "phases": phases,
        "recipe": {"digest": digest, "name": recipe.name},
        "schemaVersion": SCHEMA_VERSION,
        "validatorCatalogVersion": inputs.validator_catalog_version,
        "validatorImages": [
            {"digest": digest, "image": image}
            for image in sorted(set(inputs.validator_images))
            for digest in sorted(inputs.image_digests.get(image) or ("",))
        ],
    }
    if inputs.redact:
        predicate["redaction"] = redaction_predicate()
    if inputs.predicate_type == PREDICATE_V2 or (
        inputs.predicate_type == PREDICATE_V3 and recipe.profile
    ):
        predicate["profile"] = profile_predicate(recipe)
    statement = marshal(
        {
            "_type": STATEMENT_TYPE,
            "subject": [{"name": f"recipe:{recipe.name}", "digest": {"sha256": digest}}],
            "predicateType": inputs.predicate_type,
            "predicate": _sorted_keys(predicate),
        }
    )
    files[MANIFEST] = manifest
    files[STATEMENT] = statement
    return SummaryBundleFiles(files=files, statement=statement, recipe_digest=digest)


def _add_ctrf_reports(files: dict[str, bytes], inputs: BundleInput) -> dict[str, Any]:
    """Add each phase's CTRF report (redacted when asked) to ``files``; the predicate's
    ``phases``: each report's counts and digest."""
    phases: dict[str, Any] = {}
    for phase, report in inputs.phase_reports.items():
        try:
            data = redact_ctrf(report) if inputs.redact else bytes(report)
            summary = _phase_summary(data)
        except (ValueError, KeyError, TypeError) as exc:
            raise BundleError(
                f"ctrf/{phase}.json: not a CTRF report ({type(exc).__name__}: {str(exc)[:200]})"
            ) from None
        files[f"ctrf/{phase}.json"] = data
        phases[phase] = {**summary, "ctrfDigest": f"sha256:{_sha(data)}"}
    return phases


def _manifest(files: Mapping[str, bytes]) -> tuple[bytes, int]:
    """``manifest.json`` over ``files`` (path order), and how many files it lists."""
    manifest_doc = {
        "schemaVersion": SCHEMA_VERSION,
        "files": [
            {
                "path": path,
                "size": len(content),
                "sha256": f"sha256:{_sha(content)}",
                "mediaType": _MEDIA_TYPES.get(
                    path, "application/json" if path.endswith(".json") else "application/yaml"
                ),
            }
            for path, content in sorted(files.items())
        ],
    }
    return marshal_indent(manifest_doc), len(files)
