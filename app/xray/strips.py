"""The colour strips: every token's vector after every stage as int8 codes with one scale per
position, and the Add & Norm stages sent as corrections to a prediction.

**Strips** (:func:`quantize`): value ≈ code / 127 × scale[position], the scale being the
position's largest |value| (float32). One scale per position, not per stage: a stage where one
token's vector is huge (the feed-forward output at "." or <eos>, ~200 against ~2 elsewhere) would
otherwise round every other token's values to code 0, and its strips would be drawn blank. The
strips are colours, so 1/127 of a token's largest value is finer than any colour step; the exact
numbers are in the trace and in the opened blocks.

**Add & Norm strips are sent as corrections to a prediction** (:func:`norm_prediction`), still
exactly the same codes: an Add & Norm's output is LayerNorm(residual + sublayer), and both are
the two strips before it, so the page computes LayerNorm of their decoded values (γ and β sent
as int8, which only makes the guess rougher) and rounds it to a code; the answer carries
code − guess (mod 256: int8), which is 0 for ~75 % of the values and gzips to ~1.5 bits instead
of ~7. Every step of the guess is integer sums or IEEE float64 operations in a fixed order, so
numpy here and JavaScript in the browser compute the same guess bit for bit, and the decoded
codes are the codes (:func:`strip_codes`; ``tests/e2e/test_xray_strips.py`` checks the browser's).
"""

from __future__ import annotations

import numpy as np

from app.palette import ROBUST_SHARE
from app.xray.wire import int8_with_step, trits, untrits, wrap
from model.api import RecordedPass, Side, layout, stage_vectors


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(…, L, D) float32 vectors → each position's scale (its largest |value|, float32; 1 where
    all are 0) and the int8 codes, value ≈ code / 127 × scale."""
    scales = np.abs(vectors).max(axis=-1)
    scales = np.where(scales > 0, scales, np.float32(1)).astype(np.float32)
    codes = np.rint(vectors / scales[..., None] * np.float32(127)).astype(np.int8)
    return scales, codes


def side_strips(recorded: RecordedPass, side: Side) -> tuple[list[dict], np.ndarray, np.ndarray]:
    """One side's stages (name, layer, largest |value|), int8 codes (stages, L, D) and scales
    (stages, L)."""
    scales, codes = quantize(stage_vectors(recorded, side))
    entries = [e for e in layout(side, recorded.n_layers(side)) if e["kind"] != "logits"]
    stages = [{"name": e["name"], "layer": e["layer"], "scale": float(top)}
              for e, top in zip(entries, scales.max(axis=1), strict=True)]
    return stages, codes, scales


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


def predicted_stages(side: Side, n_layers: int) -> list[int]:
    """The Add & Norm stages: each is LayerNorm(stage i − 2 + stage i − 1)."""
    return [i for i, entry in enumerate(layout(side, n_layers)) if entry["kind"] == "add_norm"]


def _code_norms(codes: np.ndarray, scales: np.ndarray, predicted: list[int], norms) -> tuple:
    """(stages, L, D) codes → the header's coding (each Add & Norm stage, its norm's ε and the
    steps of γ and β) and the arrays: the other stages' codes, the Add & Norm stages' corrections
    (code − guess, ``trits``) and γ, β as int8."""
    corrections, gammas, betas, specs = [], [], [], []
    for i, (gamma, beta, eps) in zip(predicted, norms, strict=True):
        g, g_step = int8_with_step(gamma)
        b, b_step = int8_with_step(beta)
        guess = norm_prediction(codes[i - 2], scales[i - 2], codes[i - 1], scales[i - 1],
                                g.astype(np.float64) * g_step, b.astype(np.float64) * b_step,
                                eps, scales[i])
        corrections.append(wrap(codes[i].astype(np.int64) - guess))
        gammas.append(g)
        betas.append(b)
        specs.append({"stage": i, "eps": eps, "gamma_step": g_step, "beta_step": b_step})
    packed, gaps, values = trits(np.stack(corrections))
    plain = np.delete(codes, predicted, axis=0)
    return specs, {"": plain, ".corrections": packed, ".beyond_gaps": gaps, ".beyond": values,
                   ".gamma": np.stack(gammas), ".beta": np.stack(betas)}


def strip_arrays(arrays: dict, side: Side, n_layers: int, codes: np.ndarray, scales: np.ndarray,
                 norms) -> dict:
    """A side's strips into ``arrays`` (Add & Norm stages as corrections when ``norms`` are
    known); returns the header's coding for that side ({} without norms)."""
    arrays[f"strips.{side}.scales"] = scales
    if norms is None:
        arrays[f"strips.{side}"] = codes
        return {}
    coding, coded = _code_norms(codes, scales, predicted_stages(side, n_layers), norms[side])
    arrays.update({f"strips.{side}{suffix}": array for suffix, array in coded.items()})
    return {side: coding}


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
        corrections = untrits(arrays[f"strips.{side}.corrections"],
                              arrays[f"strips.{side}.beyond_gaps"], arrays[f"strips.{side}.beyond"],
                              len(coding) * length * d).reshape(len(coding), length, d)
        for k, spec in enumerate(coding):
            i = spec["stage"]
            gamma = arrays[f"strips.{side}.gamma"][k].astype(np.float64) * spec["gamma_step"]
            beta = arrays[f"strips.{side}.beta"][k].astype(np.float64) * spec["beta_step"]
            guess = norm_prediction(codes[i - 2], scales[i - 2], codes[i - 1], scales[i - 1],
                                    gamma, beta, spec["eps"], scales[i])
            codes[i] = wrap(guess + corrections[k])
        out[side] = codes
    return out


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
