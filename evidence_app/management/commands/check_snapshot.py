"""``manage.py check_snapshot FILE``: does the counted evidence cover this cluster? (for CI)

Exit codes a CI job can use: 0 covered (counted evidence ran on this tuple: every identity it
records matches, the only gaps being what AICR's redaction removed, and the readiness
constraints pass; it says how many were redacted), 1 not covered (prints the verdict and what
differs, what is redacted and what is not recorded, and what would settle each), 2 the
snapshot or the criteria are invalid. ``--json`` prints the API's answer instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from evidence_app.coverage.identity import LABELS
from evidence_app.coverage.service import CheckInputError, CheckResult, check_snapshot
from evidence_app.coverage.snapshot_input import MAX_SNAPSHOT_BYTES

EXIT_COVERED, EXIT_NOT_COVERED, EXIT_INVALID = 0, 1, 2


class Command(BaseCommand):
    help = "Check an AICR snapshot against the catalog and the counted evidence (exit 0: covered)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="The snapshot YAML (aicr snapshot output); - for stdin.")
        for dimension in ("service", "accelerator", "os", "intent", "platform"):
            parser.add_argument(f"--{dimension}", default="", help=f"State the {dimension}.")
        parser.add_argument("--profile", default="", help="A profile selection (name=value).")
        parser.add_argument("--json", action="store_true", help="Print the API's JSON answer.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            raw = self._read(options["file"])
            criteria = {
                d: options[d] for d in ("service", "accelerator", "os", "intent", "platform")
            }
            result = check_snapshot(raw, criteria, profile=options["profile"] or None)
        except CheckInputError as exc:
            self.stderr.write(f"invalid: {exc}")
            sys.exit(EXIT_INVALID)
        if options["json"]:
            self.stdout.write(json.dumps(result.as_api(), indent=2, default=str))
        else:
            self._print(result)
        sys.exit(EXIT_COVERED if result.covered else EXIT_NOT_COVERED)

    def _read(self, name: str) -> bytes:
        if name == "-":
            return sys.stdin.buffer.read(MAX_SNAPSHOT_BYTES + 1)
        try:
            with Path(name).open("rb") as handle:
                return handle.read(MAX_SNAPSHOT_BYTES + 1)
        except OSError as exc:
            raise CheckInputError(f"{name}: cannot read ({exc.strerror})") from None

    def _print(self, result: CheckResult) -> None:
        criteria = ", ".join(
            f"{d}={v} ({result.criteria_origin[d]})" for d, v in result.criteria.items()
        )
        self.stdout.write(f"criteria: {criteria or 'none'}")
        self.stdout.write(f"recipe: {result.recipe or 'none'}")
        if result.resolution_error:
            self.stdout.write(f"  {result.resolution_error}")
        for c in result.constraints:
            mark = "ok  " if c.ok else "FAIL"
            self.stdout.write(f"{mark} {c.name}: expected {c.expected}, actual {c.actual or '-'}")
        for e in result.evidence:
            differs = ", ".join(
                f"{LABELS[k]} {e.values[k]['evidence']} vs {e.values[k]['snapshot']}"
                for k in e.differs
            )
            line = f"evidence {e.id} ({e.signer_label}): {'exact' if e.exact else 'not exact'}"
            if differs:
                line += f"; differs: {differs}"
            if e.redacted:
                line += (
                    f"; redacted by AICR's policy ({len(e.redacted)}): "
                    f"{', '.join(LABELS[k] for k in e.redacted)}"
                )
            if e.not_recorded:
                line += f"; not recorded: {', '.join(LABELS[k] for k in e.not_recorded)}"
            self.stdout.write(line)
        for hint in result.settle:
            self.stdout.write(f"to settle: {hint}")
        self.stdout.write(f"verdict: {result.verdict}")
