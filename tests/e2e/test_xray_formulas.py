"""The x-ray's browser copies of Python formulas equal their originals. The JS runs in node (the
modules are pure: no page at import time); the Python is the code the server runs:

- static/js/xray/sampling.js ``filterDistribution`` = ``model.decoding.filter_distribution``
- static/js/xray/beam.js ``lengthPenalty`` = GNMT's penalty, ``model.decoding.length_penalty``
  (what beam search divides by; /decode's beam table uses it too)
- static/js/xray/beam.js ``beamHypotheses`` = the ranking of ``app.pages.decode.beam_lineage``
  (ended hypotheses; the open ones when none ended), on simulated and on real beam trees.
"""

from __future__ import annotations

import base64
import json
import math
import subprocess
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from app import xray
from app.pages.decode import beam_lineage
from bench.xray_payload import page_mean, shown, shown_mean
from model.decoding import filter_distribution, length_penalty
from tests.e2e.test_xray import SEED, api

pytestmark = pytest.mark.e2e
NODE = "/usr/bin/node"
XRAY_JS = Path(__file__).resolve().parents[2] / "static" / "js" / "xray"
VOCAB = 3891  # the shipped model's Chinese vocabulary: the size of a real logits row

# Reads {filter, penalty, beams} as JSON on stdin (null stands for −∞), prints the JS answers.
RUNNER = """
import { filterDistribution } from "%(sampling)s";
import { beamHypotheses, lengthPenalty } from "%(beam)s";
const chunks = [];
process.stdin.on("data", (c) => chunks.push(c));
process.stdin.on("end", () => {
  const input = JSON.parse(Buffer.concat(chunks).toString());
  const filter = input.filter.map(({ logits, cases }) => {
    const row = Float32Array.from(logits, (x) => (x === null ? -Infinity : x));
    return cases.map(([temperature, topK, topP]) =>
      Array.from(filterDistribution(row, temperature, topK, topP).probs));
  });
  const penalty = input.penalty.map(([length, alpha]) => lengthPenalty(length, alpha));
  const beams = input.beams.map(({ nodes, alpha }) => beamHypotheses(nodes, alpha).map((h) => (
    { node: h.node.id, tokens: h.tokens, length: h.length, penalty: h.penalty, score: h.score })));
  process.stdout.write(JSON.stringify({ filter, penalty, beams }));
});
"""


def run_js(payload: dict) -> dict:
    script = RUNNER % {"sampling": (XRAY_JS / "sampling.js").as_uri(), "beam": (XRAY_JS / "beam.js").as_uri()}
    done = subprocess.run([NODE, "--input-type=module", "-e", script], input=json.dumps(payload),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def logit_rows(rng: np.random.Generator) -> list[np.ndarray]:
    """float32 logits as the page gets them: real-sized rows with <pad> and <bos> at −∞, small and
    sharp ones, one finite entry, and rows with ties."""
    rows = []
    for n, spread in [(VOCAB, 3.0), (VOCAB, 8.0), (VOCAB, 0.3), (500, 2.0), (50, 5.0), (7, 1.0), (3, 0.1)]:
        for _ in range(3):
            row = (rng.standard_normal(n) * spread + rng.uniform(-5, 5)).astype(np.float32)
            row[:2] = -np.inf
            rows.append(row)
    rows.append(np.array([-np.inf, -np.inf, 1.5, -np.inf], dtype=np.float32))  # one possible token
    rows.append(np.array([0.25, -1.0], dtype=np.float32))
    return rows


TIES = [np.array([-np.inf, -np.inf, 1, 2, 2, 2, 0, 1, 2, -1], dtype=np.float32),
        np.array([0, 0, 0, 0, 0], dtype=np.float32),  # 0.2 each: top_p 0.2, 0.4 fall on a boundary
        np.array([0, 0], dtype=np.float32)]


def settings(rng: np.random.Generator, n: int, ties: bool) -> list[tuple[float, int | None, float | None]]:
    """Edge cases (top_k 1, n − 1, n and beyond; top_p tiny, 1.0, and, with ties, exactly on a
    cumulative mass; the extreme temperatures) and random mixtures."""
    ks = [None, 1, 2, 3, max(n - 1, 1), n, n + 5]
    ps = [None, 1e-6, 0.01, 0.3, 0.9, 0.999, 1.0] + ([0.2, 0.4, 0.5, 0.6] if ties else [])
    cases = [(t, None, None) for t in (0.05, 0.5, 1.0, 2.0, 5.0)]
    cases += [(1.0, k, None) for k in ks] + [(1.0, None, p) for p in ps] + [(0.05, 1, 1e-6), (5.0, n, 1.0)]
    for _ in range(12):
        temperature = float(np.float32(rng.uniform(0.05, 5)))
        cases.append((temperature, ks[rng.integers(len(ks))], ps[rng.integers(len(ps))]))
    return cases


def python_filter(row: np.ndarray, case: tuple) -> np.ndarray:
    temperature, top_k, top_p = case
    # float64, as the JS computes: the same formula at the same precision, from the same float32 logits
    return filter_distribution(torch.from_numpy(row.astype(np.float64)), temperature, top_k, top_p).numpy()


def test_filter_distribution_is_the_pythons():
    rng = np.random.default_rng(0)
    rows = [(row, settings(rng, len(row), ties=False), False) for row in logit_rows(rng)]
    rows += [(row, settings(rng, len(row), ties=True), True) for row in TIES]
    payload = {"filter": [{"logits": [None if math.isinf(x) else float(x) for x in row], "cases": cases}
                          for row, cases, _ in rows]}
    answers = run_js({**payload, "penalty": [], "beams": []})["filter"]
    compared = 0
    for (row, cases, ties), got_rows in zip(rows, answers, strict=True):
        for case, got in zip(cases, got_rows, strict=True):
            want = python_filter(row, case)
            got = np.array(got)
            if ties and case[2] is not None:
                # which of two equal tokens sorts first is in neither formula: compare the values
                got, want = np.sort(got), np.sort(want)
            assert np.array_equal(got > 0, want > 0), (len(row), case)  # the same tokens kept
            assert np.abs(got - want).max() <= 1e-6, (len(row), case, np.abs(got - want).max())
            assert abs(got.sum() - 1) <= 1e-9
            compared += 1
    assert compared > 500


def test_length_penalty_is_the_pythons():
    pairs = [(length, alpha) for length in range(0, 257) for alpha in (0.0, 0.2, 0.6, 1.0, 1.5, 2.0)]
    got = run_js({"filter": [], "penalty": pairs, "beams": []})["penalty"]
    for (length, alpha), value in zip(pairs, got, strict=True):
        assert value == pytest.approx(length_penalty(length, alpha), rel=1e-12, abs=0)


def simulated_beam(rng: np.random.Generator, beam: int, vocab: int, max_len: int, alpha: float) -> list[dict]:
    """A beam search on random log-probabilities, with model.decoding._beam_search's rules (an
    <eos> counts only within the beam; stop at `beam` ended or at max_len; the winner is the best
    ended hypothesis, else the best open one), recorded as the trace records its nodes."""
    eos = 0
    nodes = [{"id": 0, "step": 0, "token": "<bos>", "parent": -1, "score": 0.0, "finished": False,
              "selected": False}]
    live, ended = [0], []
    for position in range(max_len):
        candidates = []
        for parent in live:
            logits = rng.standard_normal(vocab) * 2
            logits[eos] += rng.uniform(-4, 2)
            log_probs = logits - np.log(np.exp(logits).sum())
            candidates += [(round(nodes[parent]["score"] + float(lp), 4), parent, token)
                           for token, lp in enumerate(log_probs)]
        candidates.sort(key=lambda c: -c[0])
        next_live = []
        for rank, (score, parent, token) in enumerate(candidates[: 2 * beam]):
            if len(next_live) == beam:
                break
            if token == eos and rank >= beam:
                continue
            node = {"id": len(nodes), "step": position + 1, "parent": parent, "score": score,
                    "token": "<eos>" if token == eos else chr(0x4E00 + token), "finished": token == eos,
                    "selected": False}
            nodes.append(node)
            if token == eos:
                ended.append((score / length_penalty(position, alpha), node["id"]))
            else:
                next_live.append(node["id"])
        live = next_live
        if len(ended) >= beam or not live or position + 1 == max_len:
            break
    if not ended:
        ended = [(nodes[n]["score"] / length_penalty(nodes[n]["step"], alpha), n) for n in live]
    cursor = max(ended)[1]
    while cursor >= 0:
        nodes[cursor]["selected"] = True
        cursor = nodes[cursor]["parent"]
    return nodes


def python_hypotheses(nodes: list[dict], alpha: float, beam: int) -> list[dict]:
    trace = SimpleNamespace(beam=[SimpleNamespace(**n) for n in nodes],
                            options={"length_penalty": alpha, "beam_size": beam})
    return beam_lineage(trace)["hypotheses"]


def assert_same_ranking(trees: list[tuple[list[dict], float, int]]) -> int:
    answers = run_js({"filter": [], "penalty": [],
                      "beams": [{"nodes": nodes, "alpha": alpha} for nodes, alpha, _ in trees]})["beams"]
    none_ended = 0
    for (nodes, alpha, beam), got in zip(trees, answers, strict=True):
        want = python_hypotheses(nodes, alpha, beam)
        assert [h["node"] for h in got] == [h["node"] for h in want], (alpha, beam, got, want)
        for g, w in zip(got, want, strict=True):
            assert g["tokens"] == w["tokens"] and g["length"] == w["length"]
            assert abs(g["penalty"] - w["penalty"]) <= 5e-5 and abs(g["score"] - w["score"]) <= 5e-5
        assert sum(w["winner"] for w in want) == 1 and want
        none_ended += not any(n["finished"] for n in nodes)
    return none_ended


def test_beam_ranking_is_the_pythons_on_simulated_trees():
    rng = np.random.default_rng(1)
    trees = []
    for _ in range(150):
        beam, max_len = int(rng.integers(1, 9)), int(rng.integers(1, 12))
        alpha = float(rng.choice([0.0, 0.6, 1.0, 2.0]))
        trees.append((simulated_beam(rng, beam, int(rng.integers(3, 12)), max_len, alpha), alpha, beam))
    none_ended = assert_same_ranking(trees)
    assert 10 <= none_ended <= 140  # both branches of the rule are exercised


@pytest.fixture()
def server(shipped_server):
    """The app on the shipped checkpoint: real beam trees (one server for the whole run)."""
    return shipped_server


def test_beam_ranking_is_the_pythons_on_real_trees(server):
    trees = []
    for text in (SEED, "The woman said that she was tired.", "Where is the station?"):
        for beam, max_len in ((1, 128), (3, 128), (5, 128), (3, 2), (4, 4), (8, 3)):
            trace = api(server, "/api/trace", {"text": text, "strategy": "beam", "beam_size": beam,
                                               "max_len": max_len})
            trees.append((trace["beam"], trace["options"]["length_penalty"], beam))
    assert assert_same_ranking(trees) >= 3  # the short max_len runs end before any <eos>


# static/js/xray/data.js decodes /api/xray/view, /api/xray/strips and /api/xray/logits; reads a
# list of {view, logits, heads, strips} (base64) on stdin and prints what the page would hold,
# and where the sampling table drawn from the view's rows differs from the one drawn from every
# logit.
VIEW_RUNNER = """
import { decodeHeads, decodeLogits, decodeStrips, decodeView } from "%(data)s";
import { filterDistribution } from "%(sampling)s";
const chunks = [];
process.stdin.on("data", (c) => chunks.push(c));
process.stdin.on("end", () => {
  const bytes = (text) => {
    const b = Buffer.from(text, "base64");
    return b.buffer.slice(b.byteOffset, b.byteOffset + b.length);
  };
  const out = JSON.parse(Buffer.concat(chunks).toString()).map(({ view, logits, heads, strips }) => {
    const { trace, xr, original } = decodeView(bytes(view));
    decodeStrips(bytes(strips), xr);
    const before = trace.heads;  // false: the view carries the head averages only
    const means = [...trace.encoder, ...trace.decoder].map(
      (layer) => [layer.self_attention_mean, layer.cross_attention_mean ?? null]);
    decodeHeads(bytes(heads), trace);
    const all = decodeLogits(bytes(logits));
    const differ = [];
    let rows = 0;
    let same = 0;
    xr.sampling.forEach((row, t) => {
      const probs = filterDistribution(all.logits[t], 1, null, null).probs;  // what the table showed
      let kept = 0;
      let mass = 0;
      for (let i = 0; i < probs.length; i++) if (probs[i] > 0) { kept++; mass += probs[i]; }
      const order = Array.from(probs.keys()).sort((a, b) => probs[b] - probs[a]).slice(0, 15);
      if (order.join() !== row.ids.join()) differ.push([t, "order"]);
      row.ids.forEach((id, i) => {
        rows++;
        const p = Math.exp(row.logits[i] - row.max) / row.sum;
        if (p === probs[id]) same++;
        const shown = (x) => [x.toFixed(6), x.toFixed(4), x.toFixed(3)].join();
        const off = Math.abs(p - probs[id]) > 1e-15 * probs[id];
        if (off || shown(p) !== shown(probs[id])) differ.push([t, "p", id, p, probs[id]]);
        if (row.tokens[i] !== all.vocab[id]) differ.push([t, "token", id]);
      });
      if (kept !== row.kept) differ.push([t, "kept", kept, row.kept]);
      const percent = (x) => (x * 100).toFixed(1);
      const far = Math.abs(mass - row.mass) > 1e-12;
      if (far || percent(mass) !== percent(row.mass)) differ.push([t, "mass", mass, row.mass]);
    });
    const strip = Array.from(xr.decoder.values[xr.decoder.values.length - 1][0]);
    return { trace, original, differ, rows, same, strip, vocab: xr.vocabSize, before, means };
  });
  process.stdout.write(JSON.stringify(out));
});
"""


def raw(server: str, path: str, body: dict) -> bytes:
    request = urllib.request.Request(f"{server}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return response.read()


def test_the_views_sampling_rows_and_numbers_are_what_the_page_drew_before(server):
    """data.js on /api/xray/view gives the page /api/trace's numbers exactly, and the sampling
    table drawn from the view's 15 rows (exp(logit − max) / sum) is the one sampling.js draws
    from every logit at the knobs' starting values — the only setting the rows serve; any other
    turns every logit in (tests/e2e/test_xray_download.py). The browser computes exp(logit − max)
    itself; the sum and the kept mass come from the server's exp (numpy's, not V8's), so the
    last bit may differ: every shown digit (4 and 6 decimals, the mass to 0.1 %) is the same, the
    values within 10⁻¹⁵ (relative) and 10⁻¹², and nearly every probability equal bit for bit."""
    bodies = [{"text": text, **options}
              for text in (SEED, "Where is the train station?",
                           "After the meeting, the students walked to the library.")
              for options in ({}, {"strategy": "beam", "beam_size": 4},
                              {"strategy": "sample", "temperature": 1.5, "seed": 2},
                              {"forced_prefix": ["我"]})]
    payload = [{"view": base64.b64encode(raw(server, "/api/xray/view", b)).decode(),
                "logits": base64.b64encode(raw(server, "/api/xray/logits", b)).decode(),
                "heads": base64.b64encode(raw(server, "/api/xray/heads", b)).decode(),
                "strips": base64.b64encode(raw(server, "/api/xray/strips", b)).decode()}
               for b in bodies]
    script = VIEW_RUNNER % {"data": (XRAY_JS / "data.js").as_uri(),
                            "sampling": (XRAY_JS / "sampling.js").as_uri()}
    done = subprocess.run([NODE, "--input-type=module", "-e", script], input=json.dumps(payload),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    rows = same = 0
    for body, item, got in zip(bodies, payload, json.loads(done.stdout), strict=True):
        trace = api(server, "/api/trace", body)
        assert got["differ"] == [], body
        # the head averages: the ones bench.xray_payload decodes, float for float, and those are
        # the page's own mean of every head wherever a line or a number shows it
        assert got["before"] is False
        mine = shown(base64.b64decode(item["view"]), base64.b64decode(item["strips"]))
        layers = mine["encoder"] + mine["decoder"]
        for (self_mean, cross_mean), layer, theirs in zip(
                got["means"], layers, trace["encoder"] + trace["decoder"], strict=True):
            assert self_mean == layer["self_attention_mean"][0].tolist()
            assert shown_mean(*layer["self_attention_mean"], page_mean(theirs["self_attention"]))
            if cross_mean is not None:
                assert cross_mean == layer["cross_attention_mean"][0].tolist()
                assert shown_mean(*layer["cross_attention_mean"], page_mean(theirs["cross_attention"]))
        assert got["trace"]["cross_overall"] == mine["cross_overall"][0].tolist()
        rows += got["rows"]
        same += got["same"]
        for side in ("encoder", "decoder"):
            for mine, theirs in zip(got["trace"][side], trace[side], strict=True):
                for key, value in mine.items():
                    if key.endswith("_mean"):
                        continue  # compared above
                    want = theirs[key] if key.endswith("attention") else {k: theirs[key][k] for k in value}
                    assert value == want, (body, side, key)
        assert got["trace"]["steps"] == [
            {"token": s["token"], "prob": s["prob"], "forced": s["forced"],
             "top": [{"token": c["token"], "prob": c["prob"]} for c in s["top"][:5]]}
            for s in trace["steps"]]
        assert got["trace"]["beam"] == trace["beam"]
        head = got["trace"]["embeddings"]["encoder"]["sum"]
        assert head == [row[:3] for row in trace["embeddings"]["encoder"]["sum"]]
        if body.get("forced_prefix"):
            plain = api(server, "/api/trace", {"text": body["text"]})
            assert [s["token"] for s in got["original"]["steps"]] == [s["token"] for s in plain["steps"]]
        header, arrays = xray.unpack_all(base64.b64decode(item["view"]), base64.b64decode(item["strips"]))
        codes = xray.strip_codes(header, arrays)["decoder"][-1][0]  # torch's: tests/e2e/test_xray_strips.py
        factor = float(arrays["strips.decoder.scales"][-1][0]) / 127
        assert got["strip"] == [float(np.float32(c * factor)) for c in codes.tolist()]
        assert got["vocab"] == len(xray.unpack(base64.b64decode(item["logits"]))[0]["vocab"])
    assert rows >= 12 * 15 * 5
    assert same >= 0.9 * rows
