"""Bounded, symlink-refusing reads of contributor-supplied evidence files.

The input tree is written by many contributors, so a ``meta.json`` or CTRF path may be a
symlink into ``/proc``, a FIFO, or a multi-gigabyte file. Reads are capped (the file is
never loaded past ``max_bytes + 1``) and only regular files are accepted; a violation aborts
generation rather than silently skipping evidence.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import CorroborateError, ErrorCode

MAX_RUN_FILE_BYTES = 16 << 20  # 16 MiB per meta.json / ctrf/<phase>.json


def read_bounded_file(path: Path, max_bytes: int, *, follow_symlinks: bool = False) -> bytes:
    """Read at most ``max_bytes`` of a regular file (raises ``CorroborateError``)."""
    try:
        st = os.stat(path, follow_symlinks=follow_symlinks)
    except FileNotFoundError as exc:
        raise CorroborateError(ErrorCode.NOT_FOUND, f"open {path}: no such file") from exc
    except OSError as exc:
        raise CorroborateError(ErrorCode.INTERNAL, f"stat {path}: {exc}") from exc
    if stat.S_ISLNK(st.st_mode):
        raise CorroborateError(ErrorCode.INVALID_REQUEST, f"{path} is a symlink; refusing it")
    if not stat.S_ISREG(st.st_mode):
        raise CorroborateError(ErrorCode.INVALID_REQUEST, f"{path} is not a regular file")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) * (not follow_symlinks)
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise CorroborateError(ErrorCode.NOT_FOUND, f"open {path}: {exc}") from exc
    with os.fdopen(fd, "rb") as f:
        # Re-check on the open descriptor: the path may have been swapped since the stat.
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise CorroborateError(ErrorCode.INVALID_REQUEST, f"{path} is not a regular file")
        try:
            data = f.read(max_bytes + 1)
        except OSError as exc:
            raise CorroborateError(ErrorCode.INTERNAL, f"read {path}: {exc}") from exc
    if len(data) > max_bytes:
        raise CorroborateError(ErrorCode.INVALID_REQUEST, f"{path} exceeds size limit")
    return data
