"""The verify-before-count transcript: ordered steps ``{step, ok, detail}``.

Steps, in order: ``parse`` (the bytes are a bundle / archive), ``signature``, ``statement``,
``manifest`` (tarballs / directories only), then ``bind`` and ``classify`` (recorded by the
Django app). Evidence counts only when every recorded step is ok and none was skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

StepName = Literal["parse", "signature", "statement", "manifest", "bind", "classify"]
STEP_ORDER: tuple[str, ...] = ("parse", "signature", "statement", "manifest", "bind", "classify")
MAX_DETAIL = 500


@dataclass(frozen=True)
class TranscriptStep:
    step: str
    ok: bool
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.step, "ok": self.ok, "detail": self.detail}


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= MAX_DETAIL else line[: MAX_DETAIL - 1] + "…"


@dataclass
class Transcript:
    steps: list[TranscriptStep] = field(default_factory=list)

    def record(self, step: str, ok: bool, detail: str = "") -> TranscriptStep:
        """Append a step; steps must follow ``STEP_ORDER`` and none may follow a failure."""
        if step not in STEP_ORDER:
            raise ValueError(f"unknown transcript step {step!r}")
        if self.steps:
            last = self.steps[-1]
            if not last.ok:
                raise ValueError(f"step {step!r} recorded after failed step {last.step!r}")
            if STEP_ORDER.index(step) <= STEP_ORDER.index(last.step):
                raise ValueError(f"step {step!r} recorded out of order (after {last.step!r})")
        entry = TranscriptStep(step=step, ok=bool(ok), detail=_one_line(detail))
        self.steps.append(entry)
        return entry

    def ok_step(self, step: str, detail: str = "") -> TranscriptStep:
        return self.record(step, True, detail)

    def fail(self, step: str, detail: str) -> TranscriptStep:
        return self.record(step, False, detail)

    @property
    def ok(self) -> bool:
        """True when at least one step was recorded and all recorded steps passed."""
        return bool(self.steps) and all(s.ok for s in self.steps)

    @property
    def failed_step(self) -> TranscriptStep | None:
        return next((s for s in self.steps if not s.ok), None)

    def passed(self, step: str) -> bool:
        return any(s.step == step and s.ok for s in self.steps)

    def __iter__(self) -> Iterator[TranscriptStep]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def to_list(self) -> list[dict[str, Any]]:
        return [s.as_dict() for s in self.steps]

    @classmethod
    def from_list(cls, items: Iterable[Mapping[str, Any]]) -> Transcript:
        transcript = cls()
        for item in items:
            transcript.steps.append(
                TranscriptStep(
                    step=str(item["step"]), ok=bool(item["ok"]), detail=str(item.get("detail", ""))
                )
            )
        return transcript


def steps_from_transcript(
    transcript: Sequence[Mapping[str, Any]], *, phases: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The transcript as AICR's step table: passed/failed per step, then one ``phases`` row
    (passed, or failed with a sub-row per phase). Read by this command and the evidence page."""
    steps: list[dict[str, Any]] = []
    for entry in transcript:
        row: dict[str, Any] = {
            "step": len(steps) + 1,
            "name": str(entry.get("step", "")),
            "status": "passed" if entry.get("ok") else "failed",
        }
        if entry.get("detail"):
            row["detail"] = str(entry["detail"])
        steps.append(row)
    if phases and all(entry.get("ok") for entry in transcript):
        rows = [
            {
                "key": name,
                "value": f"{summary['passed']} passed, {summary['failed']} failed, "
                f"{summary['skipped']} skipped",
            }
            for name, summary in sorted(phases.items())
        ]
        failed = sorted(name for name, summary in phases.items() if summary["failed"])
        steps.append(
            {
                "step": len(steps) + 1,
                "name": "phases",
                "status": "failed" if failed else "passed",
                "detail": f"phase failures recorded in {', '.join(failed)}"
                if failed
                else "every phase recorded no failure",
                "subRows": rows,
            }
        )
    return steps
