"""The x-ray (/xray) in headless Chromium against a real server on the shipped checkpoint, plus its
two JSON endpoints: every number the page shows is checked against the API's own trace."""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import SHIPPED_TRANSLATIONS, shot
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e
SEED = "The cat sits on the mat."
XRAY = "/"  # where the page is served
ENC_LAYERS = DEC_LAYERS = 3  # the shipped model's
ENC_BLOCKS = ["self_attention", "add_norm1", "ffn", "add_norm2"]
DEC_BLOCKS = ["self_attention", "add_norm1", "cross_attention", "add_norm2", "ffn", "add_norm3"]
ENC_SUBS = 2 + len(ENC_BLOCKS) * ENC_LAYERS  # tokens, embedding, then each layer's blocks in turn
DEC_SUBS = 2 + len(DEC_BLOCKS) * DEC_LAYERS  # the new token's embedding, each layer's blocks, output


@pytest.fixture()
def server(shipped_server):
    """The shipped checkpoint (the seed sentence translates into real Chinese), one server a run."""
    return shipped_server


def post(server: str, path: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(f"{server}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def api(server: str, path: str, body: dict) -> dict:
    status, data = post(server, path, body)
    assert status == 200, data
    return data


def ready(page) -> None:
    page.locator("body[data-xray=ready]").wait_for()
    page.locator("body.busy").wait_for(state="detached")


def open_page(page, server: str, query: str = "") -> None:
    page.goto(f"{server}{XRAY}?text={quote(SEED)}{query}")
    ready(page)


def where(page) -> str:
    return page.locator("#xr-where").text_content()


def frame_of(t: int, name: str, layer: int = 0) -> int:
    """The frame where block ``name`` of ``layer`` runs: in the encoder (t = 0) or at time step t."""
    if t == 0:
        if name in ("tokens", "embedding"):
            return 0 if name == "tokens" else 1
        return 2 + len(ENC_BLOCKS) * layer + ENC_BLOCKS.index(name)
    base = ENC_SUBS + (t - 1) * DEC_SUBS
    if name == "embedding":
        return base
    if name == "output":
        return base + DEC_SUBS - 1
    return base + 1 + len(DEC_BLOCKS) * layer + DEC_BLOCKS.index(name)


def active(page) -> list[str]:
    return page.locator(".xr-row.xr-active").evaluate_all("rows => rows.map(r => r.dataset.key)")


def veiled_from(page, key: str) -> int | None:
    """The first lane of a row still under the not-computed veil (None: every lane computed)."""
    found = page.locator(f'.xr-row[data-key="{key}"] rect.xr-veil:not([data-from="memory"])').evaluate_all(
        "rs => rs.map(r => +r.dataset.from)")
    return found[0] if found else None


def close(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol


def all_close(got, want, tol: float) -> bool:
    """Every pair within ``tol`` (``want`` may be a shorter sample of ``got``)."""
    return all(close(a, b, tol) for a, b in zip(got, want, strict=False))


def shown_values(panel, step: str) -> list[float]:
    return json.loads(panel.locator(f'.xr-step[data-step="{step}"] .xr-vals').first
                      .get_attribute("data-values"))


def cell_values(panel, step: str) -> list[float | None]:
    values = panel.locator(f'.xr-step[data-step="{step}"] .xr-cell').evaluate_all(
        "cells => cells.map(c => c.dataset.value)")
    return [None if v == "-inf" else float(v) for v in values]


def set_range(page, selector: str, value: float) -> None:
    """Move a slider the way a drag does: set its value, then fire the input event."""
    page.locator(selector).evaluate(
        "(el, v) => { el.value = v; el.dispatchEvent(new Event('input', {bubbles: true})); }",
        str(value))


def wait_reloaded(page) -> None:
    page.locator("body[data-xray=loading]").wait_for(state="detached")
    ready(page)


def open_block(page, key: str):
    row = page.locator(f'.xr-row[data-key="{key}"]')
    if not row.is_visible():  # its layer is a slim column beside the zoomed one: zoom into it first
        page.locator(f'.xr-group-title[data-zoom="{key[:3]}"]').click()
        page.locator(f'.xr-group.xr-zoomed[data-zoom="{key[:3]}"]').wait_for()
    row.locator("button.xr-head").click()
    assert row.locator("button.xr-head").get_attribute("aria-expanded") == "true"
    panel = row.locator(".xr-panel")
    panel.locator(".xr-step").first.wait_for()
    page.locator("body.busy").wait_for(state="detached")
    return panel


# -- the JSON endpoints ------------------------------------------------------------------------


def test_the_json_xray_answer_is_gone(server):
    """No page reads POST /api/xray any more (issue 56): the packed answers carry every number."""
    status, _ = post(server, "/api/xray", {"text": SEED})
    assert status in (404, 405)


@pytest.mark.parametrize(("body", "field"), [
    ({"text": "x" * 601}, "text"),
    ({"text": "猫坐在垫子上"}, "text"),
    ({"text": SEED, "temperature": 0}, "temperature"),
    ({"text": SEED, "strategy": "magic"}, "strategy"),
    ({"text": SEED, "forced_prefix": ["not-a-char"]}, "forced_prefix"),
    ({"text": SEED, "extra": 1}, "extra"),
])
def test_xray_data_rejects_bad_input(server, body, field):
    status, data = post(server, "/api/xray/view", body)
    assert status == 422
    assert field in data["message"]


@pytest.mark.parametrize(("change", "field", "words", "expected"), [
    ({"side": "encoder", "block": "cross_attention"}, "block", "only in the decoder", 422),
    ({"side": "encoder", "block": "output"}, "block", "only in the decoder", 422),
    ({"layer": 3}, "layer", "between 0 and 2", 422),
    ({"layer": 64}, "layer", "less than or equal to 63", 422),
    ({"position": 99}, "position", "between 0 and", 404),  # schema-valid: past this sentence
    ({"position": -1}, "position", "greater than or equal to 0", 422),
    ({"block": "softmax"}, "block", "embedding", 422),
    ({"side": "middle"}, "side", "encoder", 422),
])
def test_xray_block_limits(server, change, field, words, expected):
    body = {"text": SEED, "side": "decoder", "block": "ffn", "layer": 0, "position": 0, **change}
    status, data = post(server, "/api/xray/block", body)
    assert status == expected, data
    assert data["message"].startswith(f"{field}:") and words in data["message"], data["message"]


def test_xray_block_numbers_are_the_models(server):
    trace = api(server, "/api/trace", {"text": SEED})
    base = {"text": SEED}
    block = api(server, "/api/xray/block", {**base, "side": "decoder", "block": "cross_attention",
                                             "layer": 2, "position": 2})
    for head, weights in enumerate(trace["decoder"][2]["cross_attention"]):
        assert all_close(block["heads"][head]["weights"], weights[2], 1e-4)
        scaled = block["heads"][head]["scaled"]
        assert all(close(r / math.sqrt(block["d_k"]), s, 2e-3)
                   for r, s in zip(block["heads"][head]["raw"], scaled, strict=False))
    masked = api(server, "/api/xray/block", {**base, "side": "decoder", "block": "self_attention",
                                              "layer": 0, "position": 1})
    assert masked["heads"][0]["masked"][2:] == [None] * (len(masked["key_tokens"]) - 2)
    norm = api(server, "/api/xray/block", {**base, "side": "encoder", "block": "add_norm1",
                                            "layer": 1, "position": 3})
    stats = trace["encoder"][1]["add_norm1"]
    assert close(norm["mean"], stats["sum_mean"][3], 1e-3)
    assert close(norm["std"], stats["sum_std"][3], 1e-3)
    rebuilt = [n * g + b for n, g, b in zip(norm["normalized"], norm["gamma"], norm["beta"], strict=False)]
    assert all_close(rebuilt, norm["output"], 2e-3)
    ffn = api(server, "/api/xray/block", {**base, "side": "decoder", "block": "ffn", "layer": 1,
                                           "position": 0})
    assert close(ffn["active"] / len(ffn["hidden"]), trace["decoder"][1]["ffn"]["active_share"][0],
                 1e-3)


# -- the page ----------------------------------------------------------------------------------


# what one frame of the player shows: the same reads as where(), active() and the rows' text
FRAME_SHOWN = """() => {
    const texts = (selector) => [...document.querySelectorAll(selector)].map((e) => e.textContent);
    return {
        where: document.getElementById("xr-where").textContent,
        narration: document.getElementById("xr-narration").textContent,
        lit: [...document.querySelectorAll(".xr-row.xr-active")].map((r) => r.dataset.key),
        chosen: texts('.xr-row[data-key="dec-chosen"] .xr-outrow span'),
        visible: texts('.xr-row[data-key="dec-tokens"] .xr-token:not(.xr-hidden)'),
    };
}"""


def test_play_the_seed_sentence_through_every_step_and_sub_step(page, server):
    """Every frame in the model's order: the encoder layer by layer, then at each step the new
    token's embedding, decoder layer 1's six blocks, layer 2's, layer 3's, the output. Only the
    block computing is lit, and the player and narration name its layer."""
    trace = api(server, "/api/trace", {"text": SEED})
    steps = trace["steps"]
    assert [s["token"] for s in steps] == [*SHIPPED_TRANSLATIONS[SEED], "<eos>"]  # 猫坐在垫子上。
    total = ENC_SUBS + DEC_SUBS * len(steps)
    open_page(page, server)
    assert page.locator("#xr-scrub").get_attribute("max") == str(total - 1)
    assert f"sub-step 1 of {ENC_SUBS}" in where(page)
    page.locator("h1").click()
    seen = set()
    for frame in range(total):
        if frame:
            page.keyboard.press("ArrowRight")
        shown = page.evaluate(FRAME_SHOWN)  # one round trip a frame: ~200 frames
        text, narration, lit = shown["where"], shown["narration"], shown["lit"]
        assert narration.strip() and narration not in seen, (frame, narration)
        seen.add(narration)
        if frame < ENC_SUBS:
            assert f"sub-step {frame + 1} of {ENC_SUBS}" in text
            if frame < 2:
                assert lit == [["enc-tokens", "enc-embedding"][frame]]
                continue
            layer, block = divmod(frame - 2, len(ENC_BLOCKS))
            assert lit == [f"e-{layer}-{ENC_BLOCKS[block]}"], (frame, lit)
            assert f"Encoder layer {layer + 1} of {ENC_LAYERS}" in text
            assert narration.startswith(f"Encoder layer {layer + 1}")
            continue
        t, sub = divmod(frame - ENC_SUBS, DEC_SUBS)
        assert f"Time step {t + 1} of {len(steps)}" in text and f"sub-step {sub + 1} of {DEC_SUBS}" in text
        chosen = shown["chosen"]
        if sub == DEC_SUBS - 1:  # linear + softmax picks the character, which reaches the output
            assert sorted(lit) == ["dec-chosen", "dec-output"]
            assert chosen == [s["token"] for s in steps[: t + 1]]
            assert f"{steps[t]['prob']:.3f}" in narration
            top = ", ".join(f"P({c['token']}) = {c['prob']:.3f}" for c in steps[t]["top"][:3])
            assert top in narration, (narration, top)  # the three likeliest, in order
            if steps[t]["token"] == "<eos>":
                assert narration.endswith("most likely: <eos>, and the translation is finished.")
        elif sub == 0:  # the new token enters
            assert sorted(lit) == ["dec-embedding", "dec-tokens"]
            assert chosen == [s["token"] for s in steps[:t]]
            assert narration.startswith(f"Step {t + 1}:")
        else:
            assert chosen == [s["token"] for s in steps[:t]]
            layer, block = divmod(sub - 1, len(DEC_BLOCKS))
            assert lit == [f"d-{layer}-{DEC_BLOCKS[block]}"], (frame, lit)  # one block of one layer
            assert f"Decoder layer {layer + 1} of {DEC_LAYERS}" in text
            assert narration.startswith(f"Decoder layer {layer + 1}")
        assert shown["visible"] == trace["decoder_input"][: t + 1]
    assert page.locator("#xr-next").is_disabled()
    # play, pause, Home, End, speed, the scrubber
    page.keyboard.press("Home")
    assert f"sub-step 1 of {ENC_SUBS}" in where(page)
    page.select_option("#xr-speed", "4")
    page.locator("#xr-play").click()
    assert page.locator("#xr-play").get_attribute("aria-pressed") == "true"
    # playing at 4x moves the scrubber by itself; wait for two sub-steps, however busy the machine
    wait_until(lambda: int(page.locator("#xr-scrub").input_value()) >= 2, "the player advanced twice")
    page.keyboard.press("Space")
    assert page.locator("#xr-play").get_attribute("aria-pressed") == "false"
    played = int(page.locator("#xr-scrub").input_value())
    assert played >= 2
    assert parse_qs(urlsplit(page.url).query)["frame"] == [str(played)]
    page.keyboard.press("End")
    assert int(page.locator("#xr-scrub").input_value()) == total - 1
    page.keyboard.press("Shift+ArrowLeft")
    assert f"Time step {len(steps) - 1} of" in where(page)
    # the player stays in view however far down the page one scrolls
    page.mouse.wheel(0, 2500)
    wait_until(lambda: page.evaluate("window.scrollY") > 0, "the page scrolled")
    box = page.locator("#xr-player").bounding_box()
    assert 0 <= box["y"] < 120
    shot(page, "xray-played")


def test_the_encoder_runs_layer_by_layer_before_the_decoder(page, server):
    """At the first frame nothing past the tokens is computed; a layer's strips appear once it has
    run, and the decoder's memory (the last encoder layer's output) only when the encoder is done."""
    open_page(page, server)
    for layer in range(ENC_LAYERS):
        for block in ENC_BLOCKS:
            assert veiled_from(page, f"e-{layer}-{block}") == 0, (layer, block)
    assert veiled_from(page, "enc-embedding") == 0
    memory = page.locator('.xr-row[data-key="d-0-cross_attention"] rect.xr-veil[data-from="memory"]')
    assert memory.count() == 1
    assert page.locator('.xr-row[data-key="e-0-self_attention"] path').count() == 0
    page.goto(f"{server}{XRAY}?text={quote(SEED)}&frame={frame_of(0, 'ffn', 1)}")
    ready(page)
    assert active(page) == ["e-1-ffn"]
    assert "Encoder layer 2 of 3" in where(page)
    assert page.locator("#xr-narration").text_content().startswith("Encoder layer 2")
    for block in ENC_BLOCKS:
        assert veiled_from(page, f"e-0-{block}") is None
        assert veiled_from(page, f"e-2-{block}") == 0
    assert [veiled_from(page, f"e-1-{block}") for block in ENC_BLOCKS] == [None, None, None, 0]
    assert page.locator('.xr-row[data-key="e-0-self_attention"] path').count() > 0
    assert page.locator('.xr-row[data-key="e-2-self_attention"] path').count() == 0
    page.keyboard.press("End")  # decoding: the whole encoder is there, memory included
    assert all(veiled_from(page, f"e-{layer}-{block}") is None
               for layer in range(ENC_LAYERS) for block in ENC_BLOCKS)
    assert page.locator('rect.xr-veil[data-from="memory"]').count() == 0


def test_a_decoding_step_runs_its_layers_in_turn(page, server):
    """At step 2, while decoder layer 2's FFN runs: layer 1 has computed position 1, layer 2 up to
    its FFN, layer 3 not yet (its rows show only step 1's position); no output for step 2 yet."""
    trace = api(server, "/api/trace", {"text": SEED})
    open_page(page, server, f"&frame={frame_of(2, 'ffn', 1)}")
    assert active(page) == ["d-1-ffn"]
    assert "Time step 2 of" in where(page) and "Decoder layer 2 of 3" in where(page)
    assert page.locator("#xr-narration").text_content().startswith("Decoder layer 2, feed-forward")
    for block in DEC_BLOCKS:
        assert veiled_from(page, f"d-0-{block}") == 2
        assert veiled_from(page, f"d-2-{block}") == 1
    assert [veiled_from(page, f"d-1-{block}") for block in DEC_BLOCKS] == [2, 2, 2, 2, 2, 1]
    queries = lambda key: set(page.locator(f'.xr-row[data-key="{key}"] path').evaluate_all(  # noqa: E731
        "ps => ps.map(p => p.dataset.q)"))
    assert "1" in queries("d-0-self_attention") and "1" in queries("d-1-cross_attention")
    assert queries("d-2-self_attention") == {"0"}
    assert page.locator('.xr-row[data-key="dec-output"] g').count() == 0  # not computed yet
    chosen = page.locator('.xr-row[data-key="dec-chosen"] .xr-outrow span').all_text_contents()
    assert chosen == [trace["steps"][0]["token"]]
    page.locator("h1").click()
    for _ in range(frame_of(2, "output") - frame_of(2, "ffn", 1)):
        page.keyboard.press("ArrowRight")
    assert sorted(active(page)) == ["dec-chosen", "dec-output"]
    assert page.locator('.xr-row[data-key="dec-output"] g').count() > 0


def test_arrow_keys_scroll_the_block_computing_into_view(page, server):
    open_page(page, server, f"&frame={frame_of(1, 'ffn', 2)}")
    page.locator("h1").click()  # the top of the page; layer 3 is far below
    page.keyboard.press("ArrowRight")
    assert active(page) == ["d-2-add_norm3"]
    player = page.locator("#xr-player").bounding_box()
    box = page.locator('.xr-row[data-key="d-2-add_norm3"]').bounding_box()
    assert box["y"] >= player["y"] + player["height"] - 1 and box["y"] + box["height"] <= 800, (player, box)
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    page.keyboard.press("Shift+ArrowRight")  # step 2's embedding, back up the page
    box = page.locator('.xr-row[data-key="dec-embedding"]').bounding_box()
    player = page.locator("#xr-player").bounding_box()
    assert box["y"] >= player["y"] + player["height"] - 1 and box["y"] + box["height"] <= 800, (player, box)


def test_fast_mode_is_one_frame_per_time_step(page, server):
    trace = api(server, "/api/trace", {"text": SEED})
    steps = trace["steps"]
    open_page(page, server, f"&frame={frame_of(3, 'cross_attention', 1)}")
    page.select_option("#xr-detail", "steps")
    assert page.locator("#xr-scrub").get_attribute("max") == str(len(steps) + 1)  # start, encoder, steps
    assert "Time step 3 of" in where(page) and sorted(active(page)) == ["dec-chosen", "dec-output"]
    assert parse_qs(urlsplit(page.url).query)["detail"] == ["steps"]
    page.locator("h1").click()
    page.keyboard.press("ArrowRight")
    assert "Time step 4 of" in where(page)
    chosen = page.locator('.xr-row[data-key="dec-chosen"] .xr-outrow span').all_text_contents()
    assert chosen == [s["token"] for s in steps[:4]]
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")  # the whole encoder, as one frame
    assert active(page) == [f"e-{ENC_LAYERS - 1}-add_norm2"]
    assert veiled_from(page, "e-2-add_norm2") is None
    page.select_option("#xr-detail", "blocks")
    assert int(page.locator("#xr-scrub").input_value()) == frame_of(0, "add_norm2", ENC_LAYERS - 1)
    assert "detail" not in parse_qs(urlsplit(page.url).query)
    open_page(page, server, "&detail=steps&frame=2")  # a link keeps the mode
    assert page.locator("#xr-detail").input_value() == "steps" and "Time step 1 of" in where(page)


def test_attention_lines_follow_the_focused_token(page, server):
    trace = api(server, "/api/trace", {"text": SEED})
    open_page(page, server, f"&frame={frame_of(2, 'cross_attention', 2)}")  # step 2 (坐 next), layer 3
    cross = page.locator('.xr-row[data-key="d-2-cross_attention"] path')
    weights = [sum(h[1][k] for h in trace["decoder"][2]["cross_attention"]) / 4
               for k in range(len(trace["source_tokens"]))]
    drawn = {int(p["k"]): float(p["w"]) for p in cross.evaluate_all(
        "ps => ps.filter(p => p.dataset.q === '1').map(p => ({k: p.dataset.k, w: p.dataset.w}))")}
    for k, w in drawn.items():
        assert close(w, weights[k], 1e-3)
    assert max(drawn, key=drawn.get) == max(range(len(weights)), key=weights.__getitem__)
    page.select_option("#xr-head", "2")
    # one head's lines need every head's weights: they come on request (/api/xray/heads)
    page.wait_for_function("""() => [...document.querySelectorAll(
        '.xr-row[data-key="d-2-cross_attention"] path')].every((p) => p.dataset.h === '2')""")
    head = {int(p["k"]): float(p["w"]) for p in cross.evaluate_all(
        "ps => ps.filter(p => p.dataset.q === '1').map(p => ({k: p.dataset.k, w: p.dataset.w}))")}
    for k, w in head.items():
        assert close(w, trace["decoder"][2]["cross_attention"][2][1][k], 1e-3)
    assert parse_qs(urlsplit(page.url).query)["head"] == ["2"]
    page.select_option("#xr-head", "all")  # every head at once, one colour each (as BertViz does)
    heads = set(cross.evaluate_all("ps => ps.map(p => p.dataset.h)"))
    assert heads <= {"0", "1", "2", "3"} and len(heads) >= 2
    # hovering an English token keeps only its own lines in every encoder layer
    page.locator('.xr-row[data-key="enc-tokens"] .xr-token').nth(1).hover()
    queries = set(page.locator('.xr-row[data-key="e-0-self_attention"] path').evaluate_all(
        "ps => ps.map(p => p.dataset.q)"))
    assert queries == {"1"}
    # ... and, in the decoder, only the cross-attention lines that reach it
    keys = set(cross.evaluate_all("ps => ps.map(p => p.dataset.k)"))
    assert keys <= {"1"}
    heat = page.locator('.xr-row[data-key="d-2-cross_attention"] a.xr-heat').get_attribute("href")
    assert heat.startswith("/attention?") and "kind=cross" in heat and "layer=2" in heat


def test_open_every_kind_of_block_and_compare_with_the_trace(page, server):
    trace = api(server, "/api/trace", {"text": SEED})
    open_page(page, server, f"&frame={frame_of(3, 'embedding')}")  # time step 3: query position 2
    p = 2
    # embedding (encoder, position 1 by default: "cat")
    panel = open_block(page, "enc-embedding")
    assert all_close(shown_values(panel, "sum"), trace["embeddings"]["encoder"]["sum"][1][:8], 1e-3)
    # encoder self-attention: every key is allowed, weights are the trace's
    panel = open_block(page, "e-0-self_attention")
    assert None not in cell_values(panel, "masked")
    assert all_close(cell_values(panel, "weights"), trace["encoder"][0]["self_attention"][0][1], 1e-3)
    for step in ("x", "w_q", "q_full", "split", "q", "k", "raw", "scaled", "masked", "weights",
                 "heatmap", "w_v", "v", "out", "concat", "w_o", "result"):
        assert panel.locator(f'.xr-step[data-step="{step}"]').count() == 1, step
    assert "÷ √d_k = ÷ 8" in panel.text_content()
    # masked decoder self-attention: the future is −∞, drawn and labelled
    panel = open_block(page, "d-1-self_attention")
    masked = cell_values(panel, "masked")
    assert masked[: p + 1] == [v for v in masked[: p + 1] if v is not None]
    assert masked[p + 1:] == [None] * (len(masked) - p - 1)
    assert panel.locator('.xr-step[data-step="masked"] .xr-inf').first.text_content().endswith("−∞")
    panel.locator(".xr-tabs button", has_text="2").click()
    assert all_close(cell_values(panel, "weights"), trace["decoder"][1]["self_attention"][1][p], 1e-3)
    # cross-attention
    panel = open_block(page, "d-2-cross_attention")
    assert all_close(cell_values(panel, "weights"), trace["decoder"][2]["cross_attention"][0][p], 1e-3)
    # Add & Norm: μ, σ and the output are the trace's
    panel = open_block(page, "d-0-add_norm1")
    stats = trace["decoder"][0]["add_norm1"]
    step = panel.locator('.xr-step[data-step="stats"]')
    assert close(float(step.get_attribute("data-mean")), stats["sum_mean"][p], 1e-3)
    assert close(float(step.get_attribute("data-std")), stats["sum_std"][p], 1e-3)
    assert all_close(shown_values(panel, "result"), stats["normed_sample"][p][:8], 2e-3)
    assert panel.locator('.xr-step[data-step="gamma"]').count() == 1
    assert panel.locator('.xr-step[data-step="beta"]').count() == 1
    # FFN: how many hidden units fire
    panel = open_block(page, "d-1-ffn")
    active = int(panel.locator('.xr-step[data-step="hidden"]').get_attribute("data-active"))
    assert close(active / 1024, trace["decoder"][1]["ffn"]["active_share"][p], 1e-3)
    # linear + softmax: the top candidates and their probabilities
    panel = open_block(page, "dec-output")
    rows = panel.locator("tr").evaluate_all("rs => rs.map(r => [r.dataset.token, r.dataset.prob])")
    for (token, prob), candidate in zip(rows, trace["steps"][p]["top"], strict=False):
        assert token == candidate["token"] and close(float(prob), candidate["prob"], 1e-4)
    # the open blocks follow the player to the next time step
    page.locator("h1").click()
    page.keyboard.press("Shift+ArrowRight")
    expect(panel.locator("tr").first).to_have_attribute(
        "data-token", trace["steps"][p + 1]["top"][0]["token"])
    page.locator(".xr-group.xr-zoomed").scroll_into_view_if_needed()  # the zoom followed the player
    shot(page, "xray-blocks")


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), [
    (0.7, None, None), (1.8, None, None), (1.0, 3, None), (1.3, None, 0.8), (2.5, 6, 0.95),
])
def test_sampling_controls_match_the_servers_distribution(page, server, temperature, top_k, top_p):
    trace = api(server, "/api/trace", {"text": SEED})
    step = 2
    open_page(page, server, f"&frame={frame_of(step + 1, 'output')}")
    set_range(page, "#xr-temperature", temperature)
    set_range(page, "#xr-topk", top_k or 0)
    set_range(page, "#xr-topp", top_p or 1)
    body = {"text": SEED, "strategy": "sample", "temperature": temperature, "seed": 0,
            "forced_prefix": trace["target_tokens"][:step]}
    if top_k:
        body["top_k"] = top_k
    if top_p:
        body["top_p"] = top_p
    server_step = api(server, "/api/trace", body)["steps"][step]
    shown = {r["token"]: r for r in page.locator("#xr-dist-body tr").evaluate_all(
        "rs => rs.map(r => ({token: r.dataset.token, model: +r.dataset.model, now: +r.dataset.new,"
        " cut: r.classList.contains('xr-cut')}))")}
    assert len(shown) >= len(server_step["top"])
    for candidate in server_step["top"]:
        row = shown[candidate["token"]]
        assert close(row["model"], candidate["prob"], 1e-4)
        assert close(row["now"], candidate["sample_prob"], 1e-4), (candidate, row)
        if row["cut"]:
            assert candidate["sample_prob"] == 0
        if candidate["sample_prob"] > 0:
            assert not row["cut"]
    kept = page.locator("#xr-kept").text_content()
    assert "tokens stay" in kept
    page.fill("#xr-seed", "7")
    page.locator("#xr-draw-button").click()
    drew = page.locator("#xr-drew").text_content()
    assert "seed 7" in drew
    if (temperature, top_k) == (1.0, 3):
        shot(page, "xray-sampling")


def test_force_a_candidate_and_see_both_translations(page, server):
    trace = api(server, "/api/trace", {"text": SEED})
    step = 2
    open_page(page, server, f"&frame={frame_of(step + 1, 'output')}")
    row = page.locator("#xr-dist-body tr").nth(1)
    token = row.get_attribute("data-token")
    assert token != trace["steps"][step]["token"]
    row.locator("button").click()
    wait_reloaded(page)
    page.locator("#xr-compare").wait_for()
    forced = parse_qs(urlsplit(page.url).query)["forced"]
    assert forced == [*trace["target_tokens"][:step], token]
    original = page.locator("#xr-original li").all_text_contents()
    assert original == [s["token"] for s in trace["steps"]]
    after = page.locator("#xr-forced li").all_text_contents()
    assert after[: step + 1] == forced
    assert page.locator("#xr-original li.xr-diff").get_attribute("data-step") == str(step)
    assert page.locator("#xr-forced li.xr-diff").text_content() == token
    assert f"step {step + 1}" in page.locator("#xr-diverge").text_content()
    # the forced run plays from the step that was changed, the forced character marked
    assert f"Time step {step + 1} of" in where(page)
    assert page.locator('.xr-row[data-key="dec-chosen"] .xr-forced').count() == step + 1
    page.locator("#xr-compare").scroll_into_view_if_needed()
    shot(page, "xray-forced")
    page.locator("#xr-reset").click()
    ready(page)
    assert "forced" not in page.url and page.locator("#xr-compare").is_hidden()


def test_beam_search_lineage_tree(page, server):
    open_page(page, server, "&strategy=beam&beam_size=3")
    trace = api(server, "/api/trace", {"text": SEED, "strategy": "beam", "beam_size": 3})
    assert page.locator("#xr-beam").is_visible()
    assert page.locator("#xr-beam-svg g.xr-beam-node").count() == len(trace["beam"])
    assert page.locator("#xr-beam-svg line").count() == len(trace["beam"]) - 1
    winner = page.locator("#xr-finished li.xr-winner")
    assert winner.count() == 1 and "".join(trace["target_tokens"]) in winner.text_content()
    assert page.locator("#xr-no-end").is_hidden()


def test_beam_tree_ranks_the_open_hypotheses_when_none_ended(page, server):
    """max_len 3 stops the search before any <eos>: as app/pages/decode.py's beam_lineage does,
    the open hypotheses (all of length 3, so by log p) are ranked rather than none listed."""
    open_page(page, server, "&strategy=beam&beam_size=3&max_len=3")
    trace = api(server, "/api/trace", {"text": SEED, "strategy": "beam", "beam_size": 3, "max_len": 3})
    nodes = trace["beam"]
    assert not any(n["finished"] for n in nodes)
    parents = {n["parent"] for n in nodes}
    open_ = sorted((n for n in nodes if n["step"] == 3 and n["id"] not in parents), key=lambda n: -n["score"])
    assert len(open_) == 3
    ranked = page.locator("#xr-finished li")
    assert ranked.evaluate_all("lis => lis.map(li => +li.dataset.node)") == [n["id"] for n in open_]
    winner = page.locator("#xr-finished li.xr-winner")
    assert winner.count() == 1 and winner.text_content().startswith("".join(trace["target_tokens"]))
    assert page.locator("#xr-no-end").is_visible()


def test_chinese_and_narrow_screen(browser, server):
    context = browser.new_context(viewport={"width": 390, "height": 844}, locale="zh-CN",
                                  extra_http_headers={"Accept-Language": "zh-CN"})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        open_page(page, server, f"&frame={frame_of(2, 'cross_attention')}")
        assert page.locator("h1").text_content().startswith("透视")
        assert "交叉注意力" in page.locator("#xr-narration").text_content()
        open_block(page, "d-0-cross_attention")
        open_block(page, "d-0-add_norm2")
        set_range(page, "#xr-topk", 4)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, width
        wide = page.locator("main *").evaluate_all(
            "els => els.filter(e => e.getBoundingClientRect().right > 391 && e.offsetParent)"
            ".map(e => e.tagName + '.' + e.className)")
        assert wide == []
        encoder = page.locator("#xr-encoder").bounding_box()
        decoder = page.locator("#xr-decoder").bounding_box()
        assert decoder["y"] > encoder["y"] + encoder["height"] - 1  # the columns stack
        shot(page, "xray-390")
    finally:
        context.close()
    assert errors == []


def test_user_text_is_never_markup(page, server):
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    text = '<img src=x onerror=alert(1)> the cat "sits" & <b>purrs</b>'
    page.goto(f"{server}{XRAY}?text={quote(text)}&max_len=8&frame=8")
    ready(page)
    assert page.locator("main img").count() == 0
    assert page.locator("main b", has_text="purrs").count() == 0
    tokens = page.locator('.xr-row[data-key="enc-tokens"] .xr-token').all_text_contents()
    assert "cat" in tokens and "<unk>" in tokens  # shown as text, never parsed
    assert page.locator("#text").input_value() == text
    assert dialogs == []


def test_an_open_block_links_to_switching_it_off(page, server):
    """Each block that /ablation can switch off says so where it is opened (issue 28)."""
    open_page(page, server, f"&frame={frame_of(3, 'embedding')}")
    panel = open_block(page, "d-1-cross_attention")
    panel.locator(".xr-tabs button", has_text="2").click()
    links = page.locator('.xr-row[data-key="d-1-cross_attention"] .xr-switch-off')
    assert [links.nth(i).get_attribute("data-part") for i in range(links.count())] == ["cross.2.2", "cross.2"]
    parts = {}
    for key in ("e-0-ffn", "enc-embedding", "d-0-add_norm1"):
        open_block(page, key)
        found = page.locator(f'.xr-row[data-key="{key}"] .xr-switch-off')
        parts[key] = [found.nth(i).get_attribute("data-part") for i in range(found.count())]
    assert parts == {"e-0-ffn": ["encffn.1"], "enc-embedding": ["pos.enc"], "d-0-add_norm1": []}
    # opening d-0's block zoomed into decoder layer 1: layer 2's open panel waits, drawn small
    assert not links.first.is_visible()
    page.locator('.xr-group-title[data-zoom="d-1"]').click()
    links.first.click()
    page.wait_for_url("**/ablation**")
    assert parse_qs(urlsplit(page.url).query)["off"] == ["cross.2.2"]
    assert parse_qs(urlsplit(page.url).query)["text"] == [SEED]
    page.wait_for_load_state("networkidle")
    page.locator("body.busy").wait_for(state="detached")
    assert page.locator('#switchboard [data-part="cross.2.2"]').get_attribute("aria-pressed") == "true"
