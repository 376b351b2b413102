"""Production static files: this site's CSS and JavaScript are served minified (comments and
indentation are ~30% of them), hashed from what is served, and vendored files untouched."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from aicr_site.static_storage import minified

SOURCE = Path(settings.BASE_DIR) / "static"


@pytest.fixture
def collected(tmp_path: Path, settings) -> Path:  # type: ignore[no-untyped-def]
    settings.STATIC_ROOT = tmp_path
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "aicr_site.static_storage.MinifiedCompressedManifestStorage"},
    }
    call_command("collectstatic", interactive=False, verbosity=0)
    return tmp_path


def _rules(css: str) -> list[str]:
    """Each rule's selector and declarations, whitespace and comments aside."""
    text = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    text = re.sub(r"\s+", " ", text)
    rules = re.split(r"(?<=})", text)
    return [re.sub(r"\s*([{}:;,>()])\s*", r"\1", rule).strip() for rule in rules]


def test_own_stylesheets_are_served_minified_with_every_rule_kept(collected: Path) -> None:
    sheets = sorted(p.relative_to(SOURCE) for p in SOURCE.glob("css/*.css"))
    assert sheets
    for name in sheets:
        source = (SOURCE / name).read_text()
        served = (collected / name).read_text()
        # Whitespace and comments gone; a sheet of long selectors (api-docs.css, Swagger's
        # class chains) keeps ~83 % of its bytes, the others 55-75 %.
        assert len(served) < 0.9 * len(source), name
        assert "/*" not in served, name
        assert "\n" not in served.strip(), name
        kept = [r.replace(";}", "}") for r in _rules(source) if r]
        assert [r for r in _rules(served) if r] == kept, name


def test_a_hashed_name_is_the_hash_of_the_bytes_served(collected: Path) -> None:
    """Hashed URLs are cached as immutable: a new minifier with the same sources must change
    them, so the name hashes what is served, not the source."""
    manifest = json.loads((collected / "staticfiles.json").read_text())["paths"]
    own = [name for name in manifest if name.startswith(("css/", "js/"))]
    assert "css/base.css" in own
    assert "js/site.js" in own
    for name in [*own, "vendor/htmx/htmx.min.js"]:
        served = (collected / manifest[name]).read_bytes()
        assert served == (collected / name).read_bytes(), name
        digest = hashlib.md5(served, usedforsecurity=False).hexdigest()[:12]
        assert manifest[name].endswith(f".{digest}{Path(name).suffix}"), (name, manifest[name])
    source = (SOURCE / "css/base.css").read_bytes()
    assert (
        hashlib.md5(source, usedforsecurity=False).hexdigest()[:12] not in manifest["css/base.css"]
    )


def test_site_js_keeps_every_string_and_name(collected: Path) -> None:
    source = (SOURCE / "js/site.js").read_text()
    served = (collected / "js/site.js").read_text()
    assert len(served) < 0.7 * len(source)
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", source, flags=re.S)
    strings = set(re.findall(r'"(?:[^"\\\n]|\\.)*"', code))
    assert strings
    assert strings <= set(re.findall(r'"(?:[^"\\\n]|\\.)*"', served))
    names = set(re.findall(r"[A-Za-z_$][\w$]*", re.sub(r'"(?:[^"\\\n]|\\.)*"', "", code)))
    assert names <= set(re.findall(r"[A-Za-z_$][\w$]*", served))


def test_vendored_and_other_apps_files_are_served_as_they_come(collected: Path) -> None:
    htmx = "vendor/htmx/htmx.min.js"
    assert (collected / htmx).read_bytes() == (SOURCE / htmx).read_bytes()
    assert minified("vendor/htmx/htmx.min.js", "a  =  1") is None
    assert minified("admin/css/base.css", "a  {  color : red  }") is None
    assert minified("css/x.css", "a  {  color : red  } /* why */") == "a{color:red}"
    assert minified("css/font.woff2", "anything") is None
