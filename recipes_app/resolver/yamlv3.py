"""Byte-exact port of AICR's deterministic YAML serializer (Go ``gopkg.in/yaml.v3`` v3.0.1).

AICR writes every resolved recipe with ``serializer.MarshalYAMLDeterministic``: ``yaml.Marshal``
(indent 4), ``yaml.Unmarshal`` into a ``yaml.Node``, sort every mapping's keys bytewise, then
re-encode with indent 2. The evidence digest re-reads those bytes, sorts again and marshals with
the default indent 4 ("V1 canonicalizer"). Both digests are sha256 over the exact bytes, so this
module reproduces yaml.v3's emitter decisions (``emitterc.go``), its string style choice
(``encode.go`` ``stringv``) and its plain-scalar typing (``resolve.go``) instead of relying on a
Python YAML library, whose quoting, indentation and line-break rules all differ.

Layout: block style everywhere, flow only for empty collections, no line folding (the emitter
runs with an unlimited width), UTF-8 written raw except the characters yaml.v3 escapes.

The intermediate re-parse is modelled, not run: it only changes a value when a literal block
starts with a space or a line break (yaml.v3 writes an indentation indicator and loses the first
line break, and with indent 4 the indicator can point past the content, which makes the re-parse
drop two columns or fail). See ``_reparse_literal``.

Public API: ``marshal_deterministic``, ``marshal_canonical``, ``parity_digest``, ``recipe_digest``,
``recipe_digest_v3`` (and ``without_version``, the document it hashes).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import re
from functools import lru_cache
from operator import itemgetter

__all__ = [
    "marshal_canonical",
    "marshal_deterministic",
    "parity_digest",
    "recipe_digest",
    "recipe_digest_v3",
    "without_version",
]

# Style codes (yaml_scalar_style_t, the ones the block emitter can pick).
_PLAIN = 0
_SINGLE = 1
_DOUBLE = 2
_LITERAL = 3

# Every character yaml.v3's is_break() accepts (CR, LF, NEL, LS, PS).
_BREAK_CHARS = "\r\n\x85\u2028\u2029"
# The break characters a literal block can hold: CR and NEL are non-printable, which rules out
# the literal style, so only these three ever reach literal or single-quoted output.
_LIT_BREAKS = "\n\u2028\u2029"

_CACHE_SIZE = 1 << 16


class _Literal(str):
    """A string whose re-parsed yaml.Node carries ``LiteralStyle``.

    After the internal re-parse a literal block stays a literal request even when the value
    lost its only line break (``"\\nabc"`` reads back as ``abc`` with literal style), so the
    next emit writes ``|-`` where a plain Python ``str`` would be plain.
    """

    __slots__ = ()


class _Pairs(list):
    """A mapping as ``(key, value)`` pairs, used only when the modelled re-parse changed a key.

    yaml.Node mappings are pair lists: two keys that became equal are both kept (decoding into
    a Node does not check duplicates), so a ``dict`` cannot represent the result.
    """

    __slots__ = ()


# ---------------------------------------------------------------------------------------------
# resolve.go: would a plain scalar read back as something other than a string?
# ---------------------------------------------------------------------------------------------

_RESOLVE_MAP = frozenset(
    {
        "true", "True", "TRUE", "false", "False", "FALSE",
        "", "~", "null", "Null", "NULL",
        ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF",
        "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF",
        "<<",
    }
)  # fmt: skip
_HINT_MAP = frozenset("yYnNtTfFoO~")
_OLD_BOOLS = frozenset(
    {
        "y", "Y", "yes", "Yes", "YES", "on", "On", "ON",
        "n", "N", "no", "No", "NO", "off", "Off", "OFF",
    }
)  # fmt: skip
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?\Z")
_BASE60_FLOAT = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?\Z")
_DOT_FLOAT = re.compile(r"\.([0-9_]*)(?:[eE][-+]?[0-9][0-9_]*)?\Z")
_BAD_UNDERSCORE = re.compile(r"(?<![0-9])_|_(?![0-9])")
_DIGITS_RE = {
    2: re.compile(r"[01]*\Z"),
    8: re.compile(r"[0-7]*\Z"),
    10: re.compile(r"[0-9]*\Z"),
    16: re.compile(r"[0-9a-fA-F]*\Z"),
}
_UINT64_MAX = (1 << 64) - 1
_INT64_CUTOFF = 1 << 63

# time.Parse layouts tried by parseTimestamp, as regexes (Go's getnum reads one or two digits
# greedily, a layout space matches one or more spaces, fractions accept '.' or ',').
_TS_T = re.compile(
    r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})[Tt]([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})"
    r"(?:[.,][0-9]+)?(?:Z|[+-]([0-9]{2}):([0-9]{2}))\Z"
)
_TS_SPACE = re.compile(
    r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2}) +([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})"
    r"(?:[.,][0-9]+)?\Z"
)
_TS_DATE = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})\Z")
_DAYS_IN_MONTH = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _go_parse_uint_ok(s: str, base: int) -> bool:
    """Go ``strconv.ParseUint(s, base, 64)`` succeeds (no syntax or range error).

    Base 0 detects the ``0b``/``0o``/``0x`` prefixes and the legacy leading-``0`` octal the
    way Go does (``"0"`` alone is valid, ``"0x"`` is not). Callers strip underscores first, as
    resolve() does, so an underscore here is a syntax error.
    """
    if not s:
        return False
    if base == 0:
        base = 10
        if s[0] == "0":
            prefix = s[1:2].lower()
            if len(s) >= 3 and prefix in ("b", "o", "x"):
                base = {"b": 2, "o": 8, "x": 16}[prefix]
                s = s[2:]
            else:
                base = 8
                s = s[1:]
    if not _DIGITS_RE[base].match(s):
        return False
    return not s or int(s, base) <= _UINT64_MAX


def _go_parse_int_ok(s: str, base: int) -> bool:
    """Go ``strconv.ParseInt(s, base, 64)`` succeeds: optional sign, then ParseUint, int64 range."""
    if not s:
        return False
    neg = s[0] == "-"
    body = s[1:] if s[0] in "+-" else s
    if not _go_parse_uint_ok(body, base):
        return False
    if not body:
        return True
    if base == 0 and body[0] == "0":
        prefix = body[1:2].lower()
        if len(body) >= 3 and prefix in ("b", "o", "x"):
            value = int(body[2:], {"b": 2, "o": 8, "x": 16}[prefix])
        else:
            value = int(body[1:], 8) if len(body) > 1 else 0
    else:
        value = int(body, base or 10)
    return value <= _INT64_CUTOFF if neg else value < _INT64_CUTOFF


def _float_in_range(text: str) -> bool:
    """Go ParseFloat reports ErrRange on overflow (Python gives inf); underflow to 0 is fine."""
    return math.isfinite(float(text))


def _go_parse_dot_float_ok(s: str) -> bool:
    """Go ``strconv.ParseFloat(s, 64)`` succeeds for a string starting with ``.``.

    readFloat accepts underscores between digits in base 10 (underscoreOK), needs a digit in
    the mantissa and a digit right after the exponent sign.
    """
    m = _DOT_FLOAT.match(s)
    if m is None or not any(c.isdigit() for c in m.group(1)):
        return False
    if "_" in s and _BAD_UNDERSCORE.search(s):
        return False
    return _float_in_range(s.replace("_", ""))


def _days_in(month: int, year: int) -> int:
    """Go daysIn: the proleptic Gregorian month length used to validate a parsed day."""
    if month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0):
        return 29
    return _DAYS_IN_MONTH[month]


def _valid_date_time(groups: tuple[str | None, ...]) -> bool:
    """Go time.Parse range checks: month, day of month, hour < 24, minute/second < 60, zone."""
    year, month, day = int(groups[0] or 0), int(groups[1] or 0), int(groups[2] or 0)
    if not 1 <= month <= 12 or not 1 <= day <= _days_in(month, year):
        return False
    if len(groups) > 3:
        hour, minute, second = (int(g or 0) for g in groups[3:6])
        if hour >= 24 or minute >= 60 or second >= 60:
            return False
    zone_hour, zone_minute = (groups[6], groups[7]) if len(groups) > 6 else (None, None)
    return zone_hour is None or (int(zone_hour) <= 24 and int(zone_minute or 0) <= 60)


def _is_timestamp(s: str) -> bool:
    """resolve.go parseTimestamp: ``YYYY-`` prefix, then one of the four time.Parse layouts."""
    if len(s) < 5 or s[4] != "-" or not s[:4].isascii() or not s[:4].isdigit():
        return False
    for pattern in (_TS_T, _TS_SPACE, _TS_DATE):
        m = pattern.match(s)
        if m is not None and _valid_date_time(m.groups()):
            return True
    return False


def _resolves_to_str(s: str) -> bool:
    """yaml.v3 ``resolve("", s)`` returns ``!!str``: a plain scalar ``s`` reads back as a string.

    The first byte picks the handler (resolveTable); a first byte outside the table (``<``,
    letters other than yYnNtTfFoO, non-ASCII) is a string even for ``<<``, which is why ``<<``
    is emitted plain by Marshal and re-typed as ``!!merge`` by the parser.
    """
    if not s:
        return False
    c = s[0]
    if c in "+-":
        hint = "S"
    elif "0" <= c <= "9":
        hint = "D"
    elif c in _HINT_MAP:
        hint = "M"
    elif c == ".":
        hint = "."
    else:
        return True
    if s in _RESOLVE_MAP:
        return False
    if hint == "M":
        return True
    if hint == ".":
        return not _go_parse_dot_float_ok(s)
    if _is_timestamp(s):
        return False
    plain = s.replace("_", "")
    if _go_parse_int_ok(plain, 0) or _go_parse_uint_ok(plain, 0):
        return False
    if _YAML_STYLE_FLOAT.match(plain) and _float_in_range(plain):
        return False
    if plain.startswith("0b"):
        if _go_parse_int_ok(plain[2:], 2) or _go_parse_uint_ok(plain[2:], 2):
            return False
    elif plain.startswith("-0b") and _go_parse_int_ok("-" + plain[3:], 2):
        return False
    if plain.startswith("0o"):
        if _go_parse_int_ok(plain[2:], 8) or _go_parse_uint_ok(plain[2:], 8):
            return False
    elif plain.startswith("-0o") and _go_parse_int_ok("-" + plain[3:], 8):
        return False
    return True


def _can_use_plain(s: str) -> bool:
    """encode.go stringv: plain only if it resolves to a string and is no YAML 1.1 bool/base-60."""
    if s in _OLD_BOOLS:
        return False
    if ":" in s and s[0] in "+-0123456789" and _BASE60_FLOAT.match(s):
        return False
    return _resolves_to_str(s)


# ---------------------------------------------------------------------------------------------
# emitterc.go yaml_emitter_analyze_scalar / select_scalar_style
# ---------------------------------------------------------------------------------------------

# !is_printable (tab excluded: it has its own flag; LF is printable): C0 except TAB/LF, DEL,
# C1, surrogates, U+FEFF, U+FFFE, U+FFFF and every 4-byte UTF-8 character.
_SPECIAL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufeff\ufffe\uffff\U00010000-\U0010ffff]"
)
_ANY_BREAK = re.compile("[\r\n\x85\u2028\u2029]")
_SPACE_BREAK = re.compile(" [\r\n\x85\u2028\u2029]")
_BREAK_SPACE = re.compile("[\r\n\x85\u2028\u2029] ")
_BLOCK_INDICATOR = re.compile(
    "^(?:---|\\.\\.\\.)"  # document markers
    "|^[#,\\[\\]{}&*!|>'\"%@`]"  # indicator as first character
    "|^[?-](?:[ \t]|\\Z)"  # '?' / '-' followed by a blank or the end
    "|:(?:[ \t]|\\Z)"  # ': ' anywhere, or a trailing ':'
    "|[ \t\r\n\x85\u2028\u2029\x00]#"  # ' #' (is_blankz before '#')
)
_SURROGATE = re.compile("[\ud800-\udfff]")


@lru_cache(maxsize=_CACHE_SIZE)
def _analyze(s: str) -> tuple[bool, bool, bool, bool]:
    """Port of yaml_emitter_analyze_scalar for block context.

    Returns ``(multiline, block_plain_allowed, single_quoted_allowed, block_allowed)``; the
    flow-context flag is never needed because scalars are never emitted inside flow nodes.
    """
    if not s:
        return False, True, True, False
    special = _SPECIAL.search(s) is not None
    tab = "\t" in s
    line_breaks = _ANY_BREAK.search(s) is not None
    space_break = line_breaks and _SPACE_BREAK.search(s) is not None
    break_space = line_breaks and _BREAK_SPACE.search(s) is not None
    trailing_space = s[-1] == " "
    plain = not (
        s[0] == " "
        or trailing_space
        or line_breaks
        or break_space
        or space_break
        or tab
        or special
        or _BLOCK_INDICATOR.search(s)
    )
    single = not (break_space or space_break or tab or special)
    block = not (trailing_space or space_break or special)
    return line_breaks, plain, single, block


def _key_is_simple(s: str) -> bool:
    """yaml_emitter_check_simple_key: single-line and at most 128 bytes (tag bytes included)."""
    if _analyze(s)[0]:
        return False
    if s == "<<" and type(s) is not _Literal:
        return True  # "!!" + "merge" + "<<" = 9 bytes
    return len(s) <= 128 and (len(s) * 4 <= 128 or len(s.encode("utf-8")) <= 128)


def _style(s: str, is_lit: bool, simple_key: bool) -> int:
    """The final style: stringv's request, then yaml_emitter_select_scalar_style's downgrades."""
    multiline, plain_ok, single_ok, block_ok = _analyze(s)
    if is_lit or "\n" in s:
        style = _LITERAL
    elif _can_use_plain(s):
        style = _PLAIN
    else:
        style = _DOUBLE
    if simple_key and multiline:
        style = _DOUBLE
    if style == _PLAIN and (not plain_ok or (not s and simple_key)):
        style = _SINGLE
    if style == _SINGLE and not single_ok:
        style = _DOUBLE
    if style == _LITERAL and (not block_ok or simple_key):
        style = _DOUBLE
    return style


# ---------------------------------------------------------------------------------------------
# Scalar writers (yaml_emitter_write_*_scalar with an unlimited best_width: never folds)
# ---------------------------------------------------------------------------------------------

_NAMED_ESCAPES = {
    0x00: "\\0",
    0x07: "\\a",
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0B: "\\v",
    0x0C: "\\f",
    0x0D: "\\r",
    0x1B: "\\e",
    0x22: '\\"',
    0x5C: "\\\\",
    0x85: "\\N",
    0xA0: "\\_",
    0x2028: "\\L",
    0x2029: "\\P",
}
_DQ_ESCAPE = re.compile(
    '[\x00-\x1f"\\\\\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff\U00010000-\U0010ffff]'
)
# Zero-width position at the start of every non-empty line (after a break or at the start).
_LINE_START = re.compile("(?<![^\n\u2028\u2029])(?=[^\n\u2028\u2029])")
# Zero-width position after a break that is followed by a non-break character.
_AFTER_BREAK = re.compile("(?<=[\u2028\u2029])(?=[^\n\u2028\u2029])")
_SPLIT_LINES = re.compile("([\n\u2028\u2029])")


def _escape_char(ch: str) -> str:
    """One double-quoted escape: a named one, else ``\\xXX``/``\\uXXXX``/``\\UXXXXXXXX`` (upper)."""
    v = ord(ch)
    named = _NAMED_ESCAPES.get(v)
    if named is not None:
        return named
    if v <= 0xFF:
        return f"\\x{v:02X}"
    if v <= 0xFFFF:
        return f"\\u{v:04X}"
    return f"\\U{v:08X}"


def _double_quoted(s: str) -> str:
    """yaml_emitter_write_double_quoted_scalar.

    A value starting with U+FEFF escapes every character: Go's is_bom() looks at the start of
    the buffer, not at the current position.
    """
    if s.startswith("\ufeff"):
        return '"' + "".join(map(_escape_char, s)) + '"'
    return '"' + _DQ_ESCAPE.sub(lambda m: _escape_char(m.group()), s) + '"'


def _single_quoted(s: str, indent: int) -> str:
    """yaml_emitter_write_single_quoted_scalar: ``'`` doubled; after LS/PS the line is re-indented.

    Only LS and PS can occur (LF forces literal/double, CR and NEL are non-printable); they are
    written raw and, like a line break, followed by indentation before the next character.
    """
    body = s.replace("'", "''")
    if "\u2028" in body or "\u2029" in body:
        body = _AFTER_BREAK.sub(" " * indent, body)
    return "'" + body + "'"


def _literal(s: str, indent: int, best: int) -> str:
    """yaml_emitter_write_literal_scalar with its block-scalar header.

    Header: ``|``, the indentation indicator (``best``) when the text starts with a space or a
    break, then chomping (``-`` no final break, ``+`` two or more or a lone break). Content lines
    are indented to ``indent``; empty lines stay bare. A leading break doubles as the header's
    own line end (yaml.v3 writes none), and the text keeps its final break(s) as written.
    """
    header = "|"
    first = s[0]
    if first == " " or first in _BREAK_CHARS:
        header += str(best)
    last = s[-1]
    if last not in _BREAK_CHARS:
        header += "-"
    elif len(s) == 1 or s[-2] in _BREAK_CHARS:
        header += "+"
    body = _LINE_START.sub(" " * indent, s)
    if first in _BREAK_CHARS:
        return header + body
    return header + "\n" + body


@lru_cache(maxsize=_CACHE_SIZE)
def _render_str(s: str, is_lit: bool, simple_key: bool, indent: int, best: int) -> str:
    """The emitted text of a string scalar (without the separating space before it).

    ``indent`` is the emitter's scalar indentation (used by literal blocks and by LS/PS inside
    single quotes); ``best`` is the indentation indicator a literal header would carry.
    """
    if _SURROGATE.search(s):
        raise ValueError(f"yaml.v3 cannot marshal {s!r}: not valid UTF-8 (lone surrogate)")
    if s == "<<" and not is_lit:
        # Marshal writes it plain; the parser tags a plain "<<" !!merge, which the re-encode
        # keeps explicit because resolve("<<") says !!str.
        return "!!merge <<"
    style = _style(s, is_lit, simple_key)
    if style == _PLAIN:
        return s
    if style == _DOUBLE:
        return _double_quoted(s)
    if style == _SINGLE:
        return _single_quoted(s, indent)
    return _literal(s, indent, best)


# ---------------------------------------------------------------------------------------------
# Non-string scalars (encode.go intv/floatv/boolv/timev/nilv): always plain
# ---------------------------------------------------------------------------------------------


def _go_float(f: float) -> str:
    """``strconv.FormatFloat(f, 'g', -1, 64)`` plus yaml.v3's ``.inf``/``-.inf``/``.nan``.

    Shortest round-trip digits (Python's repr picks the same digits), ``%e`` form when the
    decimal exponent is < -4 or >= 6 (exponent with a sign and at least two digits).
    """
    if math.isnan(f):
        return ".nan"
    if math.isinf(f):
        return ".inf" if f > 0 else "-.inf"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    r = repr(f)
    sign = ""
    if r[0] == "-":
        sign, r = "-", r[1:]
    mantissa, _, exp = r.partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = int_part + frac_part
    dp = len(int_part) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    dp -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    x = dp - 1
    if x < -4 or x >= 6:
        tail = "." + digits[1:] if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{tail}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if dp <= 0:
        return f"{sign}0.{'0' * -dp}{digits}"
    if dp >= len(digits):
        return sign + digits + "0" * (dp - len(digits))
    return f"{sign}{digits[:dp]}.{digits[dp:]}"


def _rfc3339nano(v: _dt.date) -> str:
    """Go ``time.Format(time.RFC3339Nano)``; naive datetimes and dates count as UTC (as in Go)."""
    if not isinstance(v, _dt.datetime):
        return f"{v.year:04d}-{v.month:02d}-{v.day:02d}T00:00:00Z"
    text = f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}"
    if v.microsecond:
        text += "." + f"{v.microsecond:06d}".rstrip("0")
    offset = v.utcoffset()
    seconds = 0 if offset is None else offset.days * 86400 + offset.seconds
    if seconds == 0:
        return text + "Z"
    minutes = abs(seconds) // 60
    sign = "-" if seconds < 0 and minutes else "+"
    return f"{text}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def _leaf(v: object, indent: int, best: int) -> str:
    """Text of a scalar or empty collection in value position (no leading space)."""
    if isinstance(v, str):
        return _render_str(v, type(v) is _Literal, False, indent, best)
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        if not -_INT64_CUTOFF <= v <= _UINT64_MAX:
            raise ValueError(f"integer {v} does not fit a Go int64/uint64")
        return str(v)
    if isinstance(v, float):
        return _go_float(v)
    if isinstance(v, dict) or type(v) is _Pairs:  # only reached when empty
        return "{}"
    if isinstance(v, (list, tuple)):  # only reached when empty
        return "[]"
    if isinstance(v, _dt.date):
        return _rfc3339nano(v)
    raise ValueError(f"cannot marshal a value of type {type(v).__name__} to YAML")


# ---------------------------------------------------------------------------------------------
# Block emitter (emitterc.go state machine, unrolled for block collections)
# ---------------------------------------------------------------------------------------------


def _sorted_items(m: dict | _Pairs) -> list[tuple[str, object]]:
    """Mapping pairs in ``sort.SliceStable`` order on ``key.Value``.

    Python ``str`` order is code-point order, which equals the bytewise UTF-8 order Go uses.
    """
    pairs: list[tuple[object, object]] = list(m) if isinstance(m, _Pairs) else list(m.items())
    keyed: list[tuple[str, object]] = []
    for key, value in pairs:
        if not isinstance(key, str):
            raise ValueError(
                f"mapping key {key!r} ({type(key).__name__}) is not a string; "
                "only string keys are supported"
            )
        keyed.append((key, value))
    keyed.sort(key=itemgetter(0))
    return keyed


def _newline(out: list[str], pad: str) -> None:
    """yaml_emitter_write_indent: break unless a literal block just ended its line, then pad."""
    if out and out[-1][-1] not in _LIT_BREAKS:
        out.append("\n" + pad)
    elif pad:
        out.append(pad)


class _Emitter:
    """Writes one document in block style with the given best indentation (2 or 4).

    Columns follow yaml_emitter_increase_indent: a collection under a mapping key sits at the
    next multiple of ``best`` above the key column, anything inside a sequence item at dash + 2.
    """

    __slots__ = ("best", "out")

    def __init__(self, best: int) -> None:
        self.best = best
        self.out: list[str] = []

    def document(self, doc: object) -> str:
        """The whole stream: no ``---``/``...``, exactly what the last node leaves plus a break."""
        if (isinstance(doc, dict) or type(doc) is _Pairs) and doc:
            self.mapping(doc, 0, "")
        elif isinstance(doc, (list, tuple)) and doc:
            self.sequence(doc, 0, "")
        else:
            # A root scalar is indented like a flow child (indent -1 -> best).
            self.out.append(_leaf(doc, self.best, self.best))
        text = "".join(self.out)
        if text[-1] not in _LIT_BREAKS:
            text += "\n"
        return text

    def mapping(self, m: dict | _Pairs, col: int, lead: str | None) -> None:
        """A non-empty block mapping with keys at ``col``.

        ``lead`` is the text that puts the first key on the current line (after ``- `` or a
        complex key's ``:``); ``None`` starts it on a new line.
        """
        out = self.out
        best = self.best
        pad = " " * col
        child = best * ((col + best) // best)
        first = True
        for key, value in _sorted_items(m):
            if first and lead is not None:
                if lead:
                    out.append(lead)
            else:
                _newline(out, pad)
            first = False
            is_lit = type(key) is _Literal
            if _key_is_simple(key):
                out.append(_render_str(key, is_lit, True, child, best) + ":")
                self.value(value, col, child, inline=False)
            else:
                out.append("? " + _render_str(key, is_lit, False, child, best))
                _newline(out, pad)
                out.append(":")
                self.value(value, col, child, inline=True)

    def value(self, v: object, col: int, child: int, *, inline: bool) -> None:
        """A mapping value after ``key:`` (``inline``: after a complex key's ``:`` line)."""
        if isinstance(v, dict) or type(v) is _Pairs:
            if v:
                self.mapping(v, child, " " * (child - col - 1) if inline else None)
                return
        elif isinstance(v, (list, tuple)) and v:
            self.sequence(v, child, " " * (child - col - 1) if inline else None)
            return
        self.out.append(" " + _leaf(v, child, self.best))

    def sequence(self, seq: list | tuple, col: int, lead: str | None) -> None:
        """A non-empty block sequence with its dashes at ``col`` (items keep their order)."""
        out = self.out
        best = self.best
        pad = " " * col
        inner = col + 2
        first = True
        for item in seq:
            if first and lead is not None:
                if lead:
                    out.append(lead)
            else:
                _newline(out, pad)
            first = False
            if isinstance(item, dict) or type(item) is _Pairs:
                if item:
                    out.append("-")
                    self.mapping(item, inner, " ")
                    continue
            elif isinstance(item, (list, tuple)) and item:
                out.append("-")
                self.sequence(item, inner, " ")
                continue
            out.append("- " + _leaf(item, inner, best))


# ---------------------------------------------------------------------------------------------
# The internal re-parse (yaml.Unmarshal into a Node) between two emits
# ---------------------------------------------------------------------------------------------


def _literal_candidate(s: str, *, key: bool) -> bool:
    """Will ``s`` be a literal block whose re-parse can differ (leading space, tab or break)?"""
    if not s or s[0] not in " \t\n\u2028\u2029":
        return False
    is_lit = type(s) is _Literal
    if not is_lit and "\n" not in s:
        return False
    if key and _key_is_simple(s):
        return False
    return _analyze(s)[3]


def _reparse_literal(s: str, best: int, shifted: bool) -> str:
    """What yaml.v3's parser reads back from the literal block the emitter wrote for ``s``.

    * A leading break is lost: the emitter writes no break after a ``|N`` header, so that break
      ends the header line.
    * A first line starting with a tab (no indicator) is a scanner error.
    * ``shifted``: the header says ``best`` (4) but the content sits only 2 columns deeper
      (sequence items, keys at a column of 2 mod 4). Every non-empty line then needs two more
      spaces of its own, which the parser strips; otherwise the block ends early and the rest
      of the text is a syntax error ("failed to parse YAML for sort").
    """
    text = s[1:] if s[0] in _LIT_BREAKS else s
    if s[0] == "\t":
        raise ValueError(
            f"yaml.v3 cannot re-read the literal block it writes for {s!r}: "
            "tab where an indentation space is expected (failed to parse YAML for sort)"
        )
    if shifted:
        parts = _SPLIT_LINES.split(text)
        for i in range(0, len(parts), 2):
            line = parts[i]
            if line:
                if not line.startswith("  "):
                    raise ValueError(
                        f"yaml.v3 cannot re-read the literal block it writes for {s!r} "
                        f"with indent {best} (failed to parse YAML for sort)"
                    )
                parts[i] = line[2:]
        text = "".join(parts)
    if text == s:
        return s
    return _Literal(text)


def _reparse_scalar(v: object, best: int, shifted: bool, *, key: bool = False) -> object:
    """A scalar after the round trip (only literal candidates can change)."""
    if isinstance(v, str) and _literal_candidate(v, key=key):
        return _reparse_literal(v, best, shifted)
    return v


def _reparse_mapping(m: dict | _Pairs, col: int, best: int) -> object:
    """Re-parse a mapping with keys at ``col``; returns ``m`` itself when nothing changed."""
    child = best * ((col + best) // best)
    shifted = col % best != 0  # scalar indent = child, parser expects col + best
    pairs: list[tuple[object, object]] = list(m) if isinstance(m, _Pairs) else list(m.items())
    new_pairs: list[tuple[object, object]] = []
    key_changed = value_changed = False
    for key, value in pairs:
        new_key = _reparse_scalar(key, best, shifted, key=True)
        new_value = _reparse_node(value, child, child, best, shifted)
        key_changed |= new_key is not key
        value_changed |= new_value is not value
        new_pairs.append((new_key, new_value))
    if key_changed or type(m) is _Pairs:
        return _Pairs(new_pairs) if (key_changed or value_changed) else m
    return dict(new_pairs) if value_changed else m


def _reparse_sequence(seq: list | tuple, col: int, best: int) -> object:
    """Re-parse a sequence with dashes at ``col``; returns ``seq`` itself when nothing changed."""
    inner = col + 2
    shifted = best != 2  # item scalars sit at dash + 2, the parser expects dash + best
    items = [_reparse_node(item, inner, inner, best, shifted) for item in seq]
    if all(a is b for a, b in zip(items, seq, strict=True)):
        return seq
    return items


def _reparse_node(v: object, map_col: int, seq_col: int, best: int, shifted: bool) -> object:
    """Dispatch one node: nested mappings/sequences get their own columns, scalars may change."""
    if isinstance(v, dict) or type(v) is _Pairs:
        return _reparse_mapping(v, map_col, best) if v else v
    if isinstance(v, (list, tuple)):
        return _reparse_sequence(v, seq_col, best) if v else v
    return _reparse_scalar(v, best, shifted)


def _reparse(doc: object, best: int) -> object:
    """Model ``yaml.Unmarshal(yaml.Marshal(doc))`` for an emit with indentation ``best``."""
    return _reparse_node(doc, 0, 0, best, False)


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def marshal_deterministic(doc: object) -> str:
    """``serializer.MarshalYAMLDeterministic``: indent 2, keys bytewise-sorted at every level.

    Marshal (indent 4) -> Unmarshal to Node -> sort -> Encode (indent 2); styles chosen by the
    first emit are kept by the Node, so only the modelled re-parse sits between the two.
    """
    return _Emitter(2).document(_reparse(doc, 4))


def marshal_canonical(doc: object) -> str:
    """The evidence "V1" canonical form: ``yaml.Marshal(sortKeys(parse(deterministic)))``, indent 4.

    A second re-parse (of the indent-2 bytes) sits in front of the indent-4 emit.
    """
    return _Emitter(4).document(_reparse(_reparse(doc, 4), 2))


def parity_digest(doc: object) -> str:
    """Catalog parity digest: lowercase hex sha256 of ``marshal_deterministic(doc)``."""
    return hashlib.sha256(marshal_deterministic(doc).encode("utf-8")).hexdigest()


def recipe_digest(doc: object) -> str:
    """Evidence recipe digest (``aicr evidence digest``): sha256 of ``marshal_canonical(doc)``."""
    return hashlib.sha256(marshal_canonical(doc).encode("utf-8")).hexdigest()


def without_version(doc: object) -> object:
    """The document the V3 digest hashes (AICR ``canonicalize.go`` after PR #2789): the same
    recipe without the top-level ``metadata.version``, and without ``metadata`` when that leaves
    it empty. Nothing else is removed (``apiVersion`` stays). ``doc`` itself is not changed."""
    if not isinstance(doc, dict):
        return doc
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict) or "version" not in metadata:
        return doc
    trimmed = {key: value for key, value in metadata.items() if key != "version"}
    out = {key: value for key, value in doc.items() if key != "metadata"}
    if trimmed:
        out["metadata"] = trimmed
    return out


def recipe_digest_v3(doc: object) -> str:
    """The V3 recipe digest (``recipe-evidence/v3``): ``recipe_digest`` of ``without_version``,
    so the same recipe content resolved by an ``aicr`` of another version has the same digest."""
    return recipe_digest(without_version(doc))
