"""The evidence page's verify commands say what each tool is and how to get it, and offer
checks without cosign that work: run here exactly as the page prints them, on the files its
fetch lines download."""

from __future__ import annotations

import hashlib
import html
import re
import shlex
import subprocess
import tarfile
from io import BytesIO, StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

from evidence_app.fetch_steps import attestation_depth
from evidence_app.verification.commands import TOOL_GUIDE
from recipes_app.models import Recipe
from tests.evidence_app.coverage_data import full_snapshot, publish

pytestmark = pytest.mark.usefixtures("evidence_db")


def _page(pk: int) -> str:
    return html.unescape(Client().get(f"/evidence/{pk}/").content.decode())


def test_each_verify_command_says_what_its_tool_is(example_recipe: Recipe) -> None:
    evidence = publish(example_recipe, full_snapshot())
    page = _page(evidence.pk)
    guides = dict(re.findall(r'data-tool-guide="([^"]+)">([^<]+)</p>', page))
    assert "cosign" in guides
    assert TOOL_GUIDE["cosign"] in guides["cosign"]
    assert "brew install cosign" in guides["cosign"]
    assert TOOL_GUIDE["manage.py"] in guides["manage.py"]
    assert "Without cosign" in page


def test_the_no_cosign_commands_verify_the_downloaded_files(
    example_recipe: Recipe, tmp_path: Path
) -> None:
    evidence = publish(example_recipe, full_snapshot())
    page = _page(evidence.pk)
    offline = re.findall(r'<code id="offline-command-\d+">([^<]+)</code>', page)
    verify, digest = offline
    # The fetch lines' tarball, unpacked as they say (curl replaced by the test client).
    content = Client().get(f"/api/v1/evidence/{evidence.pk}/bundle").content
    assert hashlib.sha256(content).hexdigest() == evidence.sha256
    (tmp_path / "evidence.tar").write_bytes(content)
    depth = attestation_depth(content) or 0
    with tarfile.open(fileobj=BytesIO(content)) as archive:
        for member in archive.getmembers():
            parts = Path(member.name).parts[depth:]
            if member.isfile() and parts:
                target = tmp_path.joinpath("summary-bundle", *parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                source = archive.extractfile(member)
                assert source is not None
                target.write_bytes(source.read())
    argv = shlex.split(verify)
    assert argv[:3] == ["python", "manage.py", "verify_evidence"]
    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command(*argv[2:3], str(tmp_path / argv[3]), *argv[4:], stdout=out)
    assert exited.value.code in (0, None), out.getvalue()
    assert out.getvalue().startswith("VALID"), out.getvalue()
    shown = subprocess.run(
        shlex.split(digest), cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert evidence.sha256 in shown
    assert evidence.sha256 in page
