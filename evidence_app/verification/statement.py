"""Parse an in-toto Statement v1 carrying AICR recipe evidence (strict, bounded).

Predicate types: ``https://aicr.run/recipe-evidence/v1`` (unprofiled recipes), ``…/v2`` (the
recipe carries a configuration profile: ``predicate.profile`` is required), ``…/v3`` (all
evidence AICR 1.x produces: ``predicate.profile`` optional, the recipe digest is the V3 digest,
see ``digests``) and the legacy ``https://aicr.nvidia.com/recipe-evidence/v1``. Any other
predicate type, a later ``…/v4`` included, is refused naming the supported ones.

The subject is ``recipe:<name>`` with the recipe digest, which must equal ``predicate.recipe``
(name and digest), or, where the caller allows it, the OCI artifact a bundle was pushed as
(``artifact_subject``; the pipeline then checks the artifact and the bundled recipe.yaml).

Every error is a ``StatementError(field, message)`` naming the JSON path of the problem.
Unknown predicate fields are tolerated (AICR adds fields additively) but count against the
JSON limits; every string is capped at 4 KiB.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ._json import JSONLimitError, JSONLimits, load_json
from .bundle import IN_TOTO_PAYLOAD_TYPE
from .digests import PREDICATE_V3

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_V1 = "https://aicr.run/recipe-evidence/v1"
PREDICATE_V2 = "https://aicr.run/recipe-evidence/v2"
PREDICATE_LEGACY_V1 = "https://aicr.nvidia.com/recipe-evidence/v1"
PREDICATE_TYPES: dict[str, str] = {
    PREDICATE_V1: "v1",
    PREDICATE_V2: "v2",
    PREDICATE_V3: "v3",
    PREDICATE_LEGACY_V1: "legacy-v1",
}
_EVIDENCE_FAMILIES = (
    "https://aicr.run/recipe-evidence/",
    "https://aicr.nvidia.com/recipe-evidence/",
)
MAX_STATEMENT_BYTES = 1_000_000
MAX_STRING = 4096
STATEMENT_LIMITS = JSONLimits(max_bytes=MAX_STATEMENT_BYTES, max_depth=32, max_object_keys=512)

_HEX64 = re.compile(r"[0-9a-f]{64}")
_PREFIXED_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_RECIPE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,252}")
_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
_SEMVER_1 = re.compile(r"1\.\d{1,6}\.\d{1,6}")
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})"
)
_PROFILE_SELECTION = re.compile(r"([A-Za-z][A-Za-z0-9_-]{0,63})=([A-Za-z0-9][A-Za-z0-9._-]{0,127})")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_MATCH_STATES = frozenset({"matched", "mismatched", "unknown"})


class StatementError(ValueError):
    """The statement is not valid AICR recipe evidence; ``field`` is the JSON path at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Subject:
    name: str
    sha256: str


@dataclass(frozen=True)
class FingerprintValue:
    value: str | int | bool | None
    version: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class DimensionMatch:
    dimension: str
    match: str
    recipe_requires: str | None = None
    fingerprint_provides: str | None = None


@dataclass(frozen=True)
class CriteriaMatch:
    matched: bool
    per_dimension: tuple[DimensionMatch, ...]


@dataclass(frozen=True)
class PhaseSummary:
    passed: int
    failed: int
    skipped: int
    ctrf_digest: str  # "sha256:<hex>"


@dataclass(frozen=True)
class ValidatorImage:
    image: str
    digest: str


@dataclass(frozen=True)
class BomRef:
    format: str
    version: str
    digest: str
    image_count: int


@dataclass(frozen=True)
class ManifestRef:
    digest: str
    file_count: int


@dataclass(frozen=True)
class Redaction:
    policy: str
    version: str
    applied: tuple[str, ...]


@dataclass(frozen=True)
class ProfileInfo:
    selection: str
    name: str
    value: str
    policy_descriptor_identity: str
    advertiser: str | None = None


@dataclass(frozen=True)
class AicrStatement:
    """AICR recipe evidence, as claimed by the (verified) signer."""

    predicate_type: str
    predicate_version: str  # "v1" | "v2" | "v3" | "legacy-v1"
    subject: Subject
    recipe_name: str
    recipe_digest: str
    schema_version: str
    attested_at: datetime
    aicr_version: str
    validator_catalog_version: str
    validator_images: tuple[ValidatorImage, ...]
    fingerprint: Mapping[str, FingerprintValue]
    criteria_match: CriteriaMatch
    phases: Mapping[str, PhaseSummary]
    bom: BomRef | None
    manifest: ManifestRef | None
    redaction: Redaction | None
    profile: ProfileInfo | None
    statement_sha256: str
    artifact_subject: bool = False
    predicate: Mapping[str, Any] = field(default_factory=dict, repr=False)


# --------------------------------------------------------------------------------------------


def _str(value: Any, where: str, *, empty: bool = False, limit: int = MAX_STRING) -> str:
    if not isinstance(value, str):
        raise StatementError(where, f"expected a string, got {_kind(value)}")
    if len(value) > limit:
        raise StatementError(where, f"longer than {limit} characters")
    if not empty and not value.strip():
        raise StatementError(where, "must not be empty")
    if _CONTROL.search(value):
        raise StatementError(where, "contains control characters")
    return value


def _opt_str(obj: Mapping[str, Any], key: str, where: str, **kw: Any) -> str | None:
    if key not in obj or obj[key] is None:
        return None
    return _str(obj[key], f"{where}.{key}", **kw)


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise StatementError(where, f"expected an integer, got {_kind(value)}")
    if value < 0 or value > 10**9:
        raise StatementError(where, "out of range (0..1e9)")
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise StatementError(where, f"expected true or false, got {_kind(value)}")
    return value


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise StatementError(where, f"expected an object, got {_kind(value)}")
    return value


def _list(value: Any, where: str, *, limit: int) -> list[Any]:
    if not isinstance(value, list):
        raise StatementError(where, f"expected a list, got {_kind(value)}")
    if len(value) > limit:
        raise StatementError(where, f"more than {limit} items")
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def _required(obj: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in obj or obj[key] is None:
        raise StatementError(f"{where}.{key}" if where else key, "is required")
    return obj[key]


def _prefixed_digest(value: Any, where: str) -> str:
    text = _str(value, where).lower()
    if not _PREFIXED_DIGEST.fullmatch(text):
        raise StatementError(where, "expected 'sha256:<64 hex digits>'")
    return text


def _hex_digest(value: Any, where: str) -> str:
    text = _str(value, where).lower()
    if not _HEX64.fullmatch(text):
        raise StatementError(where, "expected 64 hex digits")
    return text


def parse_rfc3339(value: Any, where: str) -> datetime:
    text = _str(value, where, limit=64)
    m = _RFC3339.fullmatch(text)
    if not m:
        raise StatementError(where, f"{text!r} is not an RFC 3339 date-time")
    frac = (m.group(7) or "")[:7]  # at most microseconds
    zone = m.group(8).upper()
    iso = f"{m.group(1)}-{m.group(2)}-{m.group(3)}T{m.group(4)}:{m.group(5)}:{m.group(6)}{frac}"
    iso += "+00:00" if zone == "Z" else zone
    try:
        return datetime.fromisoformat(iso).astimezone(UTC)
    except ValueError:
        raise StatementError(where, f"{text!r} is not a valid date-time") from None


# --------------------------------------------------------------------------------------------


def _parse_fingerprint(value: Any) -> dict[str, FingerprintValue]:
    obj = _obj(value, "predicate.fingerprint")
    if len(obj) > 64:
        raise StatementError("predicate.fingerprint", "more than 64 dimensions")
    result: dict[str, FingerprintValue] = {}
    for name, item in obj.items():
        where = f"predicate.fingerprint.{name[:64]}"
        if not _IDENT.fullmatch(name):
            raise StatementError(where, "dimension names are short identifiers")
        entry = _obj(item, where)
        raw = entry.get("value")
        if raw is not None and not isinstance(raw, str | int | bool):
            raise StatementError(f"{where}.value", f"expected a scalar, got {_kind(raw)}")
        if isinstance(raw, str):
            _str(raw, f"{where}.value", empty=True)
        if isinstance(raw, int) and not isinstance(raw, bool):
            _int(raw, f"{where}.value")
        result[name] = FingerprintValue(
            value=raw,
            version=_opt_str(entry, "version", where, empty=True),
            source=_opt_str(entry, "source", where, empty=True),
        )
    return result


def _parse_criteria(value: Any) -> CriteriaMatch:
    where = "predicate.criteriaMatch"
    obj = _obj(value, where)
    matched = _bool(_required(obj, "matched", where), f"{where}.matched")
    dims: list[DimensionMatch] = []
    seen: set[str] = set()
    for i, item in enumerate(_list(obj.get("perDimension", []), f"{where}.perDimension", limit=64)):
        at = f"{where}.perDimension[{i}]"
        entry = _obj(item, at)
        dimension = _str(_required(entry, "dimension", at), f"{at}.dimension", limit=64)
        if not _IDENT.fullmatch(dimension):
            raise StatementError(f"{at}.dimension", "expected a short identifier")
        if dimension in seen:
            raise StatementError(f"{at}.dimension", f"duplicate dimension {dimension!r}")
        seen.add(dimension)
        match = _str(_required(entry, "match", at), f"{at}.match", limit=32)
        if match not in _MATCH_STATES:
            raise StatementError(f"{at}.match", "expected matched, mismatched or unknown")
        dims.append(
            DimensionMatch(
                dimension=dimension,
                match=match,
                recipe_requires=_opt_str(entry, "recipeRequires", at, empty=True),
                fingerprint_provides=_opt_str(entry, "fingerprintProvides", at, empty=True),
            )
        )
    return CriteriaMatch(matched=matched, per_dimension=tuple(dims))


def _parse_phases(value: Any) -> dict[str, PhaseSummary]:
    obj = _obj(value, "predicate.phases")
    if not obj:
        raise StatementError("predicate.phases", "no phases")
    if len(obj) > 16:
        raise StatementError("predicate.phases", "more than 16 phases")
    phases: dict[str, PhaseSummary] = {}
    for name, item in obj.items():
        where = f"predicate.phases.{name[:64]}"
        if not re.fullmatch(r"[a-z][a-z0-9-]{0,31}", name):
            raise StatementError(where, "phase names are lowercase identifiers")
        entry = _obj(item, where)
        phases[name] = PhaseSummary(
            passed=_int(_required(entry, "passed", where), f"{where}.passed"),
            failed=_int(_required(entry, "failed", where), f"{where}.failed"),
            skipped=_int(_required(entry, "skipped", where), f"{where}.skipped"),
            ctrf_digest=_prefixed_digest(
                _required(entry, "ctrfDigest", where), f"{where}.ctrfDigest"
            ),
        )
    return phases


def _parse_images(value: Any) -> tuple[ValidatorImage, ...]:
    images = []
    for i, item in enumerate(_list(value, "predicate.validatorImages", limit=256)):
        where = f"predicate.validatorImages[{i}]"
        entry = _obj(item, where)
        images.append(
            ValidatorImage(
                image=_str(_required(entry, "image", where), f"{where}.image"),
                digest=_str(entry.get("digest", ""), f"{where}.digest", empty=True),
            )
        )
    return tuple(images)


def _parse_bom(value: Any) -> BomRef:
    where = "predicate.bom"
    obj = _obj(value, where)
    return BomRef(
        format=_str(_required(obj, "format", where), f"{where}.format", limit=64),
        version=_str(_required(obj, "version", where), f"{where}.version", limit=64),
        digest=_prefixed_digest(_required(obj, "digest", where), f"{where}.digest"),
        image_count=_int(obj.get("imageCount", 0), f"{where}.imageCount"),
    )


def _parse_manifest(value: Any) -> ManifestRef:
    where = "predicate.manifest"
    obj = _obj(value, where)
    return ManifestRef(
        digest=_prefixed_digest(_required(obj, "digest", where), f"{where}.digest"),
        file_count=_int(_required(obj, "fileCount", where), f"{where}.fileCount"),
    )


def _parse_redaction(value: Any) -> Redaction:
    where = "predicate.redaction"
    obj = _obj(value, where)
    applied = tuple(
        _str(item, f"{where}.applied[{i}]", limit=256)
        for i, item in enumerate(_list(obj.get("applied", []), f"{where}.applied", limit=64))
    )
    return Redaction(
        policy=_str(_required(obj, "policy", where), f"{where}.policy", limit=64),
        version=_str(_required(obj, "version", where), f"{where}.version", limit=64),
        applied=applied,
    )


def _parse_profile(value: Any) -> ProfileInfo:
    where = "predicate.profile"
    obj = _obj(value, where)
    selection = _str(_required(obj, "selection", where), f"{where}.selection", limit=256)
    m = _PROFILE_SELECTION.fullmatch(selection)
    if not m:
        raise StatementError(f"{where}.selection", "expected '<profile>=<value>'")
    return ProfileInfo(
        selection=selection,
        name=m.group(1),
        value=m.group(2),
        policy_descriptor_identity=_str(
            _required(obj, "policyDescriptorIdentity", where), f"{where}.policyDescriptorIdentity"
        ),
        advertiser=_opt_str(obj, "advertiser", where),
    )


def parse_statement(
    payload: bytes | str | None,
    *,
    payload_type: str | None = IN_TOTO_PAYLOAD_TYPE,
    allow_artifact_subject: bool = False,
) -> AicrStatement:
    """Parse a DSSE payload as an AICR recipe-evidence in-toto Statement v1.

    ``payload`` None (a message signature) is not evidence. ``allow_artifact_subject``: accept a
    subject that is not ``recipe:<name>`` (AICR's OCI-referrer statements name the OCI artifact);
    the recipe identity then comes from the predicate alone and ``artifact_subject`` is set.
    """
    if payload is None:
        raise StatementError(
            "payload", "no in-toto statement (a message signature is not evidence)"
        )
    if payload_type != IN_TOTO_PAYLOAD_TYPE:
        raise StatementError(
            "payloadType", f"{str(payload_type)[:100]!r} is not {IN_TOTO_PAYLOAD_TYPE}"
        )
    raw = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
    try:
        doc = load_json(raw, what="statement", limits=STATEMENT_LIMITS)
    except JSONLimitError as exc:
        raise StatementError("payload", str(exc)) from None
    statement = _obj(doc, "statement")
    return parse_statement_object(
        statement,
        statement_sha256=hashlib.sha256(raw).hexdigest(),
        allow_artifact_subject=allow_artifact_subject,
    )


def _check_strings(document: Any) -> None:
    """Every string (keys included) anywhere in the statement is at most MAX_STRING chars."""
    stack: list[tuple[Any, str]] = [(document, "")]
    while stack:
        node, path = stack.pop()
        items = node.items() if type(node) is dict else enumerate(node)
        for key, value in items:
            kind = type(value)
            if kind is str:
                if len(value) > MAX_STRING:
                    where = f"{path}.{key}" if type(key) is str else f"{path}[{key}]"
                    raise StatementError(
                        where.lstrip("."), f"string longer than {MAX_STRING} characters"
                    )
            elif kind is dict or kind is list:
                where = f"{path}.{key}" if type(key) is str else f"{path}[{key}]"
                stack.append((value, where.lstrip(".")))
            if type(key) is str and len(key) > 256:
                raise StatementError(path or "statement", "object key longer than 256 characters")


def parse_statement_object(
    statement: Mapping[str, Any],
    *,
    statement_sha256: str = "",
    allow_artifact_subject: bool = False,
) -> AicrStatement:
    """``parse_statement`` for an already decoded (bounded) JSON object."""
    ptype, version = _predicate_type(statement)
    _check_strings(statement)
    subject = _subject(statement)
    predicate = _obj(_required(statement, "predicate", ""), "predicate")
    schema_version = _str(
        _required(predicate, "schemaVersion", "predicate"), "predicate.schemaVersion", limit=32
    )
    if not _SEMVER_1.fullmatch(schema_version):
        raise StatementError(
            "predicate.schemaVersion", f"unsupported schema version {schema_version!r} (1.x.y)"
        )
    recipe_name, recipe_digest = _recipe(predicate)
    artifact_subject = _is_artifact_subject(
        subject, recipe_name, recipe_digest, allowed=allow_artifact_subject
    )
    profile = None
    if version == "v2":
        profile = _parse_profile(_required(predicate, "profile", "predicate"))
    elif version == "v3":
        # v3 carries a profile for profiled recipes and none for others (AICR-V1.md §1).
        if predicate.get("profile") is not None:
            profile = _parse_profile(predicate["profile"])
    elif predicate.get("profile") is not None:
        raise StatementError(
            "predicate.profile", f"a profile needs predicate type {PREDICATE_V2} or {PREDICATE_V3}"
        )

    return AicrStatement(
        predicate_type=ptype,
        predicate_version=version,
        subject=subject,
        recipe_name=recipe_name,
        recipe_digest=recipe_digest,
        schema_version=schema_version,
        attested_at=parse_rfc3339(
            _required(predicate, "attestedAt", "predicate"), "predicate.attestedAt"
        ),
        aicr_version=_str(
            _required(predicate, "aicrVersion", "predicate"), "predicate.aicrVersion", limit=128
        ),
        validator_catalog_version=_str(
            _required(predicate, "validatorCatalogVersion", "predicate"),
            "predicate.validatorCatalogVersion",
            limit=128,
        ),
        validator_images=_parse_images(predicate.get("validatorImages", [])),
        fingerprint=_parse_fingerprint(_required(predicate, "fingerprint", "predicate")),
        criteria_match=_parse_criteria(_required(predicate, "criteriaMatch", "predicate")),
        phases=_parse_phases(_required(predicate, "phases", "predicate")),
        bom=_parse_bom(predicate["bom"]) if predicate.get("bom") is not None else None,
        manifest=_parse_manifest(predicate["manifest"])
        if predicate.get("manifest") is not None
        else None,
        redaction=_parse_redaction(predicate["redaction"])
        if predicate.get("redaction") is not None
        else None,
        profile=profile,
        statement_sha256=statement_sha256,
        artifact_subject=artifact_subject,
        predicate=predicate,
    )


def _predicate_type(statement: Mapping[str, Any]) -> tuple[str, str]:
    """The in-toto statement's predicate type and its AICR evidence version."""
    stype = statement.get("_type")
    if stype != STATEMENT_TYPE:
        raise StatementError("_type", f"{str(stype)[:100]!r} is not {STATEMENT_TYPE}")
    ptype = _str(_required(statement, "predicateType", ""), "predicateType", limit=512)
    version = PREDICATE_TYPES.get(ptype)
    if version is None:
        supported = ", ".join(PREDICATE_TYPES)
        what = (
            "is a recipe-evidence version this site does not verify"
            if ptype.startswith(_EVIDENCE_FAMILIES)
            else "is not AICR recipe evidence"
        )
        raise StatementError(
            "predicateType", f"predicate type {ptype[:200]!r} {what} (supported: {supported})"
        )
    return ptype, version


def _subject(statement: Mapping[str, Any]) -> Subject:
    subjects = _list(_required(statement, "subject", ""), "subject", limit=16)
    if len(subjects) != 1:
        raise StatementError("subject", f"expected exactly one subject, got {len(subjects)}")
    subj = _obj(subjects[0], "subject[0]")
    name = _str(_required(subj, "name", "subject[0]"), "subject[0].name", limit=1024)
    digests = _obj(_required(subj, "digest", "subject[0]"), "subject[0].digest")
    digest = _hex_digest(
        _required(digests, "sha256", "subject[0].digest"), "subject[0].digest.sha256"
    )
    return Subject(name=name, sha256=digest)


def _recipe(predicate: Mapping[str, Any]) -> tuple[str, str]:
    """The predicate's recipe name and digest."""
    recipe = _obj(_required(predicate, "recipe", "predicate"), "predicate.recipe")
    name = _str(_required(recipe, "name", "predicate.recipe"), "predicate.recipe.name", limit=253)
    if not _RECIPE_NAME.fullmatch(name):
        raise StatementError("predicate.recipe.name", f"{name!r} is not a recipe name")
    digest = _hex_digest(_required(recipe, "digest", "predicate.recipe"), "predicate.recipe.digest")
    return name, digest


def _is_artifact_subject(
    subject: Subject, recipe_name: str, recipe_digest: str, *, allowed: bool
) -> bool:
    """False for the ``recipe:<name>`` subject, which must repeat the predicate's recipe; True
    for another artifact's subject where that is ``allowed``."""
    if subject.name.startswith("recipe:"):
        if subject.name != f"recipe:{recipe_name}":
            raise StatementError(
                "subject[0].name",
                f"{subject.name!r} does not name the predicate's recipe {recipe_name!r}",
            )
        if subject.sha256 != recipe_digest:
            raise StatementError(
                "subject[0].digest.sha256",
                "does not equal predicate.recipe.digest",
            )
        return False
    if allowed:
        return True
    raise StatementError("subject[0].name", f"expected 'recipe:{recipe_name}'")
