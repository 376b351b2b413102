"""The upload page: who may upload, CSRF, the verify-before-count result (verdict, failed step,
transcript, reason), hostile file names, and OCI references. A decided upload redirects (303)
to its own result page, readable only by its uploader, so a reload never sends it again."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from evidence_app.models import Evidence, Role, TrustRoot, UploadLog
from recipes_app.models import Recipe
from tests.evidence_factories import (
    FIRST_PARTY_IDENTITY,
    GITHUB_ISSUER,
    example_statement,
    signed_example_tarball,
)
from tests.sigstore_private import PrivateSigstore

pytestmark = pytest.mark.django_db

NEW = "/evidence/new/"
HOSTILE_NAME = "<img src=x onerror=alert(1)>\"';$(id).sigstore.json"


def user_in(django_user_model: Any, username: str, *roles: str) -> Any:
    user = django_user_model.objects.create_user(username=username, password="pw-for-tests-1")
    for role in roles:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


@pytest.fixture
def contributor(django_user_model: Any, evidence_db: None) -> Client:
    client = Client()
    client.force_login(user_in(django_user_model, "alice", Role.CONTRIBUTOR))
    return client


def result_of(client: Client, response: Any) -> str:
    """The result page a decided upload redirected to (and that it was a 303 to it)."""
    assert response.status_code == 303, response.content[:300]
    assert re.fullmatch(r"/evidence/uploads/\d+/", response["Location"])
    page = client.get(response["Location"])
    assert page.status_code == 200
    return page.content.decode()


def transcript_of(page: str) -> list[tuple[str, str, str]]:
    return re.findall(
        r'transcript__step--(ok|failed)">\s*<span class="transcript__mark" aria-hidden="true">'
        r"(.)</span>\s*<strong>([a-z]+)</strong>",
        page,
    )


def test_it_sends_anonymous_visitors_to_sign_in(client: Client) -> None:
    response = client.get(NEW)

    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={NEW}"
    assert client.post(NEW, {"oci_ref": "x"}).status_code == 302


def test_it_refuses_users_without_a_role(django_user_model: Any) -> None:
    client = Client()
    client.force_login(user_in(django_user_model, "bob", Role.AUDITOR))

    response = client.get(NEW)

    assert response.status_code == 403
    assert "contributor or maintainer role" in response.content.decode()


@pytest.mark.parametrize("role", [Role.CONTRIBUTOR, Role.MAINTAINER])
def test_it_shows_the_form_to_contributors_and_maintainers(
    django_user_model: Any, role: str
) -> None:
    client = Client()
    client.force_login(user_in(django_user_model, "carol", role))

    page = client.get(NEW).content.decode()

    assert 'enctype="multipart/form-data"' in page
    assert 'name="csrfmiddlewaretoken"' in page
    assert re.search(r'<input type="file" name="bundle"[^>]*id="id_bundle"', page)
    assert 'name="artifact"' in page
    assert 'name="oci_ref"' in page
    assert "data-dropzone" in page  # enhanced by static/js/upload.js; a plain input without it


def test_superusers_may_upload_but_staff_alone_may_not(
    admin_client: Client, django_user_model: Any
) -> None:
    staff = django_user_model.objects.create_user(
        username="staffer", password="pw-for-tests-1", is_staff=True
    )
    client = Client()
    client.force_login(staff)

    assert admin_client.get(NEW).status_code == 200
    assert client.get(NEW).status_code == 403


def test_it_refuses_a_body_over_the_limit_before_reading_it(
    django_user_model: Any, evidence_db: None, settings: Any
) -> None:
    """413 from Content-Length alone: before the CSRF check (which would parse the body)."""
    settings.EVIDENCE_MAX_UPLOAD_BYTES = 1000
    client = Client(enforce_csrf_checks=True)
    client.force_login(user_in(django_user_model, "erin", Role.CONTRIBUTOR))

    response = client.generic(
        "POST",
        NEW,
        b"--x--\r\n",
        content_type="multipart/form-data; boundary=x",
        CONTENT_LENGTH=str(50 * 1024 * 1024),
    )

    assert response.status_code == 413
    page = response.content.decode()
    assert "exceeds the limit of 1,000 bytes" in page
    log = UploadLog.objects.get()
    assert (log.channel, log.outcome, log.size) == ("form", "too_large", 50 * 1024 * 1024)


def test_it_needs_the_csrf_token(django_user_model: Any, evidence_db: None) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user_in(django_user_model, "dave", Role.CONTRIBUTOR))
    upload = SimpleUploadedFile("e.json", b"{}")

    refused = client.post(NEW, {"bundle": upload})
    page = client.get(NEW)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    assert token is not None
    accepted = client.post(
        NEW,
        {"bundle": SimpleUploadedFile("e.json", b"{}"), "csrfmiddlewaretoken": token.group(1)},
    )

    assert refused.status_code == 403
    assert UploadLog.objects.count() == 1  # only the request with the token reached ingest
    assert "Not accepted:" in result_of(client, accepted)


def test_it_verifies_and_stores_signed_evidence(
    contributor: Client,
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    real_catalog: Any,
) -> None:
    bundle = private_sigstore.sign_dsse(
        example_statement(), identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle
    data = signed_example_tarball(bundle)

    response = contributor.post(
        NEW, {"bundle": SimpleUploadedFile("evidence.tar.gz", data, "application/gzip")}
    )

    page = result_of(contributor, response)
    assert "Verified and stored" in page
    evidence = Evidence.objects.get()
    assert f'href="/evidence/{evidence.pk}/"' in page
    assert [(ok, step) for ok, _, step in transcript_of(page)] == [
        ("ok", s) for s in ("parse", "signature", "statement", "manifest", "bind", "classify")
    ]
    assert evidence.uploaded_by.username == "alice"
    again = contributor.post(
        NEW, {"bundle": SimpleUploadedFile("evidence.tar.gz", data, "application/gzip")}
    )
    assert "Already here: verified earlier" in result_of(contributor, again)
    assert UploadLog.objects.count() == 2
    # The recipe it names shows it in its grid now.
    recipe_page = contributor.get(
        reverse("recipes:detail", args=[Recipe.objects.get(pk=evidence.recipe_id).name])
    ).content.decode()
    assert f'href="/evidence/{evidence.pk}/"' in recipe_page


def test_it_reports_the_failed_step_and_escapes_the_file_name(contributor: Client) -> None:
    response = contributor.post(
        NEW, {"bundle": SimpleUploadedFile(HOSTILE_NAME, b'{"not": "a bundle"}')}
    )

    page = result_of(contributor, response)
    assert "Not accepted:" in page
    assert "at step <code>parse</code>" in page
    assert transcript_of(page)[0][:2] == ("failed", "✗")
    assert "Nothing was stored." in page
    assert "<img src=x" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert Evidence.objects.count() == 0
    log = UploadLog.objects.get()
    assert log.failed_step == "parse"
    assert log.reason in page or log.reason[:80] in page


def test_it_wants_a_file_or_a_reference(contributor: Client) -> None:
    nothing = contributor.post(NEW, {})
    both = contributor.post(
        NEW,
        {
            "bundle": SimpleUploadedFile("e.json", b"{}"),
            "oci_ref": "ghcr.io/acme/evidence@sha256:" + "a" * 64,
        },
    )
    artifact_alone = contributor.post(
        NEW,
        {
            "artifact": SimpleUploadedFile("recipe.yaml", b"x"),
            "oci_ref": "ghcr.io/a/b@sha256:" + "a" * 64,
        },
    )

    assert nothing.status_code == both.status_code == artifact_alone.status_code == 400
    assert "Choose an evidence file, or give an OCI reference." in nothing.content.decode()
    assert "Give either an evidence file or an OCI reference." in both.content.decode()
    assert "An artifact goes with an uploaded evidence file." in artifact_alone.content.decode()
    assert UploadLog.objects.count() == 0


def test_it_refuses_an_oci_tag_without_a_digest(contributor: Client) -> None:
    response = contributor.post(NEW, {"oci_ref": "ghcr.io/acme/evidence:<latest>"})

    page = response.content.decode()
    assert response.status_code == 400
    assert "oci_ref" in page
    assert "<latest>" not in page


def test_it_records_an_oci_reference_and_says_what_happened(
    contributor: Client, settings: Any
) -> None:
    settings.EVIDENCE_OCI_ENABLED = False
    ref = "ghcr.io/acme/evidence@sha256:" + "b" * 64

    response = contributor.post(NEW, {"oci_ref": ref})

    page = result_of(contributor, response)
    assert ref in page
    assert "not pulled on this site" in page
    assert UploadLog.objects.get().oci_ref == ref


def test_reloading_the_result_reads_it_again_and_sends_nothing(contributor: Client) -> None:
    response = contributor.post(NEW, {"bundle": SimpleUploadedFile("e.json", b"{}")})
    first = result_of(contributor, response)

    again = contributor.get(response["Location"])

    def main(page: str) -> str:  # the CSRF token in <body> is masked anew per response
        return page[page.index("<main") : page.index("</main>")]

    assert main(again.content.decode()) == main(first)
    assert "Not accepted:" in first
    assert UploadLog.objects.count() == 1


def test_only_the_uploader_reads_a_result(
    contributor: Client, django_user_model: Any, client: Client
) -> None:
    response = contributor.post(NEW, {"bundle": SimpleUploadedFile("secret-name.json", b"{}")})
    url = response["Location"]
    other = Client()
    other.force_login(user_in(django_user_model, "mallory", Role.MAINTAINER))

    refused = other.get(url)
    anonymous = client.get(url)

    assert refused.status_code == 404
    assert "secret-name" not in refused.content.decode()
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith(reverse("login"))
    assert contributor.get("/evidence/uploads/999999/").status_code == 404


def test_an_invalid_form_answers_at_once_without_a_redirect(contributor: Client) -> None:
    ref = "ghcr.io/acme/evidence:latest"

    response = contributor.post(NEW, {"oci_ref": ref})

    assert response.status_code == 400
    page = response.content.decode()
    assert f'value="{ref}"' in page  # what was typed is kept
    assert UploadLog.objects.count() == 0
