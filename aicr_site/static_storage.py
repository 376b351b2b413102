"""Static files as production serves them: this site's own CSS and JavaScript minified, then
hashed and compressed by whitenoise.

The sources in ``static/css`` and ``static/js`` keep their comments (they say why a rule
exists); a page's byte budget (HTML + CSS + JS under 100 KB before compression,
docs/benchmarks.md) is paid in what is served, where comments and indentation are ~30% of
the CSS and ~40% of the JavaScript. Vendored files (``vendor/``, ``*.min.js``) and other apps'
assets (admin, DRF, the API docs) are served as they come.
"""

from __future__ import annotations

from typing import Any

import rcssmin
import rjsmin
from django.core.files.base import ContentFile
from whitenoise.storage import CompressedManifestStaticFilesStorage

OWN_ASSET_FOLDERS = ("css/", "js/")


def minified(name: str, text: str) -> str | None:
    """``text`` minified when ``name`` is one of this site's own stylesheets or scripts."""
    if not name.startswith(OWN_ASSET_FOLDERS) or name.endswith(".min.js"):
        return None
    if name.endswith(".css"):
        return str(rcssmin.cssmin(text))
    if name.endswith(".js"):
        return str(rjsmin.jsmin(text))
    return None


class MinifiedCompressedManifestStorage(CompressedManifestStaticFilesStorage):
    """Minifies on the way in, so the manifest's hashes and whitenoise's compressed copies are
    of the bytes actually served (``collectstatic`` copies each file through ``_save``, and the
    hashed copies it makes next go through it again: minifying twice changes nothing)."""

    def _save(self, name: str, content: Any) -> str:
        if name.startswith(OWN_ASSET_FOLDERS):
            content.seek(0)  # hashing the file may have read it to the end
            raw = content.read()
            text = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
            small = minified(name, text)
            content.seek(0)
            if small is not None:
                content = ContentFile(small.encode("utf-8"))
        return str(super()._save(name, content))
