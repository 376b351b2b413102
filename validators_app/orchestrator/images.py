"""Validator and agent image references (AICR-VALIDATE.md §2, §4.3: ``ResolveImage``)."""

from __future__ import annotations

import re

__all__ = ["default_agent_image", "pull_policy", "resolve_image"]

_RELEASE = re.compile(r"^v?\d+\.\d+\.\d+(-[A-Za-z0-9.]+)?$")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


def is_release(version: str) -> bool:
    return bool(_RELEASE.match(version)) and not version.endswith("-next")


def _split_tag(image: str) -> tuple[str, str]:
    """``(repository, tag)``; the tag is after the last ``:`` that follows the last ``/``."""
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon + 1 :]
    return image, ""


def resolve_image(
    image: str,
    *,
    aicr_version: str,
    aicr_commit: str = "",
    image_registry: str = "",
    image_tag: str = "",
) -> str:
    """Catalog ``:latest`` → ``:v<version>`` (release) or ``:sha-<commit>``; then the overrides.

    ``image_tag`` (AICR_VALIDATOR_IMAGE_TAG) replaces any tag but never a digest;
    ``image_registry`` (AICR_VALIDATOR_IMAGE_REGISTRY) replaces the first two path segments.
    """
    version, commit, tag, registry = aicr_version, aicr_commit, image_tag, image_registry
    if "@" not in image:
        repo, current = _split_tag(image)
        if current == "latest":
            if is_release(version):
                image = f"{repo}:{version if version.startswith('v') else 'v' + version}"
            elif commit != "unknown" and _COMMIT.match(commit):
                image = f"{repo}:sha-{commit}"
        if tag:
            image = f"{_split_tag(image)[0]}:{tag}"
    if registry:
        parts = image.split("/")
        if len(parts) > 2:
            image = "/".join([registry.rstrip("/"), *parts[2:]])
    return image


def pull_policy(image: str, *, tag_override: str = "") -> str:
    """ImagePullPolicy in job_plan.go."""
    if image.startswith(("ko.local/", "kind.local/")):
        return "Never"
    if "@" in image:
        return "IfNotPresent"
    if tag_override:
        return "Always"
    if image.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def default_agent_image(version: str) -> str:
    """``ghcr.io/nvidia/aicr:v<ver>`` for releases, ``:latest`` for ``dev``/``-next`` builds."""
    if is_release(version):
        return f"ghcr.io/nvidia/aicr:{version if version.startswith('v') else 'v' + version}"
    return "ghcr.io/nvidia/aicr:latest"
