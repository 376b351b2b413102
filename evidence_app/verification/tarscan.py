"""Check a tar stream's raw headers before ``tarfile`` reads it.

``tarfile`` reads a GNU long-name/long-link (``L``/``K``) or PAX (``x``/``g``) header's data
whole when it meets the header, sized by the header itself: a 1 MB package declaring a 1.2 GB
long name makes it allocate 1.2 GB before any caller sees a member. ``check_tar_headers``
walks the 512-byte headers itself, reading member data in small chunks (never a declared
size at once), and refuses, naming the member (the header's own name and its offset for a
metadata header, whose data *is* the next member's name): a metadata header over
``max_meta_bytes``, a member over ``max_member_bytes``, declared sizes over
``max_total_bytes`` in all, more than ``max_members`` members, or a header that is not tar.
After it passes, every read ``tarfile`` makes is bounded by these limits.
"""

from __future__ import annotations

from typing import Protocol


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


BLOCK = 512
#: A long name or a PAX record set is at most a few KiB in any real archive.
MAX_META_BYTES = 64 * 1024
_META_KINDS = {
    b"L": "a GNU long-name header",
    b"K": "a GNU long-link header",
    b"x": "a PAX header",
    b"g": "a PAX global header",
}
_CHUNK = 64 * 1024


class TarHeaderError(ValueError):
    """The archive is refused before ``tarfile`` reads it; ``member`` names where."""

    def __init__(self, message: str, *, member: str = "") -> None:
        self.member = member
        self.message = message
        super().__init__(f"{member}: {message}" if member else message)


def _size(field: bytes, *, member: str) -> int:
    if field[:1] == b"\x80":  # GNU base-256 (positive)
        return int.from_bytes(field[1:], "big")
    if field[:1] == b"\xff":
        raise TarHeaderError("negative size in its tar header", member=member)
    text = field.replace(b"\x00", b" ").strip()
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        raise TarHeaderError("unreadable size in its tar header", member=member) from None


def _skip(stream: Readable, length: int) -> None:
    while length > 0:
        chunk = stream.read(min(length, _CHUNK))
        if not chunk:
            return  # truncated: tarfile reports that itself
        length -= len(chunk)


def check_tar_headers(
    stream: Readable,
    *,
    max_member_bytes: int,
    max_total_bytes: int,
    max_members: int,
    max_meta_bytes: int = MAX_META_BYTES,
) -> None:
    """Walk the headers of the (uncompressed) tar ``stream``; ``TarHeaderError`` on a refusal."""
    offset = total = members = 0
    while True:
        header = stream.read(BLOCK)
        if len(header) < BLOCK or header == b"\x00" * BLOCK:
            return  # end of archive (or truncated: left to tarfile)
        name = header[:100].split(b"\x00", 1)[0].decode("utf-8", "replace")[:200]
        member = name or f"header at byte {offset}"
        size = _size(header[124:136], member=member)
        kind = header[156:157]
        meta = _META_KINDS.get(kind)
        if meta is not None:
            if size > max_meta_bytes:
                raise TarHeaderError(
                    f"{meta} at byte {offset} declares {size} bytes (limit {max_meta_bytes})",
                    member=member,
                )
        else:
            members += 1
            if members > max_members:
                raise TarHeaderError(f"more than {max_members} archive members")
            if size > max_member_bytes:
                raise TarHeaderError(
                    f"declares {size} bytes (limit {max_member_bytes})", member=member
                )
        total += size
        if total > max_total_bytes:
            raise TarHeaderError(f"archive members total more than {max_total_bytes} bytes")
        padded = -(-size // BLOCK) * BLOCK
        _skip(stream, padded)
        offset += BLOCK + padded
