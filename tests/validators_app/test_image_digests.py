"""The digests a run records are the ones the kubelet reported (``imageID``), parsed strictly.

Unit tables for ``orchestrator.images.repo_digest`` / ``is_mutable`` and ``extract.ran_image``;
the simulator's runtime forms read with the real ``kubernetes`` client are in
``test_simulator.py``; a run end to end (service → task → orchestrator → simulator → publish)
is ``test_run_digests.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from validators_app.orchestrator.extract import RanImage, ran_image
from validators_app.orchestrator.images import is_mutable, repo_digest

HEX = "0123456789abcdef" * 4  # 64 lowercase hex
REPO = "ghcr.io/nvidia/aicr-validators/deployment"


@pytest.mark.parametrize(
    ("image_id", "expected"),
    [
        # containerd and CRI-O: <repository>@sha256:<hex>
        (f"{REPO}@sha256:{HEX}", f"sha256:{HEX}"),
        (f"docker.io/library/busybox@sha256:{HEX}", f"sha256:{HEX}"),
        (f"localhost:5000/aicr/validator@sha256:{HEX}", f"sha256:{HEX}"),
        # dockershim / cri-dockerd
        (f"docker-pullable://{REPO}@sha256:{HEX}", f"sha256:{HEX}"),
        (f"docker-pullable://busybox@sha256:{HEX}", f"sha256:{HEX}"),
        # the image config id of a node-loaded image: no registry serves it, so not a digest
        (f"sha256:{HEX}", ""),
        (f"docker://sha256:{HEX}", ""),
        (f"docker-pullable://sha256:{HEX}", ""),
        # never started, or not a string
        ("", ""),
        (None, ""),
        (42, ""),
        # malformed: wrong length, case, algorithm, extra parts, whitespace, other schemes
        (f"{REPO}@sha256:{HEX[:-1]}", ""),
        (f"{REPO}@sha256:{HEX}0", ""),
        (f"{REPO}@sha256:{HEX.upper()}", ""),
        (f"{REPO}@sha512:{HEX}{HEX}", ""),
        (f"{REPO}@sha256:{HEX}@sha256:{HEX}", ""),
        (f"{REPO} @sha256:{HEX}", ""),
        (f"@sha256:{HEX}", ""),
        (f"containerd://{REPO}@sha256:{HEX}", ""),
        (f"{REPO}:v1.0.0", ""),
    ],
)
def test_only_a_repository_digest_is_recorded(image_id: object, expected: str) -> None:
    assert repo_digest(image_id) == expected


@pytest.mark.parametrize(
    ("image", "mutable"),
    [
        (f"{REPO}:latest", True),
        (f"{REPO}", True),  # no tag: :latest
        (f"{REPO}:edge", True),
        (f"{REPO}:v0.19.0", False),
        (f"{REPO}:v1.0.0-rc.1", False),
        (f"{REPO}:sha-{'a' * 40}", False),
        (f"{REPO}:sha-{'a' * 7}", True),  # a short commit can collide: not CI-frozen
        (f"{REPO}:uat-20261201-1", False),
        (f"{REPO}@sha256:{HEX}", False),
        (f"{REPO}:latest@sha256:{HEX}", False),
        (f"mirror.example/aicr-validators/deployment@sha256:{HEX}", False),
        # a mirror's tags are its own to move, whatever they look like
        ("mirror.example/nvidia/aicr-validators/deployment:v0.19.0", True),
        (f"{REPO}@sha256:{HEX[:10]}", True),
        ("ghcr.io/nvidia/aicr:v0.19.0", False),
        ("ghcr.io/nvidia/aicr:latest", True),
        ("ghcr.io/nvidia/aicr-other:v0.19.0", True),
    ],
)
def test_aicrs_rule_for_mutable_references(image: str, mutable: bool) -> None:
    assert is_mutable(image) is mutable


def _pod(statuses: list[dict[str, Any]], image: str = f"{REPO}:v0.19.0") -> dict[str, Any]:
    return {
        "spec": {"containers": [{"name": "validator", "image": image}]},
        "status": {"containerStatuses": statuses},
    }


def test_the_image_and_digest_come_from_the_named_containers_status() -> None:
    pod = _pod(
        [
            {"name": "sidecar", "image": "other:1", "imageID": f"other@sha256:{'f' * 64}"},
            {
                "name": "validator",
                "image": f"{REPO}:v0.19.0",
                "imageID": f"{REPO}@sha256:{HEX}",
            },
        ]
    )
    assert ran_image(pod, "validator") == RanImage(f"{REPO}:v0.19.0", f"sha256:{HEX}")


def test_a_container_that_never_started_has_its_image_but_no_digest() -> None:
    waiting = _pod(
        [
            {
                "name": "validator",
                "image": f"{REPO}:v0.19.0",
                "imageID": "",
                "state": {"waiting": {"reason": "ImagePullBackOff"}},
            }
        ]
    )
    assert ran_image(waiting, "validator") == RanImage(f"{REPO}:v0.19.0", "")


def test_without_a_status_the_pod_specs_image_is_named_and_no_digest_guessed() -> None:
    assert ran_image(_pod([]), "validator") == RanImage(f"{REPO}:v0.19.0", "")
    assert ran_image(None, "validator") == RanImage("", "")
    hostile = {"spec": {"containers": [{"name": "validator", "image": 7}]}, "status": {}}
    assert ran_image(hostile, "validator") == RanImage("", "")


def test_a_status_image_with_control_characters_names_the_spec_image_instead() -> None:
    for hostile in ("ghcr.io/x\x00y:1", "a\nb", "\x7f"):
        pod = _pod([{"name": "validator", "image": hostile, "imageID": f"{REPO}@sha256:{HEX}"}])
        assert ran_image(pod, "validator") == RanImage(f"{REPO}:v0.19.0", f"sha256:{HEX}")
