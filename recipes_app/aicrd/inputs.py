"""Request input for the aicrd drop-in: query parameters and bounded JSON/YAML bodies.

Bodies are read only up to ``MAX_BODY_BYTES`` (aicrd's ``MaxRecipePOSTBytes``), must be UTF-8,
and YAML is parsed by a loader that refuses anchors and aliases, so a "billion laughs" body
fails on its first alias instead of expanding. Every problem is an ``InputError`` whose text is
what aicrd puts in ``details.error`` (``[INVALID_REQUEST] …``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, QueryDict

from recipes_app.aicrd.errors import AicrdError

MAX_BODY_BYTES = 1024 * 1024
MAX_VALUE_LENGTH = 200  # longer criteria values are refused, and echoed back cut to this
MAX_NODES_DIGITS = 18  # fits Go's int64, like aicrd's parser
CRITERIA_KIND = "RecipeCriteria"
CRITERIA_API_VERSION = "aicr.run/v1alpha2"
CRITERIA_FIELDS = ("service", "accelerator", "intent", "os", "platform")
YAML_MEDIA_TYPES = ("application/x-yaml", "application/yaml", "text/yaml")


class InputError(Exception):
    """Malformed request input; ``str()`` is the ``details.error`` text."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(f"[INVALID_REQUEST] {message}")


@dataclass(frozen=True)
class CriteriaInput:
    """Criteria as the client stated them (non-empty values only), still unparsed.

    Keys: ``service, accelerator, intent, os, platform, nodes``; the resolver's
    ``parse_criteria`` validates the values and applies AICR's aliases.
    """

    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class QueryInput:
    criteria: CriteriaInput | None
    selector: str


def shorten(value: str) -> str:
    return value if len(value) <= MAX_VALUE_LENGTH else value[:MAX_VALUE_LENGTH] + "…"


# --- query parameters ---------------------------------------------------------------------


def _checked(name: str, value: str) -> str:
    """No real criteria value is long: refuse a huge one before it is parsed or echoed."""
    limit = MAX_NODES_DIGITS if name == "nodes" else MAX_VALUE_LENGTH
    if len(value) > limit:
        kind = "value" if name == "nodes" else "type"
        raise InputError(f"invalid {name} {kind}: {shorten(value)}")
    return value


def _first(query: QueryDict, key: str) -> str:
    """Go's ``url.Values.Get``: the first value of a repeated parameter."""
    values = query.getlist(key)
    return values[0] if values else ""


def criteria_from_query(query: QueryDict) -> CriteriaInput:
    """``service, accelerator`` (alias ``gpu``), ``intent, os, platform, nodes``."""
    values: dict[str, Any] = {}
    for name in CRITERIA_FIELDS:
        value = _first(query, name)
        if name == "accelerator" and not value:
            value = _first(query, "gpu")
        if value:
            values[name] = _checked(name, value)
    nodes = _first(query, "nodes")
    if nodes:
        values["nodes"] = _checked("nodes", nodes)
    return CriteriaInput(values=values)


# --- bodies -------------------------------------------------------------------------------


def read_body(request: HttpRequest) -> bytes:
    """The request body, refused past ``MAX_BODY_BYTES`` before it is read into memory."""
    too_large = AicrdError(
        "Request body exceeds maximum allowed size",
        details={"limit_bytes": MAX_BODY_BYTES},
        status=413,  # aicrd: INVALID_REQUEST, but 413 for an oversized body
    )
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > MAX_BODY_BYTES:
        raise too_large
    try:
        data = request.body
    except RequestDataTooBig:
        raise too_large from None
    if len(data) > MAX_BODY_BYTES:
        raise too_large
    return data


class _BoundedLoader(yaml.SafeLoader):
    """Safe YAML without anchors or aliases (no expansion attacks), one document only."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            mark = event.start_mark
            raise InputError(
                "failed to parse YAML body: anchors and aliases are not allowed "
                f"(line {mark.line + 1}, column {mark.column + 1})"
            )
        return super().compose_node(parent, index)


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def parse_body(data: bytes, content_type: str, *, default: str, empty_message: str) -> Any:
    """Decode a JSON or YAML body. ``default`` is the format for other media types:
    aicrd reads ``/v1/recipe`` bodies as JSON unless they are labelled YAML, and
    ``/v1/query`` bodies as YAML unless the type mentions JSON."""
    if not data.strip():
        raise InputError(empty_message)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"request body is not valid UTF-8 (byte offset {exc.start})") from None
    media_type = _media_type(content_type)
    if media_type in YAML_MEDIA_TYPES or (default == "yaml" and "json" not in media_type):
        return _load_yaml(text)
    return _load_json(text, media_type)


def _load_yaml(text: str) -> Any:
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())
        raise InputError(f"failed to parse YAML body: {shorten(problem)}") from None
    except RecursionError:
        raise InputError("failed to parse YAML body: nesting too deep") from None
    except (ValueError, OverflowError) as exc:
        # A scalar the constructors cannot build: an integer past Python's 4,300-digit
        # conversion limit, a date like 2026-13-45.
        problem = " ".join(str(exc).split())
        raise InputError(f"failed to parse YAML body: {shorten(problem)}") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON value {name}")


def _load_json(text: str, media_type: str) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        problem = "nesting too deep" if isinstance(exc, RecursionError) else str(exc)
        if media_type not in ("", "application/json"):
            raise InputError(
                f"unsupported content type {shorten(media_type)!r} and failed to parse as JSON: "
                f"{problem}"
            ) from None
        raise InputError(f"failed to parse JSON body: {problem}") from None


def criteria_from_recipe_criteria(document: Any) -> CriteriaInput:
    """A ``RecipeCriteria`` resource (``kind``, ``apiVersion``, ``metadata``, ``spec``)."""
    if not isinstance(document, Mapping):
        raise InputError("request body must be a RecipeCriteria mapping")
    if "profile" in document:
        raise InputError("profile selection is available only on /v2/recipe")
    kind = _text(document.get("kind"), "kind")
    if kind and kind != CRITERIA_KIND:
        raise InputError(f"invalid kind {shorten(kind)!r}, expected {CRITERIA_KIND!r}")
    api_version = _text(document.get("apiVersion"), "apiVersion")
    if api_version and api_version != CRITERIA_API_VERSION:
        raise InputError(
            f"invalid apiVersion {shorten(api_version)!r}, expected {CRITERIA_API_VERSION!r}"
        )
    return criteria_from_spec(document.get("spec"), where="spec")


def criteria_from_spec(spec: Any, *, where: str) -> CriteriaInput:
    if spec is None:
        return CriteriaInput()
    if not isinstance(spec, Mapping):
        raise InputError(f"{where} must be a mapping of criteria")
    values: dict[str, Any] = {}
    for name in CRITERIA_FIELDS:
        value = _text(spec.get(name), f"{where}.{name}")
        if value:
            values[name] = _checked(name, value)
    nodes = spec.get("nodes")
    if nodes is not None and nodes != "":
        if isinstance(nodes, bool) or not isinstance(nodes, int | str):
            raise InputError(f"{where}.nodes must be an integer")
        if isinstance(nodes, int) and abs(nodes) >= 10**MAX_NODES_DIGITS:
            # Checked before str(): YAML builds hex/octal integers of any size, and turning one
            # past 4,300 digits into text raises.
            raise InputError(f"invalid {where}.nodes value: more than {MAX_NODES_DIGITS} digits")
        _checked("nodes", str(nodes))
        values["nodes"] = nodes
    return CriteriaInput(values=values)


def query_from_body(document: Any) -> QueryInput:
    """A ``QueryRequest`` (``criteria`` object + ``selector``); no selector = whole recipe."""
    if not isinstance(document, Mapping):
        raise InputError("request body must be a QueryRequest mapping")
    if "profile" in document:
        raise InputError("profile selection is available only on /v2/query")
    raw_criteria = document.get("criteria")
    criteria = None if raw_criteria is None else criteria_from_spec(raw_criteria, where="criteria")
    selector = _text(document.get("selector"), "selector")
    return QueryInput(criteria=criteria, selector=selector)


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    raise InputError(f"{where} must be a string")
