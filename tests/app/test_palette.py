"""app/palette.py: one visual language, defined once and carried to the browser by app.css."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app import palette

APP_CSS = Path(__file__).resolve().parents[2] / "static" / "css" / "app.css"


def root_variables() -> dict[str, str]:
    """The custom properties of app.css's first :root block."""
    block = re.search(r":root\s*\{(.*?)\}", APP_CSS.read_text(encoding="utf-8"), re.S).group(1)
    return dict(re.findall(r"(--[\w-]+)\s*:\s*([^;]+);", block))


def test_app_css_carries_the_generated_palette():
    """app.css's palette block is exactly what ``python -m app.palette --css`` writes."""
    text = APP_CSS.read_text(encoding="utf-8")
    assert palette.with_css_block(text) == text, "app.css's palette is stale: `python -m app.palette --css`"
    css = root_variables()
    for name, value in palette.css_variables().items():
        assert css.get(name) == value, name
    # the page's accents are the palette's colours too
    assert css["--accent"].lower() == palette.BLUE.lower()
    assert css["--accent-2"].lower() == palette.ORANGE.lower()


def test_scales_run_light_to_dark_and_diverge_from_white():
    def lightness(hex_colour: str) -> float:
        r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    seq = [lightness(c) for c in palette.SEQUENTIAL]
    assert seq == sorted(seq, reverse=True)  # 0 is the lightest, 1 the darkest
    div = [lightness(c) for c in palette.DIVERGING]
    middle = len(div) // 2
    assert len(div) % 2 == 1 and max(div) == div[middle]  # zero is the lightest
    assert div[:middle + 1] == sorted(div[:middle + 1]) and div[middle:] == sorted(div[middle:], reverse=True)
    negative, positive = palette.DIVERGING[0], palette.DIVERGING[-1]
    assert int(negative[5:7], 16) > int(negative[1:3], 16)  # negative is blue
    assert int(positive[1:3], 16) > int(positive[5:7], 16)  # positive is red


def contrast(foreground: str, background: str) -> float:
    """WCAG 2 contrast ratio of two #rrggbb colours."""
    def luminance(colour: str) -> float:
        channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    light, dark = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_text_colours_read_on_every_surface():
    """Text in ink, muted ink or the chosen colour's ink reaches WCAG AA (4.5:1) on the page, a card
    and the lightest cells; orange itself is for fills, not text."""
    css = root_variables()
    for ink in ("--ink", "--muted", "--chosen-ink", "--accent"):
        for surface in ("--bg", "--card", "--div-4", "--seq-0"):
            assert contrast(css[ink], css[surface]) >= 4.5, (ink, surface, contrast(css[ink], css[surface]))
    assert contrast(palette.CHOSEN, "#ffffff") < 4.5  # why the ink exists
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)


def test_robust_scale_is_not_set_by_outliers():
    typical = [float(i % 10) - 4.5 for i in range(100)]  # 98th percentile of |v|: 4.5
    outlier_value = [1000.0] + [0.5] * 99
    assert palette.robust_scale([typical, typical]) == pytest.approx(4.5)
    assert palette.robust_scale([typical, outlier_value, typical]) == pytest.approx(4.5)
    # two outlier tokens of eight (the FFN's "." and <eos>) do not set the scale either
    assert palette.robust_scale([[0.1, -0.2]] * 6 + [[50.0, -80.0]] * 2) == pytest.approx(0.2)
    assert palette.robust_scale([]) == 1.0 and palette.robust_scale([[0.0, 0.0]]) == 1.0


def test_colorscale_spreads_the_stops_evenly():
    scale = palette.colorscale(("#000000", "#808080", "#ffffff"))
    assert scale == [[0.0, "#000000"], [0.5, "#808080"], [1.0, "#ffffff"]]


def test_the_palette_command_writes_and_checks_the_block(tmp_path):
    """``--check`` fails on a hand-edited block; ``--css`` puts the palette back, the rest untouched."""
    text = APP_CSS.read_text(encoding="utf-8")
    edited = tmp_path / "app.css"
    stale = text.replace(f"--div-0: {palette.DIVERGING[0]};", "--div-0: #123456;")
    edited.write_text(stale, encoding="utf-8")
    assert edited.read_text(encoding="utf-8") != text
    assert palette.main(["--check", "--file", str(edited)]) == 1
    assert palette.main(["--css", "--file", str(edited)]) == 0
    assert edited.read_text(encoding="utf-8") == text
    assert palette.main(["--check", "--file", str(edited)]) == 0
    with pytest.raises(ValueError, match="no palette block"):
        palette.with_css_block(":root { --bg: #fff; }")


# A colour written into a script: a hex colour, a colour function with numbers in it (``rgb(0, …``;
# ``rgb(${r}, …)`` formatting computed channels is not one) or a quoted colour name. The page
# scripts take their colours from the palette (ITT.palette, CSS custom properties) instead.
COLOUR_LITERAL = re.compile(
    r"#[0-9a-f]{3}(?:[0-9a-f]{3})?(?:[0-9a-f]{2})?\b(?![-\w])"
    r"|\b(?:rgba?|hsla?|hwb|lab|lch|oklab|oklch)\(\s*[\d.]"
    r"|[\"'`](?:white|black|red|green|blue|orange|purple|gr[ae]y|yellow|pink|brown|navy|teal|silver|"
    r"crimson|gold|tomato|steelblue|darkorange)[\"'`]", re.I)
# the x-ray's modules and /decode's script are their own areas' (issue 74 item 3, in turn)
NOT_YET = {"decode.js"}


def test_no_colour_literal_in_the_page_scripts():
    scripts = sorted(p for p in (APP_CSS.parents[1] / "js").glob("*.js") if p.name not in NOT_YET)
    assert len(scripts) >= 15
    found = [f"{p.name}:{n}: {line.strip()}" for p in scripts
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if COLOUR_LITERAL.search(line)]
    assert found == [], found
    # the pattern finds what it is for, and not an element id or a computed colour
    for literal in ('"#0072b2"', "'#fff'", "rgba(0, 114, 178, 0.5)", '"white"', "hsl(200 50% 50%)"):
        assert COLOUR_LITERAL.search(literal), literal
    for other in ('querySelector("#kv-k")', "`rgb(${r}, ${g}, ${b})`", '"#probs-a"', "#face-off"):
        assert not COLOUR_LITERAL.search(other), other
