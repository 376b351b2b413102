"""Error type of the corroboration port, with AICR's error codes and CLI exit codes.

AICR's ``pkg/errors`` gives every failure a code, and ``tools/corroborate`` turns that code
into the process exit status (``errors.ExitCodeFromError``). Keeping the same codes lets
``generate.run`` return the exit statuses the Go CLI returns (2 for a missing ``-in``, ...).
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """The subset of AICR error codes the generator raises."""

    INVALID_REQUEST = "INVALID_REQUEST"
    NOT_FOUND = "NOT_FOUND"
    TIMEOUT = "TIMEOUT"
    INTERNAL = "INTERNAL"


# pkg/errors/exitcode.go: InvalidRequest -> 2, NotFound -> 3, Timeout -> 5, Internal -> 8.
_EXIT_CODES = {
    ErrorCode.INVALID_REQUEST: 2,
    ErrorCode.NOT_FOUND: 3,
    ErrorCode.TIMEOUT: 5,
    ErrorCode.INTERNAL: 8,
}

EXIT_SUCCESS = 0
EXIT_ERROR = 1
EXIT_INVALID_INPUT = 2


class CorroborateError(Exception):
    """A generation failure that aborts the whole dashboard (never a skipped run)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code

    @property
    def exit_code(self) -> int:
        return _EXIT_CODES.get(self.code, EXIT_ERROR)


class AllowlistError(CorroborateError):
    """The allowlist file is missing, unreadable, malformed or a sybil surface."""
