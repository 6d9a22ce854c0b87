"""The x-ray (/xray): the whole model translating one sentence, drawn as one picture and played
step by step — every token's vector at every stage, attention as lines, blocks that open in place.

The page downloads one answer per sentence, the size of what it draws, and more only when a
learner opens it. ``app/xray/`` packs all of it from the trace's own recorded pass (nothing runs
the model again), with the model's own list of stages, which the page's scripts loop over:

* ``POST /api/xray/view`` — the one answer: the encoder's strips, the head-averaged attention, the numbers the
  narration quotes, the steps and the sampling table at its starting knobs, as typed arrays;
* ``POST /api/xray/strips`` — the decoder's strips, when the player first moves (the landing frame,
  the encoder's first sub-step, draws none of them);
* ``POST /api/xray/heads`` — every head's attention weights, when a learner picks a head or opens an
  attention block (the view carries their average, which the lines draw first);
* ``POST /api/xray/logits`` — every step's logits and the vocabulary, when a sampling knob turns;
* ``POST /api/xray/compare`` — the sentence by the other decoding (beam search with 4 beams, or
  greedy when the page shows that), only when a learner asks to compare (issue 75: one translation);
* ``POST /api/xray/block`` — one block opened at one position: X·W_Q → Q, the heads, QKᵀ, ÷√d_k,
  the mask, softmax, ·V, concatenation, ·W_O; residual + LayerNorm with γ and β; the FFN.
"""

from __future__ import annotations

import gzip
from typing import Literal

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import BaseModel, ConfigDict, Field

from app.api import timed
from app.deps import EngineDep, LanguageDep, TranslatorDep
from app.layout import render_page
from app.schemas import TOKENS_RULE, TRACE_ERRORS, NotFound, TraceRequest, errors, model_limit
from app.translation_warning import page_rule
from app.xray import decoder_strips_view, heads_view, logits_view, model_layout, view
from model.api import (
    MAX_SOURCE_TOKENS,
    DecodingOptions,
    InputError,
    Trace,
    Translator,
    block_names,
    block_positions,
    open_block,
)

router = APIRouter()

Side = Literal["encoder", "decoder"]
Block = Literal[tuple(block_names())]  # the model's own blocks, in the decoder's order
_LAYOUT = model_layout(1, 1)
DECODER_ONLY = sorted({e["name"] for e in _LAYOUT["decoder"]} - {e["name"] for e in _LAYOUT["encoder"]})
ALTERNATIVE_BEAM = 4  # the beam size eval.json measures ("beam4"), which the page compares with


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep, translator: TranslatorDep) -> HTMLResponse:
    """The page shell; static/js/xray/main.js (ES modules) reads the sentence and options from the URL."""
    comparison = beam_against_greedy(translator.evaluation)  # main.js sets the link's address
    config = translator.config
    # with the vocabulary sizes, the model's stages: what a file saved before views carried
    # their own layout is drawn with
    # the warning's calibrated thresholds and what they mean (app/translation_warning.py)
    return render_page(request, "xray", lang, comparison=comparison,
                       warning_rule=page_rule(translator), sizes={
        "vocab_en": translator.english.vocab_size, "vocab_zh": translator.chinese.vocab_size,
        "layout": model_layout(config.n_encoder_layers, config.n_decoder_layers)})


def beam_against_greedy(evaluation: dict) -> dict | None:
    """What the checkpoint's eval.json says of beam search (beam 4) against greedy decoding on
    the held-out test sets: on how many of them beam 4's BLEU is higher, the mean difference and
    the largest; None without both figures (a Marian model, an old eval.json)."""
    gains = []
    for figures in (evaluation.get("sets") or {}).values():
        greedy, beam = (figures.get("greedy") or {}).get("bleu"), (figures.get("beam4") or {}).get("bleu")
        if isinstance(greedy, int | float) and isinstance(beam, int | float):
            gains.append(beam - greedy)
    if not gains:
        return None
    return {"sets": len(gains), "higher": sum(gain > 0 for gain in gains),
            "mean": round(sum(gains) / len(gains), 2), "largest": round(max(gains), 2)}


@router.get("/xray", include_in_schema=False)
def old_address(request: Request) -> RedirectResponse:
    """The x-ray was first served here; links keep working."""
    query = request.url.query
    return RedirectResponse("/" + (f"?{query}" if query else ""), status_code=308)


# -- requests -----------------------------------------------------------------------------------


class XrayRequest(TraceRequest):
    """The same fields (and limits) as POST /api/trace."""


class XrayBlockRequest(TraceRequest):
    # the decoder-only blocks (cross-attention and its Add & Norm, the output head) need
    # side=decoder: said in the schema, so a client built from it never asks for one
    model_config = ConfigDict(json_schema_extra={
        "if": {"properties": {"side": {"const": "encoder"}}, "required": ["side"]},
        "then": {"properties": {"block": {"not": {"enum": DECODER_ONLY}}}}})
    side: Side = Field(description="encoder or decoder")
    block: Block = Field(description="which block to open")
    layer: int = Field(0, ge=0, le=63, json_schema_extra=model_limit("layer"),
                       description="0-based layer of that side (ignored for embedding/output)")
    # the most positions a side can have: 128 source tokens and <eos>, or 128 decoding steps
    position: int = Field(0, ge=0, le=MAX_SOURCE_TOKENS,
                          description="0-based token position (the query row): below the "
                                      "sentence's source tokens (with <eos>) for the encoder, its "
                                      "translation's steps for the decoder (else 404)")


BLOCK_ERRORS = errors(TOKENS_RULE, missing=(
    "layer must be below that side's number of layers (GET /api/model)",
    "position must be below that side's number of positions: the source tokens (with <eos>) for "
    "the encoder, the translation's steps for the decoder",
))


PACKED = "application/octet-stream"
PACKED_DOC = {"content": {PACKED: {"schema": {"type": "string", "format": "binary"}}},
              "description": "a uint32 header length, a JSON header, typed arrays "
                             "(app/xray/wire.py's docstring)"}


def _packed(request: Request, bodies: tuple[bytes, bytes], model_ms: float) -> Response:
    """A packed body, already gzipped at level 6 once per trace when the client
    takes gzip (the server's own gzip runs at level 1 on every answer)."""
    raw, packed = bodies
    takes_gzip = "gzip" in request.headers.get("accept-encoding", "").lower()
    response = Response(packed if takes_gzip else raw, media_type=PACKED,
                        headers={"Vary": "Accept-Encoding",
                                 **({"Content-Encoding": "gzip"} if takes_gzip else {})})
    timed(response, model_ms)
    return response


def _both(call, *args) -> tuple[bytes, bytes]:
    raw = call(*args)
    return raw, gzip.compress(raw, compresslevel=6, mtime=0)


@router.post("/api/xray/view", responses={200: PACKED_DOC, **TRACE_ERRORS}, tags=["x-ray"],
             response_class=Response)
def xray_view(request: XrayRequest, http: Request, engine: EngineDep,
              translator: TranslatorDep) -> Response:
    """Everything the x-ray page draws for one sentence, in one packed answer: the encoder's
    strips (int8 codes × scale / 127; each Add & Norm stage as corrections to
    the LayerNorm of the two strips before it, the same codes once undone; the decoder's come
    from ``/api/xray/strips`` when the player moves, each decoder row's ±m is here), the attention weights
    averaged over the heads (from the trace's 5-decimal weights, the page's float64 mean exactly;
    every head's come from ``/api/xray/heads``), the Add & Norm sizes and FFN shares the narration quotes, the
    steps, the beam tree, the sampling table at temperature 1 (the 15 likeliest tokens' logits
    and the exact normaliser), when a prefix is forced, the translation without it; and the model's
    own list of stages (``layout``), which the page's scripts draw their rows and frames from. The
    translation is the one decoding asked for, nothing else: the other decoding comes from
    ``/api/xray/compare`` only when a learner asks for the comparison."""
    trace, model_ms = engine.trace(request)
    original = None
    if request.forced_prefix:
        plain, plain_ms = engine.trace(request.model_copy(update={"forced_prefix": []}))
        original, model_ms = [step.token for step in plain.steps], model_ms + plain_ms
    bodies, _ = engine.derived(request, trace, "xray_view", _both, view, trace,
                               translator.chinese.vocabulary, original, translator.norm_parameters(),
                               on_model_thread=False)
    return _packed(http, bodies, model_ms)


class Comparison(BaseModel):
    """The sentence by the other decoding: what the x-ray shows, labelled as a comparison, when a
    learner asks "what would beam search say?"."""
    strategy: Literal["greedy", "beam"]
    beam_size: int | None = Field(description="4 for beam search, null for greedy decoding")
    translation: str
    finished: bool = Field(description="false when it was cut off at max_len")
    tokens: list[str] = Field(description="each step's token")
    probs: list[float] = Field(description="the model's probability for each step's token (temperature 1)")


@router.post("/api/xray/compare", responses=TRACE_ERRORS, tags=["x-ray"], response_model=Comparison)
def xray_compare(request: XrayRequest, engine: EngineDep, translator: TranslatorDep) -> dict:
    """The sentence translated by the other decoding than ``request``'s (beam search with 4 beams;
    greedy decoding when ``request`` is exactly that), without a forced prefix: read from that
    decoding's kept trace when the learner has had it on screen, else by one plain decoding (only
    the text, each step's token and its probability). Kept with ``request``'s trace, so asking
    again costs nothing."""
    trace, _ = engine.trace(request)
    kept = engine.cached(alternative_request(request))  # the learner switched decodings
    other, _ = engine.derived(request, trace, "xray_alternative", alternative, translator,
                              request, kept, on_model_thread=kept is None)
    return other


def alternative_options(request: TraceRequest) -> DecodingOptions:
    """The decoding the x-ray compares the player's with when asked (issue 75): beam search with 4
    beams, which scores higher on the held-out test sets; when the player already runs exactly
    that, greedy decoding."""
    plain_beam4 = (request.strategy == "beam" and request.beam_size == ALTERNATIVE_BEAM
                   and not request.forced_prefix)
    if plain_beam4:
        return DecodingOptions(strategy="greedy", max_len=request.max_len)
    return DecodingOptions(strategy="beam", beam_size=ALTERNATIVE_BEAM, max_len=request.max_len)


def alternative_request(request: TraceRequest) -> TraceRequest:
    """The request of :func:`alternative_options`' decoding, to find its trace when one is kept."""
    options = alternative_options(request)
    return TraceRequest.model_construct(text=request.text, strategy=options.strategy,
                                        beam_size=options.beam_size, max_len=options.max_len)


def alternative(translator: Translator, request: TraceRequest, kept: Trace | None = None) -> dict:
    """The sentence translated with :func:`alternative_options` (without a forced prefix): read
    from ``kept``, that decoding's trace when the cache has it (the learner switched decodings), else
    by one plain decoding: nothing recorded, only the text and each step's token with the model's
    probability for it (temperature 1), which the page marks where it was unsure (a few hundred
    bytes in the view; a file saved before has neither list and shows the text alone)."""
    options = alternative_options(request)
    result = kept if kept is not None else translator.translate(request.text, options)
    return {"strategy": options.strategy,
            "beam_size": options.beam_size if options.strategy == "beam" else None,
            "translation": result.translation, "finished": result.finished,
            "tokens": [step.token for step in result.steps],
            "probs": [round(step.prob, 4) for step in result.steps]}


@router.post("/api/xray/strips", responses={200: PACKED_DOC, **TRACE_ERRORS}, tags=["x-ray"],
             response_class=Response)
def xray_strips(request: XrayRequest, http: Request, engine: EngineDep,
                translator: TranslatorDep) -> Response:
    """The decoder's strips (int8 codes, Add & Norm stages as corrections, as the view sends the
    encoder's), packed as ``/api/xray/view``: asked for when the player first moves, because the
    landing frame, the encoder's first sub-step, draws none of them (the view carries each
    decoder row's ±m, shown beside its name from the start)."""
    trace, model_ms = engine.trace(request)
    bodies, _ = engine.derived(request, trace, "xray_strips", _both, decoder_strips_view, trace,
                               translator.norm_parameters(), on_model_thread=False)
    return _packed(http, bodies, model_ms)


@router.post("/api/xray/heads", responses={200: PACKED_DOC, **TRACE_ERRORS}, tags=["x-ray"],
             response_class=Response)
def xray_heads(request: XrayRequest, http: Request, engine: EngineDep) -> Response:
    """Every head's attention weights, ``[layer][head][query][key]`` × 10⁵ (the trace's 5
    decimals exactly) in three byte planes, packed as ``/api/xray/view``: asked for when a learner
    picks one head or all of them, or opens an attention block."""
    trace, model_ms = engine.trace(request)
    bodies, _ = engine.derived(request, trace, "xray_heads", _both, heads_view, trace,
                               on_model_thread=False)
    return _packed(http, bodies, model_ms)


@router.post("/api/xray/logits", responses={200: PACKED_DOC, **TRACE_ERRORS}, tags=["x-ray"],
             response_class=Response)
def xray_logits(request: XrayRequest, http: Request, engine: EngineDep,
                translator: TranslatorDep) -> Response:
    """Every step's logits over the whole vocabulary (float32, exactly the model's; −inf where it
    may never produce the token) and the vocabulary, packed as ``/api/xray/view``: what the
    sampling knobs redo temperature, top-k and top-p on, asked for when a knob first turns."""
    trace, model_ms = engine.trace(request)
    bodies, _ = engine.derived(request, trace, "xray_logits", _both, logits_view, trace,
                               translator.chinese.vocabulary, on_model_thread=False)
    return _packed(http, bodies, model_ms)


@router.post("/api/xray/block", responses=BLOCK_ERRORS, tags=["x-ray"])
def xray_block(request: XrayBlockRequest, engine: EngineDep, translator: TranslatorDep) -> dict:
    """One block at one position, stage by stage, with the shapes and the real numbers."""
    if request.side == "encoder" and request.block in DECODER_ONLY:
        raise InputError("block", f"{request.block} exists only in the decoder; use side=decoder")
    trace, _ = engine.trace(request)
    config = translator.config
    layers = config.n_encoder_layers if request.side == "encoder" else config.n_decoder_layers
    if request.layer >= layers:  # past both stacks: out of the schema's limit (422)
        deepest = max(config.n_encoder_layers, config.n_decoder_layers)
        error = NotFound if request.layer < deepest else InputError
        raise error("layer", f"layer must be between 0 and {layers - 1} for the {request.side}")
    tokens = block_positions(trace, request.side)
    if request.position >= len(tokens):
        raise NotFound("position", f"position must be between 0 and {len(tokens) - 1} "
                                     f"(this sentence has {len(tokens)} {request.side} positions)")
    block, _ = engine.run(open_block, translator, trace, request.side, request.block,
                          request.layer, request.position)
    return block
