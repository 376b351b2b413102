"""The AICR publication (``/aicr/data/``) as a stored artefact, built by a Celery task.

Issue 22: the whole publication was rebuilt inline by whichever anonymous request came first
after an upload (267 s and 318 MB at 100,000 records, pickled into Redis), an availability
hole as much as a speed one. Now:

- ``publication_rebuild`` (the task ``evidence_app.tasks.publication_rebuild``) builds each
  ``include`` choice with ``publication.publication_build`` and stores its files as
  ``PublicationDocument`` rows of one ``PublicationBuild`` per choice, replaced in one
  transaction, with the ``evidence_version`` it read;
- ``publication_changed`` asks for a rebuild, debounced: a shared cache key marks one as
  queued, so a burst of uploads queues one task (``PUBLICATION_DEBOUNCE_SECONDS`` later), and a
  change made while a build runs queues the next. The services that change what is published
  call it after their commit (ingest, withdrawal, reclassification); a request that finds the
  stored build behind ``evidence_version`` (any other write path) calls it too;
- a request reads only the stored build: one document row, its bytes and ETag, with the time
  it was built and whether a rebuild is pending. Without a build yet it answers 503 with
  ``Retry-After`` (a new site, the minutes after this migration).

``PUBLICATION_BUILT_BY_WORKER`` (on wherever a broker exists) says who builds. Off (a site
without a broker; the test suite, whose workers exist only inside the tests that start one), no
task is queued: the first read after a change builds the publication in place.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from evidence_app.exports.publication import SAMPLE_KINDS, evidence_version, publication_build
from evidence_app.models import PublicationBuild, PublicationDocument

QUEUED_KEY = "evidence:aicr-publication:queued"
INDEX, LABELS = "index.json", "labels.json"
_BATCH = 50  # documents per INSERT: a series of a busy recipe is megabytes


def include_key(include: frozenset[str]) -> str:
    return ",".join(sorted(include))


def include_choices() -> list[frozenset[str]]:
    """Every ``include`` a request may ask for (none, each sample kind, both)."""
    return [
        frozenset(chosen)
        for size in range(len(SAMPLE_KINDS) + 1)
        for chosen in combinations(SAMPLE_KINDS, size)
    ]


def debounce_seconds() -> float:
    return float(settings.PUBLICATION_DEBOUNCE_SECONDS)


def _built_by_worker() -> bool:
    return bool(settings.PUBLICATION_BUILT_BY_WORKER)


def publication_changed() -> None:
    """Ask for a rebuild once the current transaction commits (at most one queued). Without a
    broker nothing is queued here: the next read of the publication builds it (``served``),
    so a site without a worker does not rebuild on every upload."""
    if _built_by_worker():
        transaction.on_commit(_queue)


def _queue() -> None:
    from evidence_app import tasks

    # ``add`` is atomic in the shared cache: one of many concurrent callers queues the task.
    # The key outlives a lost task by a bounded time, after which a request queues again.
    if cache.add(QUEUED_KEY, time.time(), timeout=max(60, int(debounce_seconds() * 30))):
        tasks.publication_rebuild.apply_async(countdown=debounce_seconds())


def rebuild_pending() -> bool:
    return cache.get(QUEUED_KEY) is not None


def publication_rebuild() -> str:
    """Build and store every ``include`` choice; returns the evidence version built."""
    cache.delete(QUEUED_KEY)  # a change from now on queues the next build
    version = evidence_version()
    for include in include_choices():
        store(include, version)
    return version


def store(include: frozenset[str], version: str) -> PublicationBuild:
    """Build ``include``'s files and replace its stored build with them."""
    start = time.perf_counter()
    built = publication_build(include)
    documents = {INDEX: built.index, LABELS: built.labels}
    documents.update({f"series/{name}.json": body for name, body in built.series.items()})
    with transaction.atomic():
        PublicationBuild.objects.filter(include=include_key(include)).delete()
        row = PublicationBuild.objects.create(
            include=include_key(include),
            version=version,
            built_at=timezone.now(),
            build_seconds=time.perf_counter() - start,
            runs=built.runs,
            left_out=built.left_out,
        )
        PublicationDocument.objects.bulk_create(
            (
                PublicationDocument(
                    build=row, name=name, body=body, sha256=hashlib.sha256(body).hexdigest()
                )
                for name, body in documents.items()
            ),
            batch_size=_BATCH,
        )
    return row


@dataclass(frozen=True)
class Served:
    """What a request reads: the stored build (None before the first), the document asked
    for (None: not in that build), and whether the evidence has moved on since the build."""

    build: PublicationBuild | None
    document: PublicationDocument | None
    pending: bool


def _read(include: frozenset[str], name: str | None) -> tuple[Any, Any]:
    if name is not None:  # the document with its build, in one query
        document = (
            PublicationDocument.objects.select_related("build")
            .filter(build__include=include_key(include), name=name)
            .first()
        )
        if document is not None:
            return document.build, document
    return PublicationBuild.objects.filter(include=include_key(include)).first(), None


def served(include: frozenset[str], name: str | None = None) -> Served:
    """The stored build of ``include`` (and its document ``name``); when the build is missing
    or behind, a rebuild is asked for (and, without a broker, has run by the time this
    returns). Two queries when nothing changed: the version and the document."""
    version = evidence_version()
    build, document = _read(include, name)
    if build is not None and build.version == version:
        return Served(build=build, document=document, pending=False)
    if not _built_by_worker():  # no worker: built here and now
        publication_rebuild()
        build, document = _read(include, name)
        pending = build is None or build.version != version
        return Served(build=build, document=document, pending=pending)
    _queue()
    return Served(build=build, document=document, pending=True)


def series_names(build: PublicationBuild) -> list[str]:
    names = build.documents.filter(name__startswith="series/").values_list("name", flat=True)
    return sorted(n.removeprefix("series/").removesuffix(".json") for n in names)
