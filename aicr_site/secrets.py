"""The production secrets, in one place: which must be there, and the start-up refusal.

Every secret is read by ``aicr_site.lib.env.env_secret`` (``NAME`` or ``NAME_FILE``) in the
settings. In production (``DEBUG`` off) a process that lacks one must not start and fail later
at first use (a cluster registered, a run published, an audit package exported, hours after a
deploy): ``missing_secrets`` names each, the system check ``aicr_site.E010`` reports them (so
``manage.py check``, ``migrate`` and every management command refuse), and
``require_production_secrets`` is called where each long-running process starts: the WSGI
application (gunicorn) and Celery's ``worker_init`` / ``beat_init`` (aicr_site/celery.py).
The table in docs/deployment.md says what each protects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

SECRETS_ID = "aicr_site.E010"


@dataclass(frozen=True)
class Missing:
    name: str
    why: str

    def __str__(self) -> str:
        return f"{self.name} (or {self.name}_FILE): {self.why}"


def missing_secrets() -> list[Missing]:
    """The production secrets that are not configured or not usable; [] with DEBUG on (local
    keys are generated into .local/ there)."""
    if settings.DEBUG:
        return []
    missing: list[Missing] = []
    # SECRET_KEY and ALLOWED_HOSTS are refused by the settings module itself.
    if not settings.CLUSTER_KUBECONFIG_KEYS:
        missing.append(
            Missing(
                "CLUSTER_KUBECONFIG_KEY",
                "not set; registered clusters' kubeconfigs are encrypted with it "
                "(`manage.py ensure_local_keys --print` makes one)",
            )
        )
    from evidence_app.services.site_key import SiteKeyUnavailable, site_private_key

    try:
        site_private_key()
    except SiteKeyUnavailable as exc:
        missing.append(Missing("SITE_SIGNING_KEY", str(exc)))
    return missing


def require_production_secrets() -> None:
    """Refuse to start (``ImproperlyConfigured`` naming every missing secret) in production."""
    missing = missing_secrets()
    if missing:
        raise ImproperlyConfigured(
            "production secrets missing (DEBUG is off): " + "; ".join(str(m) for m in missing)
        )


@checks.register(checks.Tags.security)
def check_production_secrets(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return [
        checks.Error(
            f"{m.name} is missing: {m.why}",
            hint=f"Set {m.name}, or {m.name}_FILE to a file holding it (a compose secret).",
            id=SECRETS_ID,
        )
        for m in missing_secrets()
    ]
