"""Hostile and unparsable input to aicrd's /v1/recipe and /v1/query: always 400
INVALID_REQUEST, retryable false (never a 500 reported as a retryable INTERNAL)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.usefixtures("real_catalog")

HUGE_INT = "9" * 4301  # past Python's int/str conversion limit (4,300 digits)
YAML = "application/x-yaml"
JSON = "application/json"


def _post(client: Client, path: str, body: bytes | str, content_type: str) -> Any:
    return client.post(path, body, content_type=content_type)


def assert_invalid_request(response: Any) -> dict[str, Any]:
    assert response.status_code == 400, response.content[:500]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["code"] == "INVALID_REQUEST"
    assert body["retryable"] is False
    uuid.UUID(body["requestId"])
    return body


# (name, path, content type, body): each one a different way for a body to be unusable.
HOSTILE_BODIES = [
    # Oversized numbers.
    ("yaml-int-4301-digits-nodes", "/v1/query", YAML, f"criteria:\n  nodes: {HUGE_INT}\n"),
    ("yaml-int-4301-digits-top", "/v1/query", YAML, f"{HUGE_INT}\n"),
    ("yaml-int-4301-digits-key", "/v1/query", YAML, f"criteria:\n  {HUGE_INT}: x\n"),
    ("yaml-int-4301-digits-selector", "/v1/query", YAML, f"selector: {HUGE_INT}\n"),
    ("yaml-hex-int-huge", "/v1/query", YAML, "criteria:\n  nodes: 0x" + "f" * 4000 + "\n"),
    (
        "yaml-int-recipe",
        "/v1/recipe",
        YAML,
        f"kind: RecipeCriteria\nspec:\n  service: eks\n  nodes: {HUGE_INT}\n",
    ),
    ("json-int-4301-digits", "/v1/recipe", JSON, f'{{"spec": {{"nodes": {HUGE_INT}}}}}'),
    ("json-int-4301-digits-query", "/v1/query", JSON, f'{{"criteria": {{"nodes": {HUGE_INT}}}}}'),
    ("yaml-huge-float", "/v1/query", YAML, "criteria:\n  nodes: 1e999999\n"),
    ("json-huge-float", "/v1/recipe", JSON, '{"spec": {"nodes": 1e999999}}'),
    ("yaml-nodes-nan", "/v1/query", YAML, "criteria:\n  nodes: .nan\n"),
    ("json-nan-constant", "/v1/recipe", JSON, '{"spec": {"nodes": NaN}}'),
    ("yaml-nodes-20-digits", "/v1/query", YAML, "criteria:\n  nodes: 99999999999999999999\n"),
    # Deep nesting.
    ("yaml-deep-flow", "/v1/query", YAML, "[" * 50_000 + "]" * 50_000),
    ("yaml-deep-mapping", "/v1/query", YAML, "{a: " * 20_000 + "1" + "}" * 20_000),
    ("json-deep", "/v1/recipe", JSON, "[" * 100_000 + "]" * 100_000),
    ("json-deep-in-spec", "/v1/recipe", JSON, '{"spec": ' + "[" * 50_000 + "]" * 50_000 + "}"),
    # Binary and broken text.
    ("binary-garbage", "/v1/query", YAML, bytes(range(256)) * 4),
    ("invalid-utf8", "/v1/recipe", JSON, b'{"spec": {"service": "\xff\xfe"}}'),
    ("nul-in-yaml", "/v1/query", YAML, "criteria:\n  service: e\x00ks\n"),
    ("nul-in-json-string", "/v1/recipe", JSON, '{"spec": {"service": "e\\u0000ks"}}'),
    ("utf16-bom", "/v1/recipe", JSON, '{"spec": {}}'.encode("utf-16")),
    ("yaml-binary-tag", "/v1/query", YAML, "criteria:\n  service: !!binary aGVsbG8=\n"),
    ("yaml-python-tag", "/v1/query", YAML, "criteria: !!python/object:os.system {}\n"),
    ("yaml-bad-date", "/v1/query", YAML, "criteria:\n  service: 2026-13-45\n"),
    ("yaml-bad-timestamp", "/v1/query", YAML, "selector: 2026-02-30T25:61:61Z\n"),
    ("yaml-two-documents", "/v1/query", YAML, "selector: a\n---\nselector: b\n"),
    ("yaml-alias", "/v1/query", YAML, "a: &x [1]\nb: *x\n"),
    ("yaml-unhashable-key", "/v1/query", YAML, "? [a, b]\n: c\n"),
    ("yaml-tab-indent", "/v1/query", YAML, "criteria:\n\tservice: eks\n"),
    ("json-truncated", "/v1/recipe", JSON, '{"spec": {"service": "eks"'),
    ("json-trailing-garbage", "/v1/recipe", JSON, '{"spec": {}} {"spec": {}}'),
    ("json-lone-surrogate", "/v1/recipe", JSON, '{"spec": {"service": "\\ud800"}}'),
    # Wrong types.
    ("json-list-body", "/v1/recipe", JSON, "[1, 2, 3]"),
    ("json-string-body", "/v1/recipe", JSON, '"eks"'),
    ("json-number-body", "/v1/query", JSON, "42"),
    ("json-null-body", "/v1/recipe", JSON, "null"),
    ("yaml-scalar-body", "/v1/query", YAML, "just a string\n"),
    ("spec-is-list", "/v1/recipe", JSON, '{"spec": ["eks"]}'),
    ("spec-is-string", "/v1/recipe", JSON, '{"spec": "eks"}'),
    ("service-is-number", "/v1/recipe", JSON, '{"spec": {"service": 7}}'),
    ("service-is-list", "/v1/recipe", JSON, '{"spec": {"service": ["eks"]}}'),
    ("service-is-mapping", "/v1/recipe", JSON, '{"spec": {"service": {"a": 1}}}'),
    ("service-is-bool", "/v1/query", YAML, "criteria:\n  service: yes\n"),
    ("nodes-is-bool", "/v1/recipe", JSON, '{"spec": {"nodes": true}}'),
    ("nodes-is-float", "/v1/recipe", JSON, '{"spec": {"nodes": 2.5}}'),
    ("nodes-is-list", "/v1/query", YAML, "criteria:\n  nodes: [1, 2]\n"),
    ("nodes-negative", "/v1/recipe", JSON, '{"spec": {"service": "eks", "nodes": -1}}'),
    ("nodes-is-text", "/v1/recipe", JSON, '{"spec": {"service": "eks", "nodes": "many"}}'),
    ("kind-is-number", "/v1/recipe", JSON, '{"kind": 5}'),
    ("kind-wrong", "/v1/recipe", JSON, '{"kind": "Pod"}'),
    ("criteria-is-list", "/v1/query", YAML, "criteria: [eks]\n"),
    ("selector-is-mapping", "/v1/query", YAML, "selector: {a: b}\n"),
    ("selector-is-number", "/v1/query", JSON, '{"selector": 3}'),
    ("huge-value", "/v1/recipe", JSON, json.dumps({"spec": {"service": "e" * 100_000}})),
    ("many-keys", "/v1/recipe", JSON, json.dumps({"spec": {f"k{i}": i for i in range(20_000)}})),
    ("empty", "/v1/recipe", JSON, ""),
    ("whitespace", "/v1/query", YAML, "   \n\t\n"),
]


@pytest.mark.parametrize(
    ("path", "content_type", "body"),
    [pytest.param(path, ctype, body, id=name) for name, path, ctype, body in HOSTILE_BODIES],
)
def test_unusable_bodies_are_invalid_requests(
    client: Client, path: str, content_type: str, body: bytes | str
) -> None:
    response = _post(client, path, body, content_type)

    if response.status_code == 200:
        # Accepted input must still be a real answer (unknown keys are ignored, as aicrd does).
        pytest.fail(f"accepted: {response.content[:200]!r}")
    assert_invalid_request(response)


def test_the_4301_digit_integer_names_the_problem(client: Client) -> None:
    response = _post(client, "/v1/query", f"criteria:\n  nodes: {HUGE_INT}\n", YAML)

    body = assert_invalid_request(response)
    assert "failed to parse YAML body" in body["details"]["error"]
    assert "4300" in body["details"]["error"]
    assert len(body["details"]["error"]) < 400  # the number itself is not echoed back


HOSTILE_QUERIES = [
    ("nodes-4301-digits", "/v1/recipe", {"service": "eks", "nodes": HUGE_INT}),
    ("nodes-huge-float", "/v1/recipe", {"service": "eks", "nodes": "1e999999"}),
    ("nodes-negative", "/v1/recipe", {"service": "eks", "nodes": "-5"}),
    ("service-unknown", "/v1/recipe", {"service": "\N{SNOWMAN}"}),
    ("nul-value", "/v1/recipe", {"service": "e\x00ks"}),
    ("query-without-selector", "/v1/query", {"service": "eks"}),
    ("query-nodes-4301-digits", "/v1/query", {"nodes": HUGE_INT, "selector": ""}),
]


@pytest.mark.parametrize(
    ("path", "params"),
    [pytest.param(path, params, id=name) for name, path, params in HOSTILE_QUERIES],
)
def test_unusable_query_parameters_are_invalid_requests(
    client: Client, path: str, params: dict[str, str]
) -> None:
    assert_invalid_request(client.get(path, params))
