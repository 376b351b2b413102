"""The tree's ``allowlist.yaml`` proposed to the site (``services.allowlist_sync``, the
``import_evidence --allowlist`` modes): a diff per class, then a merge that keeps what the
site's maintainers added, published through the admin's own service."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from evidence_app.corroborate.allowlist import source_slug
from evidence_app.models import Allowlist, SignerClassChange
from evidence_app.services import allowlist_sync, signers
from tests.evidence_app.test_pointer_contract import V019, V1
from tests.evidence_factories import SignerFactory

pytestmark = pytest.mark.django_db

OAUTH = "https://github.com/login/oauth"
PARTNER_SLUG = "0123456789abcdef0123456789abcdef"
SITE_ONLY = f"""schemaVersion: 1.0.0
firstParty: []
community:
  - issuer: {OAUTH}
    source: 7c4c0edc8c765a95a0f3afdb3bbb8e91
partner:
  - label: acme-lab
    issuer: {OAUTH}
    source: {PARTNER_SLUG}
"""


@pytest.fixture
def site_allowlist(evidence_db: None) -> Allowlist:
    return signers.allowlist_publish(body=SITE_ONLY, note="a maintainer's partner")


def _entries(allowlist: Any) -> set[tuple[str, str]]:
    return {(e.class_, e.source or e.identity_pattern) for e in allowlist.entries}


def test_the_diff_names_added_and_site_only_entries_per_class(site_allowlist: Allowlist) -> None:
    diff = allowlist_sync.allowlist_diff(tree_body=(V1 / "allowlist.yaml").read_bytes())

    assert len(diff.added["first-party"]) == 4
    assert [a.split(",")[0] for a in diff.added["community"]] == [
        "source 9d71833b5a62cb2928c1b40fffc6c20f",
        "source 5bf9e82f0e90a11528ac85f4bcb866c8",
        "source 2e85f8702c6214cafcc0ed714d928720",
    ]
    assert diff.kept["partner"] == [f"source {PARTNER_SLUG} (acme-lab), issuer {OAUTH}"]
    assert diff.kept["community"] == []
    assert any(line.startswith("= partner: source 0123") for line in diff.lines())
    assert Allowlist.objects.in_force() == site_allowlist  # a diff publishes nothing


def test_apply_publishes_the_merge_and_keeps_the_maintainers_entries(
    site_allowlist: Allowlist,
) -> None:
    identity = "someone@example.org"
    moved = SignerFactory(
        issuer=OAUTH, identity=identity, signer_class="reported", counted=False, label="someone"
    )
    tree = (
        (V019 / "allowlist.yaml")
        .read_text()
        .replace(
            "source: 7c4c0edc8c765a95a0f3afdb3bbb8e91",
            f"source: 7c4c0edc8c765a95a0f3afdb3bbb8e91\n  - issuer: {OAUTH}\n"
            f"    source: {source_slug(OAUTH, identity)}",
        )
    )

    diff, row = allowlist_sync.allowlist_apply(tree_body=tree, note="from the tree")

    assert row is not None
    assert Allowlist.objects.in_force() == row
    merged = signers.allowlist_parse(row.body)
    assert ("partner", PARTNER_SLUG) in _entries(merged)
    assert _entries(signers.allowlist_parse(tree)) <= _entries(merged)
    assert [(c.label, c.from_class, c.to_class) for c in diff.signers] == [
        ("someone", "reported", "community")
    ]
    moved.refresh_from_db()
    assert (moved.signer_class, moved.counted) == ("community", True)
    change = SignerClassChange.objects.filter(signer=moved).latest("at")
    assert change.allowlist == row
    assert "from the tree" in change.reason
    # applying again changes nothing and publishes nothing
    again, none = allowlist_sync.allowlist_apply(tree_body=tree, note="again")
    assert none is None
    assert not again.changes_anything


def test_a_class_the_tree_moves_a_source_to_is_taken(site_allowlist: Allowlist) -> None:
    tree = (
        "schemaVersion: 1.0.0\nfirstParty: []\npartner: []\ncommunity:\n"
        f"  - issuer: {OAUTH}\n    source: 7c4c0edc8c765a95a0f3afdb3bbb8e91\n"
        f"  - issuer: {OAUTH}\n    source: {PARTNER_SLUG}\n"
    )
    diff = allowlist_sync.allowlist_diff(tree_body=tree)
    assert diff.moved == [f"source {PARTNER_SLUG}, issuer {OAUTH}: partner -> community"]
    assert ("community", PARTNER_SLUG) in _entries(signers.allowlist_parse(diff.merged_body))


def test_the_command_diffs_by_default_and_applies_on_request(
    site_allowlist: Allowlist,
) -> None:
    out = StringIO()
    call_command("import_evidence", str(V1), stdout=out)
    assert "= partner: source 0123456789abcdef0123456789abcdef (acme-lab)" in out.getvalue()
    assert "not applied (run again with --allowlist=apply)" in out.getvalue()
    assert Allowlist.objects.in_force() == site_allowlist

    out = StringIO()
    call_command("import_evidence", str(V1), "--allowlist=apply", stdout=out)
    row = Allowlist.objects.in_force()
    assert row != site_allowlist
    assert f"published version #{row.pk}" in out.getvalue()
    assert ("partner", PARTNER_SLUG) in _entries(signers.allowlist_parse(row.body))

    out = StringIO()
    call_command("import_evidence", str(V1), "--allowlist=skip", stdout=out)
    assert "allowlist" not in out.getvalue().split("pointers:")[1]


def test_the_admin_shows_the_diff_then_publishes_the_merge_on_confirm(
    site_allowlist: Allowlist, admin_client: Any
) -> None:
    tree = (V1 / "allowlist.yaml").read_text()
    listing = admin_client.get("/admin/evidence_app/allowlist/").content.decode()
    assert 'href="/admin/evidence_app/allowlist/sync/"' in listing

    shown = admin_client.post("/admin/evidence_app/allowlist/sync/", {"body": tree, "note": "n"})
    html = shown.content.decode()
    assert shown.status_code == 200
    assert "= partner: source 0123456789abcdef0123456789abcdef (acme-lab)" in html
    assert 'name="confirm"' in html
    assert Allowlist.objects.in_force() == site_allowlist

    done = admin_client.post(
        "/admin/evidence_app/allowlist/sync/", {"body": tree, "note": "from AICR", "confirm": "1"}
    )
    assert done.status_code == 302
    row = Allowlist.objects.in_force()
    assert (row.note, row.created_by.username) == ("from AICR", "admin")
    assert ("partner", PARTNER_SLUG) in _entries(signers.allowlist_parse(row.body))
    from django.contrib.admin.models import LogEntry

    assert LogEntry.objects.filter(object_id=str(row.pk)).exists()


def test_the_admin_names_an_invalid_allowlist(site_allowlist: Allowlist, admin_client: Any) -> None:
    bad = "schemaVersion: 1.0.0\ncommunity:\n  - issuer: x\n    identity: someone@example.org\n"
    html = admin_client.post("/admin/evidence_app/allowlist/sync/", {"body": bad}).content
    assert b"field identity not found" in html
    assert Allowlist.objects.in_force() == site_allowlist
