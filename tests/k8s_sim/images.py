"""What a simulated container runtime reports for an image: ``status.containerStatuses[].image``
and ``.imageID``, in the form each real runtime writes.

* ``containerd`` (and CRI-O): ``image`` is the normalized reference (``busybox`` →
  ``docker.io/library/busybox:latest``), ``imageID`` ``<repository>@sha256:<hex>``.
* ``docker-pullable`` (dockershim / cri-dockerd): ``image`` as the pod spec wrote it,
  ``imageID`` ``docker-pullable://<repository>@sha256:<hex>``.
* ``config-id``: an image loaded onto the node, never pulled from a registry (``kind load``,
  ``ctr import``): ``imageID`` is the bare image config id ``sha256:<hex>``, no repository
  digest exists.

``imageID`` stays "" until the container has started, as on a real node. Digests are SIMULATED:
a scenario's ``image_digests`` table, else the sha256 of the reference (deterministic, so the
same reference always "pulls" the same digest and two references never share one); a reference
pinned by digest runs exactly that digest.
"""

from __future__ import annotations

import hashlib

from .scenarios import Scenario

RUNTIME_FORMS = ("containerd", "docker-pullable", "config-id")


def split_reference(image: str) -> tuple[str, str, str]:
    """``(repository, tag, digest)`` of a reference (tag after the last ``:`` past the last
    ``/``)."""
    rest, _, digest = image.partition("@")
    slash, colon = rest.rfind("/"), rest.rfind(":")
    if colon > slash:
        return rest[:colon], rest[colon + 1 :], digest
    return rest, "", digest


def normalized(image: str) -> str:
    """containerd's normalization: ``docker.io/`` (and ``library/``) for short names, and
    ``:latest`` when a reference has neither tag nor digest."""
    repository, tag, digest = split_reference(image)
    first, _, remainder = repository.partition("/")
    if not remainder:
        repository = f"docker.io/library/{repository}"
    elif not ("." in first or ":" in first or first == "localhost"):
        repository = f"docker.io/{repository}"
    if digest:
        return f"{repository}{':' + tag if tag else ''}@{digest}"
    return f"{repository}:{tag or 'latest'}"


def digest_of(scenario: Scenario, image: str) -> str:
    """The ``sha256:<64 hex>`` repository digest the simulated registry serves for ``image``."""
    pinned = split_reference(image)[2]
    if pinned:
        return pinned
    listed = scenario.image_digests.get(image)
    if listed:
        return listed
    return "sha256:" + hashlib.sha256(f"k8s-sim registry/{normalized(image)}".encode()).hexdigest()


def reported_image(scenario: Scenario, image: str) -> str:
    """``status.containerStatuses[].image`` for a container of ``image``."""
    return normalized(image) if scenario.image_id_form == "containerd" else image


def image_id(scenario: Scenario, image: str) -> str:
    """``status.containerStatuses[].imageID`` once a container of ``image`` has started."""
    digest = digest_of(scenario, image)
    form = scenario.image_id_form
    if form == "config-id":
        # The config blob's digest: a different hash from any manifest digest.
        return "sha256:" + hashlib.sha256(f"k8s-sim config/{digest}".encode()).hexdigest()
    repository = split_reference(normalized(image))[0]
    if form == "docker-pullable":
        return f"docker-pullable://{split_reference(image)[0]}@{digest}"
    return f"{repository}@{digest}"
