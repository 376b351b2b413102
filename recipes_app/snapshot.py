"""The catalog snapshot file the product ships, so `make run` needs nothing outside the repo.

A snapshot is gzip-compressed JSON holding the exact text of every file the resolver reads
from an AICR recipe tree, plus where it came from. It is written by
``manage.py write_catalog_snapshot TREE OUT`` from a real tree and read back by
``manage.py import_catalog SNAPSHOT``.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

from evidence_app.verification._json import JSONLimitError, JSONLimits, load_json

FORMAT = "aicr-dashboard-catalog-snapshot/v1"
BUNDLED_SNAPSHOT = Path(__file__).resolve().parent / "catalog" / "aicr-main-08.json.gz"
# A snapshot holds a few MB of YAML; anything far bigger is not one of ours.
MAX_UNCOMPRESSED_BYTES = 64 * 1024 * 1024
# The snapshot is a flat object of file texts: the bounded loader's limits for that shape (a
# snapshot file handed to import_catalog is as untrusted as any other input).
SNAPSHOT_JSON_LIMITS = JSONLimits(
    max_bytes=MAX_UNCOMPRESSED_BYTES,
    max_depth=2,
    max_object_keys=100_000,
    max_values=100_010,
    max_number_chars=40,
)


class SnapshotError(ValueError):
    pass


@dataclass(frozen=True)
class Snapshot:
    source: str
    aicr_version: str
    files: dict[str, str]


def write_snapshot(path: Path, snapshot: Snapshot) -> None:
    payload = {
        "format": FORMAT,
        "source": snapshot.source,
        "aicrVersion": snapshot.aicr_version,
        "files": dict(sorted(snapshot.files.items())),
    }
    data = json.dumps(payload, ensure_ascii=False, indent=0, sort_keys=True).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0 keeps the file byte-identical when the tree has not changed.
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(data)


def read_snapshot(path: Path) -> Snapshot:
    try:
        with gzip.open(path, "rb") as gz:
            data = gz.read(MAX_UNCOMPRESSED_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise SnapshotError(f"{path}: not a readable gzip snapshot ({exc})") from exc
    if len(data) > MAX_UNCOMPRESSED_BYTES:
        raise SnapshotError(f"{path}: larger than {MAX_UNCOMPRESSED_BYTES} bytes uncompressed")
    try:
        payload = load_json(data, what=str(path), limits=SNAPSHOT_JSON_LIMITS)
    except JSONLimitError as exc:
        raise SnapshotError(str(exc)) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise SnapshotError(f"{path}: field 'format' must be {FORMAT!r}")
    files = payload.get("files")
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in files.items()
    ):
        raise SnapshotError(f"{path}: field 'files' must map relative paths to text")
    return Snapshot(
        source=str(payload.get("source", "")),
        aicr_version=str(payload.get("aicrVersion", "")),
        files=files,
    )
