"""The x-ray (/xray): the whole model translating one sentence, drawn as one picture and played
step by step — every token's vector at every stage, attention as lines, blocks that open in place.

The page reads the shared trace (POST /api/trace). What the trace does not carry, this module adds
from the loaded translator, computed on the same token ids:

* ``POST /api/xray`` — every token's full vector after every stage (the colour strips), and each
  decoding step's logits over the whole Chinese vocabulary (so the browser can redo temperature,
  top-k and top-p itself);
* ``POST /api/xray/block`` — one block opened at one position: X·W_Q → Q, the heads, QKᵀ, ÷√d_k,
  the mask, softmax, ·V, concatenation, ·W_O; residual + LayerNorm with γ and β; the FFN.
"""

from __future__ import annotations

import base64
import math
import threading
from collections import OrderedDict
from typing import Literal
from weakref import WeakKeyDictionary

import orjson
import torch
from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import Field

from app.deps import EngineDep, LanguageDep, TranslatorDep
from app.engine import Engine
from app.layout import render_page
from app.schemas import FORCED_RULE, TOKENS_RULE, TRACE_ERRORS, TraceRequest, errors, model_limit
from model.decoding import mask_special
from model.trace import Trace
from model.transformer import BOS_ID
from model.translator import InputError, Translator

# Torch appears in the web layer only here: the trace keeps plain numbers for what every page shows,
# and the x-ray needs a few more (full vectors, logits, one block's tensors), recomputed by the
# model's own modules on the model thread from the same ids rather than stored in every trace.
router = APIRouter()

BLOCK_DIGITS = 4
PREVIEW = 32  # weight matrices are shown as PREVIEW × PREVIEW block means (honestly labelled)
OUTPUT_TOP = 20
Side = Literal["encoder", "decoder"]
Block = Literal["embedding", "self_attention", "add_norm1", "cross_attention", "add_norm2", "ffn",
                "add_norm3", "output"]
DECODER_ONLY = {"cross_attention", "add_norm3", "output"}


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep, translator: TranslatorDep) -> HTMLResponse:
    """The page shell; static/js/xray.js reads the sentence and options from the URL."""
    return render_page(request, "xray", lang, sizes={
        "vocab_en": translator.english.vocab_size, "vocab_zh": translator.chinese.vocab_size})


@router.get("/xray", include_in_schema=False)
def old_address(request: Request) -> RedirectResponse:
    """The x-ray was first served here; links keep working."""
    query = request.url.query
    return RedirectResponse("/" + (f"?{query}" if query else ""), status_code=308)


# -- requests -----------------------------------------------------------------------------------


class XrayRequest(TraceRequest):
    """The same fields (and limits) as POST /api/trace."""


class XrayBlockRequest(TraceRequest):
    side: Side = Field(description="encoder or decoder")
    block: Block = Field(description="which block to open")
    layer: int = Field(0, ge=0, le=63, json_schema_extra=model_limit("layer"),
                       description="0-based layer of that side (ignored for embedding/output)")
    position: int = Field(0, ge=0, le=255, description="0-based token position (the query row)")


BLOCK_ERRORS = errors(
    TOKENS_RULE, FORCED_RULE,
    f"block {', '.join(sorted(DECODER_ONLY))} needs side=decoder",
    "layer must be below that side's number of layers (GET /api/model)",
    "position must be below that side's number of positions: the source tokens (with <eos>) for "
    "the encoder, the translation's steps for the decoder",
)


# -- one recorded pass per trace, kept for the blocks ------------------------------------------


class _Records:
    """Per engine, a small LRU of recorded passes (tensors), keyed like the trace cache."""

    def __init__(self, size: int = 8):
        self.size = size
        self._engines: WeakKeyDictionary[Engine, OrderedDict[tuple, dict]] = WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, engine: Engine, request: TraceRequest, trace: Trace) -> dict:
        key = request.cache_key()
        with self._lock:
            items = self._engines.setdefault(engine, OrderedDict())
            if key in items:
                items.move_to_end(key)
                return items[key]
        record, _ = engine.run(_record, engine.translator, trace)
        with self._lock:
            items[key] = record
            while len(items) > self.size:
                items.popitem(last=False)
        return record


RECORDS = _Records()


@torch.inference_mode()
def _record(translator: Translator, trace: Trace) -> dict:
    """Encoder and teacher-forced decoder pass over the trace's own ids, recording everything."""
    model = translator.model
    src = torch.tensor([trace.source_ids])
    decoder_ids = ([BOS_ID, *trace.target_ids])[: len(trace.decoder_input)]
    encoder: dict = {}
    decoder: dict = {}
    memory = model.encode(src, record=encoder)
    logits = model.decode(torch.tensor([decoder_ids]), memory, src, record=decoder)[0]
    return {"encoder": encoder, "decoder": decoder, "logits": mask_special(logits)}


def _stages(record: dict, side: Side) -> list[tuple[str, int | None, torch.Tensor]]:
    """(name, layer, (L, D) vectors) after every stage, in the order data flows."""
    out = [("embedding", None, record["embedding"]["sum"][0])]
    names = (["self_attention", "add_norm1", "ffn", "add_norm2"] if side == "encoder" else
             ["self_attention", "add_norm1", "cross_attention", "add_norm2", "ffn", "add_norm3"])
    for index, layer in enumerate(record["layers"]):
        for name in names:
            if name.startswith("add_norm"):
                vectors = layer[name]["normed"][0]
            else:  # a sublayer's output is what its Add & Norm adds to the residual stream
                follows = {"self_attention": "add_norm1", "cross_attention": "add_norm2",
                           "ffn": "add_norm3" if side == "decoder" else "add_norm2"}[name]
                vectors = layer[follows]["sublayer"][0]
            out.append((name, index, vectors))
    return out


def _round(values: torch.Tensor, digits: int) -> list:
    return torch.round(values.detach().double(), decimals=digits).tolist()


def _strip(vectors: torch.Tensor) -> dict:
    """(L, D) vectors → one scale and int8 codes (base64, row-major): value ≈ code / 127 × scale.

    The strips are colours, so 1/127 of the stage's largest value is finer than any colour step;
    the exact numbers are in the trace and in the opened blocks.
    """
    scale = float(vectors.abs().max()) or 1.0
    codes = torch.round(vectors / scale * 127).to(torch.int8).contiguous()
    return {"scale": scale, "shape": list(vectors.shape),
            "codes": base64.b64encode(codes.numpy().tobytes()).decode("ascii")}


@router.post("/api/xray", responses=TRACE_ERRORS, tags=["x-ray"])
def xray_data(request: XrayRequest, engine: EngineDep, translator: TranslatorDep) -> Response:
    """Every token's vector after every stage, and every step's logits over the vocabulary.

    ``encoder.values[stage]`` and ``decoder.values[stage]`` hold every position's full d_model
    vector as int8 codes with one scale (see ``_strip``). ``logits`` is steps × vocabulary,
    little-endian float32 in base64, exactly the model's numbers (−inf where the model may never
    produce the token: <pad>, <bos>), so softmax(logits / T), top-k and top-p can be redone in the
    browser as ``model.decoding.filter_distribution`` does.
    """
    trace, _ = engine.trace(request)
    record = RECORDS.get(engine, request, trace)
    if "payload" not in record:  # serialised once per recorded pass (orjson, as /api/trace)
        logits = record["logits"][: len(trace.steps)].float().contiguous()
        sides = {}
        for side in ("encoder", "decoder"):
            stages = _stages(record[side], side)
            sides[side] = {
                "stages": [{"name": name, "layer": layer} for name, layer, _ in stages],
                "values": [_strip(vectors) for _, _, vectors in stages],
            }
        record["payload"] = orjson.dumps({
            "vocab": translator.chinese.vocabulary,
            "logits": {"shape": list(logits.shape),
                       "float32": base64.b64encode(logits.numpy().astype("<f4").tobytes()).decode()},
            "length_penalty": trace.options.get("length_penalty", 0.6),
            **sides,
        })
    return Response(record["payload"], media_type="application/json")


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


@router.post("/api/xray/block", responses=BLOCK_ERRORS, tags=["x-ray"])
def xray_block(request: XrayBlockRequest, engine: EngineDep, translator: TranslatorDep) -> dict:
    """One block at one position, stage by stage, with the shapes and the real numbers."""
    if request.side == "encoder" and request.block in DECODER_ONLY:
        raise InputError("block", f"{request.block} exists only in the decoder; use side=decoder")
    trace, _ = engine.trace(request)
    config = translator.config
    layers = config.n_encoder_layers if request.side == "encoder" else config.n_decoder_layers
    if request.layer >= layers:
        raise InputError("layer", f"layer must be between 0 and {layers - 1} for the {request.side}")
    tokens = trace.source_tokens if request.side == "encoder" else trace.decoder_input
    if request.side == "decoder":
        tokens = tokens[: len(trace.steps)] or tokens[:1]
    if request.position >= len(tokens):
        raise InputError("position", f"position must be between 0 and {len(tokens) - 1} "
                                     f"(this sentence has {len(tokens)} {request.side} positions)")
    record = RECORDS.get(engine, request, trace)
    block, _ = engine.run(_open_block, translator, trace, record, request, tokens)
    return block


@torch.inference_mode()
def _open_block(translator: Translator, trace: Trace, record: dict, request: XrayBlockRequest,
                tokens: list[str]) -> dict:
    """The numbers of one opened block (runs on the model thread)."""
    config = translator.config
    side = record[request.side]
    model = translator.model
    stack = model.encoder_layers if request.side == "encoder" else model.decoder_layers
    p = request.position
    base = {"side": request.side, "block": request.block, "layer": request.layer, "position": p,
            "token": tokens[p],
            "sizes": {"d_model": config.d_model, "n_heads": config.n_heads,
                      "d_k": config.d_head, "d_ff": config.d_ff,
                      "vocab": translator.chinese.vocab_size, "length": len(tokens),
                      "source_length": len(trace.source_tokens)}}
    if request.block == "embedding":
        emb = side["embedding"]
        return {**base, "token_vector": _vec(emb["token"][0, p]),
                "position_vector": _vec(emb["position"][0, p]), "sum": _vec(emb["sum"][0, p]),
                "scale": math.sqrt(config.d_model)}
    if request.block == "output":
        final = side["final"][0, p]
        logits = record["logits"][p]
        probs = torch.softmax(logits, dim=-1)
        top = torch.topk(probs, min(OUTPUT_TOP, probs.numel()))
        return {**base, "x": _vec(final),
                "top": [{"token": translator.chinese.id_to_token(i), "id": i,
                         "logit": round(float(logits[i]), 4), "prob": round(float(pr), 6)}
                        for pr, i in zip(top.values.tolist(), top.indices.tolist(),
                                         strict=True)],
                "weights": {"w_out": _preview(model.output.weight.T)},
                "tied": config.tie_output}
    layer_record = side["layers"][request.layer]
    layer = stack[request.layer]
    if request.block in ("self_attention", "cross_attention"):
        inputs = _layer_input(side, request.side, request.layer, request.block)
        if request.block == "cross_attention":
            key_tokens = trace.source_tokens
        else:
            key_tokens = trace.source_tokens if request.side == "encoder" else \
                trace.decoder_input[: inputs.size(0)]
        block = _attention_block(getattr(layer, request.block), layer_record[request.block],
                                 inputs, p, key_tokens)
        return {**base, **block}
    if request.block == "ffn":
        follows = "add_norm3" if request.side == "decoder" else "add_norm2"
        x = layer_record["add_norm2" if request.side == "decoder" else "add_norm1"]["normed"][0, p]
        return {**base, **_ffn_block(layer.ffn, x, layer_record[follows]["sublayer"][0, p])}
    return {**base, **_add_norm_block(getattr(layer, request.block), layer_record[request.block],
                                      p)}


def _layer_input(side: dict, name: Side, layer: int, block: str) -> torch.Tensor:
    """(L, D) input of an attention sublayer: the previous stage's output."""
    if block == "cross_attention":
        return side["layers"][layer]["add_norm1"]["normed"][0]
    if layer == 0:
        return side["embedding"]["sum"][0]
    last = "add_norm2" if name == "encoder" else "add_norm3"
    return side["layers"][layer - 1][last]["normed"][0]
