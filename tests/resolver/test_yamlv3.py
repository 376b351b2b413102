"""The yaml.v3 v3.0.1 port: golden bytes, AICR's digests, and the scalar/layout rules of AICR.md."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math

import pytest
import yaml

from recipes_app.resolver.yamlv3 import (
    marshal_canonical,
    marshal_deterministic,
    parity_digest,
    recipe_digest,
)
from tests.shared_data import GOLDEN

GENERATED = GOLDEN / "generated"
LEAF_FILES = sorted((GENERATED / "resolved-leaves").glob("*.yaml"))
CLI_FILES = sorted((GENERATED / "cli").glob("*.yaml"))
GOLDEN_FILES = LEAF_FILES + CLI_FILES
PARITY = yaml.safe_load(
    (GOLDEN / "upstream/pkg/recipe/testdata/catalog_parity_golden.yaml").read_text("utf-8")
)
CLI_RECIPE = GENERATED / "cli/recipe-h100-eks-ubuntu-training-kubeflow.yaml"
BUNDLE = GENERATED / "evidence-example-full/summary-bundle"


def _load(path):
    return yaml.safe_load(path.read_text("utf-8"))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- goldens -------------------------------------------------------------------------------


def test_it_finds_every_golden_file() -> None:
    assert len(LEAF_FILES) == 51  # 45 leaves + 6 profile variants
    assert len(CLI_FILES) == 1
    assert len(PARITY) == 45


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_it_reproduces_the_golden_bytes(path) -> None:
    assert marshal_deterministic(_load(path)) == path.read_text("utf-8")


@pytest.mark.parametrize("leaf", sorted(PARITY))
def test_it_matches_the_catalog_parity_digest(leaf: str) -> None:
    doc = _load(GENERATED / "resolved-leaves" / f"{leaf}.yaml")
    assert parity_digest(doc) == PARITY[leaf]
    assert _sha(marshal_deterministic(doc)) == PARITY[leaf]


def test_it_writes_the_evidence_canonical_form_and_digest() -> None:
    canonical = (BUNDLE / "recipe.yaml").read_text("utf-8")
    statement = json.loads((BUNDLE / "statement.intoto.json").read_text("utf-8"))
    subject_digest = statement["subject"][0]["digest"]["sha256"]
    doc = _load(CLI_RECIPE)
    assert marshal_canonical(doc) == canonical
    assert recipe_digest(doc) == subject_digest == statement["predicate"]["recipe"]["digest"]
    assert recipe_digest(doc) == _sha(canonical)
    assert recipe_digest(doc) != parity_digest(doc)  # not the sha256 of the indent-2 bytes


def test_it_keeps_the_canonical_form_idempotent() -> None:
    canonical = (BUNDLE / "recipe.yaml").read_text("utf-8")
    assert marshal_canonical(yaml.safe_load(canonical)) == canonical


def test_it_gives_both_digests_of_the_same_leaf() -> None:
    doc = _load(GENERATED / "resolved-leaves/h100-eks-ubuntu-training-kubeflow.yaml")
    parity, evidence = parity_digest(doc), recipe_digest(doc)
    assert (parity[:8], parity[-4:]) == ("d0dc8163", "126d")
    assert (evidence[:8], evidence[-4:]) == ("920b3058", "00ff")


# --- scalars: one rendering as mapping value, sequence item and simple key ------------------

SCALARS = [
    ("24.04", '"24.04"'),
    ("256", '"256"'),
    ("", '""'),
    ("true", '"true"'),
    ("True", '"True"'),
    ("yes", '"yes"'),
    ("on", '"on"'),
    ("Off", '"Off"'),
    ("y", '"y"'),
    ("null", '"null"'),
    ("~", '"~"'),
    ("0755", '"0755"'),
    ("0x1F", '"0x1F"'),
    ("0o17", '"0o17"'),
    ("0b101", '"0b101"'),
    ("+1", '"+1"'),
    ("1_000", '"1_000"'),
    ("99999999999999999999", '"99999999999999999999"'),
    ("1.", '"1."'),
    (".5", '".5"'),
    ("1e3", '"1e3"'),
    ("1.5e-3", '"1.5e-3"'),
    (".inf", '".inf"'),
    ("-.inf", '"-.inf"'),
    (".nan", '".nan"'),
    ("1:20", '"1:20"'),
    ("2026-08-19", '"2026-08-19"'),
    ("2026-8-9", '"2026-8-9"'),
    ("2026-08-19T10:00:00Z", '"2026-08-19T10:00:00Z"'),
    ("2026-08-19 10:00:00", '"2026-08-19 10:00:00"'),
    (">= 1.32.4", "'>= 1.32.4'"),
    ("!x", "'!x'"),
    ("- a", "'- a'"),
    ("-", "'-'"),
    ("a: b", "'a: b'"),
    ("a:", "'a:'"),
    ("a #b", "'a #b'"),
    ("#x", "'#x'"),
    ("'q", "'''q'"),
    ('"q', "'\"q'"),
    ("---x", "'---x'"),
    (" lead", "' lead'"),
    ("trail ", "'trail '"),
    ("v1.2", "v1.2"),
    ("1.2.3", "1.2.3"),
    ("28.0.1", "28.0.1"),
    ("https://host:8080/a#b", "https://host:8080/a#b"),
    ("a:b", "a:b"),
    ("a#b", "a#b"),
    ("it's", "it's"),
    ("=", "="),
    ("inf", "inf"),
    ("nan", "nan"),
    (".", "."),
    ("08x", "08x"),
    ("(conditions[?type == 'Established'])", "(conditions[?type == 'Established'])"),
    ("\t", '"\\t"'),
    ("a\tb", '"a\\tb"'),
    ("\U0001f600", '"\\U0001F600"'),
    ("é", "é"),
    ("日本 — x", "日本 — x"),
    ("\u00a0", "\u00a0"),
    ("a\x00b\x1b", '"a\\0b\\e"'),
    ("\x7f\u200b", '"\\x7F\u200b"'),
    ("\ufeffx", '"\\uFEFF\\x78"'),
    ('back\\slash "q" ', "'back\\slash \"q\" '"),
    ('back\\slash "q"\t', '"back\\\\slash \\"q\\"\\t"'),
    ("<<", "!!merge <<"),
]


@pytest.mark.parametrize(("value", "text"), SCALARS, ids=repr)
def test_it_styles_a_string_the_same_in_every_position(value: str, text: str) -> None:
    assert marshal_deterministic({"k": value}) == f"k: {text}\n"
    assert marshal_deterministic([value]) == f"- {text}\n"
    assert marshal_deterministic({value: "v"}) == f"{text}: v\n"
    assert marshal_deterministic({"a": [{"k": value}]}) == f"a:\n  - k: {text}\n"
    assert marshal_canonical({"k": value}) == f"k: {text}\n"


# --- multi-line strings ----------------------------------------------------------------------

MULTILINE = [
    # value, as mapping value, as sequence item, as key
    ("a\nb\n", "k: |\n  a\n  b\n", "- |\n  a\n  b\n", "? |\n  a\n  b\n: v\n"),
    ("a\nb", "k: |-\n  a\n  b\n", "- |-\n  a\n  b\n", "? |-\n  a\n  b\n: v\n"),
    ("a\n\n", "k: |+\n  a\n\n", "- |+\n  a\n\n", "? |+\n  a\n\n: v\n"),
    ("a\n\nb\n", "k: |\n  a\n\n  b\n", "- |\n  a\n\n  b\n", "? |\n  a\n\n  b\n: v\n"),
    ("a\n\tb\n", "k: |\n  a\n  \tb\n", "- |\n  a\n  \tb\n", "? |\n  a\n  \tb\n: v\n"),
    ("a  \nb\n", 'k: "a  \\nb\\n"\n', '- "a  \\nb\\n"\n', '? "a  \\nb\\n"\n: v\n'),
    ("a\nb ", 'k: "a\\nb "\n', '- "a\\nb "\n', '? "a\\nb "\n: v\n'),
    ("a\n\U0001f600\n", 'k: "a\\n\\U0001F600\\n"\n', '- "a\\n\\U0001F600\\n"\n', None),
]


@pytest.mark.parametrize(("value", "as_value", "as_item", "as_key"), MULTILINE, ids=repr)
def test_it_writes_multiline_strings(value: str, as_value: str, as_item: str, as_key) -> None:
    assert marshal_deterministic({"k": value}) == as_value
    assert marshal_deterministic([value]) == as_item
    if as_key is not None:
        assert marshal_deterministic({value: "v"}) == as_key


def test_it_continues_after_a_literal_block() -> None:
    assert marshal_deterministic({"k": "a\n\n", "z": 1}) == "k: |+\n  a\n\nz: 1\n"
    assert marshal_deterministic({"k": "a\nb", "z": 1}) == "k: |-\n  a\n  b\nz: 1\n"
    assert marshal_deterministic({"k": "a\n", "z": 1}) == "k: |\n  a\nz: 1\n"


def test_it_indents_literal_blocks_for_the_evidence_form() -> None:
    doc = {"refs": [{"chart": "x", "asserts": "a\n  b\n"}], "top": "c\n"}
    assert marshal_deterministic(doc) == (
        "refs:\n  - asserts: |\n      a\n        b\n    chart: x\ntop: |\n  c\n"
    )
    assert marshal_canonical(doc) == (
        "refs:\n    - asserts: |\n        a\n          b\n      chart: x\ntop: |\n    c\n"
    )


def test_it_adds_the_indentation_indicator_for_leading_spaces() -> None:
    assert marshal_deterministic({"k": "  x\n  y\n"}) == "k: |2\n    x\n    y\n"
    assert marshal_canonical({"k": "  x\n"}) == "k: |4\n      x\n"


def test_it_loses_a_leading_line_break_like_the_reparse() -> None:
    assert marshal_deterministic({"k": "\nabc\n"}) == "k: |\n  abc\n"
    assert marshal_deterministic({"k": "\nabc"}) == "k: |-\n  abc\n"
    assert marshal_deterministic({"k": "\n"}) == 'k: ""\n'


@pytest.mark.parametrize("doc", [["\nabc\n"], {"a": [{"k": "\nabc\n"}]}, {"k": "\tx\ny\n"}])
def test_it_refuses_what_the_go_serializer_cannot_reparse(doc) -> None:
    with pytest.raises(ValueError, match="failed to parse YAML for sort"):
        marshal_deterministic(doc)


# --- non-string scalars ----------------------------------------------------------------------

FLOATS = [
    (0.5, "0.5"),
    (1.0, "1"),
    (-0.0, "-0"),
    (0.1, "0.1"),
    (1.5, "1.5"),
    (100000.0, "100000"),
    (123456.0, "123456"),
    (1e6, "1e+06"),
    (1234567.0, "1.234567e+06"),
    (1.23456789e8, "1.23456789e+08"),
    (1e21, "1e+21"),
    (1e-5, "1e-05"),
    (-2.5e-7, "-2.5e-07"),
    (0.0001, "0.0001"),
    (math.inf, ".inf"),
    (-math.inf, "-.inf"),
    (math.nan, ".nan"),
]


@pytest.mark.parametrize(("value", "text"), FLOATS, ids=repr)
def test_it_formats_floats_like_go(value: float, text: str) -> None:
    assert marshal_deterministic({"f": value}) == f"f: {text}\n"
    assert marshal_deterministic([value]) == f"- {text}\n"


def test_it_writes_ints_bools_nulls_and_times_plain() -> None:
    doc = {
        "b": True,
        "c": False,
        "d": None,
        "i": 10,
        "j": -3,
        "k": 2**64 - 1,
        "t": dt.datetime(2026, 8, 19, 10, 0, 0, 120000, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        "u": dt.datetime(2026, 8, 19, 10, 0),
        "v": dt.date(2026, 8, 19),
    }
    assert marshal_deterministic(doc) == (
        "b: true\nc: false\nd: null\ni: 10\nj: -3\nk: 18446744073709551615\n"
        "t: 2026-08-19T10:00:00.12+02:00\nu: 2026-08-19T10:00:00Z\nv: 2026-08-19T00:00:00Z\n"
    )
    assert marshal_deterministic([None, True, 0]) == "- null\n- true\n- 0\n"


# --- collections and layout ------------------------------------------------------------------


def test_it_writes_empty_collections_in_flow_style() -> None:
    doc = {"a": {}, "b": [], "c": [{}, []]}
    assert marshal_deterministic(doc) == "a: {}\nb: []\nc:\n  - {}\n  - []\n"
    assert marshal_canonical(doc) == "a: {}\nb: []\nc:\n    - {}\n    - []\n"
    assert marshal_deterministic({}) == "{}\n"
    assert marshal_deterministic([]) == "[]\n"


def test_it_writes_nested_sequences_on_the_dash_line() -> None:
    assert marshal_deterministic([[1, 2], [3, [4]]]) == "- - 1\n  - 2\n- - 3\n  - - 4\n"
    assert marshal_canonical({"a": [[1, 2]]}) == "a:\n    - - 1\n      - 2\n"


def test_it_lays_out_mappings_inside_sequences() -> None:
    doc = {"items": [{"name": "a", "list": [1], "m": {"x": 1}}]}
    assert marshal_deterministic(doc) == (
        "items:\n  - list:\n      - 1\n    m:\n      x: 1\n    name: a\n"
    )
    assert marshal_canonical(doc) == (
        "items:\n    - list:\n        - 1\n      m:\n        x: 1\n      name: a\n"
    )


def test_it_sorts_keys_bytewise_and_keeps_sequence_order() -> None:
    keys = ["b", "a2", "a10", "_x", "Z.1", "Z-1", "B", "1", "é", "z"]
    doc = {key: i for i, key in enumerate(keys)}
    out = marshal_deterministic({"m": doc, "s": ["b", "a"]})
    assert out == (
        'm:\n  "1": 7\n  B: 6\n  Z-1: 5\n  Z.1: 4\n  _x: 3\n  a10: 2\n  a2: 1\n  b: 0\n'
        "  z: 9\n  é: 8\ns:\n  - b\n  - a\n"
    )


def test_it_uses_complex_keys_past_128_bytes() -> None:
    assert marshal_deterministic({"k" * 128: 1}) == "k" * 128 + ": 1\n"
    assert marshal_deterministic({"k" * 129: 1}) == "? " + "k" * 129 + "\n: 1\n"
    assert marshal_deterministic({"é" * 64: 1}) == "é" * 64 + ": 1\n"
    assert marshal_deterministic({"é" * 65: 1}) == "? " + "é" * 65 + "\n: 1\n"
    assert marshal_deterministic({"k" * 129: {"a": 1}}) == "? " + "k" * 129 + "\n: a: 1\n"
    assert marshal_canonical({"k" * 129: [1]}) == "? " + "k" * 129 + "\n:   - 1\n"


def test_it_writes_no_document_markers_and_one_final_break() -> None:
    assert marshal_deterministic("x") == "x\n"
    assert marshal_deterministic("a\n\n") == "|+\n  a\n\n"
    assert marshal_deterministic(None) == "null\n"


@pytest.mark.parametrize(
    "doc",
    [{1: "a"}, {"a": {None: 1}}, {"a": {1, 2}}, {"a": b"x"}, {"a": 2**64}, {"a": "\ud800"}],
    ids=repr,
)
def test_it_rejects_what_yaml_v3_would_not_write(doc) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the message names the input
        marshal_deterministic(doc)
