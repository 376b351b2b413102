"""manage.py verify_evidence INPUT: ``aicr evidence verify`` on this site's trust policy."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from evidence_app.services.verify_result import (
    MAX_INPUT_BYTES,
    VerifyInputError,
    VerifyResult,
    verify_input,
)


class Command(BaseCommand):
    help = (
        "Verify evidence as `aicr evidence verify` does: INPUT is a pointer file, a "
        "digest-pinned OCI reference, an evidence (summary-bundle) directory, a tarball or a "
        "Sigstore bundle. Exit status as aicr's: 0 valid, 2 valid with phase failures or "
        "invalid (the JSON's `exit` tells them apart: 0, 1, 2)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("input")
        parser.add_argument("--expected-issuer", default=None, help="OIDC issuer to pin")
        parser.add_argument(
            "--expected-identity-regexp", default=None, help="identity (SAN) regex to pin"
        )
        parser.add_argument(
            "--artifact",
            default=None,
            help="the file a message signature or a DSSE subject signs (not in aicr: for "
            "Sigstore bundles that are not AICR evidence directories)",
        )
        parser.add_argument(
            "-o", "--output", default="text", choices=("text", "json"), help="output format"
        )

    def handle(self, *args: object, **options: Any) -> None:
        try:
            artifact = _artifact(options["artifact"])
            result = verify_input(
                str(options["input"]),
                expected_issuer=options["expected_issuer"],
                expected_identity_regexp=options["expected_identity_regexp"],
                artifact=artifact,
            )
        except VerifyInputError as exc:
            self.stderr.write(f"verify_evidence: {exc}")
            sys.exit(2)
        if options["output"] == "json":
            self.stdout.write(json.dumps(result.as_json(), indent=2, sort_keys=False))
        else:
            self.stdout.write(_text(result))
        sys.exit(result.process_exit)


def _artifact(path: str | None) -> bytes | None:
    if path is None:
        return None
    file = Path(path)
    if not file.is_file():
        raise VerifyInputError(f"--artifact {path}: no such file")
    if file.stat().st_size > MAX_INPUT_BYTES:
        raise VerifyInputError(f"--artifact {path}: larger than {MAX_INPUT_BYTES} bytes")
    return file.read_bytes()


def _text(result: VerifyResult) -> str:
    verdict = {0: "VALID", 1: "VALID, with phase failures", 2: "INVALID"}[result.exit]
    lines = [f"{verdict} ({result.input}{': ' + result.recipe_name if result.recipe_name else ''})"]
    for step in result.steps:
        mark = {"passed": "✓", "failed": "✗"}.get(step["status"], "·")
        lines.append(f"  {mark} {step['step']}. {step['name']}: {step.get('detail', '')}")
        for row in step.get("subRows", []):
            lines.append(f"      {row['key']}: {row['value']}")
    return "\n".join(lines)
