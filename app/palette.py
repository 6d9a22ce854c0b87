"""The one visual language of every page: what each colour means, the two colour scales, the type
scale and the rule that sizes a colour scale to its values.

Defined here once. ``app/plots.py`` builds every Plotly figure's colours from it;
``static/css/app.css`` carries the same values as CSS custom properties, a block that
``python -m app.palette --css`` writes (``tests/app/test_palette.py`` holds it fresh); the browser reads them
back through ``ITT.palette`` (``static/js/palette.js``), so the x-ray's canvases and the server's
figures colour one number alike.
"""

from __future__ import annotations

# a strip row's colours span ±m with this share of a typical token's |values| inside it (the
# x-ray's strips, app/xray/strips.py, and the CSS --robust-share read it from here)
ROBUST_SHARE = 0.98

# Okabe–Ito colours: distinguishable with colour-vision deficiency.
BLUE, ORANGE, GREY = "#0072B2", "#E69F00", "#999999"
GREEN, VERMILION, PURPLE = "#009E73", "#D55E00", "#CC79A7"
SKY = "#56B4E9"  # a seventh series (training stage 6), never a meaning of its own

# Signed values (vector entries, scores, attributions): negative blue, zero near-white, positive
# red, in the order of the values (ColorBrewer RdBu, 9 classes).
DIVERGING = ("#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7",
             "#fddbc7", "#f4a582", "#d6604d", "#b2182b")
# Probabilities and attention weights, 0 → 1: white to dark purple (ColorBrewer Purples), one hue
# that is in neither end of the diverging scale, so a weight never reads as a sign.
SEQUENTIAL = ("#fcfbfd", "#efedf5", "#dadaeb", "#bcbddc", "#9e9ac8",
              "#807dba", "#6a51a3", "#54278f", "#3f007d")
MODEL = "#8a929e"  # the model's own next-character distribution
FILTERED = BLUE  # the distribution after the sampling filter (temperature, top-k, top-p)
CHOSEN = ORANGE  # the character the decoder chose
CHOSEN_INK = "#9a4a00"  # the chosen character as text: orange too light to read (2.1:1), this 6.2:1
MASKED = "#d9d9d9"  # a masked (−∞) score

# The page itself: its background, cards, text, muted text (WCAG AA on every surface, held by
# tests/app/test_palette.py) and hairlines.
PAGE = {"bg": "#f7f7f4", "card": "#ffffff", "ink": "#1d2330", "muted": "#5a6270", "line": "#d9dbe0"}

# Type scale in rem (1 rem = 16 px): every font size on a page is one of these.
TYPE_SCALE = {"xs": 0.75, "sm": 0.85, "md": 1.0, "lg": 1.2, "xl": 1.45, "2xl": 1.7, "3xl": 2.0}
PLOT_FONT_PX = 12  # Plotly's text: between xs and sm
PLOT_TITLE_PX = 14



def colorscale(stops: tuple[str, ...]) -> list[list]:
    """Evenly spaced stops as a Plotly colorscale, ``[[0, c0], …, [1, cN]]``."""
    last = len(stops) - 1
    return [[round(i / last, 6), colour] for i, colour in enumerate(stops)]


def robust_scale(rows: list[list[float]]) -> float:
    """±m for a signed colour scale over rows of values (one row per token): each row's 98th
    percentile of |v|, and of those the median row's (``static/js/palette.js``'s ``robustScale``
    is its copy). One outlier value, or one or two outlier tokens (the FFN's "." and <eos>),
    cannot wash out the rest; values beyond ±m take the end colours."""
    per_row = []
    for row in rows:
        values = sorted(abs(v) for v in row)
        if values:
            per_row.append(values[min(len(values) - 1, int(len(values) * ROBUST_SHARE))])
    if not per_row:
        return 1.0
    return sorted(per_row)[len(per_row) // 2] or 1.0


def css_variables() -> dict[str, str]:
    """The palette as CSS custom properties, as ``static/css/app.css``'s ``:root`` holds them."""
    # the page's accents: links and buttons, highlights, the keyboard focus ring
    names = {f"--{name}": colour for name, colour in PAGE.items()}
    names.update({"--accent": BLUE, "--accent-2": ORANGE, "--focus": VERMILION})
    names.update({f"--div-{i}": c for i, c in enumerate(DIVERGING)})
    names.update({f"--seq-{i}": c for i, c in enumerate(SEQUENTIAL)})
    names.update({"--dist-model": MODEL, "--dist-filtered": FILTERED, "--chosen": CHOSEN,
                  "--chosen-ink": CHOSEN_INK, "--masked": MASKED, "--robust-share": str(ROBUST_SHARE)})
    names.update({f"--fs-{name}": f"{size}rem" for name, size in TYPE_SCALE.items()})
    return names


# app.css's :root holds the palette between these two lines, written by ``python -m app.palette --css``
CSS_BEGIN = "  /* the palette: generated from app/palette.py by `python -m app.palette --css`; do not edit */"
CSS_END = "  /* end of the palette */"


def css_block() -> str:
    """The palette's lines of app.css's ``:root``, its two marker lines included."""
    lines = [f"  {name}: {value};" for name, value in css_variables().items()]
    return "\n".join([CSS_BEGIN, *lines, CSS_END])


def with_css_block(css: str) -> str:
    """``css`` (app.css's text) with its palette block replaced by ``css_block()``."""
    begin, end = css.find(CSS_BEGIN), css.find(CSS_END)
    if begin < 0 or end < begin:
        raise ValueError(f"app.css has no palette block: put the two lines {CSS_BEGIN.strip()!r} "
                         f"and {CSS_END.strip()!r} inside its :root")
    return css[:begin] + css_block() + css[end + len(CSS_END):]


def main(argv: list[str] | None = None) -> int:
    """``--css`` writes the palette into static/css/app.css; ``--check`` only says whether it is."""
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m app.palette", description=main.__doc__)
    parser.add_argument("--css", action="store_true", help="rewrite app.css's palette block")
    parser.add_argument("--check", action="store_true", help="exit 1 if app.css's block is stale")
    parser.add_argument("--file", type=Path,
                        default=Path(__file__).resolve().parents[1] / "static" / "css" / "app.css")
    args = parser.parse_args(argv)
    if not (args.css or args.check):
        print(css_block())
        return 0
    css = args.file.read_text(encoding="utf-8")
    fresh = with_css_block(css)
    if args.check:
        if fresh != css:
            print(f"{args.file}: the palette block is stale; run `python -m app.palette --css`")
            return 1
        return 0
    if fresh != css:
        args.file.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
