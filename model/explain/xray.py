"""What the x-ray page reads of a trace's recorded pass, as plain data.

* :func:`payload` — every token's full vector after every stage (the colour strips, int8 codes
  with one scale), and each decoding step's logits over the whole Chinese vocabulary (float32, so
  the browser can redo temperature, top-k and top-p itself);
* :func:`open_block` — one block opened at one position: X·W_Q → Q, the heads, QKᵀ, ÷√d_k, the
  mask, softmax, ·V, concatenation, ·W_O; residual + LayerNorm with γ and β; the FFN; the output.

* :func:`view` — everything the x-ray page draws for one sentence, in one answer: the strips, the
  attention weights averaged over the heads (as the lines draw them first), the Add & Norm and FFN
  numbers the narration quotes, the steps, the beam tree, and the sampling table's rows at the
  knobs' starting values; typed arrays packed by :func:`pack`;
* :func:`heads_view` — every head's attention weights, asked for only when a learner picks a head
  or opens an attention block;
* :func:`logits_view` — every step's logits and the vocabulary, asked for only when a learner
  turns a sampling knob or draws.

All read the pass the trace was recorded with (``Trace.recorded``): nothing runs the encoder or
the decoder again.

**The packed answer** (``pack``; ``static/js/xray/data.js`` reads it): a little-endian uint32 N,
N bytes of UTF-8 JSON (the header), then the arrays, each at a multiple of 4 bytes, as the header's
``arrays`` lists them (``{name: {dtype, shape, offset}}``, offset from the end of the header).
Every number travels as the page shows it, with nothing lost to what the trace says: attention
weights as the integers of the trace's 5-decimal rounding (w × 10⁵, split into three byte planes,
which gzip packs ~25 % smaller than whole uint32s; a head average as the sum of those integers
and the few ulps by which the page's float64 mean differs from sum / (n · 10⁵), :func:`page_mean`,
so the page's average is the one it took from every head before), Add & Norm sizes as × 10³ (3 decimals),
FFN shares as × 10⁴ (4 decimals) — ``code / 10ᵈ`` is exactly the float the trace's JSON gives —
and strips as the same int8 codes as ``/api/xray`` (the colours are those of those codes).

**Add & Norm strips are sent as corrections to a prediction** (:func:`norm_prediction`), still
exactly the same codes: an Add & Norm's output is LayerNorm(residual + sublayer), and both are
the two strips before it, so the page computes LayerNorm of their decoded values (γ and β sent
as int8, which only makes the guess rougher) and rounds it to a code; the answer carries
code − guess (mod 256: int8), which is 0 for ~75 % of the values and gzips to ~1.5 bits instead
of ~7. Every step of the guess is integer sums or IEEE float64 operations in a fixed order, so
numpy here and JavaScript in the browser compute the same guess bit for bit, and the decoded
codes are the codes (``strip_codes``; ``tests/e2e/test_xray_strips.py`` checks the browser's).
"""

from __future__ import annotations

import base64
import math

import numpy as np
import orjson
import torch

from model.explain.record import ADD_NORM_NAMES, SUBLAYERS, RecordedPass
from model.explain.trace import Trace, active_shares, add_norm_sizes, asdict_list, head_codes

BLOCK_DIGITS = 4
PREVIEW = 32  # weight matrices are shown as PREVIEW × PREVIEW block means (honestly labelled)
OUTPUT_TOP = 20
SAMPLING_ROWS = 15  # the sampling table's rows (static/js/xray/whatif.js DIST_ROWS)
BARS = 5  # the output row's bars (static/js/xray/rows.js TOP_BARS)
NORMS = ("residual_norm", "sublayer_norm", "normed_norm")  # what the narration quotes
DECODER_ONLY = {"cross_attention", "add_norm3", "output"}
LINE_FROM = 0.03  # the weight from which static/js/xray/overlay.js draws an attention line
# a strip row's colours span ±m with this share of a typical token's |values| inside it
# (app/palette.py's robust_scale and the CSS --robust-share read it from here)
ROBUST_SHARE = 0.98
NAMED = 3  # a row's largest weights the page names (overlay.js describeAttention, narration.js)


def _round(values: torch.Tensor, digits: int) -> list:
    return torch.round(values.detach().double(), decimals=digits).tolist()


def _strip_codes(vectors: torch.Tensor) -> tuple[float, np.ndarray, np.ndarray]:
    """``_strip``'s numbers as arrays: the stage's largest |value|, each position's own scale
    (its largest |value|, float32) and the int8 codes, value ≈ code / 127 × scale[position].

    One scale per position, not per stage: a stage where one token's vector is huge (the
    feed-forward output at "." or <eos>, ~200 against ~2 elsewhere) would otherwise round every
    other token's values to code 0, and its strips would be drawn blank."""
    scales = vectors.detach().abs().amax(dim=-1).float()
    scales = torch.where(scales > 0, scales, torch.ones_like(scales))
    codes = torch.round(vectors.detach().float() / scales[:, None] * 127).to(torch.int8).numpy()
    return float(scales.max()), scales.numpy().astype(np.float32), codes


def _strip(vectors: torch.Tensor) -> dict:
    """(L, D) vectors → int8 codes (base64, row-major) and one scale per position: value ≈
    code / 127 × scales[position]; ``scale`` is the largest of them.

    The strips are colours, so 1/127 of a token's largest value is finer than any colour step;
    the exact numbers are in the trace and in the opened blocks.
    """
    scale, scales, codes = _strip_codes(vectors)
    return {"scale": scale, "scales": scales.tolist(), "shape": list(vectors.shape),
            "codes": base64.b64encode(np.ascontiguousarray(codes).tobytes()).decode("ascii")}


def payload(trace: Trace, vocabulary: list[str]) -> dict:
    """The strips of both sides and the logits of every step (see the module docstring).

    ``encoder.values[stage]`` and ``decoder.values[stage]`` hold every position's full d_model
    vector as int8 codes with one scale (see ``_strip``). ``logits`` is steps × vocabulary,
    little-endian float32 in base64, exactly the model's numbers (−inf where the model may never
    produce the token: <pad>, <bos>), so softmax(logits / T), top-k and top-p can be redone in the
    browser as ``model.decoding.filter_distribution`` does.
    """
    recorded = trace.recorded
    logits = recorded.logits[: len(trace.steps)].float().contiguous()
    sides = {}
    for side in ("encoder", "decoder"):
        stages = recorded.stages(side)
        sides[side] = {
            "stages": [{"name": name, "layer": layer} for name, layer, _ in stages],
            "values": [_strip(vectors) for _, _, vectors in stages],
        }
    return {
        "vocab": vocabulary,
        "logits": {"shape": list(logits.shape),
                   "float32": base64.b64encode(logits.numpy().astype("<f4").tobytes()).decode()},
        "length_penalty": trace.options.get("length_penalty", 0.6),
        **sides,
    }


# -- the one answer the page reads ------------------------------------------------------------


def pack(header: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """A JSON header and typed arrays in one body (the layout is in the module docstring)."""
    layout, parts, offset = {}, [], 0
    for name, array in arrays.items():
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False)
        layout[name] = {"dtype": str(array.dtype), "shape": list(array.shape), "offset": offset}
        raw = data.tobytes()
        parts.append(raw + b"\0" * (-len(raw) % 4))
        offset += len(parts[-1])
    head = orjson.dumps({**header, "arrays": layout})
    head += b" " * (-len(head) % 4)
    return len(head).to_bytes(4, "little") + head + b"".join(parts)


def unpack(body: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """``pack``'s body → (header, arrays); what static/js/xray/data.js reads, for tests and bench."""
    length = int.from_bytes(body[:4], "little")
    header = orjson.loads(body[4 : 4 + length])
    arrays = {name: np.frombuffer(body, dtype=np.dtype(spec["dtype"]).newbyteorder("<"),
                                  count=math.prod(spec["shape"]),
                                  offset=4 + length + spec["offset"]).reshape(spec["shape"])
              for name, spec in header["arrays"].items()}
    return header, arrays


def _planes(codes: np.ndarray) -> np.ndarray:
    """uint32 codes below 2²⁴ → (3, …) uint8: the low, middle and high bytes apart."""
    return np.stack([(codes >> shift) & 0xFF for shift in (0, 8, 16)]).astype(np.uint8)


def _fixed(values, digits: int, dtype) -> np.ndarray:
    """Numbers the trace rounded to ``digits`` decimals → the integers value × 10^digits."""
    return np.rint(np.asarray(values, dtype=np.float64) * 10**digits).astype(dtype)


def _sampling_rows(logits: torch.Tensor) -> dict:
    """Per step, the sampling table at temperature 1 without top-k or top-p, as
    ``static/js/xray/sampling.js`` computes it from all the logits: the 15 likeliest tokens' ids
    and float32 logits, the largest logit and Σ exp(logit − max) summed in vocabulary order in
    float64 (so the page's exp(logit − max) / sum is the table's probability), how many tokens
    keep a probability above 0 and the mass they hold. numpy's exp may differ from the browser's
    in the last bit, so the sum may too: every shown digit is the same, the values within 10⁻¹⁵
    (tests/e2e/test_xray_formulas.py). Other knob settings need every logit (``logits_view``)."""
    values = logits.double().numpy()  # (T, V), −inf where the model may never produce the token
    top = np.stack([_likeliest(row, SAMPLING_ROWS) for row in values])
    maxima = values.max(axis=1)
    with np.errstate(invalid="ignore"):
        exps = np.exp(values - maxima[:, None])  # exp(−inf) = 0
    sums = np.cumsum(exps, axis=1)[:, -1]  # left to right, as the page's loop adds
    probs = exps / sums[:, None]
    kept = probs > 0
    mass = np.cumsum(np.where(kept, probs, 0.0), axis=1)[:, -1]
    return {"ids": top.astype(np.uint16),
            "logits": np.take_along_axis(values, top, axis=1).astype(np.float32),
            "max": maxima.tolist(), "sum": sums.tolist(), "kept": kept.sum(axis=1).tolist(),
            "mass": mass.tolist()}


def _likeliest(row: np.ndarray, count: int) -> np.ndarray:
    """The indices of the ``count`` largest values, largest first, ties by index (the order of
    the page's stable sort)."""
    count = min(count, row.size)
    threshold = np.partition(row, row.size - count)[row.size - count]
    candidates = np.flatnonzero(row >= threshold)
    return candidates[np.lexsort((candidates, -row[candidates]))][:count]


def norm_parameters(model) -> dict[str, list[tuple[np.ndarray, np.ndarray, float]]]:
    """Each side's Add & Norm LayerNorms in the order of ``RecordedPass.stages``: (γ, β, ε)."""
    out = {}
    for side in ("encoder", "decoder"):
        layers = model.encoder_layers if side == "encoder" else model.decoder_layers
        norms = [getattr(layer, ADD_NORM_NAMES[side][sublayer]).norm
                 for layer in layers for sublayer in SUBLAYERS[side]]
        out[side] = [(norm.weight.detach().double().numpy(), norm.bias.detach().double().numpy(),
                      float(norm.eps)) for norm in norms]
    return out


def _int8_with_step(values: np.ndarray) -> tuple[np.ndarray, float]:
    """values ≈ code × step (int8 codes, float64 step: exact in JSON)."""
    top = float(np.abs(values).max())
    step = top / 127 if top > 0 else 1.0
    return np.clip(np.rint(values / step), -127, 127).astype(np.int8), step


def norm_prediction(residual: np.ndarray, residual_scales: np.ndarray, sublayer: np.ndarray,
                    sublayer_scales: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float,
                    scales: np.ndarray) -> np.ndarray:
    """The int8 codes LayerNorm(residual + sublayer) · γ + β would get at ``scales``, from the two
    strips' codes ((L, D) int) and scales ((L,) float32): static/js/xray/data.js's
    ``normPrediction``, operation for operation (the sums are exact integers; every float64
    operation is the same in both, in the same order)."""
    a, b = residual.astype(np.int64), sublayer.astype(np.int64)
    d = a.shape[1]
    sa = residual_scales.astype(np.float64) / 127
    sb = sublayer_scales.astype(np.float64) / 127
    sum_a, sum_b = a.sum(axis=1), b.sum(axis=1)
    # d² × the variances and covariance of the codes, exact integers (< 2⁵³)
    caa = d * (a * a).sum(axis=1) - sum_a * sum_a
    cab = d * (a * b).sum(axis=1) - sum_a * sum_b
    cbb = d * (b * b).sum(axis=1) - sum_b * sum_b
    mean = (sa * sum_a + sb * sum_b) / d
    var = (sa * sa * caa + 2 * sa * sb * cab + sb * sb * cbb) / (d * d)
    den = np.sqrt(var + eps)
    y = ((sa[:, None] * a + sb[:, None] * b) - mean[:, None]) / den[:, None] * gamma + beta
    guess = np.floor(y / scales.astype(np.float64)[:, None] * 127 + 0.5)
    return np.clip(guess, -127, 127).astype(np.int64)


def _wrap(codes: np.ndarray) -> np.ndarray:
    """Integers → int8 modulo 256 (code − guess of two int8 codes in −127…127 comes back exactly
    as (guess + wrapped) mod 256)."""
    return (((codes.astype(np.int64) + 128) & 255) - 128).astype(np.int8)


def _predicted_stages(names: list[str]) -> list[int]:
    """The Add & Norm stages: each is LayerNorm(stage i − 2 + stage i − 1)."""
    return [i for i, name in enumerate(names) if name.startswith("add_norm")]


def _trits(corrections: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """int8 corrections (3 in 4 are 0, nearly all others ±1) → five per byte in base 3 (each
    clamped to −1…1, +1), and the few beyond ±1: the gaps between their flat indices (uint32)
    and their values (int8)."""
    flat = corrections.ravel().astype(np.int64)
    trits = np.clip(flat, -1, 1) + 1
    trits = np.concatenate([trits, np.ones(-trits.size % 5, np.int64)]).reshape(-1, 5)
    packed = (trits @ np.array([1, 3, 9, 27, 81])).astype(np.uint8)
    beyond = np.flatnonzero(np.abs(flat) > 1)
    gaps = np.diff(beyond, prepend=0).astype(np.uint32)
    return packed, gaps, flat[beyond].astype(np.int8)


def _untrits(packed: np.ndarray, gaps: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    """``_trits`` undone: the int8 corrections, flat."""
    digits = (packed.astype(np.int64)[:, None] // np.array([1, 3, 9, 27, 81])) % 3
    flat = (digits.ravel()[:count] - 1).astype(np.int8)
    flat[np.cumsum(gaps.astype(np.int64))] = values
    return flat


def _code_norms(codes: np.ndarray, scales: np.ndarray, names: list[str], norms) -> tuple:
    """(stages, L, D) codes → the header's coding (each Add & Norm stage, its norm's ε and the
    steps of γ and β) and the arrays: the other stages' codes, the Add & Norm stages' corrections
    (code − guess, ``_trits``) and γ, β as int8."""
    predicted = _predicted_stages(names)
    corrections, gammas, betas, specs = [], [], [], []
    for i, (gamma, beta, eps) in zip(predicted, norms, strict=True):
        g, g_step = _int8_with_step(gamma)
        b, b_step = _int8_with_step(beta)
        guess = norm_prediction(codes[i - 2], scales[i - 2], codes[i - 1], scales[i - 1],
                                g.astype(np.float64) * g_step, b.astype(np.float64) * b_step,
                                eps, scales[i])
        corrections.append(_wrap(codes[i].astype(np.int64) - guess))
        gammas.append(g)
        betas.append(b)
        specs.append({"stage": i, "eps": eps, "gamma_step": g_step, "beta_step": b_step})
    packed, gaps, values = _trits(np.stack(corrections))
    plain = np.delete(codes, predicted, axis=0)
    return specs, {"": plain, ".corrections": packed, ".beyond_gaps": gaps, ".beyond": values,
                   ".gamma": np.stack(gammas), ".beta": np.stack(betas)}


def strip_codes(header: dict, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A view's (stages, L, D) int8 strip codes per side, Add & Norm corrections undone (what
    static/js/xray/data.js decodes; answers packed before the corrections decode as they are)."""
    out = {}
    for side in ("encoder", "decoder"):
        if f"strips.{side}.scales" not in arrays:  # a view without its decoder strips
            continue
        coding = header.get("norm_prediction", {}).get(side)
        scales = arrays[f"strips.{side}.scales"]
        if not coding:
            out[side] = arrays[f"strips.{side}"].copy()
            continue
        stages, (length, d) = scales.shape[0], arrays[f"strips.{side}"].shape[1:]
        predicted = [spec["stage"] for spec in coding]
        codes = np.zeros((stages, length, d), np.int8)
        codes[[i for i in range(stages) if i not in predicted]] = arrays[f"strips.{side}"]
        corrections = _untrits(arrays[f"strips.{side}.corrections"],
                               arrays[f"strips.{side}.beyond_gaps"], arrays[f"strips.{side}.beyond"],
                               len(coding) * length * d).reshape(len(coding), length, d)
        for k, spec in enumerate(coding):
            i = spec["stage"]
            gamma = arrays[f"strips.{side}.gamma"][k].astype(np.float64) * spec["gamma_step"]
            beta = arrays[f"strips.{side}.beta"][k].astype(np.float64) * spec["beta_step"]
            guess = norm_prediction(codes[i - 2], scales[i - 2], codes[i - 1], scales[i - 1],
                                    gamma, beta, spec["eps"], scales[i])
            codes[i] = _wrap(guess + corrections[k])
        out[side] = codes
    return out


def view(trace: Trace, vocabulary: list[str], original: list[str] | None = None,
         model=None, alternative: dict | None = None) -> bytes:
    """Everything the x-ray page draws for one sentence, packed (see the module docstring);
    ``original``: when a prefix is forced, the tokens of the translation without it; ``model``:
    the model that made the trace, whose LayerNorms let the Add & Norm strips go as corrections
    to a guess (without it they go as plain codes); ``alternative``: the sentence translated with
    another decoding (``{strategy, beam_size, translation, finished}``), shown beside the
    player's."""
    recorded: RecordedPass = trace.recorded
    norms = norm_parameters(model) if model is not None else None
    arrays: dict[str, np.ndarray] = {}
    stages = {}
    coding = {}
    ranges = {}
    for side in ("encoder", "decoder"):
        stages[side], codes, scales = _side_strips(recorded, side)
        if side == "encoder":
            coding.update(_strip_arrays(arrays, side, stages[side], codes, scales, norms))
        else:  # drawn from the first decoding step on: decoder_strips_view, when the player moves
            ranges[side] = shown_ranges(codes, scales, len(trace.steps))
        # the trace's numbers, read from its recorded pass (its lists are not built for this):
        # (layers, Add & Norms, NORMS, positions) and (layers, positions)
        records = [r for sub in SUBLAYERS[side] for r in recorded.records(side, f"add_norm:{sub}")]
        sizes = add_norm_sizes(records, tuple(norm.removesuffix("_norm") for norm in NORMS))
        sizes = sizes.reshape(len(NORMS), len(SUBLAYERS[side]), recorded.n_layers(side), -1)
        arrays[f"norms.{side}"] = _fixed(sizes.transpose(2, 1, 0, 3), 3, np.uint32)
        arrays[f"ffn.{side}"] = _fixed(active_shares(recorded.records(side, "ffn")), 4, np.uint16)
    attention = _attention_codes(recorded)
    cross = attention["cross"]
    # how many weights each mean is of, and its shape: a layer's heads, [layer][query][key];
    # every layer's heads for the narration, [query][key]
    means = {"heads": int(cross.shape[1]), "overall": int(cross.shape[0] * cross.shape[1]),
             "shapes": {}}
    for kind, codes in attention.items():
        arrays.update(shown_means(f"attention.{kind}", codes, axis=1))
        means["shapes"][kind] = [codes.shape[0], *codes.shape[2:]]
    arrays.update(shown_means("attention.cross.overall", cross.reshape(-1, *cross.shape[2:]), axis=0))
    means["shapes"]["cross.overall"] = list(cross.shape[2:])
    sampling = _sampling_rows(recorded.logits[: len(trace.steps)])
    arrays["sampling.ids"] = sampling.pop("ids")
    arrays["sampling.logits"] = sampling.pop("logits")
    sampling["tokens"] = [[vocabulary[i] for i in row] for row in arrays["sampling.ids"].tolist()]
    steps = [{"token": step.token, "prob": step.prob, "forced": step.forced,
              "top": [{"token": c.token, "prob": c.prob} for c in step.top[:BARS]]}
             for step in trace.steps]
    header = {
        "text": trace.text, "translation": trace.translation, "finished": trace.finished,
        "source_tokens": trace.source_tokens, "target_tokens": trace.target_tokens,
        "decoder_input": trace.decoder_input, "options": trace.options,
        "length_penalty": trace.options.get("length_penalty", 0.6),
        "steps": steps, "beam": asdict_list(trace.beam), "original": original,
        "alternative": alternative,
        # the narration quotes the first three numbers of a source token's embedding
        "embedding_head": np.round(recorded.embedding("encoder")[:, :3].double().numpy(), 4).tolist(),
        "norms": list(NORMS), "stages": stages, "sampling": sampling,
        "vocab_size": len(vocabulary),
    }
    header["attention_means"] = means
    header["strip_ranges"] = ranges
    if coding:
        header["norm_prediction"] = coding
    return pack(header, arrays)


def decoder_strips_view(trace: Trace, model=None) -> bytes:
    """The decoder's strips, packed as :func:`view` packs the encoder's: asked for when the
    player first moves, since the landing frame (the encoder's first sub-step) draws none of them.
    ``unpack_all(view, decoder_strips_view)`` reads both as one view."""
    stages, codes, scales = _side_strips(trace.recorded, "decoder")
    arrays: dict[str, np.ndarray] = {}
    norms = norm_parameters(model) if model is not None else None
    coding = _strip_arrays(arrays, "decoder", stages, codes, scales, norms)
    return pack({"norm_prediction": coding} if coding else {}, arrays)


def unpack_all(*bodies: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """A view and its decoder strips (:func:`decoder_strips_view`) as one ``unpack``: the
    header's Add & Norm codings merged, the arrays side by side (for tests and bench)."""
    header: dict = {}
    arrays: dict[str, np.ndarray] = {}
    for body in bodies:
        head, more = unpack(body)
        coding = {**header.get("norm_prediction", {}), **head.pop("norm_prediction", {})}
        header.update(head)
        if coding:
            header["norm_prediction"] = coding
        arrays.update(more)
    return header, arrays


def _side_strips(recorded: RecordedPass, side: str) -> tuple[list[dict], np.ndarray, np.ndarray]:
    """One side's stages (name, layer, largest |value|), int8 codes (stages, L, D) and scales
    (stages, L)."""
    named = recorded.stages(side)
    strips = [_strip_codes(vectors) for _, _, vectors in named]
    stages = [{"name": name, "layer": layer, "scale": scale}
              for (name, layer, _), (scale, _, _) in zip(named, strips, strict=True)]
    return (stages, np.stack([codes for _, _, codes in strips]),
            np.stack([scales for _, scales, _ in strips]))


def _strip_arrays(arrays: dict, side: str, stages: list[dict], codes: np.ndarray,
                  scales: np.ndarray, norms) -> dict:
    """A side's strips into ``arrays`` (Add & Norm stages as corrections when ``norms`` are
    known); returns the header's coding for that side ({} without norms)."""
    arrays[f"strips.{side}.scales"] = scales
    if norms is None:
        arrays[f"strips.{side}"] = codes
        return {}
    coding, coded = _code_norms(codes, scales, [stage["name"] for stage in stages], norms[side])
    arrays.update({f"strips.{side}{suffix}": array for suffix, array in coded.items()})
    return {side: coding}


def shown_ranges(codes: np.ndarray, scales: np.ndarray, lanes: int) -> list[float]:
    """Each stage's ±m as the page takes it from its strips before drawing them (rows.js
    ``layoutRow``: ``robustScale`` of the first ``lanes`` positions' values, code × (scale / 127)
    rounded to float32 as data.js decodes them): the decoder rows show it beside their names
    before their strips come."""
    if lanes == 0:
        return [1.0] * len(codes)
    values = (codes[:, :lanes].astype(np.float64)
              * (scales[:, :lanes].astype(np.float64) / 127)[..., None]).astype(np.float32)
    d = values.shape[-1]
    per_row = np.sort(np.abs(values), axis=-1)[..., min(d - 1, int(d * ROBUST_SHARE))]
    middle = np.sort(per_row, axis=-1)[:, lanes // 2]
    return [float(m) or 1.0 for m in middle]


ATTENTION_KINDS = (("encoder", "encoder", "self_attention"), ("decoder_self", "decoder", "self_attention"),
                   ("cross", "decoder", "cross_attention"))


def _attention_codes(recorded: RecordedPass) -> dict[str, np.ndarray]:
    """Every attention weight as its trace code (w × 10⁵): kind → [layer][head][query][key]."""
    return {kind: head_codes(recorded.records(side, f"attention:{sublayer}"))
            for kind, side, sublayer in ATTENTION_KINDS}


def page_mean(codes: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """The mean of ``code / 10⁵`` over ``axis`` exactly as the page took it from every head's
    weights (JavaScript: the float64 sum in order, then ÷ n), sent in two small parts: the
    integer sum of the codes, and how many float64 steps (ulps) that mean lies from
    sum / (n · 10⁵), almost always 0. The page undoes it bit for bit (data.js ``means``)."""
    n = codes.shape[axis]
    parts = np.moveaxis(codes, axis, 0)
    total = np.zeros(parts.shape[1:])
    for part in parts:
        total = total + part.astype(np.float64) / 1e5
    mean = total / n
    sums = parts.sum(axis=0, dtype=np.int64)
    nudges = mean.view(np.int64) - (sums.astype(np.float64) / (n * 1e5)).view(np.int64)
    if sums.max(initial=0) >= 1 << 24 or np.abs(nudges).max(initial=0) > 127:
        raise ValueError("attention sums beyond three bytes or means beyond an int8 of ulps")
    return sums.astype(np.uint32), nudges.astype(np.int8)


def shown_means(name: str, codes: np.ndarray, axis: int) -> dict[str, np.ndarray]:
    """A head average as the page uses it: exactly (:func:`page_mean`) wherever the page draws or
    names it, coarsely elsewhere. The page draws a line from weight ``LINE_FROM`` on and names a
    row's ``NAMED`` largest weights (the narration's strongest key, a screen reader's three), so
    those go exactly: ``.exact`` a bitmap over [..][query][key] (np.packbits order), ``.sum`` and
    ``.nudge`` for the set bits in order. Every other weight is below ``LINE_FROM`` and goes as
    ``.coarse``: ⌊mean × 100⌋ (0, 1 or 2; never above the mean, so no row's largest change), which
    the page reads as coarse / 100 and never shows."""
    sums, nudges = page_mean(codes, axis)
    n = codes.shape[axis]
    mean = ((sums.astype(np.float64) / (n * 1e5)).view(np.int64) + nudges).view(np.float64)
    exact = mean >= LINE_FROM
    # JavaScript's sort is stable: among equal weights the first key comes first
    largest = np.argsort(-mean, axis=-1, kind="stable")[..., :NAMED]
    np.put_along_axis(exact, largest, True, axis=-1)
    rest = mean[~exact]
    coarse = np.floor(rest * 100)
    coarse -= coarse / 100 > rest  # ⌊ ⌋ of a rounded product can land one above
    return {f"{name}.exact": np.packbits(exact.reshape(-1)), f"{name}.sum": _planes(sums[exact]),
            f"{name}.nudge": nudges[exact], f"{name}.coarse": coarse.astype(np.uint8)}


def heads_view(trace: Trace) -> bytes:
    """Every head's attention weights (× 10⁵, three byte planes, [layer][head][query][key]),
    packed as :func:`view`: asked for only when a learner picks one head or all of them, or opens
    an attention block (the view carries the head average the page draws first)."""
    arrays = {f"attention.{kind}": _planes(codes)
              for kind, codes in _attention_codes(trace.recorded).items()}
    return pack({}, arrays)


def logits_view(trace: Trace, vocabulary: list[str]) -> bytes:
    """Every step's logits over the vocabulary (float32, exactly the model's; −inf where the
    model may never produce the token) and the vocabulary, packed: what the sampling knobs redo
    softmax, top-k and top-p on in the browser."""
    logits = trace.recorded.logits[: len(trace.steps)].float().numpy()
    return pack({"vocab": vocabulary}, {"logits": logits})


# -- one block, opened --------------------------------------------------------------------------


def _preview(weight: torch.Tensor) -> dict:
    """(in, out) matrix → PREVIEW×PREVIEW means of equal blocks (never a made-up picture)."""
    rows, cols = weight.shape
    r, c = min(PREVIEW, rows), min(PREVIEW, cols)
    pooled = weight[: rows // r * r, : cols // c * c].reshape(r, rows // r, c, cols // c).mean((1, 3))
    return {"shape": [rows, cols], "block": [rows // r, cols // c], "means": _round(pooled, 4),
            "max_abs": round(float(weight.abs().max()), 4)}


def _vec(values: torch.Tensor) -> list:
    return _round(values, BLOCK_DIGITS)


def _attention_block(module, record: dict, inputs: torch.Tensor, position: int,
                     key_tokens: list[str]) -> dict:
    x = inputs[position]
    heads = []
    for head in range(record["q"].size(1)):
        masked = record["masked"][0, head, position]
        heads.append({
            "q": _vec(record["q"][0, head, position]),
            "k": _vec(record["k"][0, head]),
            "v": _vec(record["v"][0, head]),
            "raw": _vec(record["raw"][0, head, position]),
            "scaled": _vec(record["scaled"][0, head, position]),
            "masked": [None if math.isinf(float(v)) else round(float(v), BLOCK_DIGITS)
                       for v in masked],
            "weights": _round(record["weights"][0, head, position], 5),
            "out": _vec(record["weights"][0, head, position] @ record["v"][0, head]),
        })
    concat = torch.cat([record["weights"][0, h, position] @ record["v"][0, h]
                        for h in range(len(heads))])
    return {
        "x": _vec(x),
        "key_tokens": key_tokens,
        "q_full": _vec(module.w_q(x)),
        "d_k": int(record["q"].size(-1)),
        "heads": heads,
        "concat": _vec(concat),
        "output": _vec(module.w_o(concat)),
        "weights": {name: _preview(getattr(module, name).weight.T)
                    for name in ("w_q", "w_k", "w_v", "w_o")},
    }


def _add_norm_block(module, record: dict, position: int) -> dict:
    summed = record["sum"][0, position]
    mean = summed.mean()
    var = summed.var(unbiased=False)
    normalized = (summed - mean) / torch.sqrt(var + module.norm.eps)
    return {
        "residual": _vec(record["residual"][0, position]),
        "sublayer": _vec(record["sublayer"][0, position]),
        "sum": _vec(summed),
        "mean": round(float(mean), 5),
        "std": round(float(var.sqrt()), 5),
        "eps": module.norm.eps,
        "normalized": _vec(normalized),
        "gamma": _vec(module.norm.weight),
        "beta": _vec(module.norm.bias),
        "output": _vec(record["normed"][0, position]),
    }


def _ffn_block(module, x: torch.Tensor, output: torch.Tensor) -> dict:
    pre = module.linear1(x)
    hidden = module.activate(pre)  # ReLU here; SiLU in Marian models
    return {
        "x": _vec(x),
        "pre": _vec(pre),
        "hidden": _vec(hidden),
        "active": int((hidden > 0).sum()),
        "output": _vec(output),
        "weights": {"w_1": _preview(module.linear1.weight.T),
                    "w_2": _preview(module.linear2.weight.T)},
    }


def block_positions(trace: Trace, side: str) -> list[str]:
    """The tokens of a side's positions that a block can be opened at: the source tokens, or the
    decoder input of every decoding step."""
    if side == "encoder":
        return trace.source_tokens
    return trace.decoder_input[: len(trace.steps)] or trace.decoder_input[:1]


@torch.inference_mode()
def open_block(translator, trace: Trace, side: str, block: str, layer: int, position: int) -> dict:
    """The numbers of one opened block at one position of the trace's recorded pass (the
    caller has checked ``layer`` and ``position``; ``block_positions`` gives the tokens)."""
    recorded: RecordedPass = trace.recorded
    config = translator.config
    model = translator.model
    tokens = block_positions(trace, side)
    p = position
    base = {"side": side, "block": block, "layer": layer, "position": p, "token": tokens[p],
            "sizes": {"d_model": config.d_model, "n_heads": config.n_heads,
                      "d_k": config.d_head, "d_ff": config.d_ff,
                      "vocab": translator.chinese.vocab_size, "length": len(tokens),
                      "source_length": len(trace.source_tokens)}}
    if block == "embedding":
        return {**base, "token_vector": _vec(recorded.embedding(side, "token")[p]),
                "position_vector": _vec(recorded.embedding(side, "position")[p]),
                "sum": _vec(recorded.embedding(side)[p]), "scale": math.sqrt(config.d_model)}
    if block == "output":
        logits = recorded.logits[p]
        probs = torch.softmax(logits, dim=-1)
        top = torch.topk(probs, min(OUTPUT_TOP, probs.numel()))
        return {**base, "x": _vec(recorded.final[p]),
                "top": [{"token": translator.chinese.id_to_token(i), "id": i,
                         "logit": round(float(logits[i]), 4), "prob": round(float(pr), 6)}
                        for pr, i in zip(top.values.tolist(), top.indices.tolist(),
                                         strict=True)],
                "weights": {"w_out": _preview(model.output.weight.T)},
                "tied": config.tie_output}
    module = (model.encoder_layers if side == "encoder" else model.decoder_layers)[layer]
    sublayer, record = recorded.block_records(side, block, layer)
    if block in ("self_attention", "cross_attention"):
        inputs = recorded.sublayer_input(side, layer, sublayer)
        if block == "cross_attention" or side == "encoder":
            key_tokens = trace.source_tokens
        else:
            key_tokens = trace.decoder_input[: inputs.size(0)]
        return {**base, **_attention_block(getattr(module, block), record, inputs, p, key_tokens)}
    if block == "ffn":
        return {**base, **_ffn_block(module.ffn, recorded.sublayer_input(side, layer, "ffn")[p],
                                     recorded.sublayer_output(side, layer, "ffn")[p])}
    return {**base, **_add_norm_block(getattr(module, block), record, p)}
