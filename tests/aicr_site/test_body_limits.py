"""Request bodies are refused before they are read when over the route's cap (413), by the
declared Content-Length or, for chunked bodies, by the bytes actually read."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.test import Client

MIB = 1024 * 1024
# Non-upload routes that take a POST, one per kind of answer (page, API, aicrd).
ROUTES = ["/accounts/login/", "/evidence/1/withdraw/", "/api/v1/evidence/1/withdraw", "/v1/query"]


class Unreadable(io.RawIOBase):
    """A body stream that fails the test if anything reads it."""

    def read(self, size: int = -1) -> bytes:
        raise AssertionError("the body was read")

    def readline(self, size: int | None = -1) -> bytes:
        raise AssertionError("the body was read")


def _assert_too_large(response: Any, path: str, limit: int) -> None:
    assert response.status_code == 413, response.content[:300]
    assert response["Connection"] == "close"
    if path.startswith("/v1/"):
        body = response.json()
        assert (body["code"], body["retryable"]) == ("INVALID_REQUEST", False)
        assert body["details"] == {"limit_bytes": limit}
    elif path.startswith("/api/"):
        assert response.json()["limit_bytes"] == limit
    else:
        assert f"({limit:,} bytes)" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize("declared", [MIB + 1, 50 * MIB, 10**15])
def test_a_declared_length_over_the_cap_is_refused_unread(
    client: Client, path: str, declared: int
) -> None:
    response = client.generic(
        "POST",
        path,
        content_type="multipart/form-data; boundary=x",
        CONTENT_LENGTH=str(declared),
        **{"wsgi.input": Unreadable()},
    )

    _assert_too_large(response, path, MIB)


@pytest.mark.django_db
@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize("declared", ["-1", "1e9", "12abc", " 5", "0x10", "１２"])  # noqa: RUF001 - full-width digits
def test_a_malformed_length_is_a_bad_request(client: Client, path: str, declared: str) -> None:
    response = client.generic(
        "POST", path, content_type="application/json", CONTENT_LENGTH=declared
    )

    assert response.status_code == 400
    text = response.content.decode()
    assert "is not a number of bytes" in text


@pytest.mark.django_db
def test_the_cap_is_a_setting(client: Client, settings: Any) -> None:
    settings.REQUEST_MAX_BODY_BYTES = 100

    small = client.post("/v1/query", b"x" * 100, content_type="application/x-yaml")
    large = client.post("/v1/query", b"x" * 101, content_type="application/x-yaml")

    assert small.status_code == 400  # read, and refused as YAML that is not a QueryRequest
    _assert_too_large(large, "/v1/query", 100)


def _chunked(client: Client, path: str, body: bytes) -> Any:
    # What gunicorn hands Django for Transfer-Encoding: chunked: no Content-Length, a stream
    # that ends where the body ends.
    return client.generic(
        "POST",
        path,
        content_type="application/json",
        HTTP_TRANSFER_ENCODING="chunked",
        **{"wsgi.input": io.BytesIO(body), "wsgi.input_terminated": True},
    )


@pytest.mark.django_db
@pytest.mark.usefixtures("real_catalog")
def test_a_chunked_body_within_the_cap_is_read(client: Client) -> None:
    body = b'{"spec": {"service": "eks", "accelerator": "h100"}}'

    response = _chunked(client, "/v1/recipe", body)

    assert response.status_code == 200, response.content[:300]


@pytest.mark.django_db
@pytest.mark.parametrize("path", ROUTES)
def test_a_chunked_body_over_the_cap_is_refused(client: Client, path: str) -> None:
    response = _chunked(client, path, b" " * (MIB + 1))

    _assert_too_large(response, path, MIB)


@pytest.mark.django_db
def test_an_upload_route_refuses_by_its_own_check_and_logs_it(
    client: Client, django_user_model: Any
) -> None:
    """The guard leaves an upload route's Content-Length to the route, whose refusal writes the
    upload-log row."""
    from django.contrib.auth.models import Group

    from evidence_app.models import UploadLog

    user = django_user_model.objects.create_user("uploader", password="pw")
    user.groups.add(Group.objects.get_or_create(name="contributor")[0])
    client.force_login(user)

    response = client.generic(
        "POST",
        "/evidence/new/",
        content_type="multipart/form-data; boundary=x",
        CONTENT_LENGTH=str(50 * MIB),
        **{"wsgi.input": Unreadable()},
    )

    assert response.status_code == 413
    assert "EVIDENCE_MAX_UPLOAD_BYTES" in response.content.decode()
    assert UploadLog.objects.filter(user=user, outcome="too_large").count() == 1
