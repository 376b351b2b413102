"""Seed the vendored Sigstore production trusted root and AICR's upstream allowlist.

Both are plain rows afterwards: maintainers disable the root or publish new allowlist versions
in the admin. The files are read from the app at migration time (they are part of the code:
``verification/roots/production.trusted_root.json`` is pinned by sha256 in
``verification.trust``; ``data/aicr-allowlist.yaml`` is AICR's ``recipes/evidence/allowlist.yaml``).
"""

import hashlib
from pathlib import Path

from django.db import migrations

APP = Path(__file__).resolve().parent.parent
ROOT_FILE = APP / "verification" / "roots" / "production.trusted_root.json"
ALLOWLIST_FILE = APP / "data" / "aicr-allowlist.yaml"
ALLOWLIST_NOTE = "AICR upstream recipes/evidence/allowlist.yaml (main-08), seeded"


def seed(apps, schema_editor):
    TrustRoot = apps.get_model("evidence_app", "TrustRoot")
    Allowlist = apps.get_model("evidence_app", "Allowlist")
    if not TrustRoot.objects.filter(is_production=True).exists():
        text = ROOT_FILE.read_text()
        TrustRoot.objects.get_or_create(
            name="production",
            defaults={
                "trusted_root_json": text,
                "sha256": hashlib.sha256(text.encode()).hexdigest(),
                "is_production": True,
                "enabled": True,
            },
        )
    if not Allowlist.objects.exists():
        Allowlist.objects.create(body=ALLOWLIST_FILE.read_text(), note=ALLOWLIST_NOTE)


class Migration(migrations.Migration):
    dependencies = [("evidence_app", "0001_evidence_signers_uploads")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
