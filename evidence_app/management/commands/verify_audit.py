"""``manage.py verify_audit PACKAGE [--key site-key.pub] [--json]``: re-verify an audit
package offline (no database, no network; ``evidence_app.exports.audit``).

Exit status: 0 everything verified; 1 problems found (each named); 2 the package or the key
cannot be read at all: not a tar.gz, a header declaring more than the limits, or a JSON member
the bounded loader refuses (too deep, too large, an overlong number, not JSON), the member
named.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePublicKey
from django.core.management.base import BaseCommand, CommandParser

from evidence_app.exports.audit import (
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_UNREADABLE,
    PackageUnreadable,
    audit_verify,
)
from evidence_app.exports.signing import configured_public_key, load_public_key
from evidence_app.services.site_key import SiteKeyUnavailable


class Command(BaseCommand):
    help = "Re-verify an audit package (audit.tar.gz) offline, without the database."
    requires_system_checks: list[str] = []  # no database, no checks that might touch one

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("package", type=Path, help="The audit.tar.gz to check.")
        parser.add_argument(
            "--key",
            type=Path,
            help="PEM public key of the site you trust (default: this site's configured key).",
        )
        parser.add_argument("--json", action="store_true", help="Print the summary as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        as_json = options["json"]
        pinned: EllipticCurvePublicKey | None
        try:
            if options["key"] is not None:
                pinned = load_public_key(options["key"].read_bytes())
            else:
                pinned = configured_public_key()
            report = audit_verify(options["package"], pinned_key=pinned)
        except (PackageUnreadable, ValueError, OSError, SiteKeyUnavailable) as exc:
            self._error(str(exc), as_json)
            raise SystemExit(EXIT_UNREADABLE) from None
        if as_json:
            self.stdout.write(json.dumps(report.as_dict(), indent=1, sort_keys=True))
        else:
            self.stdout.write(
                f"{report.package}: {report.records} records, {report.bundles_verified} bundles "
                f"verified, {report.recipes_checked} recipe digests, {report.consensus_recipes} "
                f"consensus recipes, {report.files} files; site key "
                f"{report.site_key_fingerprint[:16]}…"
            )
            for problem in report.problems:
                self.stdout.write(f"PROBLEM {problem.code} {problem.path}: {problem.detail}")
            self.stdout.write("OK" if report.ok else f"FAILED: {len(report.problems)} problems")
        raise SystemExit(EXIT_OK if report.ok else EXIT_PROBLEMS)

    def _error(self, message: str, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps({"ok": False, "error": message}))
        else:
            self.stderr.write(f"error: {message}")
