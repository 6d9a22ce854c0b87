"""One block of the model opened at one position of a trace's recorded pass, with its real
numbers: X·W_Q → Q, the heads, QKᵀ, ÷√d_k, the mask, softmax, ·V, concatenation, ·W_O; residual +
LayerNorm with γ and β; the FFN; the output head's most likely tokens. Read from the pass the trace
was recorded with (``Trace.recorded``): nothing runs the encoder or the decoder again."""

from __future__ import annotations

import math

import torch

from model.explain.record import ATTENDS, EMBEDDING, OUTPUT, SUBLAYER_KINDS, RecordedPass
from model.explain.trace import Trace

BLOCK_DIGITS = 4
PREVIEW = 32  # weight matrices are shown as PREVIEW × PREVIEW block means (honestly labelled)
OUTPUT_TOP = 20


def _round(values: torch.Tensor, digits: int) -> list:
    return torch.round(values.detach().double(), decimals=digits).tolist()


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
    if block == EMBEDDING:
        return {**base, "token_vector": _vec(recorded.embedding(side, "token")[p]),
                "position_vector": _vec(recorded.embedding(side, "position")[p]),
                "sum": _vec(recorded.embedding(side)[p]), "scale": math.sqrt(config.d_model)}
    if block == OUTPUT:
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
    if block != sublayer:  # the Add & Norm after ``sublayer``
        return {**base, **_add_norm_block(getattr(module, block), record, p)}
    if SUBLAYER_KINDS[block] == "attention":
        inputs = recorded.sublayer_input(side, layer, sublayer)
        if ATTENDS[block] == "cross" or side == "encoder":
            key_tokens = trace.source_tokens
        else:
            key_tokens = trace.decoder_input[: inputs.size(0)]
        return {**base, **_attention_block(getattr(module, block), record, inputs, p, key_tokens)}
    return {**base, **_ffn_block(getattr(module, block), recorded.sublayer_input(side, layer, block)[p],
                                 recorded.sublayer_output(side, layer, block)[p])}
