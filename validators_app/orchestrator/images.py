"""Validator and agent image references (AICR-VALIDATE.md §2, §4.3: ``ResolveImage``), and the
digest a container runtime reports for the image it actually ran (pod ``status.containerStatuses
[].imageID``).

A tag names what a registry serves today; only a repository digest names the bytes that ran.
AICR itself records no digest (``pkg/evidence/attestation/bom.go``: "Digest stays empty"); this
site reads it back from the pod, so a run and its evidence say exactly which images ran.
"""

from __future__ import annotations

import re

__all__ = [
    "default_agent_image",
    "is_mutable",
    "pull_policy",
    "repo_digest",
    "resolve_image",
]

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


# A repository digest: ``sha256:`` and exactly 64 lowercase hex (OCI image-spec, descriptor).
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# A repository as the distribution reference grammar spells it: an optional registry host
# (with port), then lowercase path components joined by ``.``, ``_``, ``__`` or dashes; an
# optional tag is tolerated. No scheme, whitespace or second ``@`` gets through.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(
    rf"^(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?$"
)
_RUNTIME_SCHEMES = ("docker-pullable://",)


def repo_digest(image_id: object) -> str:
    """The ``sha256:<64 hex>`` repository digest in a container status's ``imageID``, else "".

    Runtimes write ``imageID`` differently: containerd and CRI-O ``<repo>@sha256:<hex>``, the
    dockershim / cri-dockerd ``docker-pullable://<repo>@sha256:<hex>``. A bare
    ``sha256:<hex>`` (or ``docker://sha256:<hex>``) is the image *config* id of a local image,
    not a digest any registry serves, so it is not recorded; neither is "" (the container never
    started) nor anything malformed. "" means "not reported": nothing is inferred.
    """
    if not isinstance(image_id, str):
        return ""
    text = image_id
    for scheme in _RUNTIME_SCHEMES:
        if text.startswith(scheme):
            text = text[len(scheme) :]
            break
    repository, at, digest = text.partition("@")
    if not at or not _REPOSITORY.match(repository) or not _DIGEST.match(digest):
        return ""
    return digest


# Tags AICR's release workflows never move, and only under the namespaces whose tags those
# workflows own (AICR docs/user/cli-reference.md, ``--allow-mutable-validator-tags``).
_FROZEN_TAG = re.compile(
    r"^(v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?|sha-[0-9a-f]{40}|uat-[0-9A-Za-z.-]+)$"
)
_FROZEN_NAMESPACES = ("ghcr.io/nvidia/aicr-validators/", "ghcr.io/nvidia/aicr:")


def is_mutable(image: str) -> bool:
    """Whether ``image`` may name other bytes tomorrow (AICR's rule for validator images).

    Immutable: pinned by digest (``name@sha256:<64 hex>``, any registry), or a CI-frozen tag
    (``vX.Y.Z`` and pre-releases, ``sha-<full commit>``, ``uat-<id>``) under AICR's own
    ``ghcr.io/nvidia/aicr-validators/`` (and the agent's ``ghcr.io/nvidia/aicr``). Anything else,
    ``:latest`` first of all, is mutable: a mirror may repoint its own ``:v1.0.0`` freely.
    """
    if "@" in image:
        return not _DIGEST.match(image.rpartition("@")[2])
    tag = _split_tag(image)[1]
    if not tag or not image.startswith(_FROZEN_NAMESPACES):
        return True
    return not _FROZEN_TAG.match(tag)
