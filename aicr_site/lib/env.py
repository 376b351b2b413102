"""Reading settings from the environment, failing loudly where a value is required."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no)")


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_required(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise ImproperlyConfigured(f"{name} must be set when DEBUG is off (production mode)")
    return value


class SecretFileError(ValueError):
    """A ``*_FILE`` secret setting whose file cannot be read (the message never holds it)."""


def read_secret_file(path: str, *, setting: str, max_chars: int) -> str:
    """The stripped text of the secret file ``path`` names, re-read on every call (such
    secrets rotate: projected tokens, mounted credentials). ``SecretFileError`` naming
    ``setting`` when it cannot be read, is empty, or is longer than ``max_chars``."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(max_chars + 1).strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise SecretFileError(f"{setting} cannot be read ({type(exc).__name__})") from None
    if not text or len(text) > max_chars:
        raise SecretFileError(f"{setting} holds no usable value")
    return text


# The largest secret read from a file at start-up (a PEM key, a list of Fernet keys, a password).
MAX_SECRET_FILE_CHARS = 64 * 1024


def env_secret(name: str) -> str:
    """A secret setting, from ``NAME`` or from the file ``NAME_FILE`` names (compose and
    Kubernetes mount secrets as files; an environment value is visible to anything that can
    read the process's environment). Both set is refused, as is a ``_FILE`` that cannot be
    read or holds nothing: the operator meant a value to be there. "" when neither is set."""
    value = os.environ.get(name, "").strip()
    path = os.environ.get(f"{name}_FILE", "").strip()
    if value and path:
        raise ImproperlyConfigured(f"set {name} or {name}_FILE, not both")
    if not path:
        return value
    try:
        return read_secret_file(path, setting=f"{name}_FILE", max_chars=MAX_SECRET_FILE_CHARS)
    except SecretFileError as exc:
        raise ImproperlyConfigured(str(exc)) from None
