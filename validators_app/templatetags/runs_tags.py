"""Display helpers of the run pages, and the "Validate on…" form a recipe page includes
(rendered only for maintainers: the permission is decided here, not in the template)."""

from __future__ import annotations

from typing import Any

from django import template

from evidence_app import permissions
from evidence_app.models import Role
from validators_app.models import PHASES, Cluster

register = template.Library()

_GOOD = frozenset({"passed"})
_NEUTRAL = frozenset({"queued", "running", "publishing", "pending", "skipped", "cancelled"})


@register.filter
def status_class(status: str) -> str:
    """CSS classes of a run or check status (green pass, amber in-between, red otherwise)."""
    if status in _GOOD:
        return "verdict verdict--verified"
    if status in _NEUTRAL:
        return "verdict verdict--unsupported"
    return "verdict"


@register.filter
def seconds(value: float | int | None) -> str:
    """``83.4`` → ``1m 23s``; ``None`` → ``—``."""
    if value is None:
        return "—"
    total = max(0, int(value))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m {secs}s"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


@register.filter
def milliseconds(value: int | None) -> str:
    return "—" if value is None else seconds(value / 1000)


@register.inclusion_tag("validators_app/runs/_validate_on.html", takes_context=True)
def validate_on(context: Any, recipe: Any) -> dict[str, Any]:
    """The start form for ``recipe``; empty for anyone but a maintainer."""
    request = context.get("request")
    user = getattr(request, "user", None)
    allowed = Role.MAINTAINER in permissions.roles_of(user)
    return {
        "allowed": allowed,
        "recipe": recipe,
        "clusters": list(Cluster.objects.only("pk", "name", "environment")) if allowed else [],
        "phases": PHASES,
        "csrf_token": context.get("csrf_token"),
    }
