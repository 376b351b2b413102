"""Releases and their profiles' status (``evidence_app.releases``), as AICR's operator support
policy defines qualification: each row of its staleness table flips the status with the right
words and back when the profile runs again; simulated and key-signed evidence never qualify;
a profile never inherits another profile's evidence. Evidence rows are factory rows whose
recorded identities are read by ingest's own function (``coverage.recorded``) from a snapshot
and a BOM, since the rule, not verification, is under test here (ingest itself is covered in
test_recorded_identities.py)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client, override_settings

from evidence_app.attestation.redact import redact_snapshot
from evidence_app.consensus.rules import declared_checks
from evidence_app.coverage.recorded import recorded_identities
from evidence_app.models import Evidence, Release, Role, SignerKind
from evidence_app.releases.declare import ReleaseInputError, release_declare
from evidence_app.releases.status import release_profiles
from evidence_app.services.tokens import token_create
from recipes_app.models import Recipe
from tests.evidence_app.coverage_data import full_snapshot
from tests.evidence_factories import EvidenceFactory, SignerFactory, example_statement

pytestmark = pytest.mark.usefixtures("evidence_db")
API = "/api/v1/releases/"
OPERATOR = "ghcr.io/nvidia/aicr-operator"
CHART = "ghcr.io/nvidia/charts/aicr-operator"
AICR = "ghcr.io/nvidia/aicr"
VALIDATOR = "ghcr.io/nvidia/aicr-validators/deployment"
WORKLOAD = "nvcr.io/nvidia/pytorch"
NOW = datetime.now(UTC).replace(microsecond=0)
TUPLE = {
    "instance_type": "p5.48xlarge",
    "node_image": "Ubuntu 24.04.3 LTS",
    "kernel": "6.8.0-1015-aws",
    "driver": "580.95.05",
    "gpu_operator": "v25.10.1",
}


def sha(char: str) -> str:
    return "sha256:" + char * 64


def release_body(**changes: Any) -> dict[str, Any]:
    body = {
        "name": "operator v1.0.0",
        "operator_image": f"{OPERATOR}@{sha('1')}",
        "operator_chart": f"{CHART}@{sha('2')}",
        "aicr_image": f"{AICR}@{sha('3')}",
        "validator_images": [{"image": VALIDATOR, "digest": sha("4")}],
        "profiles": [{"recipe": "h100-eks-ubuntu-training-kubeflow", "tuple": dict(TUPLE)}],
    }
    body.update(changes)
    return body


def bom(images: dict[str, str]) -> dict[str, Any]:
    return {
        "components": [
            {
                "type": "container",
                "name": repo,
                "properties": [
                    {"name": "aicr:image:tag", "value": "v1"},
                    {"name": "aicr:image:digest", "value": digest},
                ],
            }
            for repo, digest in images.items()
        ]
    }


def passing(recipe: Recipe, *, failed: str = "") -> dict[str, Any]:
    results: dict[str, Any] = {}
    for phase, name in declared_checks(recipe.checks):
        status = "failed" if name == failed else "passed"
        results.setdefault(phase, {})[name] = {"status": status}
    return results


def run(
    recipe: Recipe,
    *,
    operator: str = sha("1"),
    chart: str = sha("2"),
    aicr: str = sha("3"),
    validator: str = sha("4"),
    workload: str = sha("9"),
    snapshot: dict[str, Any] | None = None,
    failed: str = "",
    redacted: bool = False,
    days_ago: int = 1,
    allocation: str | None = None,
    **fields: Any,
) -> Evidence:
    """A counted run of ``recipe`` on hardware recording these identities (keyless signer);
    ``allocation``: the GPU allocation policy ingest resolved from the bundle's recipe."""
    predicate = dict(example_statement()["predicate"])
    predicate["validatorImages"] = [{"image": VALIDATOR, "digest": validator}]
    snapshot = snapshot if snapshot is not None else full_snapshot()
    if redacted:  # AICR's default: the minimal policy, recorded in predicate.redaction
        snapshot = redact_snapshot(snapshot)
    else:
        predicate.pop("redaction")
    images = {OPERATOR: operator, CHART: chart, AICR: aicr, WORKLOAD: workload}
    identities = recorded_identities(
        predicate,
        snapshot=snapshot,
        bom=bom(images),
        recipe={} if allocation else None,
        allocation=(lambda _recipe: allocation) if allocation else None,
    )
    return EvidenceFactory(
        recipe=recipe,
        predicate=predicate,
        identities=identities,
        check_results=passing(recipe, failed=failed),
        attested_at=NOW - timedelta(days=days_ago),
        **fields,
    )


def status_of(release: Release, recipe: str = "h100-eks-ubuntu-training-kubeflow") -> Any:
    return next(p for p in release_profiles(release) if p.recipe == recipe)


def declare(**changes: Any) -> Release:
    return release_declare(release_body(**changes))


@pytest.fixture
def h100(example_recipe: Recipe) -> Recipe:
    return example_recipe


@pytest.fixture
def gb200(example_recipe: Recipe) -> Recipe:
    found = (
        Recipe.objects.filter(catalog=example_recipe.catalog, accelerator="gb200", service="eks")
        .order_by("name")
        .first()
    )
    assert found is not None
    return found


# --- the statuses -------------------------------------------------------------------------


def test_qualified_with_every_identity_and_check(h100: Recipe) -> None:
    evidence = run(h100)
    status = status_of(declare())
    assert (status.status, status.reason, status.evidence) == (
        "qualified",
        "Qualified",
        [evidence.pk],
    )


def test_not_yet_run_on_hardware(h100: Recipe) -> None:
    status = status_of(declare())
    assert (status.status, status.reason, status.evidence) == (
        "not-qualified",
        "Not qualified: not yet run on hardware",
        [],
    )


def test_a_failed_check_is_in_progress(h100: Recipe) -> None:
    first = next(iter(declared_checks(h100.checks)))
    evidence = run(h100, failed=first[1])
    status = status_of(declare())
    assert status.status == "in-progress"
    assert status.reason.startswith("Qualification in progress: ")
    assert f"{first[0]}/{first[1]} (failed)" in status.reason
    assert status.evidence == [evidence.pk]


def test_redacted_identities_are_in_progress_with_what_settles_them(h100: Recipe) -> None:
    run(h100, redacted=True)
    status = status_of(declare())
    assert status.status == "in-progress"
    assert (
        "instance type, GPU driver, GPU Operator redacted by AICR's policy "
        "(publish with aicr validate --full)" in status.reason
    )


def test_not_claimed(h100: Recipe, gb200: Recipe) -> None:
    run(gb200)
    statuses = release_profiles(declare(), include_unclaimed=True)
    other = next(s for s in statuses if s.recipe == gb200.name)
    assert (other.status, other.reason) == ("not-claimed", "Not claimed")


# --- the policy's staleness table: each change flips, and a new run flips back -----------------

CHANGES = [
    pytest.param(
        {"operator_image": f"{OPERATOR}@{sha('5')}"},
        {"operator": sha("5")},
        f"operator image changed from {OPERATOR}@{sha('1')} to {OPERATOR}@{sha('5')}",
        id="image-rebuild",
    ),
    pytest.param(
        {"operator_chart": f"{CHART}@{sha('6')}"},
        {"chart": sha("6")},
        f"operator chart changed from {CHART}@{sha('2')} to {CHART}@{sha('6')}",
        id="chart",
    ),
    pytest.param(
        {"validator_images": [{"image": VALIDATOR, "digest": sha("7")}]},
        {"validator": sha("7")},
        f"validator image {VALIDATOR} changed from {VALIDATOR}@{sha('4')} to "
        f"{VALIDATOR}@{sha('7')}",
        id="validator-image",
    ),
    pytest.param(
        {"aicr_image": f"{AICR}@{sha('8')}"},
        {"aicr": sha("8")},
        f"AICR image changed from {AICR}@{sha('3')} to {AICR}@{sha('8')}",
        id="same-aicr-version-other-digest",
    ),
]
TUPLE_CHANGES = [
    ("instance_type", "p4d.24xlarge", "instance type"),
    ("node_image", "Ubuntu 24.04.4 LTS", "node image"),
    ("kernel", "6.8.0-1020-aws", "kernel"),
    ("driver", "590.10.01", "GPU driver"),
    ("gpu_operator", "v25.10.2", "GPU Operator"),
]
SNAPSHOT_KEY = {"kernel": "kernel", "driver": "driver", "gpu_operator": "gpu_operator"}


@pytest.mark.parametrize(("release_change", "run_change", "sentence"), CHANGES)
def test_a_changed_release_identity_unqualifies_until_the_profile_runs_with_it(
    h100: Recipe, release_change: dict[str, Any], run_change: dict[str, str], sentence: str
) -> None:
    run(h100, days_ago=3)
    assert status_of(declare()).status == "qualified"
    changed = declare(name="operator v1.0.1", **release_change)
    status = status_of(changed)
    assert status.status == "unqualified-changed"
    assert status.reason == f"Unqualified until the profile runs with it: {sentence}"
    again = run(h100, **run_change)
    status = status_of(changed)
    assert (status.status, status.reason, status.evidence) == ("qualified", "Qualified", [again.pk])


def test_a_profiles_workload_image_unqualifies_until_the_profile_runs_with_it(
    h100: Recipe,
) -> None:
    """The policy's tuple names the workload image: declared per profile, by digest."""
    run(h100, days_ago=3)
    body = release_body()
    body["profiles"][0]["workload_images"] = [{"image": WORKLOAD, "digest": sha("9")}]
    assert status_of(release_declare(body)).status == "qualified"
    moved = release_body(name="operator v1.0.0 new workload")
    moved["profiles"][0]["workload_images"] = [{"image": WORKLOAD, "digest": sha("a")}]
    release = release_declare(moved)
    status = status_of(release)
    assert status.status == "unqualified-changed"
    assert status.reason == (
        f"Unqualified until the profile runs with it: workload image {WORKLOAD} changed from "
        f"{WORKLOAD}@{sha('9')} to {WORKLOAD}@{sha('a')}"
    )
    again = run(h100, workload=sha("a"))
    assert (status_of(release).status, status_of(release).evidence) == ("qualified", [again.pk])
    page = Client().get(f"/releases/{release.pk}/").content.decode()
    assert f'workload <code class="wrap-anywhere">{WORKLOAD}@{sha("a")}</code>' in page


def test_a_malformed_workload_image_is_refused_by_name(h100: Recipe) -> None:
    body = release_body()
    body["profiles"][0]["workload_images"] = [{"image": WORKLOAD, "digest": "sha256:nope"}]
    with pytest.raises(ReleaseInputError) as refused:
        release_declare(body)
    assert refused.value.field == "profiles[0].workload_images[0].digest"
    assert not Release.objects.exists()


def _snapshot_with(key: str, value: str) -> dict[str, Any]:
    if key in SNAPSHOT_KEY:
        return full_snapshot(**{SNAPSHOT_KEY[key]: value})
    snapshot = full_snapshot()
    for m in snapshot["measurements"]:
        for s in m["subtypes"]:
            if key == "instance_type" and s["subtype"] == "label":
                s["data"]["node.kubernetes.io/instance-type"] = f"{value}|gpu-1"
            if key == "node_image" and s["subtype"] == "node":
                s["data"]["os-image"] = value
    return snapshot


@pytest.mark.parametrize(("key", "value", "label"), TUPLE_CHANGES)
def test_each_tuple_element_unqualifies_until_the_profile_runs_with_it(
    h100: Recipe, key: str, value: str, label: str
) -> None:
    run(h100, days_ago=3)
    moved = release_body(name="operator v1.0.0 new tuple")
    moved["profiles"][0]["tuple"][key] = value
    release = release_declare(moved)
    status = status_of(release)
    assert status.status == "unqualified-changed"
    assert status.reason == (
        f"Unqualified until the profile runs with it: {label} changed from {TUPLE[key]} to {value}"
    )
    again = run(h100, snapshot=_snapshot_with(key, value))
    assert (status_of(release).status, status_of(release).evidence) == ("qualified", [again.pk])


def _reading(snapshot: dict[str, Any], mtype: str, subtype: str) -> dict[str, Any]:
    measurement = next(m for m in snapshot["measurements"] if m["type"] == mtype)
    found = next((s for s in measurement["subtypes"] if s["subtype"] == subtype), None)
    if found is None:
        found = {"subtype": subtype, "data": {}}
        measurement["subtypes"].append(found)
    data: dict[str, Any] = found["data"]
    return data


def _with_fabric(snapshot: dict[str, Any], fabric: str) -> dict[str, Any]:
    snapshot["measurements"].append(
        {
            "type": "NetworkTopology",
            "subtypes": [{"subtype": "summary", "data": {"fabric": fabric}}],
        }
    )
    return snapshot


def _other_tuple(key: str, value: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(run kwargs before, run kwargs after) for a tuple element moved to ``value``."""
    before, after = full_snapshot(), full_snapshot()
    if key == "k8s_version":
        after = full_snapshot(k8s=f"v{value}-eks-1")
    elif key == "gpu_count":
        after = full_snapshot(gpu_count=int(value))
    elif key == "gpu_model":
        _reading(after, "GPU", "hardware")["model"] = value
    elif key == "os_version":
        _reading(after, "OS", "release")["VERSION_ID"] = value
    elif key == "dra_driver":
        _reading(after, "K8s", "helm")["nvidia-dra-driver-gpu.version"] = value
    elif key == "fabric":
        return {"snapshot": _with_fabric(before, "ib-a")}, {"snapshot": _with_fabric(after, value)}
    elif key == "gpu_allocation":
        return {"allocation": "device-plugin"}, {"allocation": value}
    return {"snapshot": before}, {"snapshot": after}


# The rest of the recorded tuple (the policy's "GPU Operator or DRA mode", fabric, and what the
# snapshot records besides): each a declared identity that flips the status and back.
MORE_TUPLE_CHANGES = [
    ("k8s_version", "1.34.1", "Kubernetes version"),
    ("gpu_count", "4", "GPU count"),
    ("gpu_model", "NVIDIA H200", "GPU model"),
    ("os_version", "22.04", "OS version"),
    ("dra_driver", "25.12.1", "DRA driver"),
    ("fabric", "ib-b", "fabric (network topology)"),
    ("gpu_allocation", "dra", "GPU allocation mode"),
]


@pytest.mark.parametrize(("key", "value", "label"), MORE_TUPLE_CHANGES)
def test_every_other_tuple_element_unqualifies_until_the_profile_runs_with_it(
    h100: Recipe, key: str, value: str, label: str
) -> None:
    before, after = _other_tuple(key, value)
    old = run(h100, days_ago=3, **before)
    recorded = old.identities["values"][key]["value"]
    assert recorded not in (None, value)
    pinned = release_body(name="operator v1.0.0 pinned")
    pinned["profiles"][0]["tuple"][key] = recorded
    assert status_of(release_declare(pinned)).status == "qualified"
    moved = release_body(name="operator v1.0.0 moved")
    moved["profiles"][0]["tuple"][key] = value
    release = release_declare(moved)
    status = status_of(release)
    assert status.status == "unqualified-changed"
    assert status.reason == (
        f"Unqualified until the profile runs with it: {label} changed from {recorded} to {value}"
    )
    again = run(h100, **after)
    assert (status_of(release).status, status_of(release).evidence) == ("qualified", [again.pk])


def test_a_new_plan_needs_its_own_run(h100: Recipe) -> None:
    old = "f" * 64
    run(h100, subject_digest=old, days_ago=3)
    status = status_of(declare())
    assert status.status == "unqualified-changed"
    assert status.reason == (
        "Unqualified until the profile runs with it: plan (the recipe's digest) changed from "
        f"sha256:{old} to sha256:{h100.digest}"
    )
    again = run(h100)
    assert (status_of(declare(name="v2")).status, status_of(declare(name="v3")).evidence) == (
        "qualified",
        [again.pk],
    )


# --- what never qualifies -------------------------------------------------------------------


def test_simulated_evidence_never_qualifies(h100: Recipe) -> None:
    run(h100, is_simulated=True)
    status = status_of(declare())
    assert status.status == "not-qualified"
    assert status.reason == (
        "Not qualified: not yet run on hardware (1 on a simulated cluster, which proves no "
        "hardware)"
    )


def test_demo_evidence_never_qualifies(h100: Recipe) -> None:
    run(h100, is_demo=True)
    assert status_of(declare()).status == "not-qualified"


def test_key_signed_evidence_never_qualifies_unless_the_site_says_so(h100: Recipe) -> None:
    keyed = run(h100, signer=SignerFactory(kind=SignerKind.KEY, issuer="", identity=""))
    status = status_of(declare())
    assert status.status == "not-qualified"
    assert status.reason == (
        "Not qualified: not yet run on hardware (1 key-signed, not accepted by AICR's upstream "
        "gate)"
    )
    with override_settings(RELEASES_ACCEPT_KEY_SIGNED=True):
        assert status_of(declare(name="v2")).evidence == [keyed.pk]


def test_gb200_never_inherits_h100_evidence(h100: Recipe, gb200: Recipe) -> None:
    run(h100)
    release = declare(profiles=[gb200.name, h100.name])
    statuses = {s.recipe: s for s in release_profiles(release)}
    assert statuses[h100.name].status == "qualified"
    assert statuses[gb200.name].status == "not-qualified"
    assert statuses[gb200.name].evidence == []


def test_withdrawn_evidence_stops_qualifying(h100: Recipe) -> None:
    evidence = run(h100)
    Evidence.objects.filter(pk=evidence.pk).update(withdrawn_at=NOW, withdrawal_reason="wrong lab")
    assert status_of(declare()).status == "not-qualified"


# --- the API --------------------------------------------------------------------------------


def _client(role: str | None) -> Client:
    client = Client()
    if role is None:
        return client
    user = User.objects.create_user(f"u-{role}")
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    _, key = token_create(user=user, role=role)
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    return client


def test_post_creates_a_release_and_profiles_reports_each_status(h100: Recipe) -> None:
    evidence = run(h100)
    body = release_body(profiles=[h100.name])
    response = _client(Role.MAINTAINER).post(API, json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content
    created = response.json()
    assert created["profiles"] == [{"recipe": h100.name, "tuple": {}}]
    listed = Client().get(API).json()
    assert [r["id"] for r in listed] == [created["id"]]
    profiles = Client().get(f"{API}{created['id']}/profiles/")
    assert profiles.status_code == 200
    assert profiles.json() == [
        {
            "recipe": h100.name,
            "status": "qualified",
            "reason": "Qualified",
            "evidence": [evidence.pk],
        }
    ]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"operator_image": f"{OPERATOR}:v1"}, "operator_image"),
        ({"operator_chart": f"{CHART}@sha256:abc"}, "operator_chart"),
        ({"aicr_image": 7}, "aicr_image"),
        (
            {"validator_images": [{"image": VALIDATOR, "digest": "sha256:XYZ"}]},
            "validator_images[0].digest",
        ),
        ({"validator_images": [{"digest": sha("4")}]}, "validator_images[0].image"),
        ({"profiles": []}, "profiles"),
        ({"profiles": ["no-such-recipe"]}, "profiles[0]"),
        (
            {"profiles": [{"recipe": "h100-eks-ubuntu-training-kubeflow", "tuple": {"cpu": "x"}}]},
            "profiles[0].tuple.cpu",
        ),
        ({"name": ""}, "name"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_malformed_field_is_a_400_naming_it_and_nothing_is_stored(
    h100: Recipe, change: dict[str, Any], field: str
) -> None:
    body = release_body(**change)
    response = _client(Role.MAINTAINER).post(API, json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    assert field in response.json()["detail"]
    assert not Release.objects.exists()


@pytest.mark.parametrize(
    ("role", "code"), [(None, 401), (Role.CONTRIBUTOR, 403), (Role.AUDITOR, 403)]
)
def test_only_maintainers_declare(h100: Recipe, role: str | None, code: int) -> None:
    response = _client(role).post(API, json.dumps(release_body()), content_type="application/json")
    assert response.status_code == code
    assert not Release.objects.exists()


def test_a_duplicate_name_is_a_400(h100: Recipe) -> None:
    declare()
    response = _client(Role.MAINTAINER).post(
        API, json.dumps(release_body()), content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["field"] == "name"


# --- the page, the feed, the badge, the admin ------------------------------------------------


def test_the_page_shows_each_status_its_evidence_and_the_reverify_command(
    h100: Recipe, gb200: Recipe
) -> None:
    evidence = run(
        h100, verify_commands=[{"tool": "cosign", "text": "cosign verify-blob x", "note": ""}]
    )
    run(gb200)
    release = declare(profiles=[h100.name])
    response = Client().get(f"/releases/{release.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<tr id="{h100.name}" data-status="qualified">' in html
    assert f'href="/evidence/{evidence.pk}/"' in html
    assert "cosign verify-blob x" in html
    assert f'<tr id="{gb200.name}" data-status="not-claimed">' in html
    assert "Not claimed" in html
    assert "Releases" in Client().get("/releases/").content.decode()


def test_the_page_names_each_changed_identity_and_what_settles_a_redacted_one(h100: Recipe) -> None:
    run(h100, redacted=True, aicr=sha("8"))
    html = Client().get(f"/releases/{declare().pk}/").content.decode()
    assert 'data-status="unqualified-changed"' in html
    assert "instance type: redacted by AICR's policy" in html
    assert "publish the evidence with aicr validate --full" in html
    assert (
        f"recorded <code>{AICR}@{sha('8')}</code>, declared <code>{AICR}@{sha('3')}</code>" in html
    )


def test_the_feed_has_one_entry_per_profile_and_a_new_one_when_it_changes(h100: Recipe) -> None:
    release = declare()
    before = Client().get(f"/releases/{release.pk}/feed.atom")
    assert before.status_code == 200
    assert before["Content-Type"].startswith("application/atom+xml")
    text = before.content.decode()
    assert f"{h100.name}: Not qualified" in text
    run(h100)
    after = Client().get(f"/releases/{release.pk}/feed.atom").content.decode()
    assert f"{h100.name}: Qualified" in after
    guid = re.compile(r"<id>(release-[^<]+)</id>")
    assert guid.findall(text) != guid.findall(after)
    assert Client().get("/releases/999999/feed.atom").status_code == 404


def test_the_badge_counts_qualified_profiles(h100: Recipe, gb200: Recipe) -> None:
    run(h100)
    release = declare(profiles=[h100.name, gb200.name])
    response = Client().get(f"/badges/releases/{release.pk}.svg")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml"
    assert "1 of 2 qualified" in response.content.decode()
    assert Client().get("/badges/releases/999999.svg").status_code == 404


def test_the_admin_declares_through_the_same_check(h100: Recipe) -> None:
    admin = User.objects.create_superuser("root", password="pw-for-tests")
    client = Client()
    client.force_login(admin)
    body = release_body()
    form = {
        **{k: v for k, v in body.items() if isinstance(v, str)},
        "validator_images": json.dumps(body["validator_images"]),
        "profiles": json.dumps([h100.name]),
    }
    bad = client.post("/admin/evidence_app/release/add/", {**form, "aicr_image": "ghcr.io/x:v1"})
    assert bad.status_code == 200
    assert "is not pinned" in bad.content.decode()
    assert not Release.objects.exists()
    good = client.post("/admin/evidence_app/release/add/", form)
    assert good.status_code == 302, good.content[:2000]
    stored = Release.objects.get()
    assert stored.profiles == [{"recipe": h100.name, "tuple": {}}]
    assert stored.created_by == admin


# --- the consensus lens ---------------------------------------------------------------------


def test_the_release_lens_counts_only_evidence_whose_identities_match(h100: Recipe) -> None:
    from evidence_app.consensus.grid import consensus_grid

    matching = run(h100)
    run(h100, operator=sha("5"))  # another operator build: not this release's identities
    keyed = run(h100, signer=SignerFactory(kind=SignerKind.KEY, issuer="", identity=""))
    release = declare()
    grid = consensus_grid(recipe=h100, lens=f"release:{release.pk}")
    assert grid.lens == f"release:{release.pk}"
    assert {c.evidence.pk for c in grid.columns} == {matching.pk, keyed.pk}
    assert "1 key-signed column: not accepted by AICR's upstream gate." in grid.lens_note
    assert any(o.label == f"Identities of release {release.name}" for o in grid.lens_options)
    everything = consensus_grid(recipe=h100)
    assert len(everything.columns) == 3
    assert everything.lens_note == ""
    unknown = consensus_grid(recipe=h100, lens="release:999999")
    assert unknown.lens == ""
    assert "release:999999" in unknown.lens_error
    html = Client().get(f"/recipes/{h100.name}/?lens=release:{release.pk}").content.decode()
    assert "not accepted by AICR&#x27;s upstream gate" in html
