"""Everything the x-ray page draws for one sentence, packed (``app/xray/wire.py``'s layout), and
the answers it asks for later:

* :func:`view` — the one answer: the encoder's strips, the attention weights averaged over the
  heads (as the lines draw them first), the Add & Norm and FFN numbers the narration quotes, the
  steps, the beam tree, the sampling table's rows at the knobs' starting values, and the model's
  own list of stages (``layout``: ``model/explain/record.py``'s), which the page's scripts loop
  over to draw its rows and frames;
* :func:`decoder_strips_view` — the decoder's strips, when the player first moves;
* :func:`heads_view` — every head's attention weights, when a learner picks a head or opens an
  attention block;
* :func:`logits_view` — every step's logits and the vocabulary, when a sampling knob turns.

All read the pass the trace was recorded with (``Trace.recorded``, as numpy arrays through
``model/explain/arrays.py``): nothing runs the encoder or the decoder again. Every number travels
as the page shows it, with nothing lost to what the trace says: attention weights as the integers
of the trace's 5-decimal rounding (w × 10⁵, split into three byte planes, which gzip packs ~25 %
smaller than whole uint32s; a head average as the sum of those integers and the few ulps by which
the page's float64 mean differs from sum / (n · 10⁵), :func:`page_mean`, so the page's average is
the one it took from every head before), Add & Norm sizes as × 10³ (3 decimals), FFN shares as
× 10⁴ (4 decimals) — ``code / 10ᵈ`` is exactly the float the trace's JSON gives — and strips as
int8 codes (``app/xray/strips.py``).
"""

from __future__ import annotations

import numpy as np

from app.xray.strips import shown_ranges, side_strips, strip_arrays
from app.xray.wire import fixed, pack, planes, unpack
from model.api import RecordedPass, Trace, asdict_list, layout
from model.api import arrays as recorded_arrays

SAMPLING_ROWS = 15  # the sampling table's rows (static/js/xray/whatif.js DIST_ROWS)
BARS = 5  # the output row's bars (static/js/xray/rows.js TOP_BARS)
NORMS = ("residual_norm", "sublayer_norm", "normed_norm")  # what the narration quotes
LINE_FROM = 0.03  # the weight from which static/js/xray/overlay.js draws an attention line
NAMED = 3  # a row's largest weights the page names (overlay.js describeAttention, narration.js)
SIDES = ("encoder", "decoder")


def model_layout(n_encoder_layers: int, n_decoder_layers: int) -> dict[str, list[dict]]:
    """Each side's stages as the page loops over them (``model.explain.record.layout``)."""
    return {"encoder": layout("encoder", n_encoder_layers),
            "decoder": layout("decoder", n_decoder_layers)}


def _sampling_rows(logits: np.ndarray) -> dict:
    """Per step, the sampling table at temperature 1 without top-k or top-p, as
    ``static/js/xray/sampling.js`` computes it from all the logits: the 15 likeliest tokens' ids
    and float32 logits, the largest logit and Σ exp(logit − max) summed in vocabulary order in
    float64 (so the page's exp(logit − max) / sum is the table's probability), how many tokens
    keep a probability above 0 and the mass they hold. numpy's exp may differ from the browser's
    in the last bit, so the sum may too: every shown digit is the same, the values within 10⁻¹⁵
    (tests/e2e/test_xray_formulas.py). Other knob settings need every logit (``logits_view``)."""
    values = logits.astype(np.float64)  # (T, V), −inf where the model may never produce the token
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


def view(trace: Trace, vocabulary: list[str], original: list[str] | None = None,
         norms: dict | None = None) -> bytes:
    """Everything the x-ray page draws for one sentence, packed (see the module docstring);
    ``original``: when a prefix is forced, the tokens of the translation without it; ``norms``:
    the LayerNorms of the model that made the trace (``Translator.norm_parameters``), which let
    the Add & Norm strips go as corrections to a guess (without them they go as plain codes).
    The one translation is the trace's: the other decoding is not part of the view
    (``/api/xray/compare`` brings it when asked; a file saved before may carry it as
    ``alternative``, which the page shows as a comparison)."""
    recorded: RecordedPass = trace.recorded
    arrays: dict[str, np.ndarray] = {}
    stages = {}
    coding = {}
    ranges = {}
    for side in SIDES:
        stages[side], codes, scales = side_strips(recorded, side)
        if side == "encoder":
            coding.update(strip_arrays(arrays, side, recorded.n_layers(side), codes, scales, norms))
        else:  # drawn from the first decoding step on: decoder_strips_view, when the player moves
            ranges[side] = shown_ranges(codes, scales, len(trace.steps))
        # the trace's numbers, read from its recorded pass (its lists are not built for this):
        # (layers, Add & Norms, NORMS, positions) and (layers, positions)
        sizes = recorded_arrays.norm_sizes(recorded, side, tuple(n.removesuffix("_norm") for n in NORMS))
        arrays[f"norms.{side}"] = fixed(sizes, 3, np.uint32)
        arrays[f"ffn.{side}"] = fixed(recorded_arrays.ffn_shares(recorded, side), 4, np.uint16)
    attention = recorded_arrays.attention_codes(recorded)
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
    sampling = _sampling_rows(recorded_arrays.logits(recorded, len(trace.steps)))
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
        # beam search's α as this trace ran it (model.decoding.LENGTH_PENALTY unless asked otherwise):
        # static/js/xray/beamtree.js ranks the tree with it
        "length_penalty": trace.options["length_penalty"],
        "steps": steps, "beam": asdict_list(trace.beam), "original": original,
        # the narration quotes the first three numbers of a source token's embedding
        "embedding_head": recorded_arrays.embedding_head(recorded, "encoder", 3, 4),
        "norms": list(NORMS), "stages": stages, "sampling": sampling,
        "vocab_size": len(vocabulary),
        "layout": model_layout(recorded.n_layers("encoder"), recorded.n_layers("decoder")),
    }
    header["attention_means"] = means
    header["strip_ranges"] = ranges
    if coding:
        header["norm_prediction"] = coding
    return pack(header, arrays)


def decoder_strips_view(trace: Trace, norms: dict | None = None) -> bytes:
    """The decoder's strips, packed as :func:`view` packs the encoder's: asked for when the
    player first moves, since the landing frame (the encoder's first sub-step) draws none of them.
    ``unpack_all(view, decoder_strips_view)`` reads both as one view."""
    recorded = trace.recorded
    _, codes, scales = side_strips(recorded, "decoder")
    arrays: dict[str, np.ndarray] = {}
    coding = strip_arrays(arrays, "decoder", recorded.n_layers("decoder"), codes, scales, norms)
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
    return {f"{name}.exact": np.packbits(exact.reshape(-1)), f"{name}.sum": planes(sums[exact]),
            f"{name}.nudge": nudges[exact], f"{name}.coarse": coarse.astype(np.uint8)}


def heads_view(trace: Trace) -> bytes:
    """Every head's attention weights (× 10⁵, three byte planes, [layer][head][query][key]),
    packed as :func:`view`: asked for only when a learner picks one head or all of them, or opens
    an attention block (the view carries the head average the page draws first)."""
    arrays = {f"attention.{kind}": planes(codes)
              for kind, codes in recorded_arrays.attention_codes(trace.recorded).items()}
    return pack({}, arrays)


def logits_view(trace: Trace, vocabulary: list[str]) -> bytes:
    """Every step's logits over the vocabulary (float32, exactly the model's; −inf where the
    model may never produce the token) and the vocabulary, packed: what the sampling knobs redo
    softmax, top-k and top-p on in the browser."""
    return pack({"vocab": vocabulary}, {"logits": recorded_arrays.logits(trace.recorded, len(trace.steps))})
