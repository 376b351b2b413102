"""``exports.tarstream``: the audit package's tar.gz writer gives the bytes ``tarfile`` gives
for the same members, whatever their names and sizes, and a failure while compressing reaches
the writer instead of leaving a truncated file that looks whole."""

from __future__ import annotations

import gzip
import io
import tarfile

import pytest

from evidence_app.exports.tarstream import FLUSH_BYTES, TarGzStream, member_header

MTIME = 1_764_000_000
NAMES = [
    "a",
    "README.md",
    "transcripts/" + "f" * 64 + ".json",
    "trust/roots/" + "0" * 64 + ".client_trust_config.json",  # exactly 100 characters
    "x" * 101,  # one over ustar's name field: a PAX header
    "recipes/é.yaml",  # not ASCII: a PAX header
    "dir/with space/and\ttab",
]


def _tarfile_bytes(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), MTIME, 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("size", [0, 1, 511, 512, 513, 8**11 - 1, 8**11])
def test_a_header_is_the_one_tarfile_writes(name: str, size: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, MTIME, 0o644
    assert member_header(name, size, MTIME) == info.tobuf(
        tarfile.PAX_FORMAT, "utf-8", "surrogateescape"
    )


def test_a_stream_is_the_archive_tarfile_writes() -> None:
    members = [(name, name.encode() * (i * 97 % 13)) for i, name in enumerate(NAMES)]
    members.append(("big", bytes(range(256)) * (FLUSH_BYTES // 100)))  # crosses a flush
    out = io.BytesIO()
    stream = TarGzStream(out, mtime=MTIME)
    for name, data in members[:-1]:
        stream.add(name, data)
    big = io.BytesIO(members[-1][1])
    big.seek(0, io.SEEK_END)  # add_file reads from the start whatever the position
    stream.add_file("big", big, len(members[-1][1]))
    stream.close()
    assert gzip.decompress(out.getvalue()) == _tarfile_bytes(members)
    with tarfile.open(fileobj=io.BytesIO(out.getvalue()), mode="r:gz") as tar:
        assert [m.name for m in tar] == [name for name, _ in members]


def test_a_short_file_is_refused_rather_than_padded() -> None:
    stream = TarGzStream(io.BytesIO(), mtime=MTIME)
    with pytest.raises(ValueError, match=r"records\.ndjson: 10 of its 20 bytes missing"), stream:
        stream.add_file("records.ndjson", io.BytesIO(b"0123456789"), 20)
    assert not stream._thread.is_alive()


class _FullDisk(io.RawIOBase):
    """Takes the gzip header (written when the stream opens), then is full."""

    def __init__(self) -> None:
        self.room = 64

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        if len(data) > self.room:
            raise OSError(28, "No space left on device")
        self.room -= len(data)
        return len(data)


def test_a_failure_while_compressing_reaches_the_writer() -> None:
    stream = TarGzStream(_FullDisk(), mtime=MTIME)

    def fill() -> None:
        with stream:
            for _ in range(8):  # enough blocks to reach the compressing thread
                stream.add("bundles/x", b"\x00" * FLUSH_BYTES)

    with pytest.raises(OSError, match="No space left on device"):
        fill()
    assert not stream._thread.is_alive()  # the exception stopped it, nothing left waiting
