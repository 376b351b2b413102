"""``GET /api/v1/export/audit.tar.gz`` and ``manage.py verify_audit``: a good package verifies
offline (the database blocked); each kind of tampering is found and named."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.management import call_command
from django.db import connection, connections
from django.test import Client

from evidence_app.consensus.rules import check_statuses
from evidence_app.exports import package as package_module
from evidence_app.exports import records as records_module
from evidence_app.exports.audit import (
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_UNREADABLE,
    AuditReport,
    PackageUnreadable,
    audit_verify,
    read_package,
)
from evidence_app.exports.package import (
    MANIFEST,
    SIGNATURE,
    SITE_KEY,
    UNSIGNED_FILES,
    audit_package_write,
)
from evidence_app.exports.records import ndjson_line, site_url_builder
from evidence_app.exports.signing import public_pem, sign_manifest
from evidence_app.models import Evidence, TrustRoot
from evidence_app.services import demo
from evidence_app.services.withdrawal import evidence_withdraw
from evidence_app.verification.commands import KEY_SIGNED_UPSTREAM_NOTE
from recipes_app.models import Recipe
from tests.evidence_factories import FIRST_PARTY_IDENTITY, GITHUB_ISSUER, statement_for
from tests.sigstore_private import PrivateSigstore

Api = Callable[[str | None], Client]
URL = "/api/v1/export/audit.tar.gz"


def _pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@pytest.fixture
def site_key(settings: Any) -> ec.EllipticCurvePrivateKey:
    key = ec.generate_private_key(ec.SECP256R1())
    settings.SITE_SIGNING_KEY = _pem(key)
    return key


@pytest.fixture
def auditor(make_token: Callable[..., str]) -> str:
    return make_token("audrey", "auditor")


@pytest.fixture
def stored(
    real_catalog: Any,
    ingest: Callable[..., Any],
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    example_recipe: Recipe,
) -> list[Evidence]:
    """The demo runs (key-signed evidence directories) and one keyless bundle; one withdrawn."""
    demo.seed_demo()
    statement = statement_for(example_recipe, attested_at=datetime.now(UTC) - timedelta(hours=1))
    bundle = private_sigstore.sign_dsse(
        statement, identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle
    result = ingest(bundle)
    assert result.verdict == "verified", result.reason
    first = Evidence.objects.order_by("pk").first()
    assert first is not None
    evidence_withdraw(evidence=first, by=None, roles={"maintainer"}, reason="=bad run")
    return list(Evidence.objects.order_by("pk"))


@pytest.fixture
def package(api: Api, auditor: str, stored: list[Evidence], site_key: Any, tmp_path: Path) -> Path:
    response = api(auditor).get(URL)
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"] == "application/gzip"
    assert "attachment" in response["Content-Disposition"]
    path = tmp_path / "audit.tar.gz"
    path.write_bytes(b"".join(response.streaming_content))
    return path


@pytest.fixture
def trusted_key_file(site_key: ec.EllipticCurvePrivateKey, tmp_path: Path) -> Path:
    path = tmp_path / "site-key.pub"
    path.write_text(public_pem(site_key))
    return path


def _verify(path: Path, key: ec.EllipticCurvePrivateKey, blocker: Any) -> AuditReport:
    with blocker.block():  # no database: any query raises
        return audit_verify(path, pinned_key=key.public_key())


def _rewrite(
    source: Path,
    target: Path,
    change: Callable[[dict[str, bytes]], None],
    *,
    sign_with: ec.EllipticCurvePrivateKey | None = None,
) -> Path:
    """``change`` the files; with ``sign_with``, rebuild the manifest and re-sign it (an
    attacker holding that key)."""
    files = read_package(source)
    change(files)
    if sign_with is not None:
        listed = sorted(p for p in files if p not in UNSIGNED_FILES)
        manifest = "".join(
            f"{hashlib.sha256(files[p]).hexdigest()}  {p}\n" for p in listed
        ).encode()
        signature, public = sign_manifest(manifest, sign_with)
        files[MANIFEST], files[SIGNATURE], files[SITE_KEY] = manifest, signature, public.encode()
    with tarfile.open(target, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return target


def _records(files: dict[str, bytes]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in files["records.ndjson"].splitlines()]


def _put_records(files: dict[str, bytes], records: list[dict[str, Any]]) -> None:
    files["records.ndjson"] = b"".join(
        json.dumps(r, sort_keys=True).encode() + b"\n" for r in records
    )


def _codes(report: AuditReport) -> set[str]:
    return {p.code for p in report.problems}


# --- the good package ------------------------------------------------------------------------


def test_it_writes_a_package_that_verifies_offline(
    package: Path, stored: list[Evidence], site_key: Any, django_db_blocker: Any
) -> None:
    files = read_package(package)
    records = _records(files)
    assert [r["id"] for r in records] == [e.pk for e in stored]
    assert [r["checks"] for r in records] == [check_statuses(e.check_results) for e in stored]
    lines = files["records.ndjson"].splitlines(keepends=True)
    assert [ndjson_line(json.loads(line)) for line in lines] == lines  # the export's encoder
    for evidence in stored:
        assert files[f"bundles/{evidence.sha256}"] == bytes(evidence.content)
        # The transcript as stored (written from the database's JSON text, never re-encoded).
        assert json.loads(files[f"transcripts/{evidence.sha256}.json"]) == evidence.transcript
        assert f"recipes/{evidence.subject_digest}.yaml" in files
    assert any(p.startswith("trust/roots/") for p in files)
    assert any(p.startswith("trust/keys/") for p in files)
    assert "trust/allowlist.yaml" in files
    assert any(p.startswith("catalogs/") and p.endswith(".json.gz") for p in files)
    readme = files["README.md"].decode()
    assert "sha256sum --check" in readme
    assert "aicr evidence verify <dir> --key trust/keys/<signer_key_fingerprint>.pem" in readme
    assert f"Key-signed records: {KEY_SIGNED_UPSTREAM_NOTE}" in readme
    consensus = json.loads(files["consensus.json"])
    assert consensus
    assert all(entry["state"] for entry in consensus.values())
    assert records[0]["withdrawn"] is True
    assert records[0]["counted"] is False

    report = _verify(package, site_key, django_db_blocker)

    assert report.ok, report.problems
    assert report.records == len(stored)
    assert report.bundles_verified == len(stored)
    assert report.consensus_recipes == len(consensus)
    assert report.recipes_checked >= 1


def test_it_answers_exit_0_and_a_json_summary_from_the_command(
    package: Path, trusted_key_file: Path, django_db_blocker: Any, capsys: Any
) -> None:
    with django_db_blocker.block(), pytest.raises(SystemExit) as exit_:
        call_command("verify_audit", str(package), "--key", str(trusted_key_file), "--json")
    assert exit_.value.code == EXIT_OK
    summary = json.loads(capsys.readouterr().out)
    assert summary["ok"] is True
    assert summary["problems"] == []
    assert summary["bundles_verified"] == summary["records"] > 0


# --- tampering -------------------------------------------------------------------------------


def test_it_names_an_altered_bundle(
    package: Path, stored: list[Evidence], site_key: Any, tmp_path: Path, django_db_blocker: Any
) -> None:
    target = f"bundles/{stored[-1].sha256}"

    def alter(files: dict[str, bytes]) -> None:
        files[target] = files[target].replace(b"}", b" }", 1)

    report = _verify(_rewrite(package, tmp_path / "t.tar.gz", alter), site_key, django_db_blocker)
    assert ("file-altered", target) in {(p.code, p.path) for p in report.problems}
    assert ("bundle-altered", target) in {(p.code, p.path) for p in report.problems}


def test_it_names_a_dropped_file(
    package: Path, stored: list[Evidence], site_key: Any, tmp_path: Path, django_db_blocker: Any
) -> None:
    target = f"transcripts/{stored[3].sha256}.json"

    def drop(files: dict[str, bytes]) -> None:
        del files[target]

    report = _verify(_rewrite(package, tmp_path / "t.tar.gz", drop), site_key, django_db_blocker)
    assert [(p.code, p.path) for p in report.problems] == [("file-missing", target)]


def test_it_names_an_edited_record_even_when_the_manifest_is_rebuilt_and_signed(
    package: Path, stored: list[Evidence], site_key: Any, tmp_path: Path, django_db_blocker: Any
) -> None:
    def edit(files: dict[str, bytes]) -> None:
        records = _records(files)
        records[1]["aicr_version"] = "v9.9.9"
        _put_records(files, records)

    unsigned = _rewrite(package, tmp_path / "a.tar.gz", edit)
    assert ("file-altered", "records.ndjson") in {
        (p.code, p.path) for p in _verify(unsigned, site_key, django_db_blocker).problems
    }
    # The site's own key re-signing an edited record (a compromised server) is still caught.
    signed = _rewrite(package, tmp_path / "b.tar.gz", edit, sign_with=site_key)
    report = _verify(signed, site_key, django_db_blocker)
    assert [(p.code, p.path) for p in report.problems] == [
        ("record-mismatch", f"records.ndjson#{stored[1].pk}")
    ]
    assert "aicr_version" in report.problems[0].detail


def test_it_names_an_edited_check_status_through_the_consensus(
    package: Path, stored: list[Evidence], site_key: Any, tmp_path: Path, django_db_blocker: Any
) -> None:
    def edit(files: dict[str, bytes]) -> None:
        records = _records(files)
        record = next(r for r in records if r["counted"] and r["checks"])
        for phase in record["checks"].values():
            for name in phase:
                phase[name] = "passed"
        _put_records(files, records)

    report = _verify(
        _rewrite(package, tmp_path / "t.tar.gz", edit, sign_with=site_key),
        site_key,
        django_db_blocker,
    )
    codes = _codes(report)
    assert "record-mismatch" in codes
    assert "checks" in next(p for p in report.problems if p.code == "record-mismatch").detail


def test_it_names_a_stated_consensus_the_records_do_not_give(
    package: Path, site_key: Any, tmp_path: Path, django_db_blocker: Any
) -> None:
    def edit(files: dict[str, bytes]) -> None:
        consensus = json.loads(files["consensus.json"])
        name = next(iter(consensus))
        consensus[name]["state"] = (
            "CONFIRMED" if consensus[name]["state"] != "CONFIRMED" else "FAILING"
        )
        files["consensus.json"] = json.dumps(consensus).encode()

    report = _verify(
        _rewrite(package, tmp_path / "t.tar.gz", edit, sign_with=site_key),
        site_key,
        django_db_blocker,
    )
    assert _codes(report) == {"consensus-mismatch"}


def test_it_names_a_swapped_trusted_root(
    package: Path, stored: list[Evidence], site_key: Any, tmp_path: Path, django_db_blocker: Any
) -> None:
    other = PrivateSigstore(name="someone-else.test")

    def swap(files: dict[str, bytes]) -> None:
        policy = json.loads(files["trust/policy.json"])
        private = next(r for r in policy["trusted_roots"] if not r["production"])
        files[private["path"]] = other.trusted_root_json().encode()

    keyless = next(e for e in stored if e.signer.kind == "keyless")
    unsigned = _verify(_rewrite(package, tmp_path / "a.tar.gz", swap), site_key, django_db_blocker)
    assert "file-altered" in _codes(unsigned)
    report = _verify(
        _rewrite(package, tmp_path / "b.tar.gz", swap, sign_with=site_key),
        site_key,
        django_db_blocker,
    )
    assert [(p.code, p.path) for p in report.problems] == [
        ("bundle-not-verified", f"bundles/{keyless.sha256}")
    ]


def test_it_refuses_a_manifest_re_signed_with_another_key(
    package: Path, site_key: Any, tmp_path: Path, django_db_blocker: Any, trusted_key_file: Path
) -> None:
    mallory = ec.generate_private_key(ec.SECP256R1())

    def edit(files: dict[str, bytes]) -> None:
        files["README.md"] += b"\nAll good, trust me.\n"

    forged = _rewrite(package, tmp_path / "t.tar.gz", edit, sign_with=mallory)
    report = _verify(forged, site_key, django_db_blocker)
    assert "manifest-key-mismatch" in _codes(report)
    assert "manifest-signature-invalid" in _codes(report)

    with django_db_blocker.block(), pytest.raises(SystemExit) as exit_:
        call_command("verify_audit", str(forged), "--key", str(trusted_key_file))
    assert exit_.value.code == EXIT_PROBLEMS


def test_it_does_not_trust_a_package_whose_key_is_not_pinned(
    package: Path, settings: Any, django_db_blocker: Any
) -> None:
    settings.SITE_SIGNING_KEY = ""
    with django_db_blocker.block():
        report = audit_verify(package, pinned_key=None)
    assert _codes(report) == {"manifest-key-not-pinned"}


@pytest.mark.parametrize("kind", ["not-a-tar", "symlink", "dotdot"])
def test_it_refuses_an_unreadable_or_unsafe_package(
    tmp_path: Path, kind: str, trusted_key_file: Path
) -> None:
    path = tmp_path / "bad.tar.gz"
    if kind == "not-a-tar":
        path.write_bytes(b"hello")
    else:
        with tarfile.open(path, mode="w:gz") as tar:
            info = tarfile.TarInfo("../escape" if kind == "dotdot" else "link")
            if kind == "symlink":
                info.type = tarfile.SYMTYPE
                info.linkname = "/etc/passwd"
            tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(PackageUnreadable):
        read_package(path)
    with pytest.raises(SystemExit) as exit_:
        call_command("verify_audit", str(path), "--key", str(trusted_key_file))
    assert exit_.value.code == EXIT_UNREADABLE


# --- the endpoint ------------------------------------------------------------------------------


def test_it_answers_503_without_a_site_key_in_production(
    api: Api, auditor: str, settings: Any
) -> None:
    # What production settings hold without SITE_SIGNING_KEY: no development key file either.
    settings.SITE_SIGNING_KEY = ""
    settings.SITE_SIGNING_LOCAL_KEY_FILE = None
    settings.DEBUG = False
    response = api(auditor).get(URL)
    assert response.status_code == 503
    assert "SITE_SIGNING_KEY" in response.json()["detail"]


@pytest.mark.parametrize(("role", "status"), [(None, 401), ("contributor", 403)])
def test_it_packages_only_for_auditors_and_maintainers(
    api: Api, make_token: Callable[..., str], role: str | None, status: int, site_key: Any
) -> None:
    token = make_token("carol", role) if role else None
    assert api(token).get(URL).status_code == status


def test_it_packages_what_the_filters_select(
    api: Api,
    auditor: str,
    stored: list[Evidence],
    site_key: Any,
    tmp_path: Path,
    django_db_blocker: Any,
) -> None:
    keyless = next(e for e in stored if e.signer.kind == "keyless")
    response = api(auditor).get(URL, {"signer": keyless.signer.slug})
    path = tmp_path / "one.tar.gz"
    path.write_bytes(b"".join(response.streaming_content))
    files = read_package(path)
    assert [r["id"] for r in _records(files)] == [keyless.pk]
    assert json.loads(files["package.json"])["filters"] == {"signer": keyless.signer.slug}
    assert json.loads(files["package.json"])["aicr_supported_range"] == ""
    assert _verify(path, site_key, django_db_blocker).ok


@pytest.mark.parametrize(
    ("path", "content", "code"),
    [
        ("trust/policy.json", b"[1, 2]", "not-json"),
        ("consensus.json", b'"nope"', "not-json"),
        ("records.ndjson", b'{"id": 1, "counted": true}\n[]\n', "consensus-uncomputable"),
    ],
)
def test_it_names_garbage_signed_by_the_site_key_instead_of_crashing(
    package: Path,
    site_key: Any,
    tmp_path: Path,
    django_db_blocker: Any,
    path: str,
    content: bytes,
    code: str,
) -> None:
    def garble(files: dict[str, bytes]) -> None:
        files[path] = content

    report = _verify(
        _rewrite(package, tmp_path / "t.tar.gz", garble, sign_with=site_key),
        site_key,
        django_db_blocker,
    )
    assert code in _codes(report)
    assert not report.ok


@pytest.mark.parametrize(
    ("path", "content", "named"),
    [
        ("consensus.json", b"[" * 100_000, "consensus.json: nesting deeper than 64"),
        ("package.json", b'{"records": ' + b"9" * 5_000 + b"}", "package.json: number literal"),
        (
            "records.ndjson",
            b'{"a":' * 5_000 + b"1" + b"}" * 5_000 + b"\n",
            "records.ndjson:1: nesting deeper than 64",
        ),
        ("recipes/index.json", b"{not json", "recipes/index.json: not valid JSON"),
    ],
    ids=["consensus-100000-deep", "package-5000-digit-number", "record-5000-deep", "not-json"],
)
def test_it_exits_2_naming_a_json_member_the_bounded_loader_refuses(
    package: Path,
    site_key: Any,
    trusted_key_file: Path,
    tmp_path: Path,
    path: str,
    content: bytes,
    named: str,
    capsys: Any,
) -> None:
    """Signed by the site key, listed in the manifest, and still not a package: the member is
    named and nothing after it is checked (exit 2, not a RecursionError or a list of problems)."""

    def garble(files: dict[str, bytes]) -> None:
        files[path] = content

    hostile = _rewrite(package, tmp_path / "t.tar.gz", garble, sign_with=site_key)
    with pytest.raises(SystemExit) as exit_:
        call_command("verify_audit", str(hostile), "--key", str(trusted_key_file), "--json")
    assert exit_.value.code == EXIT_UNREADABLE
    answer = json.loads(capsys.readouterr().out)
    assert answer["ok"] is False
    assert answer["error"].startswith(named), answer


def test_its_readme_commands_verify_it_with_public_tools(package: Path, tmp_path: Path) -> None:
    """The package README's openssl, sha256sum, binding and sigstore-python commands."""
    import subprocess

    out = tmp_path / "pkg"
    out.mkdir()
    subprocess.run(["tar", "-xzf", str(package), "-C", str(out)], check=True)
    readme = (out / "README.md").read_text()
    assert "sha256sum --check --strict MANIFEST.sha256" in readme

    def sh(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", command], cwd=out, capture_output=True, text=True, check=False
        )

    signature = sh(
        "base64 -d MANIFEST.sha256.sig > manifest.sig.der && "
        "openssl dgst -sha256 -verify site-key.pub -signature manifest.sig.der MANIFEST.sha256"
    )
    assert signature.returncode == 0, signature.stderr
    assert "Verified OK" in signature.stdout
    manifest = sh("sha256sum --check --strict --quiet MANIFEST.sha256")
    assert manifest.returncode == 0, manifest.stdout + manifest.stderr
    bindings = sh(
        """for f in recipes/*.yaml; do [ "$(sha256sum < "$f" | cut -d' ' -f1).yaml" = """
        """"${f#recipes/}" ] || echo "MISMATCH $f"; done"""
    )
    assert bindings.stdout == ""

    # The keyless record, with sigstore-python against the root in the package (no network).
    import sys

    record = next(r for r in _records(read_package(package)) if r["signer_kind"] == "keyless")
    policy = json.loads((out / "trust" / "policy.json").read_text())
    root = next(r for r in policy["trusted_roots"] if r["name"] == record["trusted_root"])
    sigstore = subprocess.run(
        [
            sys.executable,
            "-m",
            "sigstore",
            "--trust-config",
            root["client_trust_config"],
            "verify",
            "identity",
            "--bundle",
            record["bundle"],
            "--cert-identity",
            record["signer_identity"],
            "--cert-oidc-issuer",
            record["signer_issuer"],
            record["recipe_yaml"],
        ],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert sigstore.returncode == 0, sigstore.stdout + sigstore.stderr
    assert "OK" in sigstore.stdout + sigstore.stderr

    (out / "records.ndjson").write_bytes((out / "records.ndjson").read_bytes() + b"\n")
    assert sh("sha256sum --check --strict --quiet MANIFEST.sha256").returncode != 0


def test_it_packages_the_supported_range_its_counted_records_rest_on(
    api: Api,
    auditor: str,
    stored: list[Evidence],
    site_key: Any,
    tmp_path: Path,
    django_db_blocker: Any,
    settings: Any,
) -> None:
    settings.AICR_SUPPORTED_RANGE = ">=1.0.0,<2.0.0"  # the demo and test runs are v0.19-era
    path = tmp_path / "ranged.tar.gz"
    path.write_bytes(b"".join(api(auditor).get(URL).streaming_content))
    files = read_package(path)
    assert json.loads(files["package.json"])["aicr_supported_range"] == ">=1.0.0,<2.0.0"
    records = _records(files)
    assert records
    assert not any(r["counted"] for r in records)
    assert all("aicr-unsupported" in r["stale_reasons"] for r in records)
    assert _verify(path, site_key, django_db_blocker).ok


def _connections_to_this_database() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return int(cursor.fetchone()[0])


def test_a_worker_reads_each_next_chunk_ahead_on_a_connection_it_then_closes(
    transactional_db: None,
    stored: list[Evidence],
    site_key: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    django_db_blocker: Any,
) -> None:
    """Outside a transaction (a worker's job) each chunk's rows are read on a second thread
    while the one before is written; the package is the same, and that thread's connection is
    closed at the end (the tests above run inside a transaction, where rows are read inline)."""
    monkeypatch.setattr(package_module, "PACKAGE_CHUNK", 2)
    readers: set[str] = set()
    their_connections: list[Any] = []
    export_rows = records_module.export_rows

    def spy(queryset: Any, extra: Any = None) -> Any:
        if extra:
            readers.add(threading.current_thread().name)
            their_connections.append(connections["default"])
        return export_rows(queryset, extra)

    monkeypatch.setattr(records_module, "export_rows", spy)
    before = _connections_to_this_database()
    path = tmp_path / "audit.tar.gz"
    with path.open("wb") as out:
        audit_package_write(
            Evidence.objects.all(),
            out,
            url_of=site_url_builder("http://testserver/"),
            filters={},
            site="http://testserver/",
        )
    assert _connections_to_this_database() == before
    assert all(wrapper.connection is None for wrapper in their_connections)  # closed
    assert readers
    assert all(name.startswith("export-read-ahead") for name in readers)
    files = read_package(path)
    assert [r["id"] for r in _records(files)] == [e.pk for e in stored]
    assert len(stored) > 2 * package_module.PACKAGE_CHUNK
    report = _verify(path, site_key, django_db_blocker)
    assert report.ok, report.problems
    assert report.records == len(stored)
