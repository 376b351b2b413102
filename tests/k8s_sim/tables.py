"""``meta.k8s.io/v1`` Table answers, which kubectl asks for to print ``kubectl get``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .store import Resource


def _age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    seconds = int(
        (
            datetime.now(UTC)
            - datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        ).total_seconds()
    )
    seconds = max(seconds, 0)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def _duration(start: str | None, end: str | None) -> str:
    if not (start and end):
        return ""
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    seconds = (datetime.strptime(end, stamp) - datetime.strptime(start, stamp)).total_seconds()
    return f"{int(seconds)}s"


def table(resource: Resource, items: list[dict[str, Any]], rv: str) -> dict[str, Any]:
    if resource.plural == "events":
        return _events_table(items, rv)
    columns: list[tuple[str, str]] = [("Name", "name")]
    if resource.plural == "namespaces":
        columns.append(("Status", ""))
    elif resource.plural == "jobs":
        columns += [("Status", ""), ("Completions", ""), ("Duration", "")]
    elif resource.plural == "pods":
        columns += [("Ready", ""), ("Status", ""), ("Restarts", "")]
    columns.append(("Age", ""))
    rows = []
    for item in items:
        meta = item["metadata"]
        status = item.get("status") or {}
        cells: list[Any] = [meta["name"]]
        if resource.plural == "namespaces":
            cells.append(status.get("phase", "Active"))
        elif resource.plural == "jobs":
            conditions = {
                c["type"] for c in status.get("conditions") or [] if c.get("status") == "True"
            }
            state = (
                "Complete"
                if "Complete" in conditions
                else ("Failed" if "Failed" in conditions else "Running")
            )
            cells += [
                state,
                f"{status.get('succeeded', 0)}/{item['spec'].get('completions', 1)}",
                _duration(status.get("startTime"), status.get("completionTime")),
            ]
        elif resource.plural == "pods":
            statuses = status.get("containerStatuses") or []
            ready = sum(1 for s in statuses if s.get("ready"))
            shown = status.get("phase", "Pending")
            for container in statuses:  # kubectl shows the container's reason, e.g. Completed
                state = container.get("state") or {}
                reason = (state.get("terminated") or state.get("waiting") or {}).get("reason")
                shown = reason or shown
            if meta.get("deletionTimestamp"):
                shown = "Terminating"
            cells += [
                f"{ready}/{len(item['spec'].get('containers') or [])}",
                shown,
                0,
            ]
        cells.append(_age(meta.get("creationTimestamp")))
        rows.append(
            {
                "cells": cells,
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta,
                },
            }
        )
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": [
            {"name": name, "type": "string", "format": fmt, "description": name, "priority": 0}
            for name, fmt in columns
        ],
        "rows": rows,
    }


def _events_table(items: list[dict[str, Any]], rv: str) -> dict[str, Any]:
    """kube-apiserver's event columns (``kubectl get events``): Last Seen, Type, Reason,
    Object, Message."""
    columns = ["Last Seen", "Type", "Reason", "Object", "Message"]
    rows = []
    for item in items:
        involved = item.get("involvedObject") or {}
        cells = [
            _age(item.get("lastTimestamp")),
            item.get("type", ""),
            item.get("reason", ""),
            f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
            item.get("message", ""),
        ]
        rows.append(
            {
                "cells": cells,
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": item["metadata"],
                },
            }
        )
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": [
            {"name": name, "type": "string", "format": "", "description": name, "priority": 0}
            for name in columns
        ],
        "rows": rows,
    }
