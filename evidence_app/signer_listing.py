"""Reads behind ``/signers/``: every signer with what it contributed, and its public key.

Kept apart from ``signer_page`` (one signer's page) as the index needs only the
signer rows and their tallies (``services.signer_tallies``: a few rows per signer, kept by
the services that change evidence), in one query per page: never a group over every
evidence row.
"""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import F, QuerySet

from evidence_app.models import Signer, SignerKind
from evidence_app.services.signer_tallies import signers_annotated

PAGE_SIZE = 50


def signer_index(*, page_number: Any) -> Page[Signer]:
    """Signers, counted ones first, then by the newest upload; each annotated with
    ``counted_records`` (records consensus counts), ``records`` (all) and ``last_seen`` (the
    newest upload). Queries: the count and the page."""
    signers: QuerySet[Signer] = (
        signers_annotated()
        .select_related("key")
        .order_by("-counted", F("last_seen").desc(nulls_last=True), "label", "pk")
    )
    return Paginator(signers, PAGE_SIZE).get_page(page_number)


def signer_public_key(*, slug: str) -> tuple[Signer, str] | None:
    """The registered public key (PEM) of a key-signed signer; None for keyless or unknown."""
    signer = Signer.objects.select_related("key").filter(slug=slug, kind=SignerKind.KEY).first()
    if signer is None or signer.key is None:
        return None
    return signer, signer.key.public_key_pem
