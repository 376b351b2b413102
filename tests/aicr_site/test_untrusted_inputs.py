"""Every place untrusted YAML or JSON enters is bounded by the one loader per format, and the
hostile corpus (``tests/hostile_corpus.py``) is refused by name at each of them.

The loaders: ``evidence_app/verification/_json.py::load_json`` (JSON; API bodies reach it
through ``aicr_site/parsers.py::BoundedJSONParser``) and ``recipes_app/resolver/yamlload.py``
(``parse_raw``, and ``overlong_number`` for the readers that stream PyYAML events).

Three lists keep this complete, as ``test_request_guards.py`` does for the NUL guard:

- ``ROUTES_FED`` / ``ROUTES_WITHOUT_DOCUMENTS``: every URL route is one or the other;
- ``COMMANDS_FED`` / ``COMMANDS_WITHOUT_UNTRUSTED_FILES``: every product management command;
- ``PARSE_SITES``: every ``json.loads`` / ``yaml.*`` call in product code outside the loaders,
  with why it is safe. A new one fails ``test_it_knows_every_parse_site`` until it is routed
  through a loader or listed with its reason.

Under ``DATABASE_URL=postgres://…`` the routes run against PostgreSQL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command, get_commands
from django.test import Client
from django.urls import get_resolver
from rest_framework.parsers import JSONParser
from rest_framework.settings import api_settings

from aicr_site.parsers import BoundedJSONParser
from evidence_app.models import Role
from evidence_app.services.tokens import token_create, user_with_role
from tests import hostile_corpus
from tests.aicr_site.api_objects import ApiObjects
from tests.aicr_site.test_request_guards import _route_names

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("aicr_site", "evidence_app", "recipes_app", "validators_app")
LOADERS = {"evidence_app/verification/_json.py", "recipes_app/resolver/yamlload.py"}
REFUSED = {400, 413, 415, 422}

# --- the lists --------------------------------------------------------------------------------

#: Route name → how the corpus is fed to it (a key of ``FEEDERS``).
ROUTES_FED = {
    "api:check": "check-api",
    "check": "check-page",
    "api:cluster-list": "cluster-api",
    "clusters:new": "cluster-page",
    "api:cluster-detail": "cluster-settings-api",
    "clusters:settings": "cluster-settings-page",
    "aicrd:recipe": "aicrd",
    "aicrd:query": "aicrd",
    "api:evidence-list": "evidence-upload-api",
    "evidence:new": "evidence-upload-page",
    "api:evidence-withdraw": "json-body",
    "api:key-list": "json-body",
    "api:run-list": "json-body",
}
#: Route name → why it takes no YAML or JSON document.
ROUTES_WITHOUT_DOCUMENTS = {
    name: "GET only (query parameters: the NUL guard's test)"
    for name in (
        "home",
        "recipes:list",
        "badge",
        "evidence-feed",
        "recipes:detail",
        "recipes:history",
        "recipes:yaml",
        "evidence:list",
        "evidence:compare",
        "evidence:upload",
        "evidence:detail",
        "evidence:pointers",
        "evidence:pointer-yaml",
        "evidence:signers",
        "evidence:signer",
        "evidence:signer-key",
        "api:api-root",
        "api:recipe-list",
        "api:recipe-detail",
        "api:recipe-resolved-yaml",
        "api:recipe-query",
        "api:evidence-detail",
        "api:evidence-bundle",
        "api:upload-detail",
        "api:signer-list",
        "api:pointer-list",
        "api:signer-detail",
        "api:export-ndjson",
        "api:export-csv",
        "api:export-audit",
        "aicr-dashboard:index",
        "aicr-dashboard:series",
        "health",
        "ready",
        "metrics",
        "api-schema",
        "api-docs",
        "api:run-detail",
        "api:run-ctrf",
        "clusters:list",
        "clusters:detail",
        "runs:list",
        "runs:detail",
    )
} | {
    "login": "form fields (username, password), no document",
    "logout": "no body",
    "evidence:withdraw": "form field (reason text), no document",
    "clusters:test": "no body (the outbound connection policy: h-hostile-peer)",
    "api:cluster-test": "no body (the outbound connection policy: h-hostile-peer)",
    "runs:start": "form fields (choices), no document",
    "runs:cancel": "no body",
    "api:run-cancel": "no body is read (a JSON body is ignored, never parsed)",
}

#: Product commands that read untrusted files → how the corpus is fed (exit 2 expected).
COMMANDS_FED = {"verify_audit": "audit-package", "check_snapshot": "snapshot-file"}
COMMANDS_WITHOUT_UNTRUSTED_FILES = {
    "verify_evidence": "evidence files go through verify_evidence's pipeline (load_json)",
    "import_evidence": "an AICR checkout: pointers and allowlist through their bounded readers",
    "import_catalog": "the maintainer's AICR recipe tree, through parse_raw",
    "register_key": "a PEM key, no YAML or JSON",
    "create_token": "arguments only",
    "ensure_site_key": "arguments only",
    "export_pointer": "writes, reads only the database",
    "refresh_consensus": "reads only the database",
    "seed_demo": "the repository's own demo data",
    "write_catalog_snapshot": "writes; reads the maintainer's tree through parse_raw",
    "write_v1_tree": "writes",
    "ensure_local_keys": "arguments only",
    "publish_runs": "reads only the database",
    "rotate_cluster_keys": "reads only the database",
}

#: ``path: (calls, why it is not untrusted input or is bounded there)``.
PARSE_SITES = {
    "aicr_site/settings.py": (1, "EVIDENCE_EXTRA_POLICIES: the operator's environment"),
    "evidence_app/verification/trust.py": (1, "a trusted root stored after load_json checked it"),
    "evidence_app/attestation/redact.py": (1, "the run's CTRF as orchestrator/ctrf.py wrote it"),
    "evidence_app/attestation/builder.py": (1, "the run's CTRF as orchestrator/ctrf.py wrote it"),
    "evidence_app/exports/ndjson_pg.py": (2, "PostgreSQL's own json output"),
    "evidence_app/exports/audit.py": (1, "a round trip of the consensus this code computed"),
    "evidence_app/corroborate/gojson.py": (
        1,
        "Go encoding/json semantics (duplicate keys, U+FFFD); size-capped reads; ValueError "
        "and RecursionError become JSONTypeError",
    ),
    "evidence_app/corroborate/allowlist.py": (
        1,
        "yaml.v3 node semantics; 1 MiB cap; compose keeps aliases unexpanded and scalars as "
        "text; RecursionError is an invalid allowlist",
    ),
    "recipes_app/aicrd/inputs.py": (
        2,
        "aicrd drop-in (Go decoders: duplicate keys allowed); 1 MiB body cap, anchors refused, "
        "ValueError/RecursionError are [INVALID_REQUEST]",
    ),
    "recipes_app/api/views.py": (1, "DRF's own error detail, round-tripped"),
    "recipes_app/migrations/0002_catalog_validator_catalog_version.py": (1, "stored catalog"),
    "recipes_app/snapshot.py": (1, "the catalog snapshot write_catalog_snapshot wrote; capped"),
    "validators_app/orchestrator/kube.py": (
        2,
        "API server responses, capped in bytes and time by aicr_site.lib.outbound "
        "(a gzip answer still decompresses uncapped)",
    ),
    "validators_app/orchestrator/run.py": (
        1,
        "the agent's snapshot: alias-free loader with overlong_number; RecursionError, "
        "ValueError become RunError",
    ),
    "validators_app/orchestrator/logs.py": (1, "pod log extras; any failure means no extras"),
    "validators_app/services/runs.py": (2, "the stored catalog, and this site's canonical YAML"),
    "validators_app/kubeconfig.py": (
        2,
        "event pass with depth, count, alias and overlong_number limits before the load",
    ),
}
_PARSE_CALL = re.compile(
    r"\b(?:json\.loads?|yaml\.(?:safe_load|safe_load_all|load|load_all|full_load|unsafe_load|"
    r"compose|compose_all|parse))\("
)


# --- completeness -------------------------------------------------------------------------------


def test_it_classifies_every_route() -> None:
    routes = _route_names(get_resolver().url_patterns)
    assert not set(ROUTES_FED) & set(ROUTES_WITHOUT_DOCUMENTS)
    assert routes - set(ROUTES_FED) - set(ROUTES_WITHOUT_DOCUMENTS) == set()


def test_it_classifies_every_product_command() -> None:
    ours = {name for name, app in get_commands().items() if app.split(".")[0] in PRODUCT}
    assert ours == set(COMMANDS_FED) | set(COMMANDS_WITHOUT_UNTRUSTED_FILES)


def test_it_knows_every_parse_site() -> None:
    found: dict[str, int] = {}
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT).as_posix()
            if relative in LOADERS:
                continue
            calls = len(_PARSE_CALL.findall(path.read_text()))
            if calls:
                found[relative] = calls
    assert found == {path: calls for path, (calls, _) in PARSE_SITES.items()}


def _api_views() -> list[tuple[str, Any]]:
    views = []
    for pattern in get_resolver().url_patterns:
        for inner in getattr(pattern, "url_patterns", [pattern]):
            callback = getattr(inner, "callback", None)
            cls = getattr(callback, "cls", None)
            if cls is not None:
                views.append((str(inner.pattern), cls))
    return views


def test_it_parses_every_api_json_body_with_the_bounded_parser() -> None:
    assert BoundedJSONParser in api_settings.DEFAULT_PARSER_CLASSES
    views = _api_views()
    assert len(views) > 20
    for route, cls in views:
        for parser in cls.parser_classes:
            if issubclass(parser, JSONParser):
                assert issubclass(parser, BoundedJSONParser), (route, parser)


# --- feeding the corpus -------------------------------------------------------------------------


def _token(role: str) -> str:
    user = user_with_role(username=f"hostile-{role}", role=role)
    return token_create(user=user, role=role)[1]


def _api(role: str) -> Client:
    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {_token(role)}"
    return client


def _page(role: str) -> Client:
    client = Client()
    client.force_login(user_with_role(username=f"hostile-page-{role}", role=role))
    return client


Response = Any
Feeder = Callable[[ApiObjects, str], list[tuple[str, Response]]]


def _json_bodies(client: Client, url: str) -> list[tuple[str, Response]]:
    return [
        (f"json:{name}", client.post(url, data, content_type="application/json"))
        for name, data in hostile_corpus.JSON.items()
    ]


def _yaml_in_json(client: Client, url: str, field: str, **other: str) -> list[tuple[str, Any]]:
    return [
        (
            f"yaml-in-json:{name}",
            client.post(
                url,
                json.dumps({field: text, **other}).encode("utf-8", "surrogatepass"),
                content_type="application/json",
            ),
        )
        for name, text in hostile_corpus.yaml_texts().items()
    ]


def _files(client: Client, url: str, field: str) -> list[tuple[str, Response]]:
    from django.core.files.uploadedfile import SimpleUploadedFile

    out = []
    for name, data in {**hostile_corpus.YAML, **hostile_corpus.JSON}.items():
        upload = SimpleUploadedFile("hostile.yaml", data)
        out.append((f"file:{name}", client.post(url, {field: upload})))
    return out


def _feed_check_api(objects: ApiObjects, url: str) -> list[tuple[str, Response]]:
    client = Client()
    return (
        _json_bodies(client, url)
        + _yaml_in_json(client, url, "snapshot")
        + _files(client, url, "snapshot")
    )


def _feed_check_page(objects: ApiObjects, url: str) -> list[tuple[str, Response]]:
    client = Client()
    pasted = [
        (f"paste:{name}", client.post(url, {"snapshot_text": text}))
        for name, text in hostile_corpus.yaml_texts().items()
        if "\x00" not in text and "\ud800" not in text  # a form field cannot carry them
    ]
    return pasted + _files(client, url, "snapshot_file")


def _feed_cluster_api(objects: ApiObjects, url: str) -> list[tuple[str, Response]]:
    client = _api(Role.MAINTAINER)
    return _json_bodies(client, url) + _yaml_in_json(
        client, url, "kubeconfig", name="hostile", environment="simulated"
    )


def _feed_cluster_page(objects: ApiObjects, url: str) -> list[tuple[str, Response]]:
    client = _page(Role.MAINTAINER)
    return [
        (
            f"paste:{name}",
            client.post(url, {"name": "hostile", "environment": "simulated", "kubeconfig": text}),
        )
        for name, text in hostile_corpus.yaml_texts().items()
        if "\x00" not in text and "\ud800" not in text
    ]


def _feed_cluster_settings_api(objects: ApiObjects, url: str) -> list[tuple[str, Response]]:
    client = _api(Role.MAINTAINER)
    return [
        (f"json:{name}", client.patch(url, data, content_type="application/json"))
        for name, data in hostile_corpus.JSON.items()
    ]


def _feed_cluster_settings_page(objects: ApiObjects, url: str) -> list[tuple[str, Response]]:
    """Each hostile JSON text pasted into each JSON field of the settings form."""
    client = _page(Role.MAINTAINER)
    fields = ("image_pull_secrets", "node_selector", "tolerations", "agent_tolerations")
    answers = []
    for name, data in hostile_corpus.JSON.items():
        text = data.decode("utf-8", "replace")
        if "\x00" in text:
            continue  # a NUL in a form field is the NUL guard's (test_request_guards.py)
        answers += [(f"{field}:{name}", client.post(url, {field: text})) for field in fields]
    return answers


def _feed_aicrd(objects: ApiObjects, url: str) -> list[tuple[str, Response]]:
    client = Client()
    yaml_bodies = [
        (f"yaml:{name}", client.post(url, data, content_type="application/x-yaml"))
        for name, data in hostile_corpus.YAML.items()
    ]
    return _json_bodies(client, url) + yaml_bodies


def _feed_evidence_upload_api(objects: ApiObjects, url: str) -> list[tuple[str, Response]]:
    client = _api(Role.CONTRIBUTOR)
    return _json_bodies(client, url) + _files(client, url, "bundle")


class _Outcome:
    """The page answers 303 to the upload's own page; the refusal is the upload's outcome,
    mapped to a status the way the API maps it (``upload_status.http_status_of``)."""

    def __init__(self, status_code: int, content: bytes) -> None:
        self.status_code = status_code
        self.content = content


def _feed_evidence_upload_page(objects: ApiObjects, url: str) -> list[tuple[str, Response]]:
    from evidence_app.models import UploadLog
    from evidence_app.upload_status import http_status_of

    out: list[tuple[str, Response]] = []
    for member, response in _files(_page(Role.CONTRIBUTOR), url, "bundle"):
        if response.status_code == 303:
            upload = UploadLog.objects.order_by("-pk").first()
            assert upload is not None
            assert "/evidence/uploads/" in response["Location"]
            response = _Outcome(http_status_of(upload.outcome), upload.reason.encode()[:200])
        out.append((member, response))
    return out


def _feed_json_body(objects: ApiObjects, url: str) -> list[tuple[str, Response]]:
    return _json_bodies(_api(Role.MAINTAINER), url)


FEEDERS: dict[str, Feeder] = {
    "check-api": _feed_check_api,
    "check-page": _feed_check_page,
    "cluster-api": _feed_cluster_api,
    "cluster-page": _feed_cluster_page,
    "cluster-settings-api": _feed_cluster_settings_api,
    "cluster-settings-page": _feed_cluster_settings_page,
    "aicrd": _feed_aicrd,
    "evidence-upload-api": _feed_evidence_upload_api,
    "evidence-upload-page": _feed_evidence_upload_page,
    "json-body": _feed_json_body,
}


def _url(name: str, objects: ApiObjects) -> str:
    from django.urls import reverse

    if name == "api:evidence-withdraw":
        return reverse(name, args=[objects.evidence.pk])
    if name == "api:run-cancel":
        return reverse(name, args=[objects.run.pk])
    if name in ("api:cluster-detail", "clusters:settings"):
        return reverse(name, args=[objects.cluster.pk])
    return reverse(name)


@pytest.mark.django_db
@pytest.mark.parametrize("route", sorted(ROUTES_FED))
def test_it_refuses_the_hostile_corpus_by_name_at_every_route(
    api_objects: ApiObjects, route: str, settings: Any
) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"evidence-upload": "100000/min"},
    }
    url = _url(route, api_objects)
    answers = FEEDERS[ROUTES_FED[route]](api_objects, url)
    assert answers
    wrong = {
        member: (response.status_code, response.content[:200])
        for member, response in answers
        if response.status_code not in REFUSED
    }
    assert wrong == {}


# --- the defects of the issue, by name ----------------------------------------------------------

BIG_INTEGER_SNAPSHOT = "x: " + "9" * 5_000


@pytest.mark.django_db
def test_it_answers_400_not_500_to_a_5000_digit_yaml_integer_on_the_check_api() -> None:
    client = Client()
    response = client.post(
        "/api/v1/check/", {"snapshot": BIG_INTEGER_SNAPSHOT}, content_type="application/json"
    )
    assert response.status_code == 400
    assert "number literal of 5000 characters (limit 1000)" in response.json()["detail"]


@pytest.mark.django_db
def test_it_answers_400_not_500_to_a_5000_digit_yaml_integer_on_the_check_page() -> None:
    response = Client().post("/check/", {"snapshot_text": BIG_INTEGER_SNAPSHOT})
    assert response.status_code == 400
    assert "number literal of 5000 characters" in response.content.decode()


@pytest.mark.django_db
def test_it_answers_400_not_500_to_a_kubeconfig_holding_a_5000_digit_integer(
    api_objects: ApiObjects,
) -> None:
    from tests.validators_app.kubeconfigs import kubeconfig

    response = _api(Role.MAINTAINER).post(
        "/api/v1/clusters/",
        {
            "name": "big-int",
            "environment": "simulated",
            "kubeconfig": kubeconfig() + "\nx: " + "9" * 5_000 + "\n",
        },
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "number literal of 5000 characters" in response.content.decode()


@pytest.mark.django_db
def test_it_answers_400_not_500_to_json_nested_5000_deep_on_the_check_api() -> None:
    response = Client().post(
        "/api/v1/check/", b'{"snapshot": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", "application/json"
    )
    assert response.status_code == 400
    assert "nesting deeper than 2 levels" in response.content.decode()


@pytest.mark.parametrize("member", sorted(hostile_corpus.YAML))
def test_check_snapshot_exits_2_on_every_hostile_yaml(
    member: str, tmp_path: Path, db: None
) -> None:
    path = tmp_path / "snapshot.yaml"
    path.write_bytes(hostile_corpus.YAML[member])
    with pytest.raises(SystemExit) as exit_:
        call_command("check_snapshot", str(path))
    assert exit_.value.code == 2


@pytest.mark.parametrize(
    "member", sorted({**hostile_corpus.YAML, **hostile_corpus.JSON}.items()), ids=lambda m: m[0]
)
def test_verify_audit_exits_2_on_every_hostile_file(
    member: tuple[str, bytes], tmp_path: Path
) -> None:
    path = tmp_path / "audit.tar.gz"
    path.write_bytes(member[1])
    key = tmp_path / "key.pub"
    key.write_text("-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n")
    with pytest.raises(SystemExit) as exit_:
        call_command("verify_audit", str(path), "--json")
    assert exit_.value.code == 2
