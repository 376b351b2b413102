"""``check --deploy`` says when a production site signs run evidence with its key (it then
counts here only: AICR's upstream gate takes keyless evidence only), unless the operator
configured keyless signing or stated the choice; a malformed push repository is an error."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from validators_app.checks import KEY_SIGNED_ID, REPOSITORY_ID, check_run_evidence_repository


def _deploy_check() -> str:
    try:
        call_command("check", deploy=True, fail_level="WARNING", tags=["security"])
    except SystemCheckError as exc:
        return str(exc)
    return ""


@pytest.fixture
def production(settings: Any) -> Any:
    settings.DEBUG = False
    settings.SITE_SIGSTORE_IDENTITY_TOKEN = ""
    settings.SITE_SIGSTORE_IDENTITY_TOKEN_FILE = ""
    settings.RUN_EVIDENCE_KEY_SIGNED_ACCEPTED = False
    return settings


def test_a_key_signed_production_site_is_told_it_cannot_contribute(production: Any) -> None:
    found = _deploy_check()
    assert KEY_SIGNED_ID in found
    assert "counts on this site only" in found
    assert "AICR's upstream gate takes keyless evidence only" in found


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SITE_SIGSTORE_IDENTITY_TOKEN", "a.jwt.token"),
        ("SITE_SIGSTORE_IDENTITY_TOKEN_FILE", "/run/secrets/oidc-token"),
        ("RUN_EVIDENCE_KEY_SIGNED_ACCEPTED", True),
    ],
)
def test_keyless_signing_or_a_stated_choice_silences_it(
    production: Any, name: str, value: Any
) -> None:
    setattr(production, name, value)
    assert KEY_SIGNED_ID not in _deploy_check()


def test_development_is_not_told(production: Any) -> None:
    production.DEBUG = True
    assert KEY_SIGNED_ID not in _deploy_check()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("registry.example/org/evidence:latest", "names a tag or digest"),
        ("registry.example/org/evidence@sha256:" + "0" * 64, "names a tag or digest"),
        ("evidence", "must start with the registry host"),
        ("registry.example/Org/Evidence", "is not a valid repository name"),
    ],
)
def test_a_malformed_push_repository_is_an_error(settings: Any, value: str, message: str) -> None:
    settings.RUN_EVIDENCE_OCI_REPOSITORY = value
    (error,) = check_run_evidence_repository()
    assert error.id == REPOSITORY_ID
    assert error.level == checks.ERROR
    assert message in error.msg


def test_a_well_formed_push_repository_passes(settings: Any) -> None:
    settings.RUN_EVIDENCE_OCI_REPOSITORY = "registry.example:5000/org/aicr-evidence"
    assert check_run_evidence_repository() == []
