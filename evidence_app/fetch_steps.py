"""The shell lines that fetch what a verify command reads, so it runs from a fresh shell.

A verify command names fixed files (``services.ingest.record.verify_commands``): a bundle's
``evidence.sigstore.json`` and ``recipe.yaml``, or, for an evidence directory, the unpacked
``summary-bundle/``; a key-signed one also reads ``key.pub``. These lines download each from
this site (the stored bytes, the recipe's canonical YAML pinned to its catalog version, the
registered key) and unpack a tarball where the commands expect it. ``without_cosign`` gives
the checks that need neither cosign nor aicr: this site's own ``manage.py verify_evidence`` on
the same files, and the downloaded bytes' sha256 with ``openssl``.
"""

from __future__ import annotations

import io
import shlex
import tarfile
from pathlib import PurePosixPath

from django.urls import reverse

from evidence_app.attestation.signing import ATTESTATION as ATTESTATION_NAME
from evidence_app.models import Container, Evidence, SignerKind
from recipes_app.selectors import resolved_yaml_url

TARBALL_FILE = "evidence.tar"
UNPACKED_DIR = "summary-bundle"


def is_tarball(evidence: Evidence) -> bool:
    return evidence.container == Container.SUMMARY_BUNDLE or "tar" in evidence.media_type


def attestation_depth(content: bytes) -> int | None:
    """How many directories above ``attestation.intoto.jsonl`` the archive has (what ``tar
    --strip-components`` removes to unpack it into ``summary-bundle/``); None if absent."""
    try:
        with tarfile.open(fileobj=io.BytesIO(content)) as archive:
            for member in archive.getmembers():
                path = PurePosixPath(member.name)
                if member.isfile() and path.name == ATTESTATION_NAME:
                    return len([p for p in path.parent.parts if p not in (".", "")])
    except (tarfile.TarError, OSError, EOFError):
        return None
    return None


def fetch_lines(evidence: Evidence, *, base_url: str) -> list[str]:
    """Shell lines for ``evidence`` (``base_url``: this site, ``https://host``). The stored
    bytes are read (one query) only for a tarball, to know where its attestation sits."""
    curl = "curl -fsSL -o"
    bundle = base_url + reverse("api:evidence-bundle", args=[evidence.pk])
    lines = []
    if is_tarball(evidence):
        content = Evidence.objects.filter(pk=evidence.pk).values_list("content", flat=True)
        depth = attestation_depth(bytes(content.first() or b""))
        lines.append(f"{curl} {TARBALL_FILE} {shlex.quote(bundle)}")
        lines.append(f"mkdir -p {UNPACKED_DIR}")
        strip = f" --strip-components={depth}" if depth else ""
        lines.append(f"tar -xf {TARBALL_FILE} -C {UNPACKED_DIR}{strip}")
    else:
        recipe = base_url + resolved_yaml_url(evidence.recipe, pin_catalog=True)
        lines.append(f"{curl} evidence.sigstore.json {shlex.quote(bundle)}")
        lines.append(f"{curl} recipe.yaml {shlex.quote(recipe)}")
    if evidence.signer.kind == SignerKind.KEY:
        key = base_url + reverse("evidence:signer-key", args=[evidence.signer.slug])
        lines.append(f"{curl} key.pub {shlex.quote(key)}")
    return lines


def without_cosign(evidence: Evidence) -> list[tuple[str, str]]:
    """``(tool, command)`` checks of the files ``fetch_lines`` downloads that need neither
    cosign nor aicr."""
    if is_tarball(evidence):
        verify = f"python manage.py verify_evidence {UNPACKED_DIR}"
        downloaded = TARBALL_FILE
    else:
        verify = "python manage.py verify_evidence evidence.sigstore.json --artifact recipe.yaml"
        downloaded = "evidence.sigstore.json"
    return [("manage.py", verify), ("openssl", f"openssl dgst -sha256 {downloaded}")]
