"""Validator pod logs and termination messages as AICR processes them (§6.3, §6.6).

Works on bytes, like Go strings: the 512-byte line cut and the 4096-byte message cap are byte
cuts, and invalid UTF-8 (from the container or from a cut through a multibyte character)
becomes U+FFFD **per invalid byte**, which is what Go's ``encoding/json`` writes.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Mapping

__all__ = ["cap_message", "go_string", "process_logs"]

EXTRA_PREFIX = b"##AICR-EXTRA## "
MAX_LINES = 1000
MAX_LINE_BYTES = 512
MAX_MESSAGE_BYTES = 4096


def _go_replace(err: UnicodeError) -> tuple[str, int]:
    # Go's utf8.DecodeRune reports an invalid sequence one byte at a time.
    assert isinstance(err, UnicodeDecodeError)
    return "\ufffd", err.start + 1


codecs.register_error("aicr-go-replace", _go_replace)


def go_string(data: bytes) -> str:
    """Decode bytes the way Go's JSON encoder renders a string holding them."""
    return data.decode("utf-8", errors="aicr-go-replace")


# A \uXXXX escape can name half a surrogate pair; json.loads keeps it, Go's Unmarshal (and
# anything that must encode the text as UTF-8, e.g. the database) cannot: it becomes U+FFFD.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _extra(payload: bytes) -> dict[str, str] | None:
    try:
        value = json.loads(go_string(payload))
    except (ValueError, RecursionError):  # hostile pod output: not an extras object
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        return None
    return {
        _LONE_SURROGATE.sub("\ufffd", k): _LONE_SURROGATE.sub("\ufffd", v) for k, v in value.items()
    }


def process_logs(log: bytes) -> tuple[tuple[str, ...], Mapping[str, str]]:
    """processValidatorLogs: ``(stdout lines, extra)``.

    Every ``##AICR-EXTRA## `` line is removed; the last valid non-empty string→string object
    wins and malformed ones are dropped. The rest: trailing newlines trimmed, split on ``\\n``,
    last 1000 lines, each cut to 512 bytes + ``... [truncated N chars]``. Empty ⇒ no lines.
    """
    extra: Mapping[str, str] = {}
    kept: list[bytes] = []
    for line in log.split(b"\n"):
        if line.startswith(EXTRA_PREFIX):
            parsed = _extra(line[len(EXTRA_PREFIX) :])
            if parsed:
                extra = parsed
            continue
        kept.append(line)
    text = b"\n".join(kept).rstrip(b"\n")
    if not text:
        return (), extra
    lines = text.split(b"\n")[-MAX_LINES:]
    out = []
    for line in lines:
        if len(line) > MAX_LINE_BYTES:
            cut = len(line) - MAX_LINE_BYTES
            out.append(go_string(line[:MAX_LINE_BYTES]) + f"... [truncated {cut} chars]")
        else:
            out.append(go_string(line))
    return tuple(out), extra


def cap_message(message: bytes) -> str:
    """The termination message capped at 4096 bytes with ``... [truncated N bytes]``."""
    if len(message) > MAX_MESSAGE_BYTES:
        cut = len(message) - MAX_MESSAGE_BYTES
        return go_string(message[:MAX_MESSAGE_BYTES]) + f"... [truncated {cut} bytes]"
    return go_string(message)
