"""API tokens: ``manage.py create_token``, hashed storage, Bearer authentication, roles."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.test import Client

from evidence_app.models import ApiToken
from evidence_app.services import tokens
from evidence_app.services.tokens import token_authenticate, token_create, token_revoke


def _create(username: str, role: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    call_command("create_token", username, "--role", role, stdout=out, stderr=err)
    assert "shown only once" in err.getvalue()
    return out.getvalue().strip()


def test_it_creates_the_user_group_and_a_token_it_prints_once(db: None) -> None:
    token = _create("alice", "contributor")

    user = get_user_model().objects.get(username="alice")
    assert not user.has_usable_password()
    assert list(user.groups.values_list("name", flat=True)) == ["contributor"]
    row = ApiToken.objects.get()
    assert (row.user, row.role) == (user, "contributor")
    assert token.startswith(f"aicr_{row.prefix}_")
    secret = token[len(f"aicr_{row.prefix}_") :]
    assert len(secret) >= 43  # token_urlsafe(32): 256 bits
    assert row.key_hash == hashlib.sha256(token.encode()).hexdigest()
    stored = " ".join(str(v) for v in ApiToken.objects.values().get().values())
    assert secret not in stored


def test_it_reuses_an_existing_user_and_makes_distinct_tokens(db: None) -> None:
    first = _create("bob", "maintainer")
    second = _create("bob", "auditor")

    assert first != second
    assert get_user_model().objects.filter(username="bob").count() == 1
    assert set(Group.objects.values_list("name", flat=True)) == {"maintainer", "auditor"}
    assert set(ApiToken.objects.values_list("role", flat=True)) == {"maintainer", "auditor"}


def test_it_refuses_an_unknown_role(db: None) -> None:
    with pytest.raises(Exception, match="invalid choice"):
        call_command("create_token", "eve", "--role", "root")


def test_it_authenticates_only_the_exact_active_token(db: None) -> None:
    user = get_user_model().objects.create(username="carol")
    row, token = token_create(user=user, role="contributor")

    assert token_authenticate(token) == row
    assert token_authenticate(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert token_authenticate(f"aicr_{'f' * 10}_{'x' * 43}") is None
    assert token_authenticate("garbage") is None
    assert token_authenticate("") is None
    user.is_active = False
    user.save()
    assert token_authenticate(token) is None
    user.is_active = True
    user.save()
    token_revoke(token=row)
    assert token_authenticate(token) is None


def test_it_compares_hashes_in_constant_time(db: None) -> None:
    user = get_user_model().objects.create(username="dave")
    _, token = token_create(user=user, role="auditor")

    with mock.patch.object(
        tokens.hmac, "compare_digest", wraps=tokens.hmac.compare_digest
    ) as compare:
        assert token_authenticate(token) is not None
    compare.assert_called_once()


def test_it_answers_401_for_bad_tokens_and_403_for_the_wrong_role(
    make_token: Callable[..., str], evidence_db: None
) -> None:
    auditor = make_token("audrey", "auditor")

    def post(header: str | None) -> int:
        client = Client()
        if header:
            client.defaults["HTTP_AUTHORIZATION"] = header
        return client.post("/api/v1/evidence/", {}, content_type="application/json").status_code

    assert post(None) == 401
    assert post("Bearer") == 401
    assert post("Bearer nope") == 401
    assert post("Bearer a b") == 401
    assert post("Basic dXNlcjpwYXNz") == 401  # not our scheme: anonymous
    assert post(f"Bearer {auditor}") == 403
    # Reads are public, but a bad token is still refused rather than ignored.
    assert Client().get("/api/v1/evidence/").status_code == 200
    assert Client(HTTP_AUTHORIZATION="Bearer nope").get("/api/v1/evidence/").status_code == 401
