"""What a new sentence costs the x-ray page on the wire, before and after issue 27, and proof that
the one answer carries the very numbers the page showed before.

    python -m bench.xray_payload                      # sizes, then the 200 answers compared
    python -m bench.xray_payload --sizes-only

Sizes are bytes as sent (gzip as the server sends it: its middleware at level 1 for JSON, the
x-ray's packed answers gzipped once per trace at level 6), in-process on the shipped checkpoint,
greedy, for new 5/10/20/40-word sentences and one of 128 source tokens. "Before" is what the page
downloaded until issue 27 — ``/api/trace`` and ``/api/xray`` (gone since; :func:`old_answer`
computes its answer) for every sentence; "after" is
``/api/xray/view``, its one download for the landing frame; ``/api/xray/strips`` (the decoder's
strips, asked for when the player first moves), ``/api/xray/logits`` (every step's logits, asked
for when a sampling knob first turns) and an opened block are listed apart.

The comparison decodes every ``/api/xray/view`` (with its ``/api/xray/strips``) of
``bench.answers``' 200 requests (25 sentences × 8 strategies) as ``static/js/xray/data.js`` does
and checks every number the page reads against ``/api/trace`` and ``/api/xray`` of the same
request: equal, not close (the strips after their Add & Norm corrections are undone; the
sampling table's Σ exp and kept mass within 10⁻¹⁵, numpy's exp against math.exp; each decoder
row's ±m against ``robust_scale`` of its decoded strips).
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import sys

import numpy as np
import orjson

from app import xray
from app.palette import robust_scale
from bench.common import sentences
from model.explain.record import ATTENTION_KINDS
from model.tokenizer import MAX_SOURCE_TOKENS

MAX_TEXT = 600  # characters the API accepts
GZIP = {"Accept-Encoding": "gzip"}


def longest_text(tokenize) -> str:
    """A sentence of exactly MAX_SOURCE_TOKENS tokens (with <eos>) within MAX_TEXT characters."""
    words = " and ".join(s.rstrip(".").lower() for s in sentences(5, 40, offset=3)).split()
    text = ""
    for word in words:
        longer = f"{text} {word}".strip()
        if len(longer) + 1 > MAX_TEXT or len(tokenize(longer + ".")) > MAX_SOURCE_TOKENS:
            break
        text = longer
    return text[0].upper() + text[1:] + "."


def wire(client, path: str, body: dict) -> int:
    """Bytes of the answer's body as sent (compressed when the server compresses)."""
    answer = client.post(path, json=body, headers=GZIP)
    assert answer.status_code == 200, answer.text
    return answer.num_bytes_downloaded


def sizes(client, texts: dict[str, str]) -> list[dict]:
    rows = []
    for name, text in texts.items():
        body = {"text": text}
        trace = client.post("/api/trace", json=body).json()
        rows.append({
            "sentence": name, "source_tokens": len(trace["source_tokens"]), "steps": len(trace["steps"]),
            "trace": wire(client, "/api/trace", body), "xray": old_wire(client, body),
            "view": wire(client, "/api/xray/view", body),
            "strips": wire(client, "/api/xray/strips", body),
            **plain_view(client, body),
            "heads": wire(client, "/api/xray/heads", body),
            "logits": wire(client, "/api/xray/logits", body),
            "block": wire(client, "/api/xray/block", {**body, "side": "decoder",
                                                      "block": "self_attention", "layer": 0,
                                                      "position": 0}),
        })
    return rows


def old_answer(client, body: dict) -> dict:
    """What ``POST /api/xray`` answered until it went (issue 56; no page read it): every stage's
    strips as int8 codes with one scale per position (base64), and every step's logits (float32,
    base64) with the vocabulary — computed here with torch from the trace's recorded pass, apart
    from ``app/xray``'s numpy, as the reference the packed answers are held to."""
    import torch

    from app.pages.xray import XrayRequest

    state = client.app.state
    trace, _ = state.engine.trace(XrayRequest(**body))
    recorded = trace.recorded
    logits = recorded.logits[: len(trace.steps)].float().contiguous()
    answer = {"vocab": state.translator.chinese.vocabulary,
              "logits": {"shape": list(logits.shape),
                         "float32": base64.b64encode(logits.numpy().astype("<f4").tobytes()).decode()},
              "length_penalty": trace.options.get("length_penalty", 0.6)}
    for side in ("encoder", "decoder"):
        stages, values = [], []
        for name, layer, vectors in recorded.stages(side):
            scales = vectors.detach().abs().amax(dim=-1).float()
            scales = torch.where(scales > 0, scales, torch.ones_like(scales))
            codes = torch.round(vectors.detach().float() / scales[:, None] * 127).to(torch.int8)
            stages.append({"name": name, "layer": layer})
            values.append({"scale": float(scales.max()), "scales": scales.tolist(),
                           "shape": list(vectors.shape),
                           "codes": base64.b64encode(codes.numpy().tobytes()).decode("ascii")})
        answer[side] = {"stages": stages, "values": values}
    return answer


def old_wire(client, body: dict) -> int:
    """:func:`old_answer`'s bytes as the server sent them (JSON, gzip level 1)."""
    import gzip

    return len(gzip.compress(orjson.dumps(old_answer(client, body)), compresslevel=1, mtime=0))


def plain_view(client, body: dict) -> dict:
    """The view as packed before its attention went as head averages (every head's weights in
    it, as they are now in /api/xray/heads), gzipped as the server gzips it, and what each part of
    today's view costs (gzipped alone, KB): where the bytes go."""
    import gzip

    from app.pages.xray import XrayRequest

    state = client.app.state
    trace, _ = state.engine.trace(XrayRequest(**body))
    vocabulary = state.translator.chinese.vocabulary
    norms = state.translator.norm_parameters()
    view_body, strips_body = xray.view(trace, vocabulary, norms=norms), xray.decoder_strips_view(trace, norms)
    header, arrays = xray.unpack_all(view_body, strips_body)
    _, every = xray.unpack(xray.heads_view(trace))
    before = {}
    for name, array in arrays.items():
        if not name.startswith("attention."):
            before[name] = array
        elif name.endswith(".sum") and ".overall" not in name:
            kind = name.split(".")[1]
            before[f"attention.{kind}"] = every[f"attention.{kind}"]
    old_header = {k: v for k, v in header.items() if k not in ("arrays", "attention_mean_of")}
    plain = gzip.compress(xray.pack(old_header, before), compresslevel=6, mtime=0)
    # the view as it was before the decoder's strips went apart: both answers' arrays in one
    whole = gzip.compress(xray.pack(old_header, arrays), compresslevel=6, mtime=0)
    view_header, _ = xray.unpack(view_body)
    parts = {"header": len(gzip.compress(orjson.dumps(view_header), 6))}
    for name, array in arrays.items():
        group = "strips corrections" if name.split(".")[-1] in (
            "corrections", "beyond_gaps", "beyond", "gamma", "beta") else name.split(".")[0]
        if name.startswith("strips.") and name.count(".") == 1:
            group = "strips (other stages)"
        elif name.endswith(".scales"):
            group = "strip scales"
        if name.startswith("strips.decoder"):
            group = f"/api/xray/strips: {group}"
        elif name.startswith("attention."):
            group = "attention (head averages and their nudges)"
        parts[group] = parts.get(group, 0) + len(gzip.compress(array.tobytes(), 6))
    return {"view_plain": len(plain), "view_whole": len(whole), "parts": parts}


def _planes(planes: np.ndarray) -> np.ndarray:
    p = planes.astype(np.int64)
    return p[0] | (p[1] << 8) | (p[2] << 16)


def _mean(arrays: dict, name: str, means: dict, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """A head average as data.js decodes it, and where it is exact: where ``.exact`` is set,
    sum / (n · 10⁵) nudged by its ulps; elsewhere coarse / 100."""
    n = means["overall" if kind == "cross.overall" else "heads"]
    shape = tuple(means["shapes"][kind])
    exact = np.unpackbits(arrays[f"{name}.exact"])[: math.prod(shape)].astype(bool)
    base = _planes(arrays[f"{name}.sum"]).astype(np.float64) / (n * 1e5)
    out = np.empty(exact.size)
    out[exact] = (base.view(np.int64) + arrays[f"{name}.nudge"]).view(np.float64)
    out[~exact] = arrays[f"{name}.coarse"] / 100
    return out.reshape(shape), exact.reshape(shape)


def page_mean(matrices: list) -> list:
    """What the page took before as the mean of several [query][key] matrices of the trace's
    numbers (overlay.js headWeights, narration.js): the float sum in order, then ÷ n."""
    total = np.zeros(np.asarray(matrices[0]).shape)
    for matrix in matrices:
        total = total + np.asarray(matrix, dtype=np.float64)
    return (total / len(matrices)).tolist()


def shown_mean(mean: np.ndarray, exact: np.ndarray, want: list) -> bool:
    """The view's head average against the page's own from every head: equal (``==``) wherever
    a line is drawn (weight ≥ 0.03) and at each row's three largest; elsewhere below 0.03, at
    most 0.01 under, never above — so no row's largest three, their order or any line changes."""
    want = np.asarray(want)
    largest = np.argsort(-want, axis=-1, kind="stable")[..., : xray.NAMED]
    needed = want >= xray.LINE_FROM
    np.put_along_axis(needed, largest, True, axis=-1)
    rest = ~exact
    return bool((exact == needed).all() and (mean[exact] == want[exact]).all()
                and (mean[rest] <= want[rest]).all() and (want[rest] - mean[rest] < 0.01).all()
                and (mean[rest] < xray.LINE_FROM).all()
                and (np.argsort(-mean, axis=-1, kind="stable")[..., : xray.NAMED] == largest).all())


def heads(body: bytes) -> dict[str, list]:
    """/api/xray/heads decoded: kind → [layer][head][query][key] as the trace's numbers."""
    _, arrays = xray.unpack(body)
    return {name.split(".")[1]: (_planes(array) / 1e5).tolist() for name, array in arrays.items()}


def shown(body: bytes, strips: bytes) -> dict:
    """The view and its decoder strips as static/js/xray/data.js decodes them, in /api/trace's
    and /api/xray's shapes."""
    header, arrays = xray.unpack_all(body, strips)

    def layers(side):
        norms = arrays[f"norms.{side}"] / 1e3
        ffn = arrays[f"ffn.{side}"] / 1e4
        names = ["add_norm1", "add_norm2"] + (["add_norm3"] if side == "decoder" else [])
        out = []
        self_name = "attention.encoder" if side == "encoder" else "attention.decoder_self"
        means = _mean(arrays, self_name, header["attention_means"],
                      "encoder" if side == "encoder" else "decoder_self")
        cross = _mean(arrays, "attention.cross", header["attention_means"], "cross")
        for layer in range(len(means[0])):
            row = {"self_attention_mean": (means[0][layer], means[1][layer]),
                   "ffn": {"active_share": ffn[layer].tolist()}}
            if side == "decoder":
                row["cross_attention_mean"] = (cross[0][layer], cross[1][layer])
            for a, add_norm in enumerate(names):
                row[add_norm] = {norm: norms[layer, a, k].tolist()
                                 for k, norm in enumerate(header["norms"])}
            out.append(row)
        return out

    strips = {}
    decoded = xray.strip_codes(header, arrays)  # the Add & Norm corrections undone
    for side in ("encoder", "decoder"):
        codes = decoded[side]
        scales = arrays[f"strips.{side}.scales"]
        strips[side] = [{"scale": stage["scale"], "scales": scales[s], "codes": codes[s]}
                        for s, stage in enumerate(header["stages"][side])]
    overall = _mean(arrays, "attention.cross.overall", header["attention_means"], "cross.overall")
    return {"header": header, "encoder": layers("encoder"), "decoder": layers("decoder"),
            "cross_overall": overall, "strips": strips, "sampling_ids": arrays["sampling.ids"],
            "sampling_logits": arrays["sampling.logits"]}


def _js_sum(row: np.ndarray) -> tuple[float, float, int, float]:
    """sampling.js at temperature 1, written out: max, Σ exp(l − max) left to right, how many
    keep a probability above 0, the mass they hold."""
    finite = row[np.isfinite(row)].astype(np.float64)
    top = float(finite.max())
    total = 0.0
    exps = [math.exp(float(x) - top) if math.isfinite(x) else 0.0 for x in row]
    for e in exps:
        total += e
    kept, mass = 0, 0.0
    for e in exps:
        if e / total > 0:
            kept += 1
            mass += e / total
    return top, total, kept, mass


def differences(client, body: dict) -> list[str]:
    """Where the view differs from /api/trace and what /api/xray answered (:func:`old_answer`;
    empty: every shown number equal)."""
    found = []
    trace = client.post("/api/trace", json=body).json()
    old = old_answer(client, body)
    view = shown(client.post("/api/xray/view", json=body).content,
                 client.post("/api/xray/strips", json=body).content)
    header = view["header"]

    def same(what, a, b):
        if a != b:
            found.append(what)

    for key in ("text", "translation", "finished", "source_tokens", "target_tokens",
                "decoder_input", "options", "beam"):
        same(key, header[key], trace[key])
    same("length_penalty", header["length_penalty"], old["length_penalty"])
    same("steps", header["steps"], [{"token": s["token"], "prob": s["prob"], "forced": s["forced"],
                                     "top": [{"token": c["token"], "prob": c["prob"]}
                                             for c in s["top"][:5]]} for s in trace["steps"]])
    same("embedding_head", header["embedding_head"],
         [row[:3] for row in trace["embeddings"]["encoder"]["sum"]])
    for side in ("encoder", "decoder"):
        for layer, (mine, theirs) in enumerate(zip(view[side], trace[side], strict=True)):
            for key, value in mine.items():
                if key.endswith("_mean"):  # the average the page took of every head before
                    if not shown_mean(*value, page_mean(theirs[key.removesuffix("_mean")])):
                        found.append(f"{side}.{layer}.{key}")
                    continue
                same(f"{side}.{layer}.{key}", value, {k: theirs[key][k] for k in value})
    if not shown_mean(*view["cross_overall"], page_mean(
            [head for layer in trace["decoder"] for head in layer["cross_attention"]])):
        found.append("cross_overall")
    every = heads(client.post("/api/xray/heads", json=body).content)
    for kind, (side, sublayer) in ATTENTION_KINDS.items():
        same(f"heads.{kind}", every[kind], [layer[sublayer] for layer in trace[side]])
        for s, stage in enumerate(old[side]["values"]):
            mine = view["strips"][side][s]
            same(f"strips.{side}.{s}.scale", mine["scale"], stage["scale"])
            same(f"strips.{side}.{s}.scales", mine["scales"].tolist(), stage["scales"])
            same(f"strips.{side}.{s}.codes", mine["codes"].tobytes(),
                 np.frombuffer(base64.b64decode(stage["codes"]), np.int8).tobytes())
    # each decoder row's ±m, shown before its strips come: robustScale of the decoded strips
    lanes = len(trace["steps"])
    for s, stage in enumerate(view["strips"]["decoder"]):
        rows = (stage["codes"][:lanes].astype(np.float64)
                * (stage["scales"][:lanes].astype(np.float64) / 127)[:, None]).astype(np.float32)
        same(f"strip_ranges.decoder.{s}", header["strip_ranges"]["decoder"][s],
             robust_scale(rows.tolist()))
    if body.get("forced_prefix"):
        plain = client.post("/api/trace", json={k: v for k, v in body.items()
                                                 if k != "forced_prefix"}).json()
        same("original", header["original"], [s["token"] for s in plain["steps"]])
    else:
        same("original", header["original"], None)
    # the sampling table's rows: the 15 likeliest of all logits, and the page's own sums
    steps, vocab = old["logits"]["shape"]
    logits = np.frombuffer(base64.b64decode(old["logits"]["float32"]),
                           "<f4").reshape(steps, vocab)
    rows = header["sampling"]
    for t in range(steps):
        order = sorted(range(vocab), key=lambda i: -float(logits[t, i]))[:15]  # stable: ties by id
        same(f"sampling.{t}.ids", view["sampling_ids"][t].tolist(), order)
        same(f"sampling.{t}.logits", view["sampling_logits"][t].tolist(), logits[t, order].tolist())
        same(f"sampling.{t}.tokens", rows["tokens"][t], [old["vocab"][i] for i in order])
        # the largest logit and the count exactly; Σ exp and the mass to 10⁻¹⁵: the server sums
        # numpy's exp, this sum math.exp's (the browser's is V8's), which differ in the last bit
        # for ~5 % of arguments, so a sum may too (tests/e2e/test_xray_formulas.py: every shown
        # digit the same)
        top, total, kept, mass = _js_sum(logits[t])
        same(f"sampling.{t}.max", rows["max"][t], top)
        same(f"sampling.{t}.kept", rows["kept"][t], kept)
        if not (math.isclose(rows["sum"][t], total, rel_tol=1e-15)
                and math.isclose(rows["mass"][t], mass, rel_tol=1e-15)):
            found.append(f"sampling.{t}.sums")
    return found


def compare(client) -> tuple[int, dict[str, int]]:
    from bench.answers import OPTIONS, SENTENCES

    where: dict[str, int] = {}
    count = 0
    for text in SENTENCES:
        for options in OPTIONS:
            count += 1
            for place in differences(client, {"text": text, **options}):
                key = place.split(".")[0] if "." in place else place
                where[key] = where.get(key, 0) + 1
    return count, where


def kb(n: int) -> str:
    return f"{n / 1000:,.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-only", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    with TestClient(create_app(Settings(request_timeout_s=300, cache_size=512, cache_mb=8192,
                                        access_log=False))) as client:
        english = client.app.state.translator.english
        texts = {f"{n} words": sentences(n, 1, offset=27_000 + n)[0] for n in (5, 10, 20, 40)}
        texts["128 tokens"] = longest_text(english.encode)
        rows = sizes(client, texts)
        print("| sentence | source tokens | steps | before issue 27: /api/trace + /api/xray "
              "| /api/xray/view with every head and the decoder's strips "
              "| with the decoder's strips | now: /api/xray/view (landing) | now / before issue 27 "
              "| when the player moves: /api/xray/strips | a head picked: /api/xray/heads "
              "| when a knob turns: /api/xray/logits | an opened block |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            before = r["trace"] + r["xray"]
            print(f"| {r['sentence']} | {r['source_tokens']} | {r['steps']} | {kb(r['trace'])} + "
                  f"{kb(r['xray'])} = {kb(before)} KB | {kb(r['view_plain'])} KB | "
                  f"{kb(r['view_whole'])} KB | **{kb(r['view'])} KB** | {r['view'] / before:.1%} | "
                  f"{kb(r['strips'])} KB | {kb(r['heads'])} KB | {kb(r['logits'])} KB | "
                  f"{kb(r['block'])} KB |")
        print("\nwhere the bytes of /api/xray/view and /api/xray/strips go (each part gzipped alone, KB):")
        groups = list(rows[0]["parts"])
        print("| part | " + " | ".join(r["sentence"] for r in rows) + " |")
        print("|---|" + "---|" * len(rows))
        for group in groups:
            print(f"| {group} | " + " | ".join(kb(r["parts"].get(group, 0)) for r in rows) + " |")
        result = {"sizes": rows}
        if not args.sizes_only:
            count, where = compare(client)
            result["compared"], result["differ"] = count, where
            print(f"\n{count} requests compared (every number the page reads, view vs /api/trace "
                  f"and /api/xray): {where or 'all equal'}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)
    return 1 if result.get("differ") else 0


if __name__ == "__main__":
    sys.exit(main())
