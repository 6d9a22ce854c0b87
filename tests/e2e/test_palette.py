"""One visual language (issue 24 item 5): a number gets the same colour on every page, and a
strip's number can be read by hovering it (item 4)."""

from __future__ import annotations

from urllib.parse import quote

import pytest

pytestmark = pytest.mark.e2e
CAT = "The cat sits on the mat."

# The colour of the canvas pixel under the pointer, and the palette's colour for the tip's value.
XRAY_PIXEL = """([x, y]) => {
  const canvas = document.querySelector('[data-key="enc-embedding"] canvas');
  const box = canvas.getBoundingClientRect();
  const px = Math.floor((x - box.left) * canvas.width / box.width);
  const py = Math.floor((y - box.top) * canvas.height / box.height);
  const tip = document.querySelector('.xr-tip').dataset;
  const expected = ITT.palette.diverging(Number(tip.value), Number(tip.scale)).map(Math.round);
  return { pixel: [...canvas.getContext('2d').getImageData(px, py, 1, 1).data.slice(0, 3)], expected,
           lane: Number(tip.lane), j: Number(tip.j), value: Number(tip.value), scale: Number(tip.scale),
           computed: tip.computed };
}"""
# Plotly's heatmap image in chart ``gd`` drawn onto a canvas of the image's own size, so that its
# pixels can be read (a function declared inside the checks below).
HEATMAP_CANVAS = """async function heatmapCanvas(gd) {
  const image = gd.querySelector('.hm image');
  const source = new Image();
  source.src = image.getAttribute('href') || image.getAttribute('xlink:href');
  await source.decode();
  const canvas = document.createElement('canvas');
  canvas.width = source.naturalWidth;
  canvas.height = source.naturalHeight;
  canvas.getContext('2d').drawImage(source, 0, 0);
  return canvas;
}"""
# The pixel of cell (lane, j) in Plotly's heatmap image of the sum (one image pixel per cell).
EMBEDDINGS_PIXEL = """async ([lane, j]) => {
  """ + HEATMAP_CANVAS + """
  const gd = document.getElementById('emb-sum');
  const canvas = await heatmapCanvas(gd);
  const ctx = canvas.getContext('2d');
  const z = gd.data[0].z;
  const zmax = gd._fullData[0].zmax;
  const cell = [Math.floor((j + 0.5) * canvas.width / z[0].length),
                Math.floor((lane + 0.5) * canvas.height / z.length)];
  return { pixel: [...ctx.getImageData(cell[0], cell[1], 1, 1).data.slice(0, 3)], value: z[lane][j], zmax,
           expected: ITT.palette.diverging(z[lane][j], zmax).map(Math.round) };
}"""


def close(a, b, tolerance):
    return all(abs(x - y) <= tolerance for x, y in zip(a, b, strict=True))


def hover_strip(page, fraction: float):
    """Move the pointer onto the English embedding strip at ``fraction`` of its width: what the
    tip says and the pixel under the pointer, or None between two tokens' strips."""
    figure = page.locator('[data-key="enc-embedding"] .xr-fig')
    box = figure.bounding_box()
    x, y = box["x"] + box["width"] * fraction, box["y"] + box["height"] - 9
    page.mouse.move(x, y)  # the page's pointermove handler has run when this returns
    if not page.is_visible(".xr-tip"):
        return None
    return page.evaluate(XRAY_PIXEL, [x, y])


def test_one_number_gets_one_colour_on_the_xray_and_on_embeddings(page, server):
    page.goto(f"{server}/?text={quote(CAT)}")
    page.wait_for_function("""() => {
      const range = document.querySelector('[data-key="enc-embedding"] .xr-range');
      return range && range.textContent.startsWith('±');
    }""")
    page.keyboard.press("End")  # everything computed: the veil is off every strip
    page.locator('[data-key="enc-embedding"] .xr-fig').evaluate("e => e.scrollIntoView({block: 'center'})")
    # a clearly signed number of each sign, neither clipped nor near 0
    found = {}
    for step in range(1, 200):
        hit = hover_strip(page, step / 200)
        if hit is None:
            continue
        share = hit["value"] / hit["scale"]
        if 0.3 < abs(share) < 0.9:
            found.setdefault(share > 0, hit)
        if len(found) == 2:
            break
    assert len(found) == 2, found
    tip = page.locator(".xr-tip").inner_text()
    assert "dimension" in tip and "±" in tip
    page.goto(f"{server}/embeddings?text={quote(CAT)}")
    page.wait_for_selector("#emb-sum .hm image")
    for positive, hit in found.items():
        assert hit["computed"] == "true"
        # the x-ray draws the palette's colour for its number …
        assert close(hit["pixel"], hit["expected"], 1), hit
        cell = page.evaluate(EMBEDDINGS_PIXEL, [hit["lane"], hit["j"]])
        # … /embeddings shows the same number (the x-ray's strips are int8 codes), on the same scale …
        assert cell["value"] == pytest.approx(hit["value"], abs=hit["scale"] / 40), (cell, hit)
        assert cell["zmax"] == pytest.approx(hit["scale"], rel=0.03)
        assert close(cell["pixel"], cell["expected"], 2), cell
        # … and so in the same colour: red when positive, blue when negative
        assert close(cell["pixel"], hit["pixel"], 8), (cell, hit)
        red, _, blue = hit["pixel"]
        assert (red > blue) == positive, hit


# Every cell of the enlarged head (Plotly's heatmap image, gaps between cells) and the same cell
# of its thumbnail in the grid (static/js/attention.js: a canvas, one pixel per weight).
THUMBNAIL_CELLS = """async () => {
  """ + HEATMAP_CANVAS + """
  const gd = document.getElementById('enlarged');
  const big = await heatmapCanvas(gd);
  const ctx = big.getContext('2d');
  const z = gd.data[0].z;
  const thumb = document.querySelector('.head-cell[aria-pressed="true"] .thumb canvas');
  const small = thumb.getContext('2d');
  const cells = [];
  z.forEach((row, r) => row.forEach((weight, c) => {
    const x = Math.floor((c + 0.5) * big.width / row.length);
    const y = Math.floor((r + 0.5) * big.height / z.length);
    cells.push({ r, c, weight, enlarged: [...ctx.getImageData(x, y, 1, 1).data.slice(0, 3)],
                 thumbnail: [...small.getImageData(c, r, 1, 1).data] });
  }));
  return { size: [thumb.width, thumb.height], shape: [z[0].length, z.length], cells };
}"""


@pytest.mark.parametrize("kind", ["encoder", "cross"])
def test_a_heads_thumbnail_shows_the_enlarged_heads_colours(page, server, kind):
    page.goto(f"{server}/attention?text={quote(CAT)}&kind={kind}&layer=1&head=2")
    page.wait_for_selector("#enlarged .hm image")
    found = page.evaluate(THUMBNAIL_CELLS)
    assert found["size"] == found["shape"]  # one pixel per weight: columns keys, rows queries
    cells = found["cells"]
    assert len(cells) >= 8 and len({cell["weight"] for cell in cells}) > 4, cells
    for cell in cells:
        assert cell["thumbnail"][3] == 255, cell  # every weight drawn, opaque
        assert close(cell["thumbnail"][:3], cell["enlarged"], 2), cell
    # a heavier weight is darker (white → dark purple)
    light = min(cells, key=lambda cell: cell["weight"])
    dark = max(cells, key=lambda cell: cell["weight"])
    assert sum(dark["thumbnail"][:3]) < sum(light["thumbnail"][:3]) - 30, (light, dark)


def test_timelines_chips_take_the_palettes_accent(page, server):
    """/timeline tints each character's chip by its probability with the palette's accent (CSS,
    not a colour in the script): alpha 0.08 + 0.5 p over --accent's own channels."""
    from app import palette  # the server's palette, the one app.css is generated from

    page.goto(f"{server}/timeline")
    page.locator("#probs-a li").first.wait_for()
    chips = page.evaluate("""() => [...document.querySelectorAll('#probs-a li')].map((li) => {
      const probe = document.createElement('span');
      probe.style.color = getComputedStyle(li).backgroundColor;  // rgb channels 0-255, whatever the syntax
      document.body.append(probe);
      const canvas = document.createElement('canvas').getContext('2d');
      canvas.fillStyle = getComputedStyle(probe).color;
      canvas.fillRect(0, 0, 1, 1);
      probe.remove();
      return { p: Number(li.style.getPropertyValue('--p')), rgba: [...canvas.getImageData(0, 0, 1, 1).data] };
    })""")
    assert chips
    accent = [int(palette.BLUE[i:i + 2], 16) for i in (1, 3, 5)]
    for chip in chips:
        alpha = round(255 * (0.08 + 0.5 * chip["p"]))
        assert abs(chip["rgba"][3] - alpha) <= 2, chip
        for channel, want in zip(chip["rgba"][:3], accent, strict=True):
            # a canvas stores channels premultiplied by alpha: the paler, the coarser they come back
            assert abs(channel - want) <= max(3, 160 / alpha), chip
