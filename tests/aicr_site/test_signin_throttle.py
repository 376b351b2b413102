"""Sign-in throttling (django-axes) on the site and the admin sign-in, keyed by the username
as authentication normalises it; where sign-in lands without ?next=."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client

from aicr_site.signin import normalise_username

PASSWORD = "pw-for-tests-1"
SIGN_IN_PAGES = ["/accounts/login/", "/admin/login/"]


def _fullwidth(text: str) -> str:
    """ASCII letters and digits as their full-width forms (U+FF01…), which NFKC folds back."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _sign_in(client: Client, page: str, username: str, password: str) -> Any:
    # What a browser's sign-in form sends.
    return client.post(
        page,
        urlencode({"username": username, "password": password}),
        content_type="application/x-www-form-urlencoded",
    )


@pytest.fixture
def victim(django_user_model: Any, settings: Any) -> str:
    settings.LOGIN_FAILURE_LIMIT = settings.AXES_FAILURE_LIMIT = 5
    name = f"victim{uuid.uuid4().hex[:8]}"
    django_user_model.objects.create_user(username=name, password=PASSWORD, is_staff=True)
    return name


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("admin", "admin"),
        ("admin ", "admin"),
        ("  admin\t", "admin"),
        ("ａｄｍｉｎ", "admin"),  # noqa: RUF001 - full-width letters are the point
        ("ａｄｍｉｎ ", "admin"),  # noqa: RUF001
        ("Admin", "Admin"),  # authentication compares case-sensitively: another account
        ("ﬁle", "file"),  # the "fi" ligature
        ("x" * 10_000, "x" * 150),
    ],
)
def test_the_throttle_keys_the_username_authentication_sees(raw: str, expected: str) -> None:
    assert normalise_username(raw) == expected


@pytest.mark.django_db
@pytest.mark.parametrize("page", SIGN_IN_PAGES)
@pytest.mark.parametrize(
    "variant",
    ["trailing space", "leading space", "tab", "full-width", "full-width and space"],
)
def test_username_variants_share_one_counter(victim: str, page: str, variant: str) -> None:
    """Four failures with the plain name and one with a variant lock the account: the
    variant did not get a fresh counter (the bypass from issue 6)."""
    spelled = {
        "trailing space": f"{victim} ",
        "leading space": f" {victim}",
        "tab": f"{victim}\t",
        "full-width": _fullwidth(victim),
        "full-width and space": f"{_fullwidth(victim)} ",
    }[variant]
    client = Client()

    answers = [_sign_in(client, page, victim, "wrong").status_code for _ in range(4)]
    locking = _sign_in(client, page, spelled, "wrong")
    right = _sign_in(client, page, victim, PASSWORD)
    right_variant = _sign_in(client, page, spelled, PASSWORD)

    assert answers == [200] * 4
    assert locking.status_code == 429
    assert right.status_code == 429
    assert right_variant.status_code == 429


@pytest.mark.django_db
@pytest.mark.parametrize("page", SIGN_IN_PAGES)
def test_only_variants_never_escape_the_limit(victim: str, page: str) -> None:
    client = Client()
    spellings = [f"{victim} ", _fullwidth(victim), f" {victim}", f"{victim}\t", f"{victim}  "]

    answers = [_sign_in(client, page, spelled, "wrong").status_code for spelled in spellings]

    assert answers == [200, 200, 200, 200, 429]
    assert _sign_in(client, page, victim, PASSWORD).status_code == 429


@pytest.mark.django_db
def test_the_site_and_the_admin_share_the_counter(victim: str) -> None:
    client = Client()
    for page in ["/admin/login/", "/accounts/login/"] * 2:
        assert _sign_in(client, page, victim, "wrong").status_code == 200

    assert _sign_in(client, "/admin/login/", f"{victim} ", "wrong").status_code == 429
    assert _sign_in(client, "/accounts/login/", victim, PASSWORD).status_code == 429


@pytest.mark.django_db
@pytest.mark.parametrize("page", SIGN_IN_PAGES)
def test_the_lockout_says_what_happened_and_when_to_retry(victim: str, page: str) -> None:
    client = Client()
    for _ in range(5):
        response = _sign_in(client, page, victim, "wrong")

    assert response.status_code == 429
    assert response["Retry-After"] == str(15 * 60)
    text = response.content.decode()
    assert "Too many failed sign-ins for this username from your address (5 in a row)" in text
    assert "refused for 15 minutes" in text


@pytest.mark.django_db
def test_a_different_case_is_a_different_account_and_counter(
    victim: str, django_user_model: Any
) -> None:
    other = victim.capitalize()
    django_user_model.objects.create_user(username=other, password=PASSWORD)
    client = Client()
    for _ in range(5):
        _sign_in(client, "/accounts/login/", victim, "wrong")

    signed_in = _sign_in(client, "/accounts/login/", other, PASSWORD)

    assert signed_in.status_code == 302


@pytest.mark.django_db
def test_a_success_below_the_limit_resets_the_counter(victim: str) -> None:
    client = Client()
    for _ in range(4):
        _sign_in(client, "/accounts/login/", victim, "wrong")
    assert _sign_in(client, "/accounts/login/", victim, PASSWORD).status_code == 302
    client.logout()

    answers = [_sign_in(client, "/accounts/login/", victim, "wrong").status_code for _ in range(4)]

    assert answers == [200] * 4


@pytest.mark.django_db
def test_sign_in_without_next_lands_on_a_real_page(victim: str) -> None:
    client = Client()

    response = _sign_in(client, "/accounts/login/", victim, PASSWORD)

    assert response.status_code == 302
    assert response["Location"] == "/recipes/"
    assert client.get(response["Location"]).status_code == 200


@pytest.mark.django_db
def test_an_anonymous_multipart_sign_in_is_not_parsed(
    victim: str, django_user_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 6: a multipart POST to the sign-in page was spooled to temporary files before CSRF
    refused it. Now it is never parsed: CSRF refuses it with nothing read."""
    from django.http import multipartparser

    parsed: list[str] = []
    original = multipartparser.MultiPartParser.parse

    def spy(self: Any) -> Any:
        parsed.append("parsed")
        return original(self)

    monkeypatch.setattr(multipartparser.MultiPartParser, "parse", spy)
    client = Client(enforce_csrf_checks=True)
    client.get("/accounts/login/")  # the CSRF cookie, as a browser would have it
    token = client.cookies["csrftoken"].value
    attachment = ("big.bin", b"\0" * (900 * 1024))

    response = client.post(
        "/accounts/login/",
        {"csrfmiddlewaretoken": token, "username": victim, "password": PASSWORD, "f": attachment},
    )

    assert response.status_code == 403  # the token in the unparsed body was not seen
    assert parsed == []
    # Signed in, the same kind of body is parsed (uploads and admin forms need it).
    client.force_login(django_user_model.objects.get(username=victim))
    client.post("/accounts/logout/", {"csrfmiddlewaretoken": token, "f": attachment})
    assert parsed == ["parsed"]
