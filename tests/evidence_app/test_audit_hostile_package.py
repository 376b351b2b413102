"""``manage.py verify_audit`` on hostile packages: a header that declares more than the package
holds is refused from its raw bytes (exit 2, the member named) before ``tarfile`` reads it, and
hostile JSON inside a package is a named problem, never a traceback."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from evidence_app.exports import audit
from evidence_app.exports.audit import EXIT_UNREADABLE, PackageUnreadable, read_package
from evidence_app.verification.summary_bundle import SummaryBundleError, read_archive

DECLARED = 1_200_000_000  # 1.2 GB declared, a few KiB present


def _header(name: str, size: int, kind: bytes) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.type = kind
    return info.tobuf(tarfile.USTAR_FORMAT)


def _hostile_tar(kind: bytes, name: str) -> bytes:
    return _header(name, DECLARED, kind) + b"a" * 8192 + b"\x00" * 1024


KINDS = [
    pytest.param(tarfile.GNUTYPE_LONGNAME, "././@LongLink", id="gnu-long-name"),
    pytest.param(tarfile.GNUTYPE_LONGLINK, "././@LongLink", id="gnu-long-link"),
    pytest.param(tarfile.XHDTYPE, "./PaxHeaders/records.ndjson", id="pax"),
    pytest.param(tarfile.XGLTYPE, "./PaxHeaders/global", id="pax-global"),
    pytest.param(tarfile.REGTYPE, "records.ndjson", id="regular-file"),
]


@pytest.mark.parametrize(("kind", "name"), KINDS)
def test_it_exits_2_naming_the_member_whose_header_declares_too_much(
    tmp_path: Path, kind: bytes, name: str, capsys: Any
) -> None:
    path = tmp_path / "audit.tar.gz"
    path.write_bytes(gzip.compress(_hostile_tar(kind, name)))
    key = tmp_path / "key.pub"
    key.write_text("unused: the package is refused first")
    with pytest.raises(PackageUnreadable, match=f"declares {DECLARED} bytes") as refused:
        read_package(path)
    assert str(refused.value).startswith(name)
    with pytest.raises(SystemExit) as exit_:
        call_command("verify_audit", str(path), "--json")
    assert exit_.value.code == EXIT_UNREADABLE
    assert name in capsys.readouterr().out


@pytest.mark.parametrize(("kind", "name"), KINDS)
def test_it_refuses_the_same_headers_in_an_uploaded_archive(kind: bytes, name: str) -> None:
    with pytest.raises(SummaryBundleError, match="declares 1200000000 bytes") as refused:
        read_archive(gzip.compress(_hostile_tar(kind, name)))
    assert refused.value.file == name


def test_it_still_reads_a_package_with_long_names_and_pax_headers(tmp_path: Path) -> None:
    path = tmp_path / "audit.tar.gz"
    long_name = "records/" + "n" * 180 + ".json"
    with tarfile.open(path, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo(long_name)
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
    assert read_package(path) == {long_name: b"{}"}
    pax = tmp_path / "pax.tar.gz"
    with tarfile.open(pax, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(long_name)
        info.size = 2
        info.pax_headers = {"comment": "é" * 100}
        tar.addfile(info, io.BytesIO(b"{}"))
    assert read_package(pax) == {long_name: b"{}"}


def test_it_exits_2_when_the_declared_sizes_total_more_than_the_package_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Each member under its own cap, the sum over the package's: refused from the headers
    while walking them (the limit lowered to 1 MiB so the package stays small), before tarfile
    reads a member."""
    monkeypatch.setattr(audit, "MAX_TOTAL_BYTES", 1024 * 1024)
    path = tmp_path / "audit.tar.gz"
    with tarfile.open(path, mode="w:gz") as tar:
        for n in range(3):
            info = tarfile.TarInfo(f"records/{n}.json")
            info.size = 512 * 1024
            tar.addfile(info, io.BytesIO(b" " * info.size))
    with pytest.raises(PackageUnreadable, match="archive members total more than 1048576 bytes"):
        read_package(path)
    with pytest.raises(SystemExit) as exit_:
        call_command("verify_audit", str(path), "--json")
    assert exit_.value.code == EXIT_UNREADABLE
    assert "total more than" in capsys.readouterr().out


def test_it_exits_2_on_more_members_than_the_package_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit, "MAX_MEMBERS", 3)
    path = tmp_path / "audit.tar.gz"
    with tarfile.open(path, mode="w:gz") as tar:
        for n in range(4):
            info = tarfile.TarInfo(f"records/{n}.json")
            info.size = 2
            tar.addfile(info, io.BytesIO(b"{}"))
    with pytest.raises(PackageUnreadable, match="more than 3 archive members"):
        read_package(path)
