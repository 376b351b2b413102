"""Validator logs → CTRF stdout/extra/message as AICR processes them (§6.3, §6.6)."""

from __future__ import annotations

import json

from validators_app.orchestrator import process_logs
from validators_app.orchestrator.ctrf import build_phase_report, to_bytes
from validators_app.orchestrator.logs import cap_message, go_string
from validators_app.orchestrator.model import CheckOutcome


def test_it_keeps_the_last_valid_extra_and_removes_every_sentinel_line() -> None:
    log = b"\n".join(
        [
            b'time=2026-08-19T10:15:02.101Z level=INFO msg="starting check" name=check-nvidia-smi',
            b'##AICR-EXTRA## {"nodesValidated": "2", "nodesTotal": "2"}',
            b'##AICR-EXTRA## {"skipReason": 3}',  # not string->string: dropped
            b"##AICR-EXTRA## not json",
            b"##AICR-EXTRA## {}",  # empty: never wins
            b"RESULT: nodesValidated: 2/2",
            b'##AICR-EXTRA##{"x": "no space"}',  # not the sentinel (prefix includes one space)
            b"",
        ]
    )
    stdout, extra = process_logs(log + b"\n\n")
    assert extra == {"nodesValidated": "2", "nodesTotal": "2"}
    assert stdout == (
        'time=2026-08-19T10:15:02.101Z level=INFO msg="starting check" name=check-nvidia-smi',
        "RESULT: nodesValidated: 2/2",
        '##AICR-EXTRA##{"x": "no space"}',
    )


def test_it_keeps_the_last_1000_lines_and_empty_lines() -> None:
    log = b"\n".join(str(i).encode() for i in range(1500)) + b"\n\nlast\n"
    stdout, _ = process_logs(log)
    assert len(stdout) == 1000
    assert stdout[-1] == "last"
    assert stdout[-2] == ""
    assert stdout[0] == "502"


def test_it_cuts_lines_at_512_bytes() -> None:
    stdout, _ = process_logs(b"a" * 600)
    assert stdout == ("a" * 512 + "... [truncated 88 chars]",)
    # A cut through a multibyte character: the dangling bytes become U+FFFD one per byte, like Go.
    stdout, _ = process_logs(b"a" * 511 + "€".encode() + b"z")
    assert stdout == ("a" * 511 + "\ufffd" + "... [truncated 3 chars]",)


def test_invalid_utf8_becomes_one_replacement_per_byte() -> None:
    assert go_string(b"ok\xff\xfe") == "ok\ufffd\ufffd"
    assert go_string(b"\xe2\x82x") == "\ufffd\ufffdx"  # Python's "replace" would give one
    assert go_string("→".encode()) == "→"
    stdout, _ = process_logs(b"bad \xc3\x28 byte\n")
    assert stdout == ("bad \ufffd( byte",)


def test_empty_log_gives_no_stdout_and_hostile_text_stays_data() -> None:
    assert process_logs(b"") == ((), {})
    assert process_logs(b"\n\n\n") == ((), {})
    stdout, extra = process_logs(b'<script>alert(1)</script>\n##AICR-EXTRA## {"a": "<img>"}\n')
    outcome = CheckOutcome("deployment", "x", "failed", 1, "", 0, stdout, extra, "j")
    data = to_bytes(build_phase_report(version="dev", outcomes=[outcome], start_ms=0, stop_ms=0))
    assert b"<" not in data
    assert json.loads(data)["results"]["tests"][0]["extra"] == {"a": "<img>"}


def test_megabytes_of_log_are_bounded() -> None:
    log = (b"x" * 5000 + b"\n") * 2000  # 10 MB
    stdout, _ = process_logs(log)
    assert len(stdout) == 1000
    assert all(len(s.encode()) < 600 for s in stdout)


def test_termination_message_is_capped_at_4096_bytes() -> None:
    assert cap_message(b"m" * 4096) == "m" * 4096
    assert cap_message(b"m" * 5000) == "m" * 4096 + "... [truncated 904 bytes]"
