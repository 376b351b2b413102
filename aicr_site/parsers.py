"""The one JSON parser for API request bodies: every ``/api/`` JSON body is decoded by the
bounded loader (``evidence_app.verification._json.load_json``: size, depth, keys per object,
total values, number-literal length, duplicate keys, NUL and lone surrogates), and every
refusal is a 400 naming the limit.

It is ``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``; a view that needs other limits states
``json_limits`` (a ``JSONLimits``) instead of writing its own parser class.
``tests/aicr_site/test_untrusted_inputs.py`` fails when a view parses JSON any other way.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from evidence_app.verification._json import JSONLimitError, JSONLimits, load_json

#: For a view that states nothing: a command body (withdraw, register a key, start a run) is a
#: few small fields.
DEFAULT_API_LIMITS = JSONLimits(max_bytes=64 * 1024, max_depth=8, max_object_keys=16)


def view_json_limits(view: Any) -> JSONLimits:
    limits = getattr(view, "json_limits", None)
    return limits if isinstance(limits, JSONLimits) else DEFAULT_API_LIMITS


class BoundedJSONParser(JSONParser):
    """JSON request bodies through the bounded loader, with the view's ``json_limits``."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limits = view_json_limits((parser_context or {}).get("view"))
        # One byte past the limit is enough to refuse it; the rest is never read.
        data = stream.read(limits.max_bytes + 1) if stream is not None else b""
        try:
            return load_json(data, what="request body", limits=limits)
        except JSONLimitError as exc:
            raise ParseError(str(exc)) from None
