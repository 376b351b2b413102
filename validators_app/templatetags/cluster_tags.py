"""Display helpers of the cluster page: tolerations and label maps written the way
``kubectl describe`` writes them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import template

register = template.Library()


@register.filter
def toleration(item: Mapping[str, Any]) -> str:
    """``key=value:Effect``, ``key:Effect op=Exists``, ``op=Exists`` (every taint), with
    ``for Ns`` when tolerationSeconds is set (kubectl's format)."""
    key, value = str(item.get("key", "")), str(item.get("value", ""))
    effect, operator = str(item.get("effect", "")), str(item.get("operator", "Equal"))
    text = key
    if operator == "Exists":
        text += f":{effect}" if effect else ""
        text = f"{text} op=Exists" if text else "op=Exists"
    else:
        text += f"={value}" + (f":{effect}" if effect else "")
    if item.get("tolerationSeconds") is not None:
        text += f" for {item['tolerationSeconds']}s"
    return text


@register.filter
def labels(selector: Mapping[str, str]) -> str:
    """``k1=v1, k2=v2`` in key order."""
    return ", ".join(f"{key}={selector[key]}" for key in sorted(selector))
