"""yaml.v3-compatible typing: raw text for Go string fields, yaml.v3 typing inside overrides."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import pytest

from recipes_app.resolver.errors import CatalogError
from recipes_app.resolver.yamlload import Ctx, as_str, as_str_map, parse_raw, resolve_plain


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("yes", "yes"),
        ("on", "on"),
        ("Off", "Off"),
        ("true", True),
        ("FALSE", False),
        ("~", None),
        ("null", None),
        ("08", 8.0),
        ("010", 8),
        ("0o17", 15),
        ("0x1F", 31),
        ("0b101", 5),
        ("1_000", 1000),
        ("+1", 1),
        ("1e3", 1000.0),
        ("1.20", 1.2),
        ("1.0", 1.0),
        (".5", 0.5),
        ("1:20", "1:20"),
        ("=", "="),
        ("v1.2", "v1.2"),
        ("1.2.3", "1.2.3"),
        ("18446744073709551615", 18446744073709551615),
        ("-9223372036854775809", -9.223372036854775809e18),  # out of int64: a float
        ("1e400", "1e400"),
        ("2026-08-19", dt.datetime(2026, 8, 19, tzinfo=dt.UTC)),
        ("2026-8-9", dt.datetime(2026, 8, 9, tzinfo=dt.UTC)),
    ],
)
def test_it_types_plain_scalars_like_yaml_v3(text: str, value: Any) -> None:
    got = resolve_plain(text)
    assert got == value
    assert type(got) is type(value)


def test_it_types_special_floats() -> None:
    assert math.isnan(resolve_plain(".nan"))
    assert resolve_plain("-.Inf") == -math.inf


def test_it_keeps_raw_text_for_string_fields() -> None:
    root = parse_raw('a: 24.04\nb: 1.20\nc: "quoted"\nd: ~\ne: true\n', "t.yaml")
    pairs = {k.value: v for k, v in root.pairs}  # type: ignore[union-attr]
    ctx = Ctx("t.yaml")
    assert [as_str(pairs[k], ctx) for k in "abcde"] == ["24.04", "1.20", "quoted", "", "true"]


def test_it_types_override_maps() -> None:
    root = parse_raw(
        "overrides:\n  version: 1.20\n  flag: yes\n  n: 8\n  '1': quoted-key\n"
        "  nested: {1: int-key, x: null}\n  empty: ''\n",
        "t.yaml",
    )
    overrides = as_str_map(root.pairs[0][1], Ctx("t.yaml"))  # type: ignore[union-attr]
    assert overrides == {
        "version": 1.2,
        "flag": "yes",
        "n": 8,
        "1": "quoted-key",
        "nested": {1: "int-key", "x": None},
        "empty": "",
    }


@pytest.mark.parametrize(
    "literal",
    ["9" * 1_001, "-" + "9" * 1_000, "0x" + "f" * 999, "1" + "0" * 1_000 + ".5", "1e" + "9" * 999],
)
def test_it_refuses_a_number_literal_longer_than_1000_characters_by_name(literal: str) -> None:
    with pytest.raises(CatalogError, match=r"line 1, column 4: number literal of \d+ characters"):
        parse_raw(f"x: {literal}\n", "f.yaml")
    with pytest.raises(CatalogError, match="number literal"):
        parse_raw(f'x: !!int "{literal}"\n', "f.yaml")


def test_it_keeps_long_digit_text_that_is_quoted_and_numbers_up_to_the_limit() -> None:
    quoted = parse_raw('x: "' + "9" * 5_000 + '"\n', "f.yaml")
    assert as_str_map(quoted, Ctx("f.yaml")) == {"x": "9" * 5_000}
    # Past uint64 yaml.v3 keeps the text (ParseInt's ErrRange), and no int() is attempted.
    assert resolve_plain("9" * 1_000) == "9" * 1_000
    assert resolve_plain("0x" + "f" * 17) == "0x" + "f" * 17
    assert resolve_plain("18446744073709551615") == 18446744073709551615
