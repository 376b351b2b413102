"""What a signer's page shows (``views.signer_detail``): why its evidence counts or not, its
class history and its evidence, newest first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator

from evidence_app.models import Evidence, Signer, SignerClass, SignerClassChange, SignerKind
from evidence_app.selectors import PAGE_SIZE, evidence_queryset
from evidence_app.services.staleness import StaleReason, staleness_bulk


def counting_explanation(signer: Signer) -> str:
    """Why this signer's evidence counts for consensus, or why it does not."""
    if signer.counted:
        if signer.signer_class == SignerClass.REGISTERED_KEY:
            return "Counted: signed with a public key a maintainer registered."
        return (
            f"Counted: the certificate's issuer and identity match the allowlist "
            f"({signer.get_signer_class_display().lower()})."
        )
    if signer.kind == SignerKind.KEY:
        return "Reported, not counted: the public key is not registered (or was revoked)."
    return (
        "Reported, not counted: the signature verified, but this issuer and identity are not "
        "on the allowlist. Its results are shown and never change a consensus state."
    )


@dataclass
class SignerPage:
    signer: Signer
    explanation: str
    changes: list[SignerClassChange]
    page: Page[Evidence]
    stale: dict[int, list[StaleReason]]
    recipe_count: int


def signer_get(*, slug: str) -> Signer | None:
    return Signer.objects.select_related("key").filter(slug=slug).first()


def signer_page(*, signer: Signer, page_number: Any) -> SignerPage:
    qs = evidence_queryset().filter(signer=signer).order_by("-attested_at", "-pk")
    page = Paginator(qs, PAGE_SIZE).get_page(page_number)
    items = list(page.object_list)
    page.object_list = items
    changes = list(SignerClassChange.objects.filter(signer=signer).select_related("allowlist"))
    recipe_count = Evidence.objects.filter(signer=signer).values("recipe_name").distinct().count()
    return SignerPage(
        signer=signer,
        explanation=counting_explanation(signer),
        changes=changes,
        page=page,
        stale=staleness_bulk(items),
        recipe_count=recipe_count,
    )
