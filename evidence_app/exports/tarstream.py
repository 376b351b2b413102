"""A write-only ``tar.gz`` stream for packages of many small files.

``tarfile`` spends about 22 µs building each member's header (its PAX machinery runs for every
name) and compresses at level 9 on the caller's thread; an audit package writes three members
per record, so at the 5,000 records/s of issue 22 the headers alone took a third of the budget
and gzip most of the rest. Here a plain ASCII name of at most 100 bytes gets the same ustar
header ``tarfile.TarInfo.tobuf(PAX_FORMAT)`` writes for it (``test_audit_tarstream`` holds them
byte-equal), built from one format string; any other name goes through ``tarfile`` itself (a
PAX header). Members are gathered into blocks that a second thread compresses (``zlib``
releases the GIL while it works), so the records' Python and the compression overlap on two
cores. Memory is bounded by two blocks in flight.
"""

from __future__ import annotations

import gzip
import queue
import tarfile
import threading
from typing import IO

BLOCK = 512
FLUSH_BYTES = 1 << 20  # handed to the compressing thread once this much is gathered
COMPRESS_LEVEL = 6  # zlib's default: 9 cost 10-30 % more time for under 1 % smaller packages
_END = b"\0" * (2 * BLOCK)
_USTAR = (
    b"%s"  # name (NUL-padded to 100)
    b"%07o\0"  # mode
    b"%07o\0"  # uid
    b"%07o\0"  # gid
    b"%011o\0"  # size
    b"%011o\0"  # mtime
    b"        "  # checksum, computed over the header with eight spaces here
    b"0"  # regular file
    + b"\0" * 100  # linkname
    + b"ustar\x0000"
    + b"\0" * 32  # uname
    + b"\0" * 32  # gname
    + b"\0" * 16  # devmajor, devminor: empty for a regular file, as tarfile writes them
    + b"\0" * 155  # prefix
    + b"\0" * 12
)


def _simple(name: str) -> bytes | None:
    """``name`` as ustar can hold it alone, or None when it needs a PAX header."""
    if len(name) > 100 or not name.isascii():
        return None
    return name.encode("ascii")


def member_header(name: str, size: int, mtime: int, mode: int = 0o644) -> bytes:
    """The header ``tarfile`` (PAX format) writes for a regular file of this name and size."""
    raw = _simple(name)
    if raw is None or size >= 8**11 or not 0 <= mtime < 8**11:
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = size, mtime, mode
        return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
    header = bytearray(_USTAR % (raw.ljust(100, b"\0"), mode, 0, 0, size, mtime))
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


class TarGzStream:
    """``add`` members, then ``close`` (or use it as a context manager, which closes it, or
    on an exception only stops its thread); the gzip stream goes to ``out`` (binary,
    write-only)."""

    def __init__(self, out: IO[bytes], *, mtime: int) -> None:
        self.mtime = mtime
        # filename "": the gzip header names no file of this machine
        self._gzip = gzip.GzipFile(
            filename="", fileobj=out, mode="wb", compresslevel=COMPRESS_LEVEL, mtime=mtime
        )
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._total = 0  # uncompressed bytes added, counted on the adding thread
        self._blocks: queue.Queue[bytes | None] = queue.Queue(maxsize=2)
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._compress, name="tar-gzip", daemon=True)
        self._thread.start()

    def _compress(self) -> None:
        while (block := self._blocks.get()) is not None:
            if self._failure is None:
                try:
                    self._gzip.write(block)
                except BaseException as exc:  # re-raised on the writer's thread
                    self._failure = exc

    def _put(self, data: bytes) -> None:
        self._pending.append(data)
        self._pending_bytes += len(data)
        self._total += len(data)
        if self._pending_bytes >= FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._pending:
            self._blocks.put(b"".join(self._pending))
            self._pending, self._pending_bytes = [], 0

    def add(self, name: str, data: bytes) -> None:
        self._put(member_header(name, len(data), self.mtime))
        self._put(data)
        if remainder := len(data) % BLOCK:
            self._put(b"\0" * (BLOCK - remainder))

    def add_file(self, name: str, handle: IO[bytes], size: int) -> None:
        """A member of ``size`` bytes read from ``handle`` (from its start) a block at a time."""
        self._put(member_header(name, size, self.mtime))
        handle.seek(0)
        left = size
        while left > 0:
            chunk = handle.read(min(left, FLUSH_BYTES))
            if not chunk:
                raise ValueError(f"{name}: {left} of its {size} bytes missing")
            self._put(chunk)
            left -= len(chunk)
        if remainder := size % BLOCK:
            self._put(b"\0" * (BLOCK - remainder))

    def __enter__(self) -> TarGzStream:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()

    def abort(self) -> None:
        """Stop the compressing thread without finishing the archive (the writer failed)."""
        if self._thread.is_alive():
            self._blocks.put(None)
            self._thread.join()

    def close(self) -> None:
        """The end-of-archive blocks, the rest compressed, the gzip trailer written."""
        try:
            # tarfile pads the archive to its record size (20 blocks); so does this.
            self._put(_END)
            if tail := self._total % (20 * BLOCK):
                self._put(b"\0" * (20 * BLOCK - tail))
            self._flush()
        finally:
            self.abort()
        if self._failure is not None:
            raise self._failure
        self._gzip.close()
