"""Every identity a bundle records, each with where it came from and a tri-state, read once at
ingest and stored on the row (``Evidence.identities``).

AICR's support policy: a qualification covers exact identities (the operator image and chart
digests, the AICR image digest even at the same version, the validator images, and the
profile's hardware/software tuple) and stops applying when any of them changes. To compare
them, each identity is one of three things, never guessed:

- ``recorded``: the bundle carries a value (``value``), read from ``source``: ``predicate``
  (the signed statement), ``snapshot`` (``snapshot.yaml``), ``bom`` (``bom.cdx.json``),
  ``ctrf`` (``ctrf/*.json``) or ``recipe`` (``recipe.yaml`` with the catalog's values files);
- ``redacted``: AICR's redaction removed every reading it could come from, as the bundle's own
  ``predicate.redaction`` block says (``snapshot.measurements.allowlist`` applied, and none of
  the identity's readings is on ``attestation.redact.MEASUREMENT_ALLOWLIST``); publishing with
  ``aicr validate --full`` would settle it;
- ``not-recorded``: the bundle has no field for it, or left it empty.

What AICR's predicate/BOM names are is taken from AICR's example bundle and ADR-007 (the
offline tree): ``predicate.validatorImages[{image, digest}]``, ``predicate.redaction``, BOM
``container`` components with ``aicr:image:{registry,repository,tag,digest}`` properties, CTRF
``results.tool``. Not in that tree, so not invented here: a predicate field for AICR's own
image digest or the operator's image/chart (they are found only where the BOM lists an image of
that repository), the exact keys of a ``NetworkTopology`` measurement (any reading whose key
names a fabric is taken; it is never on the minimal allowlist, so a minimal bundle has it
redacted), and a recorded GPU allocation policy (resolved from the bundle's ``recipe.yaml`` as
``aicr validate`` does, ``validators_app.orchestrator.allocation``).

Plain Python apart from the allocation resolver's import; no database access.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evidence_app.attestation.redact import MEASUREMENT_ALLOWLIST
from evidence_app.verification._json import JSONLimitError, load_json, storable

from .identity import LABELS, identity_from_fingerprint, identity_of

SCHEMA = 1
RECORDED = "recorded"
REDACTED = "redacted"
NOT_RECORDED = "not-recorded"
STATES = (RECORDED, REDACTED, NOT_RECORDED)
SNAPSHOT_ALLOWLIST = "snapshot.measurements.allowlist"

# The hardware/software tuple of a profile, in the order pages show it: coverage.identity's
# readings (AICR version apart), then the GPU allocation policy and the fabric.
TUPLE_LABELS: dict[str, str] = {k: v for k, v in LABELS.items() if k != "aicr_version"}
TUPLE_LABELS.update(gpu_allocation="GPU allocation mode", fabric="fabric (network topology)")
TUPLE_KEYS: tuple[str, ...] = tuple(TUPLE_LABELS)
VALUE_LABELS: dict[str, str] = {
    "aicr_version": "AICR version",
    **TUPLE_LABELS,
    "workload_images": "workload images",
}

# The snapshot readings (type, subtype, key) each snapshot-read identity comes from
# (coverage.identity.identity_of): an identity is redacted when none survives the allowlist.
SNAPSHOT_READINGS: Mapping[str, tuple[tuple[str, str, str], ...]] = {
    "k8s_version": (("K8s", "server", "version"),),
    "os": (("OS", "release", "ID"),),
    "os_version": (("OS", "release", "VERSION_ID"),),
    "kernel": (("OS", "sysctl", "/proc/sys/kernel/osrelease"), ("K8s", "node", "kernel-version")),
    "gpu_model": (("GPU", "hardware", "model"),),
    "gpu_count": (("GPU", "hardware", "gpu-count"),),
    "driver": (("K8s", "policy", "driver.version"), ("K8s", "image", "nvidia-driver")),
    "gpu_operator": (("K8s", "helm", "gpu-operator.version"), ("K8s", "image", "gpu-operator")),
    "dra_driver": (
        ("K8s", "helm", "nvidia-dra-driver-gpu.version"),
        ("K8s", "image", "nvidia-dra-driver-gpu"),
    ),
    "node_image": (("K8s", "node", "os-image"),),
    "instance_type": (("NodeTopology", "label", "node.kubernetes.io/instance-type"),),
    "fabric": (("NetworkTopology", "*", "*"),),
}
_FINGERPRINT_KEYS = frozenset({"k8s_version", "os", "os_version", "gpu_model", "aicr_version"})
_FABRIC_KEY = re.compile(r"fabric", re.IGNORECASE)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def _dropped(reading: tuple[str, str, str]) -> bool:
    mtype, subtype, key = reading
    return key not in MEASUREMENT_ALLOWLIST.get(mtype, {}).get(subtype, frozenset())


# Identities AICR's minimal policy can remove from a redacted snapshot, computed from the
# policy: at least one reading they come from is not on the allowlist, so a redacted bundle
# without them may have had them (the kernel: OS.sysctl is dropped, K8s.node kept). One whose
# every reading is kept is "not recorded" when absent: the raw snapshot did not have it.
REDACTED_BY_POLICY = frozenset(
    k for k, readings in SNAPSHOT_READINGS.items() if any(_dropped(r) for r in readings)
)


@dataclass(frozen=True)
class Identity:
    """One identity as recorded: ``value`` when ``state`` is ``recorded``, else None."""

    key: str
    value: str | None
    state: str
    source: str = ""

    @property
    def label(self) -> str:
        return VALUE_LABELS.get(self.key, self.key)

    def as_dict(self) -> dict[str, str | None]:
        return {"value": self.value, "state": self.state, "source": self.source}


@dataclass(frozen=True)
class Image:
    """An image the bundle names: ``repository`` (registry/path), tag and digest as given."""

    repository: str
    tag: str
    digest: str  # "sha256:<64 hex>" or "" (not recorded)
    source: str
    role: str  # "validator" (predicate.validatorImages) or "workload" (another BOM container)

    def as_dict(self) -> dict[str, str]:
        return {
            "image": self.repository,
            "tag": self.tag,
            "digest": self.digest,
            "source": self.source,
            "role": self.role,
        }


# --- reading -------------------------------------------------------------------------------


def redaction_applied(predicate: Mapping[str, Any]) -> frozenset[str]:
    redaction = predicate.get("redaction")
    applied = redaction.get("applied") if isinstance(redaction, Mapping) else None
    if not isinstance(applied, list):
        return frozenset()
    return frozenset(a for a in applied if isinstance(a, str))


def split_image(ref: str) -> tuple[str, str, str]:
    """``repo[:tag][@sha256:…]`` → (repository, tag, digest); the tag's colon is the last one
    after the last slash (a registry port is not a tag)."""
    ref = ref.strip()
    digest = ""
    if "@" in ref:
        ref, digest = ref.split("@", 1)
    tag = ""
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > slash:
        ref, tag = ref[:colon], ref[colon + 1 :]
    return ref, tag, digest if _DIGEST.fullmatch(digest) else ""


def _text(value: object, limit: int = 500) -> str:
    return value.strip()[:limit] if isinstance(value, str) else ""


def _predicate_images(predicate: Mapping[str, Any]) -> list[Image]:
    raw = predicate.get("validatorImages")
    out = []
    for entry in raw[:64] if isinstance(raw, list) else ():
        if not isinstance(entry, Mapping):
            continue
        repo, tag, inline = split_image(_text(entry.get("image")))
        digest = _text(entry.get("digest"), 80)
        if repo:
            digest = digest if _DIGEST.fullmatch(digest) else inline
            out.append(Image(repo, tag, digest, "predicate", "validator"))
    return out


def _bom_images(bom: Mapping[str, Any]) -> list[Image]:
    components = bom.get("components")
    out = []
    for c in components[:2000] if isinstance(components, list) else ():
        if not isinstance(c, Mapping) or c.get("type") != "container":
            continue
        props = {
            p.get("name"): p.get("value")
            for p in c.get("properties") or ()
            if isinstance(p, Mapping) and isinstance(p.get("name"), str)
        }
        repo = _text(c.get("name"))
        registry, path = (
            _text(props.get("aicr:image:registry")),
            _text(props.get("aicr:image:repository")),
        )
        if registry and path:
            repo = f"{registry}/{path}"
        repo, tag, inline = split_image(repo)
        tag = _text(props.get("aicr:image:tag"), 200) or tag or _text(c.get("version"), 200)
        digest = _text(props.get("aicr:image:digest"), 80)
        if repo:
            out.append(
                Image(repo, tag, digest if _DIGEST.fullmatch(digest) else inline, "bom", "workload")
            )
    return out


def _images(predicate: Mapping[str, Any], bom: Mapping[str, Any] | None) -> list[Image]:
    """Validator images from the predicate (the signed field), then every other BOM container
    as a workload image; a BOM digest completes a validator image the predicate left empty."""
    validators = {i.repository: i for i in _predicate_images(predicate)}
    workloads: dict[str, Image] = {}
    for image in _bom_images(bom or {}):
        known = validators.get(image.repository)
        if known is not None:
            if not known.digest and image.digest:
                validators[image.repository] = Image(
                    known.repository, known.tag, image.digest, "bom", "validator"
                )
        elif image.repository not in workloads or image.digest:
            workloads[image.repository] = image
    return sorted(validators.values(), key=lambda i: i.repository) + sorted(
        workloads.values(), key=lambda i: i.repository
    )


def _fabric(snapshot: Mapping[str, Any]) -> str | None:
    measurements = snapshot.get("measurements")
    values: set[str] = set()
    for m in measurements if isinstance(measurements, list) else ():
        if not isinstance(m, Mapping) or m.get("type") != "NetworkTopology":
            continue
        for s in m.get("subtypes") or ():
            data = s.get("data") if isinstance(s, Mapping) else None
            for key, value in (data or {}).items() if isinstance(data, Mapping) else ():
                if isinstance(key, str) and _FABRIC_KEY.search(key) and str(value).strip():
                    values.add(str(value).strip()[:200])
    return ",".join(sorted(values)) or None


def _has_type(snapshot: Mapping[str, Any], mtype: str) -> bool:
    measurements = snapshot.get("measurements")
    return any(
        isinstance(m, Mapping) and m.get("type") == mtype
        for m in (measurements if isinstance(measurements, list) else ())
    )


def _ctrf_tool_version(ctrf: Sequence[Mapping[str, Any]]) -> str | None:
    for report in ctrf:
        results = report.get("results")
        tool = results.get("tool") if isinstance(results, Mapping) else None
        if isinstance(tool, Mapping) and tool.get("name") == "aicr":
            version = _text(tool.get("version"), 100)
            if version:
                return version
    return None


AllocationReader = Callable[[Mapping[str, Any]], str | None]


def recorded_identities(
    predicate: Mapping[str, Any],
    *,
    snapshot: Mapping[str, Any] | None = None,
    bom: Mapping[str, Any] | None = None,
    ctrf: Sequence[Mapping[str, Any]] = (),
    recipe: Mapping[str, Any] | None = None,
    allocation: AllocationReader | None = None,
) -> dict[str, Any]:
    """The stored record: ``{"schema", "redaction", "values": {key: {value, state, source}},
    "images": [...]}``. ``allocation`` resolves the GPU allocation policy of the bundle's
    ``recipe`` (None when it cannot)."""
    applied = redaction_applied(predicate)
    snapshot_redacted = SNAPSHOT_ALLOWLIST in applied
    fingerprint = predicate.get("fingerprint")
    aicr_version = _text(predicate.get("aicrVersion"), 100)
    from_fp = identity_from_fingerprint(
        fingerprint if isinstance(fingerprint, Mapping) else {}, aicr_version=aicr_version
    )
    from_snap = identity_of(snapshot) if snapshot is not None else dict.fromkeys(LABELS)
    values: dict[str, Identity] = {}

    def put(key: str, value: str | None, source: str) -> None:
        if value and key not in values:
            values[key] = Identity(key, value[:4000], RECORDED, source)

    # The snapshot's readings first, as coverage.identity reads a person's snapshot (so the two
    # compare like for like), then the signed fingerprint for what the shipped snapshot lacks
    # (AICR computes the fingerprint from the raw snapshot, before redaction).
    for key in LABELS:
        if key != "aicr_version":
            put(key, from_snap.get(key), "snapshot")
    for key in _FINGERPRINT_KEYS:
        put(key, from_fp.get(key), "predicate")
    if snapshot is not None and _has_type(snapshot, "NetworkTopology"):
        put("fabric", _fabric(snapshot), "snapshot")
    put("aicr_version", _ctrf_tool_version(ctrf), "ctrf")
    if recipe is not None and allocation is not None:
        put("gpu_allocation", allocation(recipe), "recipe")
    images = _images(predicate, bom)
    workloads = [i for i in images if i.role == "workload"]
    if workloads:
        put(
            "workload_images",
            ",".join(
                f"{i.repository}@{i.digest}" if i.digest else f"{i.repository}:{i.tag}"
                for i in workloads
            ),
            "bom",
        )
    for key in VALUE_LABELS:
        if key in values:
            continue
        redacted = snapshot_redacted and key in REDACTED_BY_POLICY
        values[key] = Identity(key, None, REDACTED if redacted else NOT_RECORDED)
    redaction = predicate.get("redaction")
    # Text read from the bundle: a NUL or a lone surrogate is written as an escape, since
    # neither can be stored in a JSON column (PostgreSQL refuses them).
    record: dict[str, Any] = storable(
        {
            "schema": SCHEMA,
            "redaction": {
                "policy": _text(redaction.get("policy"), 50),
                "version": _text(redaction.get("version"), 50),
                "applied": sorted(applied),
            }
            if isinstance(redaction, Mapping)
            else None,
            "values": {key: values[key].as_dict() for key in VALUE_LABELS},
            "images": [i.as_dict() for i in images],
        }
    )
    return record


# --- reading back what is stored --------------------------------------------------------------


def identity(record: Mapping[str, Any] | None, key: str) -> Identity:
    """One identity of a stored record (``not-recorded`` when the record predates it)."""
    values = (record or {}).get("values")
    entry = values.get(key) if isinstance(values, Mapping) else None
    if not isinstance(entry, Mapping) or entry.get("state") not in STATES:
        return Identity(key, None, NOT_RECORDED)
    value = entry.get("value")
    state = entry["state"]
    if state == RECORDED and not isinstance(value, str):
        return Identity(key, None, NOT_RECORDED)
    return Identity(
        key, value if state == RECORDED else None, state, str(entry.get("source") or "")
    )


def image_identity(record: Mapping[str, Any] | None, repository: str, label: str) -> Identity:
    """The digest the record gives ``repository`` (``recorded`` with ``repo@digest``), or
    ``not-recorded`` when it names no such image or names it without a digest."""
    for entry in (record or {}).get("images") or ():
        if isinstance(entry, Mapping) and entry.get("image") == repository:
            digest = entry.get("digest")
            if isinstance(digest, str) and _DIGEST.fullmatch(digest):
                return Identity(label, f"{repository}@{digest}", RECORDED, str(entry["source"]))
            return Identity(label, None, NOT_RECORDED, str(entry.get("source") or ""))
    return Identity(label, None, NOT_RECORDED)


def parse_json(data: bytes | None) -> Mapping[str, Any] | None:
    """A bundle file's JSON object through the bounded loader (None when unreadable)."""
    if not data:
        return None
    try:
        doc = load_json(data, what="bundle file")
    except JSONLimitError:
        return None
    return doc if isinstance(doc, Mapping) else None


# --- comparing with what is expected ----------------------------------------------------------

DIFFERS = "differs"
# The plan a record was made for (its subject, the recipe's digest): a new plan needs its own
# run (AICR's policy), so releases and /check/ name it as a changed identity too.
PLAN = "plan"
PLAN_LABEL = "plan (the recipe's digest)"


@dataclass(frozen=True)
class Expected:
    """An identity a release (or a snapshot) requires: ``image`` for an image compared by its
    repository's digest, else a ``VALUE_LABELS`` key."""

    key: str
    label: str
    value: str
    image: str = ""  # the repository, for an image identity


@dataclass(frozen=True)
class Difference:
    """Why one expected identity is not confirmed by a record: ``differs`` (both recorded,
    unequal), ``redacted`` (by the bundle's redaction) or ``not-recorded``."""

    key: str
    label: str
    state: str
    expected: str
    recorded: str | None

    @property
    def settle(self) -> str:
        """What would settle it, in words."""
        if self.state == REDACTED:
            return "publish the evidence with aicr validate --full (unredacted)"
        if self.state == NOT_RECORDED:
            return "run the profile with an AICR version that records it"
        return f"run the profile with {self.expected}"


def differences(record: Mapping[str, Any] | None, expected: Sequence[Expected]) -> list[Difference]:
    """Each expected identity the record does not confirm, in ``expected``'s order."""
    out = []
    for want in expected:
        have = (
            image_identity(record, want.image, want.label)
            if want.image
            else identity(record, want.key)
        )
        if have.state == RECORDED and have.value == want.value:
            continue
        state = DIFFERS if have.state == RECORDED else have.state
        out.append(Difference(want.key, want.label, state, want.value, have.value))
    return out
