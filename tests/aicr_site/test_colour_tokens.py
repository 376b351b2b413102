"""The site's colour tokens meet WCAG 2.1 AA in both schemes, and every sheet uses them.

The tokens are the custom properties of ``static/css/base.css``: the light values in its first
``:root`` block, the dark ones in the ``:root`` inside ``@media (prefers-color-scheme: dark)``
(a dark value overrides its light one; a token without a dark value keeps it). Each pair
below is a foreground the site draws on a background; its contrast ratio is computed as WCAG
2.1 defines it (relative luminance of sRGB, https://www.w3.org/TR/WCAG21/#dfn-contrast-ratio),
so a token change that drops a pair below 4.5:1 (text) or 3:1 (borders of controls, focus
rings) fails here, naming the pair, the scheme and the ratio.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CSS = Path(__file__).resolve().parents[2] / "static" / "css"
BASE = CSS / "base.css"
TEXT = 4.5
UI = 3.0

DECLARATION = re.compile(r"(--[\w-]+):\s*([^;]+);")
HEX = re.compile(r"^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
RGBA = re.compile(r"^rgb\((\d+) (\d+) (\d+) / (\d+)%\)$")
RAW_COLOUR = re.compile(r"#[0-9a-fA-F]{3,8}\b|\brgba?\(|\bhsla?\(")

RGB = tuple[float, float, float]

#: (foreground, background, minimum): the pairs the components draw. A background written
#: ``"a over b"`` is token a (translucent) composited over token b.
PAIRS: list[tuple[str, str, float]] = [
    # page text, links and quieter text on every surface
    *[
        (fg, bg, TEXT)
        for fg in ("--text", "--muted", "--link", "--link-hover")
        for bg in ("--bg", "--surface", "--surface-alt", "--surface-hover")
    ],
    ("--text", "--code-bg", TEXT),
    ("--muted", "--code-bg", TEXT),  # the "any" chips of the recipe list
    ("--text", "--input-bg", TEXT),
    # the header
    ("--on-header", "--header", TEXT),
    ("--on-header-strong", "--header", TEXT),
    ("--on-header-strong", "--on-header-hover-bg over --header", TEXT),
    ("--on-header-strong", "--on-header-current-bg over --header", TEXT),
    ("--header", "--brand", TEXT),  # the AICR mark
    # buttons
    ("--on-primary", "--primary-bg", TEXT),
    ("--on-primary", "--primary-hover", TEXT),
    ("--on-danger", "--danger-bg", TEXT),
    ("--on-danger", "--danger-hover", TEXT),
    ("--on-brand-dark", "--brand-dark", TEXT),  # a "Copied" button
    ("--brand-tint-fg", "--brand-tint-bg", TEXT),  # criteria chips
    # states, badges, alerts, verdicts: a tone's text on its fill
    ("--ok-fg", "--ok-bg", TEXT),
    ("--ok-fg", "--ok-tint", TEXT),
    ("--single-fg", "--ok-tint", TEXT),
    ("--info-fg", "--info-bg", TEXT),
    ("--note-fg", "--note-bg", TEXT),
    ("--warn-fg", "--warn-bg", TEXT),
    ("--stale-fg", "--stale-bg", TEXT),
    ("--bad-fg", "--bad-bg", TEXT),
    ("--bad-fg", "--bad-tint", TEXT),
    ("--neutral-fg", "--neutral-bg", TEXT),
    ("--demo-fg", "--demo-bg", TEXT),
    ("--sim-fg", "--sim-bg", TEXT),
    ("--profile-fg", "--profile-bg", TEXT),
    # marks and words coloured on a surface or on a tinted cell
    *[
        (fg, bg, TEXT)
        for fg in ("--ok-text", "--bad-text", "--stale-text", "--caution-text", "--neutral-mark")
        for bg in ("--surface", "--bg")
    ],
    ("--ok-text", "--pass-area", TEXT),
    ("--bad-text", "--fail-area", TEXT),
    ("--stale-text", "--diff-area", TEXT),
    *[(fg, "--surface-alt", TEXT) for fg in ("--ok-text", "--bad-text", "--neutral-mark")],
    # areas that hold the page's own text
    ("--text", "--pass-area", TEXT),
    ("--text", "--fail-area", TEXT),
    ("--text", "--diff-area", TEXT),
    # controls: a field's or a button's border, the focus ring
    ("--control-border", "--surface", UI),
    ("--control-border", "--input-bg", UI),
    ("--control-border", "--bg", UI),
    ("--focus", "--surface", UI),
    ("--focus", "--bg", UI),
]


def _block_after(text: str, start: int) -> str:
    """The body of the ``{ … }`` block opening at or after ``start`` (no nested blocks)."""
    opening = text.index("{", start)
    return text[opening + 1 : text.index("}", opening)]


def tokens(css: str) -> dict[str, dict[str, str]]:
    light_body = _block_after(css, css.index(":root"))
    dark_media = css.index("@media (prefers-color-scheme: dark)")
    dark_body = _block_after(css, css.index(":root", dark_media))
    light = dict(DECLARATION.findall(light_body))
    dark = light | dict(DECLARATION.findall(dark_body))
    return {
        "light": {k: v.strip() for k, v in light.items()},
        "dark": {k: v.strip() for k, v in dark.items()},
    }


def _rgb(value: str) -> RGB:
    match = HEX.match(value)
    assert match, f"not a hex colour: {value}"
    digits = match.group(1)
    if len(digits) == 3:
        digits = "".join(d * 2 for d in digits)
    red, green, blue = (int(digits[i : i + 2], 16) / 255 for i in (0, 2, 4))
    return red, green, blue


def colour(scheme: dict[str, str], spec: str) -> RGB:
    """A token's colour; ``"a over b"`` composites translucent token a over opaque token b."""
    if " over " not in spec:
        return _rgb(scheme[spec])
    top, below = spec.split(" over ")
    match = RGBA.match(scheme[top])
    assert match, f"{top} is not rgb(r g b / a%): {scheme[top]}"
    *channels, percent = (int(g) for g in match.groups())
    alpha = percent / 100
    base = colour(scheme, below)
    return tuple(  # type: ignore[return-value]
        alpha * (c / 255) + (1 - alpha) * b for c, b in zip(channels, base, strict=True)
    )


def luminance(rgb: RGB) -> float:
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    red, green, blue = (linear(c) for c in rgb)
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def contrast(a: RGB, b: RGB) -> float:
    lighter, darker = sorted((luminance(a), luminance(b)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


SCHEMES = tokens(BASE.read_text())


def test_the_formula_matches_wcag_reference_values() -> None:
    assert contrast(_rgb("#000000"), _rgb("#ffffff")) == pytest.approx(21.0)
    assert contrast(_rgb("#777777"), _rgb("#ffffff")) == pytest.approx(4.48, abs=0.01)
    # The broken dark-mode button of issue 20: white on the dark scheme's --text, 1.23:1.
    assert contrast(_rgb("#ffffff"), _rgb("#e5e7eb")) == pytest.approx(1.23, abs=0.01)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_pair_meets_wcag_aa(scheme: str) -> None:
    values = SCHEMES[scheme]
    below = [
        f"{fg} on {bg}: {ratio:.2f}:1 < {minimum}:1"
        for fg, bg, minimum in PAIRS
        if (ratio := contrast(colour(values, fg), colour(values, bg))) < minimum
    ]
    assert below == [], f"{scheme} scheme:\n" + "\n".join(below)


def test_every_token_used_by_a_sheet_is_defined() -> None:
    defined = SCHEMES["light"].keys()
    used = {
        name
        for sheet in sorted(CSS.glob("*.css"))
        for name in re.findall(r"var\((--[\w-]+)\)", sheet.read_text())
    }
    assert used - defined == set()


def _without_token_blocks(css: str) -> str:
    return DECLARATION.sub("", css)


@pytest.mark.parametrize("sheet", sorted(p.name for p in CSS.glob("*.css")))
def test_components_use_tokens_never_raw_colours(sheet: str) -> None:
    """A raw colour outside the token definitions escapes both the dark scheme and this
    test's contrast check: every sheet takes its colours from the tokens."""
    text = (CSS / sheet).read_text()
    lines = [
        f"{number}: {line.strip()}"
        for number, line in enumerate(_without_token_blocks(text).splitlines(), 1)
        if RAW_COLOUR.search(line)
    ]
    assert lines == [], f"{sheet} uses raw colours; use a token from base.css:\n" + "\n".join(lines)
