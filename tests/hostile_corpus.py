"""Hostile documents every untrusted-input entry point is fed (``tests/aicr_site/
test_untrusted_inputs.py``): each must be refused by name (a 4xx, or exit 2 for a command),
never a 500 or a traceback. Generated here rather than stored: a 5,000-deep document is one
line of Python and a diff of it would be unreadable."""

from __future__ import annotations

import gzip
import zlib

DEPTH = 5_000
DIGITS = 5_000  # past Python's 4,300-digit int() limit
HUGE = 3 * 1024 * 1024  # past every body and document cap

_LAUGHS = b'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + b"".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},"
    f"*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n".encode()
    for i in range(8)
)

#: YAML text (snapshots, kubeconfigs, aicrd YAML bodies).
YAML: dict[str, bytes] = {
    "big-integer": b"x: " + b"9" * DIGITS,
    "big-hex-integer": b"x: 0x" + b"f" * DIGITS,
    "big-tagged-integer": b'x: !!int "' + b"9" * DIGITS + b'"',
    "deep-flow-nesting": b"x: " + b"[" * DEPTH + b"]" * DEPTH,
    "deep-block-nesting": b"".join(b"  " * i + b"k:\n" for i in range(200)) + b"  " * 200 + b"v",
    "alias-bomb": _LAUGHS,
    "binary": bytes(range(256)) * 4,
    "not-utf8": b"x: \xff\xfe\xfd",
    "nul": b"x: a\x00b",
    "lone-surrogate": b'x: "\\ud800"',
    "huge-string": b"x: " + b"a" * HUGE,
    "impossible-date": b"x: 2026-13-45",
}

#: JSON text (API bodies, audit package files, evidence).
JSON: dict[str, bytes] = {
    "big-integer": b'{"x": ' + b"9" * DIGITS + b"}",
    "big-float": b'{"x": 1' + b"0" * DIGITS + b".5}",
    "deep-array-nesting": b"[" * DEPTH + b"]" * DEPTH,
    "deep-object-nesting": b'{"a":' * DEPTH + b"1" + b"}" * DEPTH,
    "unclosed-nesting": b"[" * 100_000,
    "nan": b'{"x": NaN}',
    "nul": b'{"x": "a\\u0000b"}',
    "lone-surrogate": b'{"x": "\\ud800"}',
    "not-utf8": b'{"x": "\xff"}',
    "binary": bytes(range(256)) * 4,
    "huge-string": b'{"x": "' + b"a" * HUGE + b'"}',
}


#: Compressed answers a peer sends unasked (``Content-Encoding`` → body): each decodes past
#: every answer cap, is not what its encoding says, or is in an encoding nobody asked for.
_ZEROS = b"0" * (10 * 1024 * 1024)  # 10 MiB, compressing to about 10 KiB
COMPRESSED: dict[str, tuple[str, bytes]] = {
    "gzip-bomb": ("gzip", gzip.compress(_ZEROS, 9)),
    "gzip-bomb-in-members": ("gzip", gzip.compress(_ZEROS[: 1 << 20], 9) * 10),
    "deflate-bomb": ("deflate", zlib.compress(_ZEROS, 9)),
    "truncated-gzip": ("gzip", gzip.compress(b'{"kind": "Status"}')[:-12]),
    "not-gzip": ("gzip", b'{"kind": "Status"}'),
    "unasked-brotli": ("br", b"\x0b\x02\x80{}\x03"),
    "unknown-encoding": ("x-hostile", b"{}"),
}


def yaml_texts() -> dict[str, str]:
    """The YAML corpus members that are text (for form fields and JSON strings); lone
    surrogates and NULs are kept, undecodable bytes are not text at all."""
    out = {}
    for name, data in YAML.items():
        try:
            out[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    out["raw-lone-surrogate"] = "x: a\ud800b"
    return out
