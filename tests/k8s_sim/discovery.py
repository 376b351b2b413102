"""Discovery documents of the simulated API server: /version, /api, /apis, resource lists and
the stub OpenAPI v3 that lets kubectl validate server-side."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .store import BY_GROUP_VERSION, RESOURCES, ApiError

if TYPE_CHECKING:
    from .scenarios import Scenario


def resource_list(group: str, version: str) -> dict[str, Any]:
    resources: list[dict[str, Any]] = []
    for resource in BY_GROUP_VERSION[(group, version)].values():
        entry = {
            "name": resource.plural,
            "singularName": resource.singular,
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": list(resource.verbs),
        }
        if resource.short_names:
            entry["shortNames"] = list(resource.short_names)
        if resource.plural in ("jobs", "pods", "deployments", "daemonsets"):
            entry["categories"] = ["all"]
        resources.append(entry)
        if resource.plural in ("jobs", "pods", "namespaces", "nodes", "deployments", "daemonsets"):
            resources.append(
                {
                    "name": f"{resource.plural}/status",
                    "singularName": "",
                    "namespaced": resource.namespaced,
                    "kind": resource.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        if resource.plural == "pods":
            resources.append(
                {
                    "name": "pods/log",
                    "singularName": "",
                    "namespaced": True,
                    "kind": "Pod",
                    "verbs": ["get"],
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def dra_resource_list(version: str) -> dict[str, Any]:
    """DRA is discoverable (the validators probe it); its objects are not simulated."""
    kinds = {
        "deviceclasses": ("DeviceClass", False),
        "resourceclaims": ("ResourceClaim", True),
        "resourceclaimtemplates": ("ResourceClaimTemplate", True),
        "resourceslices": ("ResourceSlice", False),
    }
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"resource.k8s.io/{version}",
        "resources": [
            {
                "name": plural,
                "singularName": kind.lower(),
                "namespaced": namespaced,
                "kind": kind,
                "verbs": ["get", "list", "watch"],
            }
            for plural, (kind, namespaced) in kinds.items()
        ],
    }


def openapi_v3(group_version_path: str) -> dict[str, Any]:
    """Just enough OpenAPI v3 for kubectl to see that PATCH takes ``fieldValidation``, so it
    validates server-side instead of downloading full schemas (which are not simulated)."""
    if not group_version_path:
        return {
            "paths": {
                ("api/" if not group else f"apis/{group}/") + version: {
                    "serverRelativeURL": (
                        "/openapi/v3/api/" if not group else f"/openapi/v3/apis/{group}/"
                    )
                    + f"{version}?hash=SIM"
                }
                for group, version in BY_GROUP_VERSION
            }
        }
    prefix, _, rest = group_version_path.partition("/")
    group, _, version = rest.rpartition("/") if prefix == "apis" else ("", "", rest)
    resources = BY_GROUP_VERSION.get((group, version))
    if resources is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    paths: dict[str, Any] = {}
    for resource in resources.values():
        scope = "/namespaces/{namespace}" if resource.namespaced else ""
        paths[f"/{group_version_path}{scope}/{resource.plural}/{{name}}"] = {
            "patch": {
                "operationId": f"patch{resource.kind}",
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {
                    "group": group,
                    "version": version,
                    "kind": resource.kind,
                },
                "parameters": [
                    {"name": name, "in": "query", "schema": {"type": "string"}}
                    for name in ("dryRun", "fieldManager", "fieldValidation", "force")
                ],
                "responses": {"200": {"description": "OK"}},
            }
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (simulated)", "version": "v1"},
        "paths": paths,
        "components": {"schemas": {}},
    }


def groups(scenario: Scenario) -> list[dict[str, Any]]:
    groups: dict[str, list[str]] = {}
    for resource in RESOURCES:
        if resource.group and resource.version not in groups.setdefault(resource.group, []):
            groups[resource.group].append(resource.version)
    result = []
    for name, versions in groups.items():
        entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        result.append({"name": name, "versions": entries, "preferredVersion": entries[0]})
    if scenario.resource_api_versions:
        # Served for the validators' DRA discovery; no resources are simulated behind it.
        entries = [
            {"groupVersion": f"resource.k8s.io/{v}", "version": v}
            for v in scenario.resource_api_versions
        ]
        result.append(
            {"name": "resource.k8s.io", "versions": entries, "preferredVersion": entries[0]}
        )
    return result


def version_info(scenario: Scenario) -> dict[str, str]:
    major, minor = scenario.kubernetes_version.removeprefix("v").split(".")[:2]
    return {
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "gitVersion": scenario.kubernetes_version,
        "gitCommit": "5f5bd3b6f0b5c4d9f3ad5b3b1e2a4c1d7e9f0a12",
        "gitTreeState": "clean",
        "buildDate": "2025-09-04T18:21:33Z",
        "goVersion": scenario.go_version,
        "compiler": "gc",
        "platform": scenario.platform,
    }
