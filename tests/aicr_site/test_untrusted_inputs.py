"""Every place untrusted YAML or JSON enters is bounded by the one loader per format, and the
hostile corpus (``tests/hostile_corpus.py``) is refused by name at each of them.

The loaders: ``evidence_app/verification/_json.py::load_json`` (JSON; API bodies reach it
through ``aicr_site/parsers.py::BoundedJSONParser``) and ``recipes_app/resolver/yamlload.py``
(``parse_raw``, and ``overlong_number`` for the readers that stream PyYAML events).

Three lists keep this complete, as ``test_request_guards.py`` does for the NUL guard:

- ``ROUTES_FED`` / ``ROUTES_WITHOUT_DOCUMENTS``: every URL route is one or the other;
- ``COMMANDS_FED`` / ``COMMANDS_WITHOUT_UNTRUSTED_FILES``: every product management command;
  each fed command answers the corpus with exit 2, and ``COMMAND_PARSE_SITES`` lists the files
  that parse for it (recorded at run time, so a command that starts parsing elsewhere fails);
- ``PARSE_SITES``: every ``json.loads`` / ``yaml.*`` call in product code outside the loaders,
  with why it is safe. A new one fails ``test_it_knows_every_parse_site`` until it is routed
  through a loader or listed with its reason.

Under ``DATABASE_URL=postgres://…`` the routes run against PostgreSQL.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import sys
import tarfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import CommandError, call_command, get_commands
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
    "api:release-list": "json-body",
    "api:export-job-list": "json-body",
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
        "api:export-job-detail",
        "api:export-job-download",
        "evidence:export",
        "evidence:export-file",
        "aicr-dashboard:index",
        "aicr-dashboard:series",
        "aicr-dashboard:listing",
        "aicr-dashboard:labels",
        "qualifications",
        "api:qualifications",
        "api:qualifications-csv",
        "api:qualifications-ndjson",
        "api:release-detail",
        "api:release-profiles",
        "releases:list",
        "releases:detail",
        "releases:feed",
        "release-badge",
        "health",
        "ready",
        "metrics",
        "api-schema",
        "api-docs",
        "api:run-detail",
        "api:run-ctrf",
        "api:run-pointer",
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
    "evidence:exports": "form fields (format, the evidence filters), no document",
    "runs:cancel": "no body",
    "api:run-cancel": "no body is read (a JSON body is ignored, never parsed)",
}

#: Product commands that read untrusted files → how the corpus is fed (a key of
#: ``COMMAND_FEEDERS``); each must answer exit 2 naming what it refused, never a traceback.
COMMANDS_FED = {
    "verify_audit": "audit-package",
    "check_snapshot": "snapshot-file",
    "verify_evidence": "evidence-file",
    "import_catalog": "catalog-tree-and-snapshot",
    "import_evidence": "evidence-tree",
}
#: Fed command → every product file that calls a parser (``_PARSERS``) while the corpus is
#: fed to it, recorded at run time. A command that starts parsing somewhere new fails
#: ``test_each_command_parses_only_through_its_listed_sites`` until the site is listed here
#: (and, outside the loaders, in ``PARSE_SITES`` with why it is bounded).
COMMAND_PARSE_SITES = {
    "verify_audit": {"evidence_app/verification/_json.py"},
    "check_snapshot": {"recipes_app/resolver/yamlload.py"},
    "verify_evidence": {
        "evidence_app/verification/_json.py",
        "evidence_app/corroborate/allowlist.py",  # the site's own allowlist, to classify
    },
    "import_catalog": {"evidence_app/verification/_json.py", "recipes_app/resolver/yamlload.py"},
    "import_evidence": {
        "evidence_app/corroborate/allowlist.py",  # the tree's allowlist.yaml
        "recipes_app/resolver/yamlload.py",  # each pointer file
    },
}
COMMANDS_WITHOUT_UNTRUSTED_FILES = {
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
    "push_run_evidence": "reads only the database; the registry's answers go through oci_push",
    "rotate_cluster_keys": "reads only the database",
    "wait_for_dependencies": "arguments only; connects to the database and the broker",
}

#: ``path: (calls, why it is not untrusted input or is bounded there)``.
PARSE_SITES = {
    "aicr_site/settings.py": (1, "EVIDENCE_EXTRA_POLICIES: the operator's environment"),
    "evidence_app/verification/trust.py": (1, "a trusted root stored after load_json checked it"),
    "evidence_app/attestation/redact.py": (1, "the run's CTRF as orchestrator/ctrf.py wrote it"),
    "evidence_app/attestation/builder.py": (1, "the run's CTRF as orchestrator/ctrf.py wrote it"),
    "evidence_app/exports/ndjson_pg.py": (2, "PostgreSQL's own json output"),
    "evidence_app/exports/audit.py": (1, "a round trip of the consensus this code computed"),
    "evidence_app/exports/package.py": (2, "a stored check_results, as the database renders it"),
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
    "validators_app/orchestrator/kube.py": (
        2,
        "API server responses, capped in bytes and time by aicr_site.lib.outbound; a gzip "
        "or deflate answer is inflated by kube.py with its output capped at the same limit; "
        "ValueError/RecursionError are InvalidAnswer (test_orchestrator_semantics.py feeds "
        "the JSON and COMPRESSED corpus)",
    ),
    "validators_app/orchestrator/run.py": (
        1,
        "the agent's snapshot: alias-free loader with overlong_number; RecursionError, "
        "ValueError become RunError",
    ),
    "validators_app/orchestrator/logs.py": (1, "pod log extras; any failure means no extras"),
    "validators_app/services/runs.py": (2, "the stored catalog, and this site's canonical YAML"),
    "validators_app/services/publication.py": (1, "the statement this site's builder just wrote"),
    "validators_app/kubeconfig.py": (
        2,
        "event pass with depth, count, alias and overlong_number limits before the load",
    ),
}
_PARSE_CALL = re.compile(
    r"\b(?:(?:or)?json\.loads?|yaml\.(?:safe_load|safe_load_all|load|load_all|full_load|unsafe_load|"
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


# --- the commands -------------------------------------------------------------------------------

#: (corpus member, exit status, what the command printed)
CommandAnswer = tuple[str, int, str]


def _command(name: str, *args: str) -> tuple[int, str]:
    """Run a command as ``manage.py`` would: its exit status and its output. Any other
    exception (a traceback) propagates and fails the test."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(name, *args, stdout=out, stderr=err)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    except CommandError as exc:
        code = exc.returncode
        err.write(str(exc))
    else:
        code = 0
    return code, out.getvalue() + err.getvalue()


def _members(*corpora: dict[str, bytes]) -> dict[str, bytes]:
    merged: dict[str, bytes] = {}
    for corpus, label in zip(corpora, ("yaml", "json"), strict=False):
        merged.update({f"{label}:{name}": data for name, data in corpus.items()})
    return merged


def _feed_audit_package(tmp: Path) -> list[CommandAnswer]:
    """Each member as the whole file, and as the ``package.json`` of a tar.gz (the package
    JSON is decoded before the unsigned manifest could matter: see test_audit_package.py for
    hostile members in a package signed by the site key)."""
    answers = []
    for member, data in _members(hostile_corpus.YAML, hostile_corpus.JSON).items():
        path = tmp / "audit.tar.gz"
        path.write_bytes(data)
        answers.append((f"file:{member}", *_command("verify_audit", str(path), "--json")))
        if member == "json:huge-string":
            continue  # 3 MB is within a package member's 64 MiB: a named problem, exit 1
        with tarfile.open(path, mode="w:gz") as tar:
            info = tarfile.TarInfo("package.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        code, text = _command("verify_audit", str(path), "--json")
        answers.append((f"package.json:{member}", code, text))
        assert code != 2 or "package.json" in text, (member, text[:300])
    return answers


def _each_member_as_file(
    tmp: Path, command: str, filename: str, *corpora: dict[str, bytes]
) -> list[CommandAnswer]:
    answers = []
    for member, data in _members(*corpora).items():
        path = tmp / filename
        path.write_bytes(data)
        answers.append((member, *_command(command, str(path))))
    return answers


def _feed_snapshot_file(tmp: Path) -> list[CommandAnswer]:
    return _each_member_as_file(tmp, "check_snapshot", "snapshot.yaml", hostile_corpus.YAML)


def _feed_evidence_file(tmp: Path) -> list[CommandAnswer]:
    return _each_member_as_file(
        tmp, "verify_evidence", "bundle.json", hostile_corpus.YAML, hostile_corpus.JSON
    )


def _feed_catalog(tmp: Path) -> list[CommandAnswer]:
    """Each member as a tree's ``registry.yaml``, and gzipped as a catalog snapshot."""
    answers = []
    for member, data in _members(hostile_corpus.YAML, hostile_corpus.JSON).items():
        tree = tmp / "tree"
        tree.mkdir(exist_ok=True)
        (tree / "registry.yaml").write_bytes(data)
        answers.append((f"tree:{member}", *_command("import_catalog", str(tree))))
        snapshot = tmp / "catalog.json.gz"
        snapshot.write_bytes(gzip.compress(data))
        answers.append((f"snapshot:{member}", *_command("import_catalog", str(snapshot))))
    return answers


def _feed_evidence_tree(tmp: Path) -> list[CommandAnswer]:
    """Each member as the tree's ``allowlist.yaml`` (the tree is refused: exit 2). As a pointer
    file it is one refused row with its reason and the import goes on: the test below."""
    answers = []
    for member, data in _members(hostile_corpus.YAML).items():
        evidence = tmp / "recipes" / "evidence"
        evidence.mkdir(parents=True, exist_ok=True)
        (evidence / "allowlist.yaml").write_bytes(data)
        answers.append((member, *_command("import_evidence", str(tmp))))
    return answers


COMMAND_FEEDERS: dict[str, Callable[[Path], list[CommandAnswer]]] = {
    "audit-package": _feed_audit_package,
    "snapshot-file": _feed_snapshot_file,
    "evidence-file": _feed_evidence_file,
    "catalog-tree-and-snapshot": _feed_catalog,
    "evidence-tree": _feed_evidence_tree,
}
_PARSERS = {
    json: ("loads", "load"),
    yaml: (
        "safe_load",
        "safe_load_all",
        "load",
        "load_all",
        "full_load",
        "unsafe_load",
        "compose",
        "compose_all",
        "parse",
    ),
}


@contextmanager
def _parse_sites_recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """Every product file that calls one of ``_PARSERS`` while the block runs (the caller's
    frame, so a loader calling ``json.loads`` is recorded as the loader)."""
    seen: set[str] = set()

    def recording(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            caller = Path(sys._getframe(1).f_code.co_filename)
            if caller.is_relative_to(ROOT) and caller.relative_to(ROOT).parts[0] in PRODUCT:
                seen.add(caller.relative_to(ROOT).as_posix())
            return original(*args, **kwargs)

        return wrapper

    for module, names in _PARSERS.items():
        for name in names:
            monkeypatch.setattr(module, name, recording(getattr(module, name)))
    yield seen


@pytest.mark.django_db
@pytest.mark.parametrize("command", sorted(COMMANDS_FED))
def test_each_command_exits_2_on_the_hostile_corpus_through_its_listed_parse_sites(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _parse_sites_recorded(monkeypatch) as seen:
        answers = COMMAND_FEEDERS[COMMANDS_FED[command]](tmp_path)
    assert answers
    wrong = {member: (code, text[-300:]) for member, code, text in answers if code != 2}
    assert wrong == {}
    assert all("Traceback" not in text for _, _, text in answers)
    # The corpus reached a parser (the recorder sees the parsing), and nothing parsed it
    # anywhere unlisted; a cached site (the site's allowlist) may be skipped on a warm run.
    assert seen
    assert seen <= COMMAND_PARSE_SITES[command]
    assert COMMAND_PARSE_SITES[command] <= LOADERS | set(PARSE_SITES)


@pytest.mark.django_db
@pytest.mark.parametrize("member", sorted(hostile_corpus.YAML))
def test_import_evidence_refuses_a_hostile_pointer_file_by_name_and_imports_the_rest(
    member: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evidence_app.models import EvidencePointer

    folder = tmp_path / "recipes" / "evidence" / "some-recipe" / "src"
    folder.mkdir(parents=True)
    (folder / "hostile.yaml").write_bytes(hostile_corpus.YAML[member])
    with _parse_sites_recorded(monkeypatch) as seen:
        code, text = _command("import_evidence", str(tmp_path), "--allowlist=skip")
    assert code == 0, text
    assert seen <= COMMAND_PARSE_SITES["import_evidence"]
    row = EvidencePointer.objects.get(path__endswith="some-recipe/src/hostile.yaml")
    assert row.state == "refused", (row.state, row.reason)
    assert row.reason
    assert f"refused  {row.path}: " in text
