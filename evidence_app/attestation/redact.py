"""AICR's default ("minimal", v2) redaction of an evidence bundle (``pkg/evidence/redact``).

What leaves the cluster in a published bundle (AICR-VALIDATE.md §10):

- CTRF, per test: ``stdout`` and ``message`` removed (validator logs and termination messages
  can carry node names, addresses, anything a container printed), ``extra`` filtered to the
  allowlist of §8 (``nodesValidated``/``nodesTotal`` as at most five decimal digits,
  ``skipReason`` from a closed set) and omitted when nothing is left. Summary, names,
  statuses, durations, suites and timestamps are unchanged.
- Snapshot: the header keeps ``kind``, ``apiVersion`` and ``metadata.{timestamp,version}``;
  ``fingerprint`` is kept; measurements keep only the allowlisted readings below; subtypes and
  measurements left empty are removed.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from evidence_app.corroborate.gojson import marshal_indent

POLICY = "minimal"
POLICY_VERSION = "v2"
APPLIED = (
    "ctrf.tests.extra.allowlist",
    "ctrf.tests.omit:message",
    "ctrf.tests.omit:stdout",
    "snapshot.header.allowlist",
    "snapshot.measurements.allowlist",
)

_COUNT = re.compile(r"[0-9]{1,5}")
_SKIP_REASONS = frozenset({"no-gpu-nodes", "no-schedulable-gpu-nodes", "nodes-busy"})
_HEADER_METADATA = ("timestamp", "version")
FINGERPRINT_FIELDS = (
    "service",
    "accelerator",
    "gpuModel",
    "os",
    "k8sVersion",
    "region",
    "nodeCount",
    "gpuNodeCount",
)
FINGERPRINT_ENTRY_KEYS = ("value", "source", "note", "version")
MEASUREMENT_ALLOWLIST: Mapping[str, Mapping[str, frozenset[str]]] = {
    "K8s": {
        "server": frozenset({"version", "platform", "goVersion"}),
        "node": frozenset(
            {
                "provider",
                "kubelet-version",
                "kernel-version",
                "operating-system",
                "os-image",
                "container-runtime-name",
                "container-runtime-version",
            }
        ),
    },
    "GPU": {
        "hardware": frozenset(
            {"gpu-present", "gpu-count", "driver-loaded", "detection-source", "model"}
        )
    },
    "OS": {
        "release": frozenset(
            {"ID", "ID_LIKE", "NAME", "PRETTY_NAME", "VERSION", "VERSION_ID", "VERSION_CODENAME"}
        )
    },
    "NodeTopology": {"summary": frozenset({"node-count", "taint-count", "label-count"})},
}


def redaction_predicate() -> dict[str, Any]:
    """``predicate.redaction`` of a redacted bundle."""
    return {"applied": sorted(APPLIED), "policy": POLICY, "version": POLICY_VERSION}


def _extra_allowed(key: str, value: object) -> bool:
    if not isinstance(value, str):
        return False
    if key in ("nodesValidated", "nodesTotal"):
        return bool(_COUNT.fullmatch(value))
    return key == "skipReason" and value in _SKIP_REASONS


def redact_ctrf(data: bytes) -> bytes:
    """``redact.CTRF``: the same report without stdout, messages and unlisted extras.

    ``data`` is a CTRF document as AICR writes it; the result is written the same way (Go
    ``MarshalIndent`` + newline), every other field in its original order and value.
    """
    report = json.loads(data)
    if not isinstance(report, dict):
        raise ValueError("a CTRF report is a JSON object")
    results = report.get("results")
    tests = results.get("tests") if isinstance(results, dict) else None
    for test in tests if isinstance(tests, list) else []:
        if not isinstance(test, dict):
            raise ValueError("a CTRF test is a JSON object")
        test.pop("stdout", None)
        test.pop("message", None)
        extra = test.pop("extra", None)
        if isinstance(extra, dict):
            kept = {k: v for k, v in extra.items() if _extra_allowed(k, v)}
            if kept:
                test["extra"] = kept
    return marshal_indent(report)


def _items(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _redact_measurement(measurement: object) -> dict[str, Any] | None:
    if not isinstance(measurement, Mapping):
        return None
    mtype = measurement.get("type")
    allowed = MEASUREMENT_ALLOWLIST.get(mtype) if isinstance(mtype, str) else None
    if not allowed:
        return None
    subtypes = []
    for subtype in _items(measurement.get("subtypes")):
        if not isinstance(subtype, Mapping):
            continue
        name = subtype.get("subtype")
        keys = allowed.get(name) if isinstance(name, str) else None
        data = subtype.get("data")
        if not keys or not isinstance(data, Mapping):
            continue
        kept = {k: v for k, v in data.items() if k in keys and _scalar(v)}
        if kept:
            subtypes.append({"subtype": name, "data": kept})
    return {"type": mtype, "subtypes": subtypes} if subtypes else None


def _scalar(value: object) -> bool:
    """A reading AICR's typed snapshot can hold (int, string, bool, float64; a YAML timestamp
    decodes to a time). Maps, lists and non-finite floats cannot: they are dropped."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str | int | datetime.date)  # bool is an int


def _fingerprint_kept(value: object) -> dict[str, Any]:
    """The snapshot's ``fingerprint`` as AICR's typed struct re-marshals it: the known
    dimensions, each with scalar ``value``/``source``/``note``/``version``; anything else (a
    cluster wrote it) is dropped."""
    if not isinstance(value, Mapping):
        return {}
    kept: dict[str, Any] = {}
    for name in FINGERPRINT_FIELDS:
        entry = value.get(name)
        if isinstance(entry, Mapping):
            fields = {k: entry[k] for k in FINGERPRINT_ENTRY_KEYS if _scalar(entry.get(k))}
            if fields:
                kept[name] = fields
    return kept


def redact_snapshot(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """``redact.Snapshot``: the header and the allowlisted readings only."""
    out: dict[str, Any] = {}
    for key in ("kind", "apiVersion"):
        if snapshot.get(key) not in (None, "") and _scalar(snapshot[key]):
            out[key] = snapshot[key]
    metadata = snapshot.get("metadata")
    if isinstance(metadata, Mapping):
        kept = {
            k: metadata[k]
            for k in _HEADER_METADATA
            if metadata.get(k) not in (None, "") and _scalar(metadata[k])
        }
        if kept:
            out["metadata"] = kept
    fingerprint = _fingerprint_kept(snapshot.get("fingerprint"))
    if fingerprint:
        out["fingerprint"] = fingerprint
    measurements = [
        m
        for m in (_redact_measurement(item) for item in _items(snapshot.get("measurements")))
        if m is not None
    ]
    if measurements:
        out["measurements"] = measurements
    return out
