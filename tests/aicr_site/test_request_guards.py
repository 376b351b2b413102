"""Unstorable text in paths, query strings and cookies is refused (400, naming it) before any
query runs, on every page and API route; errors under /api/ and /v1/ are JSON.

Run under DATABASE_URL=postgres://… these cases reach PostgreSQL, which cannot compare text
holding a NUL: without the guard they answer 500 there.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from django.db import OperationalError
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

# Every route of the site (admin aside) with concrete arguments; the first test keeps this list
# complete, so a new route gets these cases too.
ROUTES = {
    "home": "/",
    "recipes:list": "/recipes/",
    "badge": "/badges/h100-eks-ubuntu-training-kubeflow.svg",
    "evidence-feed": "/feeds/evidence.atom",
    "recipes:detail": "/recipes/h100-eks-ubuntu-training-kubeflow/",
    "recipes:history": "/recipes/h100-eks-ubuntu-training-kubeflow/history/",
    "recipes:yaml": "/recipes/h100-eks-ubuntu-training-kubeflow/recipe.yaml",
    "evidence:list": "/evidence/",
    "evidence:new": "/evidence/new/",
    "evidence:compare": "/evidence/compare/",
    "evidence:upload": "/evidence/uploads/1/",
    "evidence:detail": "/evidence/1/",
    "evidence:withdraw": "/evidence/1/withdraw/",
    "evidence:pointers": "/evidence/pointers/",
    "evidence:pointer-yaml": "/evidence/1/pointer.yaml",
    "evidence:signers": "/signers/",
    "evidence:signer": "/signers/some-signer/",
    "evidence:signer-key": "/signers/some-signer/key.pub",
    "login": "/accounts/login/",
    "logout": "/accounts/logout/",
    "api:api-root": "/api/v1/",
    "api:recipe-list": "/api/v1/recipes/",
    "api:recipe-detail": "/api/v1/recipes/h100-eks-ubuntu-training-kubeflow/",
    "api:recipe-resolved-yaml": "/api/v1/recipes/h100-eks-ubuntu-training-kubeflow/resolved.yaml",
    "api:recipe-query": "/api/v1/query/",
    "api:evidence-list": "/api/v1/evidence/",
    "api:evidence-detail": "/api/v1/evidence/1/",
    "api:evidence-bundle": "/api/v1/evidence/1/bundle",
    "api:evidence-withdraw": "/api/v1/evidence/1/withdraw",
    "api:upload-detail": "/api/v1/uploads/1/",
    "api:signer-list": "/api/v1/signers/",
    "api:pointer-list": "/api/v1/pointers/",
    "api:signer-detail": "/api/v1/signers/0123456789abcdef0123456789abcdef/",
    "api:key-list": "/api/v1/keys/",
    "api:export-ndjson": "/api/v1/export/evidence.ndjson",
    "api:export-csv": "/api/v1/export/evidence.csv",
    "api:qualifications": "/api/v1/qualifications/",
    "api:qualifications-csv": "/api/v1/export/qualifications.csv",
    "api:qualifications-ndjson": "/api/v1/export/qualifications.ndjson",
    "api:export-audit": "/api/v1/export/audit.tar.gz",
    "api:export-job-list": "/api/v1/exports/",
    "api:export-job-detail": "/api/v1/exports/1/",
    "api:export-job-download": "/api/v1/exports/1/download/",
    "evidence:exports": "/exports/",
    "evidence:export": "/exports/1/",
    "evidence:export-file": "/exports/1/download",
    "api:release-list": "/api/v1/releases/",
    "api:release-detail": "/api/v1/releases/1/",
    "api:release-profiles": "/api/v1/releases/1/profiles/",
    "aicr-dashboard:listing": "/aicr/data/",
    "aicr-dashboard:index": "/aicr/data/index.json",
    "aicr-dashboard:labels": "/aicr/data/labels.json",
    "aicr-dashboard:series": "/aicr/data/series/h100-eks-ubuntu-training-kubeflow.json",
    "health": "/health",
    "ready": "/ready",
    "metrics": "/metrics",
    "api-schema": "/api/schema/",
    "api-docs": "/api/docs/",
    "aicrd:recipe": "/v1/recipe",
    "aicrd:query": "/v1/query",
    "api:cluster-list": "/api/v1/clusters/",
    "api:cluster-detail": "/api/v1/clusters/1/",
    "api:cluster-test": "/api/v1/clusters/1/test/",
    "api:run-list": "/api/v1/runs/",
    "api:run-detail": "/api/v1/runs/1/",
    "api:run-ctrf": "/api/v1/runs/1/ctrf.json",
    "api:run-pointer": "/api/v1/runs/1/pointer.yaml",
    "api:run-cancel": "/api/v1/runs/1/cancel/",
    "clusters:list": "/clusters/",
    "clusters:new": "/clusters/new/",
    "clusters:detail": "/clusters/1/",
    "clusters:test": "/clusters/1/test/",
    "clusters:settings": "/clusters/1/settings/",
    "runs:list": "/runs/",
    "runs:start": "/runs/start/",
    "runs:detail": "/runs/1/",
    "runs:cancel": "/runs/1/cancel/",
    "check": "/check/",
    "qualifications": "/qualifications/",
    "releases:list": "/releases/",
    "releases:detail": "/releases/1/",
    "releases:feed": "/releases/1/feed.atom",
    "release-badge": "/badges/releases/1.svg",
    "api:check": "/api/v1/check/",
    "admin:index": "/admin/",
    "admin:login": "/admin/login/",
}
ROUTE_PATHS = sorted(set(ROUTES.values()))
# Query parameters the pages and APIs actually read, plus one they do not.
PARAMETERS = (
    "recipe",
    "signer",
    "service",
    "accelerator",
    "q",
    "page",
    "selector",
    "cell",
    "from",
    "anything",
)


def _route_names(patterns: list[Any], namespace: str = "") -> set[str]:
    names: set[str] = set()
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            if pattern.namespace == "admin":
                continue
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            names |= _route_names(pattern.url_patterns, inner)
        elif isinstance(pattern, URLPattern) and pattern.name:
            names.add(namespace + pattern.name)
    return names


def test_every_route_is_covered() -> None:
    assert _route_names(get_resolver().url_patterns) <= set(ROUTES)


def _assert_refused(response: Any, path: str, name: str) -> None:
    assert response.status_code == 400, (path, response.status_code, response.content[:300])
    if path.startswith("/v1/"):
        body = response.json()
        assert body["code"] == "INVALID_REQUEST"
        assert body["retryable"] is False
        assert body["details"]["parameter"] == name
    elif path.startswith("/api/"):
        assert response.json()["parameter"] == name
    else:
        assert response["Content-Type"].startswith("text/html")
        assert "NUL character" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("path", ROUTE_PATHS)
@pytest.mark.parametrize("parameter", PARAMETERS)
def test_a_nul_in_a_query_value_is_refused_before_any_query(
    client: Client, django_assert_num_queries: Any, path: str, parameter: str
) -> None:
    with django_assert_num_queries(0):
        response = client.get(f"{path}?{parameter}=abc%00def")

    _assert_refused(response, path, parameter)
    if not path.startswith("/v1/"):
        assert repr(parameter) in (
            response.json()["detail"] if path.startswith("/api/") else response.content.decode()
        ).replace("&#x27;", "'")


@pytest.mark.django_db
@pytest.mark.parametrize("path", ROUTE_PATHS)
def test_a_nul_in_a_query_name_is_refused(client: Client, path: str) -> None:
    response = client.get(f"{path}?na%00me=1")

    _assert_refused(response, path, "na\N{REPLACEMENT CHARACTER}me")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [
        "/recipes/%00/",
        "/recipes/h100%00/",
        "/signers/%00/",
        "/api/v1/recipes/%00/",
        "/api/v1/recipes/%00/resolved.yaml",
        "/api/v1/signers/%00/",
        "/v1/recipe%00",
        "/evidence/%00/",
        "/admin/%00/",
    ]
    + [f"{path}%00" for path in ROUTE_PATHS],
)
def test_a_nul_in_the_path_is_refused(
    client: Client, django_assert_num_queries: Any, path: str
) -> None:
    with django_assert_num_queries(0):
        response = client.get(path)

    _assert_refused(response, path, "URL path")


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["post", "put", "delete"])
@pytest.mark.parametrize("path", ["/evidence/?recipe=%00", "/api/v1/evidence/?recipe=%00"])
def test_other_methods_are_refused_too(client: Client, method: str, path: str) -> None:
    response = getattr(client, method)(path)

    _assert_refused(response, path, "recipe")


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/evidence/", "/api/v1/evidence/", "/v1/recipe"])
def test_a_nul_in_a_cookie_is_refused(client: Client, path: str) -> None:
    # RFC 2965-quoted cookie values may carry octal escapes: "\000" is a NUL once unquoted.
    response = client.get(path, HTTP_COOKIE='sessionid="abc\\000defghijkl"')

    _assert_refused(response, path, "sessionid")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "parameters"),
    [
        ("/evidence/", {"recipe": "h100-eks-ubuntu-training-kubeflow"}),
        ("/api/v1/recipes/", {"service": "eks"}),
        ("/recipes/", {"q": "h100 ünïcode ☃"}),
    ],
)
def test_ordinary_text_passes(client: Client, path: str, parameters: dict[str, str]) -> None:
    assert client.get(path, parameters).status_code == 200


# --- JSON errors under /api/ and /v1/ ------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v1/nothing-here/", "/api/nothing/", "/v1/nothing"])
def test_a_missing_api_route_answers_json_404(client: Client, path: str) -> None:
    response = client.get(path)

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    body = response.json()
    if path.startswith("/v1/"):
        assert (body["code"], body["retryable"]) == ("NOT_FOUND", False)
    else:
        assert body["detail"] == "Nothing is at this address."


@pytest.mark.django_db
def test_a_missing_page_answers_html_404(client: Client) -> None:
    response = client.get("/no-such-page/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
    assert "Nothing is at this address." in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "path"),
    [("put", "/api/schema/"), ("delete", "/v1/recipe"), ("put", "/v1/query")],
)
def test_a_wrong_method_answers_json_405(client: Client, method: str, path: str) -> None:
    response = getattr(client, method)(path)

    assert response.status_code == 405
    assert response["Content-Type"] == "application/json"
    assert response.has_header("Allow")


@pytest.fixture
def debug_off_client(settings: Any) -> Client:
    settings.DEBUG = False
    return Client(raise_request_exception=False)


def _explode(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("secret internal detail /srv/app/settings.py")


@pytest.mark.django_db
@pytest.mark.parametrize("debug", [False, True])
def test_an_exception_in_an_api_view_answers_json_500_without_a_traceback(
    settings: Any, monkeypatch: pytest.MonkeyPatch, debug: bool
) -> None:
    from recipes_app.api.views import RecipeViewSet

    settings.DEBUG = debug
    monkeypatch.setattr(RecipeViewSet, "list", _explode)

    response = Client(raise_request_exception=False).get("/api/v1/recipes/")

    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    body = response.json()
    message = "Something went wrong on our side; it has been logged."
    assert body == {
        "code": "internal",
        "message": message,
        "detail": message,
        "details": {},
        "request_id": response["X-Request-Id"],
    }
    assert b"secret internal detail" not in response.content
    assert b"Traceback" not in response.content


@pytest.mark.django_db
def test_an_exception_in_a_page_answers_a_plain_500_page(
    debug_off_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recipes_app import selectors

    monkeypatch.setattr(selectors, "recipe_listing", _explode)

    response = debug_off_client.get("/recipes/")

    assert response.status_code == 500
    assert response["Content-Type"].startswith("text/html")
    assert b"secret internal detail" not in response.content


def _locked(*args: Any, **kwargs: Any) -> Any:
    # What Django raises when SQLite's busy timeout runs out.
    try:
        raise sqlite3.OperationalError("database is locked")
    except sqlite3.OperationalError as exc:
        raise OperationalError("database is locked") from exc


@pytest.mark.django_db
@pytest.mark.parametrize("debug", [False, True])
def test_a_locked_database_answers_503_with_retry_after(
    settings: Any, monkeypatch: pytest.MonkeyPatch, debug: bool
) -> None:
    from recipes_app import selectors
    from recipes_app.aicrd import views as aicrd_views
    from recipes_app.api.views import RecipeViewSet

    settings.DEBUG = debug
    monkeypatch.setattr(selectors, "recipe_listing", _locked)
    monkeypatch.setattr(RecipeViewSet, "list", _locked)
    monkeypatch.setattr(aicrd_views, "resolve_criteria", _locked)
    client = Client(raise_request_exception=False)

    page = client.get("/recipes/")
    api = client.get("/api/v1/recipes/")
    aicrd = client.get("/v1/recipe", {"service": "eks"})

    for response in (page, api, aicrd):
        assert response.status_code == 503
        assert response["Retry-After"] == str(settings.DB_RETRY_AFTER_SECONDS)
    assert "database is busy" in page.content.decode()
    assert "database is busy" in api.json()["detail"]
    assert (aicrd.json()["code"], aicrd.json()["retryable"]) == ("SERVICE_UNAVAILABLE", True)


@pytest.mark.django_db
def test_other_sqlite_errors_stay_500(monkeypatch: pytest.MonkeyPatch) -> None:
    from recipes_app.api.views import RecipeViewSet

    def missing_table(*args: Any, **kwargs: Any) -> Any:
        try:
            raise sqlite3.OperationalError("no such table: recipes_app_recipe")
        except sqlite3.OperationalError as exc:
            raise OperationalError(str(exc)) from exc

    monkeypatch.setattr(RecipeViewSet, "list", missing_table)

    response = Client(raise_request_exception=False).get("/api/v1/recipes/")

    assert response.status_code == 500


@pytest.mark.django_db
@pytest.mark.parametrize("debug", [False, True])
def test_a_lock_met_outside_the_view_answers_503_too(
    settings: Any, monkeypatch: pytest.MonkeyPatch, django_user_model: Any, debug: bool
) -> None:
    """The session is saved by its middleware after the view: a lock there is no 500 either
    (with DEBUG it was a traceback page)."""
    from django.contrib.sessions.backends.db import SessionStore

    settings.DEBUG = debug
    django_user_model.objects.create_user("locked-out", password="pw-for-tests-1")
    monkeypatch.setattr(SessionStore, "save", _locked)
    client = Client(raise_request_exception=False)

    response = client.post(
        "/accounts/login/",
        "username=locked-out&password=pw-for-tests-1",
        content_type="application/x-www-form-urlencoded",
    )

    assert response.status_code == 503
    assert response["Retry-After"] == str(settings.DB_RETRY_AFTER_SECONDS)
    assert "Traceback" not in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("post", "/api/v1/evidence/1/withdraw", 401),
        ("get", "/api/v1/uploads/1/", 401),
        ("get", "/api/v1/evidence/999999/", 404),
        ("get", "/api/v1/recipes/no-such-recipe/", 404),
        ("delete", "/api/v1/signers/", 405),
    ],
)
@pytest.mark.parametrize("accept", ["application/json", "text/html,*/*;q=0.8"])
def test_api_errors_are_json_whatever_the_client_accepts(
    client: Client, method: str, path: str, status: int, accept: str
) -> None:
    response = getattr(client, method)(path, headers={"Accept": accept})

    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]
