"""Roles come from one place (``evidence_app.permissions``): groups named after a role, every
role for a superuser, nothing for ``is_staff`` alone; an API token acts with its role only while
its user still holds it. Also: the upload throttle and the rules the settings enforce."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from evidence_app import permissions
from evidence_app.models import Role, TrustRoot, UploadLog
from evidence_app.services import trust_roots
from evidence_app.verification.pipeline import verify_evidence
from recipes_app.models import Recipe
from tests.evidence_factories import FIRST_PARTY_IDENTITY, GITHUB_ISSUER, statement_for
from tests.shared_data import REPO_ROOT
from tests.sigstore_private import PrivateSigstore

Api = Callable[[str | None], Client]


def _user(django_user_model: Any, name: str, *roles: str, **flags: Any) -> Any:
    user = django_user_model.objects.create_user(username=name, password="pw-for-tests-1", **flags)
    for role in roles:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


@pytest.mark.django_db
def test_roles_come_from_groups_superusers_hold_all_and_staff_none(
    django_user_model: Any,
) -> None:
    staff = _user(django_user_model, "staff", is_staff=True)
    root = _user(django_user_model, "root", is_superuser=True)
    contributor = _user(django_user_model, "carol", Role.CONTRIBUTOR)
    gone = _user(django_user_model, "gone", Role.MAINTAINER, is_active=False)

    assert permissions.roles_of(staff) == set()
    assert permissions.roles_of(root) == set(Role.values)
    assert permissions.roles_of(contributor) == {Role.CONTRIBUTOR}
    assert permissions.roles_of(gone) == set()
    assert permissions.roles_of(None) == set()
    assert not permissions.can_upload(staff)
    assert permissions.can_upload(contributor)


@pytest.mark.django_db
def test_a_token_stops_acting_with_a_role_its_user_lost(
    api: Api, make_token: Callable[..., str], django_user_model: Any
) -> None:
    token = make_token("carol", "contributor")
    client = api(token)
    upload = {"bundle": SimpleUploadedFile("e.json", b"{}", content_type="application/json")}
    assert client.post("/api/v1/evidence/", upload).status_code == 422  # allowed, then refused

    carol = django_user_model.objects.get(username="carol")
    carol.groups.clear()
    upload = {"bundle": SimpleUploadedFile("e.json", b"{}", content_type="application/json")}

    assert client.post("/api/v1/evidence/", upload).status_code == 403


@pytest.mark.django_db
def test_uploads_are_throttled_per_user(
    api: Api, make_token: Callable[..., str], settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evidence_app.auth import EvidenceUploadThrottle

    monkeypatch.setattr(EvidenceUploadThrottle, "THROTTLE_RATES", {"evidence-upload": "2/min"})
    # A key of its own: the cache may be shared with parallel test processes.
    key = f"throttle_test_{uuid.uuid4().hex}_%(scope)s_%(ident)s"
    monkeypatch.setattr(EvidenceUploadThrottle, "cache_format", key)
    client = api(make_token("carol", "contributor"))

    def post() -> int:
        upload = {"bundle": SimpleUploadedFile("e.json", b"{}", content_type="application/json")}
        return client.post("/api/v1/evidence/", upload).status_code

    assert [post(), post(), post()] == [422, 422, 429]
    assert client.get("/api/v1/evidence/").status_code == 200  # reads are not throttled
    assert UploadLog.objects.count() == 2


# --- attestedAt in the future ---------------------------------------------------------------


def test_an_attestation_from_the_future_is_rejected_at_the_statement_step(
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    example_recipe: Recipe,
    ingest: Callable[..., Any],
) -> None:
    statement = statement_for(example_recipe, attested_at=datetime.now(UTC) + timedelta(hours=1))
    bundle = private_sigstore.sign_dsse(
        statement, identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle

    result = ingest(bundle)

    assert (result.verdict, result.failed_step) == ("rejected", "statement")
    assert "is in the future" in result.reason
    assert "5 minutes" in result.reason


def test_an_attestation_later_than_its_rekor_entry_is_rejected(
    private_root: TrustRoot, private_sigstore: PrivateSigstore, example_recipe: Recipe
) -> None:
    attested = datetime.now(UTC) + timedelta(hours=1)
    statement = statement_for(example_recipe, attested_at=attested)
    bundle = private_sigstore.sign_dsse(
        statement, identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle
    roots = trust_roots.enabled_roots()

    # Seen two hours later, attestedAt is in the past, but after the log integrated the entry.
    later = verify_evidence(
        bundle, trusted_root=roots, issuer=GITHUB_ISSUER, now=attested + timedelta(hours=1)
    )
    failed = later.transcript.failed_step

    assert failed is not None
    assert failed.step == "statement"
    assert "later than the Rekor integrated time" in failed.detail

    # Within the skew it is accepted.
    near = statement_for(example_recipe, attested_at=datetime.now(UTC) + timedelta(minutes=2))
    ok = verify_evidence(
        private_sigstore.sign_dsse(
            near, identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
        ).bundle,
        trusted_root=roots,
        issuer=GITHUB_ISSUER,
    )
    assert ok.transcript.ok, ok.transcript.to_list()


# --- settings -------------------------------------------------------------------------------

LOAD_SETTINGS = (
    "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE','aicr_site.settings');"
    "django.setup(); from django.conf import settings as s;"
    "print(getattr(s, 'SECURE_PROXY_SSL_HEADER', None), s.EVIDENCE_OCI_ENABLED)"
)
_CLEARED = {
    "DEBUG",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "DATABASE_URL",
    "REDIS_URL",
    "EVIDENCE_OCI_ENABLED",
    "EVIDENCE_EXTRA_POLICIES",
    "TRUST_X_FORWARDED_PROTO",
}


def _settings(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    return subprocess.run(
        [sys.executable, "-c", LOAD_SETTINGS],
        cwd=REPO_ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_oci_pulls_need_a_broker_never_the_web_process() -> None:
    refused = _settings({"EVIDENCE_OCI_ENABLED": "1"})
    assert refused.returncode != 0
    assert "ImproperlyConfigured" in refused.stderr
    assert "EVIDENCE_OCI_ENABLED needs REDIS_URL" in refused.stderr

    with_broker = _settings({"EVIDENCE_OCI_ENABLED": "1", "REDIS_URL": "redis://127.0.0.1:1/0"})
    assert with_broker.returncode == 0, with_broker.stderr
    assert with_broker.stdout.split()[-1] == "True"
    assert _settings({}).stdout.split()[-1] == "False"  # off by default without a broker


def test_bad_extra_policies_json_names_the_variable() -> None:
    result = _settings({"EVIDENCE_EXTRA_POLICIES": "{not json"})

    assert result.returncode != 0
    assert "ImproperlyConfigured: EVIDENCE_EXTRA_POLICIES is not valid JSON" in result.stderr


def test_x_forwarded_proto_is_trusted_only_when_asked() -> None:
    production = {"DEBUG": "0", "SECRET_KEY": "x" * 60, "ALLOWED_HOSTS": "a.example"}

    default = _settings(production)
    trusting = _settings({**production, "TRUST_X_FORWARDED_PROTO": "1"})

    assert default.returncode == 0, default.stderr
    assert default.stdout.startswith("None ")
    assert trusting.stdout.startswith("('HTTP_X_FORWARDED_PROTO', 'https') ")
