"""``nccl-benchmark-runtime-ref``: a recipe's own NCCL benchmark runtime, read from its data tree.

AICR's ``pkg/validator/benchmark_runtime_ref.go`` (``resolveBenchmarkRuntimeRef``, constants
in ``pkg/validator/v1/perf_constraints.go``): before readiness, a performance constraint
``nccl-benchmark-runtime-ref: "<accelerator>/<service>"`` is replaced by an inline
``nccl-benchmark-runtime`` constraint holding the file
``validators/performance/testdata/<accelerator>/<service>/runtime.yaml`` of the recipe's data
tree (``--data``; here the recipe's catalog version). A malformed ref, a missing or empty file,
or a ref next to an inline runtime fails closed. The messages are AICR's text.

``nccl-benchmark-profile`` needs nothing here: it travels in ``validation.yaml`` and the
performance container reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from recipes_app.resolver.catalog import BENCHMARK_RUNTIME_DIR as TESTDATA_DIR
from recipes_app.resolver.errors import goq

from .model import InvalidRecipeInput

__all__ = [
    "RUNTIME",
    "RUNTIME_REF",
    "TESTDATA_DIR",
    "RuntimeRefError",
    "lower_benchmark_runtime_ref",
    "runtime_ref_path",
]

RUNTIME = "nccl-benchmark-runtime"  # the carrier the performance container renders
RUNTIME_REF = "nccl-benchmark-runtime-ref"  # what recipe authors write

#: Reads a file of the recipe's data tree by relative path: its text, or ``None`` if absent.
TextReader = Callable[[str], "str | None"]


class RuntimeRefError(InvalidRecipeInput):
    """AICR's ``ErrCodeInvalidRequest`` from the lowering; the message is AICR's."""


def runtime_ref_path(ref: str) -> str:
    """``benchmarkRuntimeRefPath``: the data-tree path a ``"<accelerator>/<service>"`` names."""
    parts = ref.split("/")
    if len(parts) == 2:
        accelerator, service = (part.strip() for part in parts)
        if _safe_segment(accelerator) and _safe_segment(service):
            return f"{TESTDATA_DIR}/{accelerator}/{service}/runtime.yaml"
    raise RuntimeRefError(
        f'invalid {RUNTIME_REF}={goq(ref)}: must be "{{accelerator}}/{{service}}" '
        '(e.g. "gb200/mycloud")'
    )


def lower_benchmark_runtime_ref(
    document: Mapping[str, Any], *, read: TextReader | None
) -> dict[str, Any]:
    """The ValidationInput ``document`` with its runtime ref lowered into the carrier.

    Returns a new document (the input's lists are shared with the recipe and stay untouched);
    without a non-blank ref the document comes back unchanged. ``read`` ``None``: no data tree.
    """
    performance = ((document.get("config") or {}).get("performance")) or {}
    constraints = [c for c in performance.get("constraints") or () if isinstance(c, Mapping)]
    for name in (RUNTIME_REF, RUNTIME):
        count = sum(1 for c in constraints if c.get("name") == name)
        if count > 1:
            raise RuntimeRefError(f"declare at most one {name} constraint (found {count})")
    ref = _value(constraints, RUNTIME_REF)
    if ref is None or not ref.strip():
        return dict(document)
    raw = ref.strip()
    inline = _value(constraints, RUNTIME)
    if inline is not None and inline.strip():
        raise RuntimeRefError(f"{RUNTIME_REF} and an inline {RUNTIME} are both set — supply one")
    path = runtime_ref_path(raw)
    if read is None:
        raise RuntimeRefError(
            f"{RUNTIME_REF}={goq(raw)} is set but no --data source is available to resolve it"
        )
    content = read(path)
    if content is None:
        # AICR wraps the data provider's own error here; a catalog holds no such file.
        raise RuntimeRefError(
            f"failed to resolve {RUNTIME_REF}={goq(raw)}: expected {goq(path)} in the --data "
            f"tree: file {goq(path)} not found"
        )
    if not content.strip():
        raise RuntimeRefError(f"{RUNTIME_REF}={goq(raw)} resolved to an empty file ({goq(path)})")
    lowered = [c for c in constraints if c.get("name") not in (RUNTIME_REF, RUNTIME)]
    lowered.append({"name": RUNTIME, "value": content})
    config = dict(document["config"])
    config["performance"] = {**performance, "constraints": lowered}
    return {**document, "config": config}


def _value(constraints: list[Mapping[str, Any]], name: str) -> str | None:
    """``findPerfConstraint``: the first constraint of that name's value."""
    for constraint in constraints:
        if constraint.get("name") == name:
            value = constraint.get("value")
            return "" if value is None else str(value)
    return None


def _safe_segment(segment: str) -> bool:
    """A plain name: not empty, not ``.``/``..``, no path separator."""
    return segment not in ("", ".", "..") and "/" not in segment and "\\" not in segment
