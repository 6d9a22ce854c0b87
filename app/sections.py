"""The section pages and their JSON endpoints: tokens, embeddings, coreference, training,
KV cache, scale and the guided tour.

Thin handlers: validate, read the cached trace (or run the one model call the page needs),
shape plain data with ``app.section_figures`` and answer. Strings come from
``app.section_content`` in the reader's language.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse

from app import coreference, scale, section_content
from app import section_figures as figs
from app.dependencies import LanguageDep, TracesDep, TranslateDep, TranslatorDep
from app.i18n import Translate
from app.pages import render_page
from app.schemas import ErrorResponse, TranslateRequest
from app.section_schemas import (
    CoreferenceQuery,
    EmbeddingsRequest,
    KVCacheQuery,
    ScaleQuery,
    ScoreRequest,
)
from model.sections import padded_batch, positional_encoding
from model.train import noam_lr
from model.translator import InputError

router = APIRouter()
pages = APIRouter(include_in_schema=False)
ERRORS = {422: {"model": ErrorResponse, "description": "a field is out of its limits"}}
SCHEDULE_POINTS = 200


def _timed(response: Response, model_ms: float) -> None:
    response.headers["Server-Timing"] = f"model;dur={model_ms:.1f}"


def _norm(vector: list[float]) -> float:
    return math.sqrt(sum(v * v for v in vector))


# -- /tokens ------------------------------------------------------------------------------------


@router.post("/api/figures/tokens", responses=ERRORS, tags=["figures"])
def tokens_figures(request: TranslateRequest, traces: TracesDep, translator: TranslatorDep,
                   t: TranslateDep, response: Response) -> dict:
    """Token pieces and ids, a padded mini-batch with the sentence, and its three masks."""
    trace, model_ms = traces.get(request)
    companions = [section_content.BATCH_COMPANIONS[1], section_content.BATCH_COMPANIONS[2]]
    sources = [trace.text] + [source for source, _ in companions]
    targets = [trace.translation] + [target for _, target in companions]
    batch = padded_batch(translator, sources, targets)
    rows = [t("tokens.yours")] + [t("tokens.row", n=i + 2) for i in range(len(companions))]
    mask_words = {"allowed": t("tokens.allowed"), "blocked": t("tokens.blocked"),
                  "labels": (t("tokens.query"), t("tokens.key"))}
    masks = []
    for row in range(len(sources)):
        src, dec = batch["source_tokens"][row], batch["decoder_tokens"][row]
        masks.append({
            "padding": figs.mask_heatmap(batch["encoder_mask"][row], src, src,
                                         t("tokens.mask.padding"), **mask_words),
            "causal": figs.mask_heatmap(batch["decoder_mask"][row], dec, dec,
                                        t("tokens.mask.causal"), **mask_words),
            "cross": figs.mask_heatmap(batch["cross_mask"][row], dec, src,
                                       t("tokens.mask.cross"), **mask_words),
        })
    padded = sum(r.count(0) for r in batch["source_padding"] + batch["target_padding"])
    total = sum(len(r) for r in batch["source_padding"] + batch["target_padding"])
    _timed(response, model_ms)
    return {
        "text": trace.text,
        "translation": trace.translation,
        "english": [{"token": tok, "id": i} for tok, i in zip(trace.source_tokens,
                                                               trace.source_ids, strict=True)],
        "chinese": [{"token": tok, "id": i} for tok, i in zip(trace.target_tokens,
                                                               trace.target_ids, strict=True)],
        "specials": [{"token": translator.chinese.id_to_token(i), "id": i, "key": key}
                     for key, i in batch["special"].items()]
        + [{"token": "<unk>", "id": 3, "key": "unk"}],
        "batch": batch,
        "rows": rows,
        "padding_share": {"pad": padded, "total": total},
        "figures": {
            "source": figs.batch_heatmap(batch["source_tokens"], batch["source_ids"],
                                         batch["source_padding"], rows,
                                         t("tokens.source_batch"), t("tokens.pad")),
            "decoder": figs.batch_heatmap(batch["decoder_tokens"], batch["decoder_ids"],
                                          batch["target_padding"], rows,
                                          t("tokens.decoder_batch"), t("tokens.pad")),
            "labels": figs.batch_heatmap(batch["label_tokens"], batch["label_ids"],
                                         [[int(i != 0) for i in r] for r in batch["label_ids"]],
                                         rows, t("tokens.label_batch"), t("tokens.pad")),
            "masks": masks,
        },
    }


# -- /embeddings --------------------------------------------------------------------------------


@router.post("/api/figures/embeddings", responses=ERRORS, tags=["figures"])
def embeddings_figures(request: EmbeddingsRequest, traces: TracesDep, translator: TranslatorDep,
                       t: TranslateDep, response: Response) -> dict:
    """Token embeddings (×√d), positional encodings, their sum, the position table and its
    cosine similarities, and the 2-D projection of the token vectors after every layer."""
    trace, model_ms = traces.get(TranslateRequest(**request.model_dump(exclude={"positions"})))
    d = translator.config.d_model
    root = math.sqrt(d)
    encoder = trace.embeddings["encoder"]
    tokens = trace.source_tokens
    table = positional_encoding(translator, request.positions)
    dims = t("sec.dimension")
    norms = {
        t("emb.norm.raw"): [round(_norm(v) / root, 4) for v in encoder["token"]],
        t("emb.norm.scaled"): [round(_norm(v), 4) for v in encoder["token"]],
        t("emb.norm.position"): [round(_norm(v), 4) for v in encoder["position"]],
        t("emb.norm.sum"): [round(_norm(v), 4) for v in encoder["sum"]],
    }
    stages = [t("emb.input")] + [t("emb.after_layer", n=i + 1)
                                 for i in range(len(trace.projection["points"]) - 1)]
    peak = max(abs(v) for row in encoder["sum"] for v in row)
    positions = list(range(len(table["table"])))
    _timed(response, model_ms)
    return {
        "text": trace.text,
        "translation": trace.translation,
        "source_tokens": tokens,
        "d_model": d,
        "sqrt_d": round(root, 4),
        "position_norm": table["norm"],
        "norms": norms,
        "sample": {
            "token": tokens[0],
            "raw": [round(v / root, 4) for v in encoder["token"][0][:8]],
            "scaled": encoder["token"][0][:8],
            "position": encoder["position"][0][:8],
            "sum": encoder["sum"][0][:8],
        },
        "projection": trace.projection,
        "figures": {
            "token": figs.vectors_heatmap(encoder["token"], tokens, t("emb.tokens"), dims, peak),
            "position": figs.vectors_heatmap(encoder["position"], tokens,
                                             t("emb.positions_sentence"), dims, peak),
            "sum": figs.vectors_heatmap(encoder["sum"], tokens, t("emb.sum"), dims, peak),
            "norms": figs.norm_bars(tokens, norms, ""),
            "table": figs.vectors_heatmap(table["table"], [str(p) for p in positions],
                                          t("emb.pe_heatmap", n=len(positions)), dims, 1.0, 420),
            "cosine": figs.similarity_heatmap(table["cosine"], "", t("sec.position")),
            "offset": figs.similarity_by_offset(
                table["cosine"], [0, 10, 20], t("emb.offset"), t("emb.offset_axis"),
                t("emb.offset_name")),
            "projection": figs.projection_figure(trace.projection, stages),
        },
    }


# -- /coreference -------------------------------------------------------------------------------


@router.get("/api/coreference", responses=ERRORS, tags=["model"])
def coreference_ranking(query: Annotated[CoreferenceQuery, Query()], traces: TracesDep,
                        translator: TranslatorDep, t: TranslateDep, response: Response) -> dict:
    """Every encoder head ranked by the weight the pronoun's row puts on the referent."""
    trace, model_ms = traces.get(TranslateRequest(text=query.text))
    tokens = trace.source_tokens

    def find(field: str, after: int = -1) -> list[int]:
        word = getattr(query, field)
        try:
            return coreference.locate(translator.english.tokenize(word), tokens, field, after)
        except coreference.WordNotFound as error:
            raise InputError(error.field, str(error)) from error

    referent = find("referent")
    pronoun = find("pronoun", referent[-1])
    if set(pronoun) & set(referent):
        raise InputError("pronoun", "pronoun and referent must be different words")
    distractor = find("distractor") if query.distractor else None
    attention = [layer["self_attention"] for layer in trace.encoder]
    result = coreference.rank_heads(attention, tokens, pronoun, referent, distractor)
    best = result["ranking"][0]
    highlight = {k: figs.ORANGE for k in referent}
    highlight.update({k: figs.GREY for k in pronoun})
    if distractor:
        highlight.update({k: figs.PURPLE for k in distractor})
    _timed(response, model_ms)
    return {
        "text": trace.text,
        "tokens": tokens,
        "pronoun": pronoun,
        "referent": referent,
        "distractor": distractor or [],
        **result,
        "figures": {
            "grid": figs.head_grid(result["grid"], "", t("word.layer", n="").strip(),
                                   t("word.head", n="").strip()),
            "best": figs.row_bars(
                best["row"], tokens, highlight,
                f"{t('word.layer', n=best['layer'] + 1)} · {t('word.head', n=best['head'] + 1)}"),
        },
    }


# -- /training ----------------------------------------------------------------------------------


@router.post("/api/score", responses=ERRORS, tags=["model"])
def score(request: ScoreRequest, traces: TracesDep, translator: TranslatorDep, t: TranslateDep,
          response: Response) -> dict:
    """Teacher-forced loss of (text, reference): per-position label probability and
    cross-entropy, the loss, and the gradient norm before and after clipping (no update)."""
    settings = translator.history.get("settings", {})
    result = translator.score(
        request.text, request.reference,
        label_smoothing=float(settings.get("label_smoothing", 0.1)),
        clip=float(settings.get("clip", 1.0)),
    )
    trace, model_ms = traces.get(TranslateRequest(text=request.text))
    data = asdict(result)
    _timed(response, model_ms)
    return {
        **data,
        "text": request.text,
        "reference": request.reference,
        "greedy": trace.target_tokens + (["<eos>"] if trace.finished else []),
        "greedy_translation": trace.translation,
        "figures": {"positions": figs.score_figure(data, (t("training.prob"), t("training.ce")))},
    }


@router.get("/api/training", tags=["model"])
def training_history(translator: TranslatorDep, t: TranslateDep) -> dict:
    """This model's warmup schedule and its real training curves (from history.json)."""
    history = translator.history
    settings = history.get("settings", {})
    d = translator.config.d_model
    warmup = int(settings.get("warmup", 1500))
    factor = float(settings.get("lr_factor", 1.0))
    steps = history.get("steps", [])
    epochs = history.get("epochs", [])
    last_step = max([s["step"] for s in steps] + [e.get("step", 0) for e in epochs]
                    + [warmup * 4])
    stride = max(1, last_step // SCHEDULE_POINTS)
    curve_steps = list(range(1, last_step + 1, stride))
    curve_lr = [noam_lr(s, d, warmup, factor) for s in curve_steps]
    # the training loop logs the rate used for step s, which LambdaLR computed as noam_lr(s)
    names = t("training.schedule_names").split("|")
    return {
        "d_model": d,
        "warmup": warmup,
        "lr_factor": factor,
        "peak_lr": noam_lr(warmup, d, warmup, factor),
        "settings": settings,
        "final": history.get("final"),
        "epochs": epochs,
        "has_history": bool(steps or epochs),
        "figures": {
            "schedule": figs.lr_schedule_figure(
                curve_steps, curve_lr, [s["step"] for s in steps], [s["lr"] for s in steps],
                warmup, tuple(names)),
            "curves": figs.training_curves(steps, {
                "loss": t("training.loss_name"), "grad_norm": t("training.grad_name"),
                "clip": str(settings.get("clip", 1.0))}) if steps else None,
            "epochs": figs.epoch_curves(epochs, {
                "train_loss": t("training.train_loss"), "epoch": t("training.epoch")})
            if epochs else None,
        },
    }


# -- /kv-cache ----------------------------------------------------------------------------------


@router.get("/api/kv-cache", responses=ERRORS, tags=["model"])
def kv_cache(query: Annotated[KVCacheQuery, Query()], translator: TranslatorDep, t: TranslateDep,
             response: Response) -> dict:
    """Generate ``steps`` tokens with and without the KV cache on the live model, timing each."""
    race = translator.kv_cache_race(query.text, query.steps)
    names = (t("kv.cached"), t("kv.uncached"))
    step, position = t("sec.step"), t("sec.position")
    legend = (t("kv.fresh"), t("kv.reused"), "")
    _timed(response, race["cached_ms"] + race["uncached_ms"])
    return {
        "text": query.text,
        **race,
        "d_model": translator.config.d_model,
        "layers": translator.config.n_decoder_layers,
        "figures": {
            "timing": figs.kv_timing_figure(race, names, t("kv.ms"), step),
            "work": figs.kv_work_figure(race, names, t("kv.positions"), step),
            "cached_grid": figs.kv_grid(race, True, t("kv.grid_cached"), legend, step, position),
            "uncached_grid": figs.kv_grid(race, False, t("kv.grid_uncached"), legend, step,
                                          position),
        },
    }


# -- /scale -------------------------------------------------------------------------------------


def _scale_labels(t: Translate) -> dict[str, str]:
    keys = ["token_embedding", "position_embedding", "source_embedding", "target_embedding",
            "position_encoding", "qkv", "out", "cross_qkv", "cross_out", "ffn", "layer_norm",
            "final_norm", "output_projection"]
    labels = {key: t(f"scale.row.{key}") for key in keys}
    for group in ("encoder", "decoder"):
        for key in ("qkv", "out", "cross_qkv", "cross_out", "ffn", "layer_norm"):
            labels[f"{group}.{key}"] = f"{t(f'scale.group.{group}')} · {t(f'scale.row.{key}')}"
    return labels


def scale_result(query: ScaleQuery, t: Translate) -> dict:
    if query.d_model % query.heads:
        raise InputError("heads", f"heads must divide d_model ({query.d_model} % {query.heads} "
                                  f"= {query.d_model % query.heads})")
    if query.active_experts > query.experts:
        raise InputError("active_experts", "active_experts cannot exceed experts")
    result = scale.count(scale.ScaleInput(**query.model_dump()))
    labels = _scale_labels(t)
    for row in result["rows"]:
        row["label"] = labels.get(f"{row['group']}.{row['key']}", labels.get(row["key"]))
    result["figure"] = figs.parameter_breakdown(result, labels)
    return result


@router.get("/api/scale", responses=ERRORS, tags=["model"])
def scale_calculator(query: Annotated[ScaleQuery, Query()], t: TranslateDep) -> dict:
    """Parameters of every weight matrix for the given sizes (the page's calculator)."""
    return scale_result(query, t)


def _presets(translator) -> list[dict]:
    ours = scale.from_config(asdict(translator.config))
    presets = [{"name": model["name"], "official": model["official"],
                "query": {**asdict(scale.preset(model["name"])), "target_vocab": None}}
               for model in scale.GPT_MODELS]
    presets.append({"name": "this", "official": True, "query": asdict(ours)})
    return presets


# -- pages --------------------------------------------------------------------------------------


@pages.get("/tokens", response_class=HTMLResponse)
def tokens_page(request: Request, lang: LanguageDep) -> HTMLResponse:
    return render_page(request, "tokens.html", "tokens", lang)


@pages.get("/embeddings", response_class=HTMLResponse)
def embeddings_page(request: Request, lang: LanguageDep, translator: TranslatorDep) -> HTMLResponse:
    d = translator.config.d_model
    return render_page(request, "embeddings.html", "embeddings", lang,
                       sqrt_d=f"{math.sqrt(d):.2f}", pe_norm=f"{math.sqrt(d / 2):.2f}")


@pages.get("/coreference", response_class=HTMLResponse)
def coreference_page(request: Request, lang: LanguageDep) -> HTMLResponse:
    """The sentence comes with its pronoun and referent; a sentence carried over from another
    page without them is replaced by the first example."""
    examples = [asdict(example) for example in coreference.EXAMPLES]
    query = request.query_params
    if query.get("pronoun") and query.get("referent"):
        choice = {"text": query.get("text", ""), "pronoun": query["pronoun"],
                  "referent": query["referent"], "distractor": query.get("distractor", "")}
    else:
        choice = examples[0]
    return render_page(
        request, "coreference.html", "coreference", lang, coref_examples=examples,
        coref_text=choice["text"][:200], pronoun=choice["pronoun"][:20],
        referent=choice["referent"][:30], distractor=choice["distractor"][:30],
    )


@pages.get("/training", response_class=HTMLResponse)
def training_page(request: Request, lang: LanguageDep, translator: TranslatorDep) -> HTMLResponse:
    settings = translator.history.get("settings", {})
    return render_page(request, "training.html", "training", lang,
                       reference=request.query_params.get("reference", "")[:200],
                       clip=settings.get("clip", 1.0), warmup=settings.get("warmup", 1500))


@pages.get("/kv-cache", response_class=HTMLResponse)
def kv_cache_page(request: Request, lang: LanguageDep) -> HTMLResponse:
    steps = request.query_params.get("steps", "32")
    return render_page(request, "kv_cache.html", "kv_cache", lang,
                       steps=steps if steps.isdigit() else "32")


@pages.get("/scale", response_class=HTMLResponse)
def scale_page(request: Request, lang: LanguageDep, translator: TranslatorDep) -> HTMLResponse:
    t = Translate(lang)
    ours = scale.from_config(asdict(translator.config))
    computed = {model["name"]: scale.count(scale.preset(model["name"]))["total"]
                for model in scale.GPT_MODELS}
    this = scale_result(ScaleQuery(**asdict(ours)), t)
    return render_page(
        request, "scale.html", "scale", lang,
        gpt_models=scale.GPT_MODELS, computed=computed, this_model=this,
        this_total=translator.parameter_counts()["total"],
        presets=_presets(translator), design=section_content.DESIGN_QUESTIONS,
        improvements=section_content.IMPROVEMENTS, timeline=section_content.TIMELINE,
        stages=section_content.CHATGPT_STAGES,
        ffn_ratio=f"{translator.config.d_ff / translator.config.d_model:g}",
    )


@pages.get("/tour", response_class=HTMLResponse)
def tour_page(request: Request, lang: LanguageDep,
              step: Annotated[str, Query(max_length=4)] = "0") -> HTMLResponse:
    """One stop of the guided tour; an out-of-range ``step`` shows the nearest stop."""
    last = len(section_content.TOUR) - 1
    step = min(last, max(0, int(step))) if step.isdigit() else 0
    path, stage, key = section_content.TOUR[step]
    return render_page(
        request, "tour.html", "tour", lang, step=step, steps=section_content.TOUR,
        tour_path=path, tour_stage=stage, tour_key=key, stages=section_content.PIPELINE_STAGES,
    )


router.include_router(pages)
