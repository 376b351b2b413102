"""Which images a run's containers ran, with the digests their pods reported, for the run page
and ``GET /api/v1/runs/{id}/`` (``images``).

A digest is shown only as the kubelet reported it (``status.containerStatuses[].imageID``,
parsed by ``orchestrator.images.repo_digest``); "" means the runtime reported none (the
container never started, or the image was loaded onto the node rather than pulled), and pages
say "not reported" rather than guess. ``mutable`` is AICR's tag rule
(``orchestrator.images.is_mutable``): such a reference may name other bytes tomorrow, so the
digest is the only exact record of what ran.
"""

from __future__ import annotations

from dataclasses import dataclass

from validators_app.models import ValidationRun
from validators_app.orchestrator.images import is_mutable

AGENT_PHASE = "snapshot"  # the agent runs before any phase


@dataclass(frozen=True)
class ImageRan:
    role: str  # agent | validator
    phase: str  # "snapshot" for the agent
    check: str  # "" for the agent
    image: str
    digest: str  # sha256:<64 hex>, or "" = not reported

    @property
    def mutable(self) -> bool:
        return is_mutable(self.image)


def images_ran(run: ValidationRun) -> list[ImageRan]:
    """The agent first (when this site took the snapshot), then each check that had a pod, in
    execution order; checks that never got a pod ran no image and are not listed."""
    rows = []
    if run.agent_image:
        rows.append(ImageRan("agent", AGENT_PHASE, "", run.agent_image, run.agent_image_digest))
    for check in run.checks.all():  # prefetched by the views, in position order
        if check.image:
            rows.append(
                ImageRan("validator", check.phase, check.name, check.image, check.image_digest)
            )
    return rows
