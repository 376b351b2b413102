"""Trusted roots for keyless verification: the vendored production root and private roots.

Rows are ``TrustRoot``; each enabled row is loaded with ``verification.load_trust_root``
(cached by name and content) and tried in turn — never TUF, never the network. Migration
0002 seeds the production root; maintainers add private roots (their own Sigstore instance)
in the admin, where the JSON is validated by loading it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from evidence_app.models import TrustRoot
from evidence_app.verification import trust as vtrust

logger = logging.getLogger(__name__)

PRODUCTION_NAME = "production"


def trust_root_check(*, name: str, trusted_root_json: str) -> vtrust.TrustRoot:
    """Load ``trusted_root_json`` as the verifier would; ``ValidationError`` saying why not."""
    try:
        return vtrust.load_trust_root(trusted_root_json, name=name or "unnamed")
    except (vtrust.TrustRootError, ValueError) as exc:
        raise ValidationError(str(exc), code="invalid_trust_root") from None


def trust_root_add(
    *,
    name: str,
    trusted_root_json: str,
    accepted_issuers: str = "",
    enabled: bool = True,
    by: Any = None,
) -> TrustRoot:
    """Register a (private) trusted root after loading it once."""
    loaded = trust_root_check(name=name, trusted_root_json=trusted_root_json)
    root = TrustRoot(
        name=name,
        trusted_root_json=trusted_root_json,
        sha256=hashlib.sha256(trusted_root_json.encode()).hexdigest(),
        is_production=loaded.production,
        enabled=enabled,
        accepted_issuers=accepted_issuers,
        added_by=by,
    )
    root.full_clean()
    root.save()
    return root


class ProductionRootProtected(ValidationError):
    """The vendored production root is not edited or deleted by hand."""


def trust_root_update(
    *,
    root: TrustRoot,
    name: str,
    trusted_root_json: str,
    accepted_issuers: str = "",
    enabled: bool = True,
) -> TrustRoot:
    """Change a private trusted root (re-loaded once); the production root is refused."""
    if TrustRoot.objects.filter(pk=root.pk, is_production=True).exists():
        raise ProductionRootProtected(
            "The production trusted root cannot be edited.", code="production_root"
        )
    loaded = trust_root_check(name=name, trusted_root_json=trusted_root_json)
    root.name = name
    root.trusted_root_json = trusted_root_json
    root.sha256 = hashlib.sha256(trusted_root_json.encode()).hexdigest()
    root.is_production = loaded.production
    root.accepted_issuers = accepted_issuers
    root.enabled = enabled
    root.full_clean()
    root.save()
    return root


def trust_root_delete(*, root: TrustRoot) -> None:
    """Delete a private trusted root; the production root is refused."""
    if root.is_production:
        raise ProductionRootProtected(
            "The production trusted root cannot be deleted.", code="production_root"
        )
    root.delete()


@transaction.atomic
def production_root_ensure() -> TrustRoot:
    """The production root row, created from the vendored file if missing (idempotent)."""
    existing = TrustRoot.objects.filter(is_production=True).order_by("pk").first()
    if existing is not None:
        return existing
    text = vtrust.PRODUCTION_ROOT_PATH.read_text()
    root, _ = TrustRoot.objects.get_or_create(
        name=PRODUCTION_NAME,
        defaults={
            "trusted_root_json": text,
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "is_production": True,
            "enabled": True,
        },
    )
    return root


def enabled_roots() -> list[vtrust.TrustRoot]:
    """The enabled roots, loaded (production first). A row that no longer loads is skipped
    and logged; the admin refuses such rows, so this means the verifier library changed."""
    return roots_load(TrustRoot.objects.enabled().only("name", "trusted_root_json"))


def roots_load(rows: Iterable[TrustRoot]) -> list[vtrust.TrustRoot]:
    """``enabled_roots`` for rows already read (in order; a row that does not load is skipped)."""
    loaded: list[vtrust.TrustRoot] = []
    for row in rows:
        try:
            loaded.append(vtrust.load_trust_root(row.trusted_root_json, name=row.name))
        except (vtrust.TrustRootError, ValueError):
            logger.exception("trusted root %r cannot be loaded; skipped", row.name)
    return loaded


def root_issuers() -> list[str]:
    """Issuers configured on enabled roots (``TrustRoot.accepted_issuers``)."""
    return issuers_of(TrustRoot.objects.enabled().values_list("accepted_issuers", flat=True))


def issuers_of(texts: Iterable[str]) -> list[str]:
    """The issuers named in ``TrustRoot.accepted_issuers`` texts (one per line)."""
    issuers: list[str] = []
    for text in texts:
        issuers.extend(line.strip() for line in text.splitlines() if line.strip())
    return issuers
