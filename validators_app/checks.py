"""System checks for how run evidence is signed and where it is pushed.

``check --deploy`` (and the start of every production process's checks) says when a production
site signs run evidence with its key: such evidence counts on this site only, because AICR's
upstream gate (``recipes/evidence/allowlist.yaml``) lists keyless signers only, so no run here
can become an upstream contribution. The operator either configures keyless signing
(``SITE_SIGSTORE_IDENTITY_TOKEN`` / ``_FILE``) or states the choice with
``RUN_EVIDENCE_KEY_SIGNED_ACCEPTED=1``. A malformed ``RUN_EVIDENCE_OCI_REPOSITORY`` is an
error everywhere (the settings module cannot parse it: the parser needs the apps loaded).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

KEY_SIGNED_ID = "validators_app.W001"
REPOSITORY_ID = "validators_app.E001"


def key_signed_on_production() -> bool:
    """Whether this production site signs run evidence with its key, unannounced."""
    token = getattr(settings, "SITE_SIGSTORE_IDENTITY_TOKEN", "") or getattr(
        settings, "SITE_SIGSTORE_IDENTITY_TOKEN_FILE", ""
    )
    accepted = getattr(settings, "RUN_EVIDENCE_KEY_SIGNED_ACCEPTED", False)
    return not settings.DEBUG and not token and not accepted


@checks.register(checks.Tags.security, deploy=True)
def check_run_evidence_signing(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if not key_signed_on_production():
        return []
    return [
        checks.Warning(
            "Run evidence is key-signed: it counts on this site only; AICR's upstream gate "
            "takes keyless evidence only, so no run here can be contributed upstream.",
            hint="Set SITE_SIGSTORE_IDENTITY_TOKEN or SITE_SIGSTORE_IDENTITY_TOKEN_FILE to sign "
            "keyless through Sigstore, or RUN_EVIDENCE_KEY_SIGNED_ACCEPTED=1 to keep run "
            "evidence local on purpose.",
            id=KEY_SIGNED_ID,
        )
    ]


@checks.register()
def check_run_evidence_repository(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    from evidence_app.services.oci import OciError, parse_oci_repository

    configured = getattr(settings, "RUN_EVIDENCE_OCI_REPOSITORY", "") or ""
    if not configured:
        return []
    try:
        parse_oci_repository(configured, what="RUN_EVIDENCE_OCI_REPOSITORY")
    except OciError as exc:
        return [checks.Error(exc.message, id=REPOSITORY_ID)]
    return []
