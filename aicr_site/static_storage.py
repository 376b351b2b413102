"""Static files as production serves them: this site's own CSS and JavaScript minified, then
hashed and compressed by whitenoise.

The sources in ``static/css`` and ``static/js`` keep their comments (they say why a rule
exists); a page's byte budget (HTML + CSS + JS under 100 KB before compression,
docs/benchmarks.md) is paid in what is served, where comments and indentation are ~30% of
the CSS and ~40% of the JavaScript. Vendored files (``vendor/``, ``*.min.js``) and other apps'
assets (admin, DRF, the API docs) are served as they come.
"""

from __future__ import annotations

import hashlib
from typing import Any

import rcssmin
import rjsmin
from django.core.files.base import ContentFile
from whitenoise.storage import CompressedManifestStaticFilesStorage

OWN_ASSET_FOLDERS = ("css/", "js/")


def is_minifiable(name: str) -> bool:
    """One of this site's own stylesheets or scripts (not a vendored ``*.min.js``)."""
    return (
        name.startswith(OWN_ASSET_FOLDERS)
        and name.endswith((".css", ".js"))
        and not name.endswith(".min.js")
    )


def minified(name: str, text: str) -> str | None:
    """``text`` minified when ``name`` is one of this site's own stylesheets or scripts."""
    if not is_minifiable(name):
        return None
    if name.endswith(".css"):
        return str(rcssmin.cssmin(text))
    return str(rjsmin.jsmin(text))


def _minified_bytes(name: str | None, content: Any) -> bytes | None:
    """The minified bytes of ``content`` when ``name`` is one of this site's own files."""
    if content is None or name is None or not is_minifiable(name):
        return None
    content.seek(0)  # hashing or copying may have read it to the end
    raw = content.read()
    content.seek(0)
    small = minified(name, raw.decode("utf-8") if isinstance(raw, bytes) else str(raw))
    return None if small is None else small.encode("utf-8")


class MinifiedCompressedManifestStorage(CompressedManifestStaticFilesStorage):
    """Minifies on the way in, and names each file by the hash of its minified bytes, so a
    hashed URL (served as immutable for a year) changes whenever the served bytes do — a new
    minifier included. ``collectstatic`` copies each file through ``_save`` and the hashed
    copies it makes next go through it again: minifying twice changes nothing."""

    def file_hash(self, name: str | None, content: Any = None) -> str | None:
        small = _minified_bytes(name, content)
        if small is None:
            return super().file_hash(name, content)  # type: ignore[no-any-return]
        return hashlib.md5(small, usedforsecurity=False).hexdigest()[:12]

    def _save(self, name: str, content: Any) -> str:
        small = _minified_bytes(name, content)
        if small is not None:
            content = ContentFile(small)
        return str(super()._save(name, content))
