"""/scale — from this model to GPT-1…GPT-4: the same architecture, a parameter calculator for
every matrix, what changed since.

The calculator: how many numbers each weight matrix of a Transformer holds.

Two layouts are counted, both with biases and LayerNorms unless ``biases=False``:

- ``decoder_only`` — the GPT family: learned token and position embeddings, ``layers`` blocks of
  (LayerNorm, fused QKV, output projection, LayerNorm, FFN), a final LayerNorm, and an output layer
  tied to the token embedding. With biases this reproduces GPT-2's published 124,439,808.
- ``encoder_decoder`` — the model in this app (``model/transformer.py``): source and target
  embeddings, fixed sinusoidal positions (no parameters), ``layers`` encoder layers and ``layers``
  decoder layers (the decoder has a second, cross-attention block and a third LayerNorm), and an
  output projection whose weight is tied to the target embedding (only its bias is new).

The documents' per-matrix figures for GPT-3 (embedding 50257×12288, QKV 3·12288², output projection
12288², FFN 2·12288·49152 per layer) are the weight-only rows below. ``experts`` > 1 turns every
FFN into a mixture of experts; ``active_experts`` of them run for each token.

Pure Python: the JSON API and the page both use this one implementation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import Field

from app.deps import LanguageDep, TranslatorDep, page_text
from app.i18n import Translate
from app.layout import render_page
from app.plots import BLUE, GREEN, GREY, ORANGE, base_layout, category_axis, unique_labels
from app.schemas import QueryModel, errors

router = APIRouter()
PageText = page_text("scale")

# What the page lists below the calculator: i18n key suffixes, rendered in either language.
DESIGN_QUESTIONS = ["deep", "wide", "ffn", "heads", "rlhf", "moe"]
IMPROVEMENTS = {
    "efficiency": ["flash", "sparse", "linear", "gqa"],
    "positions": ["rope", "alibi", "relative", "ntk"],
    "architecture": ["prenorm", "swiglu", "moe", "decoder_only"],
    "long_context": ["interpolation", "sliding", "ring", "memory"],
    "multimodal": ["vit", "clip", "whisper", "video"],
    "training": ["mixed_precision", "checkpointing", "deepnorm", "mup"],
}
TIMELINE = ["2017", "2018", "2020", "2022", "2024"]
CHATGPT_STAGES = ["pretrain", "sft", "rm", "ppo"]

Architecture = Literal["decoder_only", "encoder_decoder"]


@dataclass(frozen=True)
class ScaleInput:
    architecture: Architecture = "decoder_only"
    vocab: int = 50257
    target_vocab: int | None = None  # encoder-decoder only; defaults to ``vocab``
    d_model: int = 12288
    layers: int = 96  # per stack for encoder-decoder
    heads: int = 96
    d_ff: int = 49152
    context: int = 2048
    experts: int = 1
    active_experts: int = 1
    biases: bool = True
    tied_output: bool = True

    def __post_init__(self) -> None:
        # heads need not divide d_model: no count depends on them (d_head is then fractional)
        if self.active_experts > self.experts:
            raise ValueError("active_experts cannot exceed experts")


@dataclass(frozen=True)
class Row:
    """One kind of weight: its shape, how many numbers per layer (or once), and in all layers."""

    key: str  # stable id; the page looks up its label in both languages
    group: str  # "embedding", "encoder", "decoder", "output"
    shape: str
    per_layer: int  # numbers in one layer (or in the single matrix for embeddings/output)
    times: int  # how many layers hold it (1 for embeddings and output)
    weights: int  # the weight-matrix part of per_layer (no biases / LayerNorms)

    @property
    def count(self) -> int:
        return self.per_layer * self.times

    def as_dict(self) -> dict:
        return {**asdict(self), "count": self.count}


def _attention_rows(group: str, prefix: str, d: int, layers: int, bias: int) -> list[Row]:
    return [
        Row(f"{prefix}qkv", group, f"3 × {d} × {d}", 3 * d * d + 3 * d * bias, layers, 3 * d * d),
        Row(f"{prefix}out", group, f"{d} × {d}", d * d + d * bias, layers, d * d),
    ]


def _ffn_row(group: str, d: int, d_ff: int, layers: int, bias: int, experts: int) -> Row:
    one = 2 * d * d_ff + (d_ff + d) * bias
    shape = f"{d} × {d_ff} + {d_ff} × {d}"
    if experts > 1:  # the label names the experts in the reader's language (scale.row.experts)
        shape = f"{experts} × ({shape})"
    return Row("ffn", group, shape, experts * one, layers, experts * 2 * d * d_ff)


def _norm_row(group: str, d: int, layers: int, norms: int, bias: int) -> Row:
    per_layer = norms * 2 * d * bias  # each LayerNorm has a gain and a shift vector
    return Row("layer_norm", group, f"{norms} × 2 × {d}", per_layer, layers, 0)


def count(spec: ScaleInput) -> dict:
    """Every row, the totals, and the parameters one token actually uses (mixture of experts)."""
    d, bias = spec.d_model, int(spec.biases)
    rows: list[Row] = []
    if spec.architecture == "decoder_only":
        rows.append(Row("token_embedding", "embedding", f"{spec.vocab} × {d}",
                        spec.vocab * d, 1, spec.vocab * d))
        rows.append(Row("position_embedding", "embedding", f"{spec.context} × {d}",
                        spec.context * d, 1, spec.context * d))
        rows += _attention_rows("decoder", "", d, spec.layers, bias)
        rows.append(_ffn_row("decoder", d, spec.d_ff, spec.layers, bias, spec.experts))
        rows.append(_norm_row("decoder", d, spec.layers, 2, bias))
        rows.append(Row("final_norm", "output", f"2 × {d}", 2 * d * bias, 1, 0))
        vocab_out = spec.vocab
        output_bias = 0
    else:
        target_vocab = spec.target_vocab or spec.vocab
        rows.append(Row("source_embedding", "embedding", f"{spec.vocab} × {d}",
                        spec.vocab * d, 1, spec.vocab * d))
        rows.append(Row("target_embedding", "embedding", f"{target_vocab} × {d}",
                        target_vocab * d, 1, target_vocab * d))
        rows.append(Row("position_encoding", "embedding", f"{spec.context} × {d}",
                        0, 1, 0))
        rows += _attention_rows("encoder", "", d, spec.layers, bias)
        rows.append(_ffn_row("encoder", d, spec.d_ff, spec.layers, bias, spec.experts))
        rows.append(_norm_row("encoder", d, spec.layers, 2, bias))
        rows += _attention_rows("decoder", "", d, spec.layers, bias)
        rows += _attention_rows("decoder", "cross_", d, spec.layers, bias)
        rows.append(_ffn_row("decoder", d, spec.d_ff, spec.layers, bias, spec.experts))
        rows.append(_norm_row("decoder", d, spec.layers, 3, bias))
        vocab_out = target_vocab
        output_bias = vocab_out * bias
    untied = 0 if spec.tied_output else vocab_out * d
    # the shape of the weight it uses; the label says whether that weight is the embedding's
    rows.append(Row("output_projection", "output", f"{d} × {vocab_out}",
                    untied + output_bias, 1, untied))

    total = sum(row.count for row in rows)
    ffn_total = sum(row.count for row in rows if row.key == "ffn")
    active = total - ffn_total + ffn_total * spec.active_experts // spec.experts
    embedding = sum(row.count for row in rows if row.group == "embedding")
    return {
        "input": asdict(spec),
        "d_head": d // spec.heads if d % spec.heads == 0 else round(d / spec.heads, 2),
        "rows": [row.as_dict() for row in rows],
        "total": total,
        "total_weights_only": sum(row.weights * row.times for row in rows),
        "active_per_token": active,
        "non_embedding": total - embedding,
        # a forward pass costs about two floating-point operations per parameter a token uses
        "flops_per_token": 2 * (active - embedding),
        # K and V for every layer (both stacks' self-attention for encoder-decoder decoding)
        "kv_cache_floats_per_token": 2 * d * spec.layers,
        "attention_scores_per_head": spec.context * spec.context,
    }


def from_config(config: dict) -> ScaleInput:
    """The calculator's input for this app's encoder-decoder (a TransformerConfig as a dict)."""
    if config["n_encoder_layers"] != config["n_decoder_layers"]:
        raise ValueError("the calculator assumes as many encoder as decoder layers")
    return ScaleInput(
        architecture="encoder_decoder",
        vocab=config["src_vocab_size"],
        target_vocab=config["tgt_vocab_size"],
        d_model=config["d_model"],
        layers=config["n_encoder_layers"],
        heads=config["n_heads"],
        d_ff=config["d_ff"],
        context=config["max_positions"],
        tied_output=config["tie_output"],
    )


# The documents' GPT table. GPT-1…3 sizes are published; GPT-4's are not (marked unofficial).
GPT_MODELS = [
    {"name": "GPT-1", "year": 2018, "params": "117M", "layers": 12, "d_model": 768, "heads": 12,
     "d_ff": 3072, "context": "512", "vocab": 40478, "context_n": 512, "official": True},
    {"name": "GPT-2", "year": 2019, "params": "1.5B", "layers": 48, "d_model": 1600, "heads": 25,
     "d_ff": 6400, "context": "1024", "vocab": 50257, "context_n": 1024, "official": True},
    {"name": "GPT-3", "year": 2020, "params": "175B", "layers": 96, "d_model": 12288, "heads": 96,
     "d_ff": 49152, "context": "2048", "vocab": 50257, "context_n": 2048, "official": True},
    {"name": "GPT-4", "year": 2023, "params": "~1.8T (MoE)", "layers": 120, "d_model": 16384,
     "heads": 128, "d_ff": 65536, "context": "8K–128K", "vocab": 100256, "context_n": 8192,
     "official": False},
]


def preset(name: str) -> ScaleInput:
    for model in GPT_MODELS:
        if model["name"] == name:
            return ScaleInput(
                vocab=model["vocab"], d_model=model["d_model"], layers=model["layers"],
                heads=model["heads"], d_ff=model["d_ff"], context=model["context_n"],
            )
    raise KeyError(name)


class ScaleQuery(QueryModel):
    """A Transformer's sizes; the answer counts every weight matrix."""

    architecture: Literal["decoder_only", "encoder_decoder"] = "decoder_only"
    vocab: int = Field(50257, ge=1, le=2_000_000, description="(source) vocabulary size")
    target_vocab: int | None = Field(None, ge=1, le=2_000_000,
                                     description="target vocabulary (encoder-decoder only)")
    d_model: int = Field(12288, ge=1, le=65536)
    layers: int = Field(96, ge=1, le=1024, description="layers (per stack for encoder-decoder)")
    heads: int = Field(96, ge=1, le=1024, description="attention heads; real models' divide "
                                                      "d_model (if not: a warning, and d_head "
                                                      "fractional; no count depends on heads)")
    d_ff: int = Field(49152, ge=1, le=1_048_576)
    context: int = Field(2048, ge=1, le=10_000_000, description="context length (tokens)")
    experts: int = Field(1, ge=1, le=1024, description="FFN experts per layer (1 = dense)")
    active_experts: int = Field(1, ge=1, le=1024, description="experts each token uses (more "
                                                              "than experts: a warning, counted "
                                                              "as experts)")
    biases: bool = True
    tied_output: bool = True


# -- routes ---------------------------------------------------------------------------------------


@router.get("/scale", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep, translator: TranslatorDep) -> HTMLResponse:
    t = Translate(lang, "scale")
    ours = from_config(asdict(translator.config))
    computed = {model["name"]: count(preset(model["name"]))["total"]
                for model in GPT_MODELS}
    this = scale_result(ScaleQuery(**asdict(ours)), t)
    return render_page(
        request, "scale", lang,
        gpt_models=GPT_MODELS, computed=computed, this_model=this,
        this_total=translator.parameter_counts()["total"],
        presets=_presets(translator), design=DESIGN_QUESTIONS,
        improvements=IMPROVEMENTS, timeline=TIMELINE,
        stages=CHATGPT_STAGES,
        ffn_ratio=f"{translator.config.d_ff / translator.config.d_model:g}",
    )


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
    """The counts, with ``warnings`` (in the reader's language) for sizes no real model has:
    heads that do not divide d_model (no count depends on them), more active experts than
    experts (counted as all of them)."""
    warnings = []
    if query.d_model % query.heads:
        warnings.append(t("scale.warn.heads", heads=query.heads, d=query.d_model,
                          d_head=round(query.d_model / query.heads, 2)))
    if query.active_experts > query.experts:
        warnings.append(t("scale.warn.experts", active=query.active_experts, n=query.experts))
    sizes = {**query.model_dump(), "active_experts": min(query.active_experts, query.experts)}
    result = count(ScaleInput(**sizes))
    result["warnings"] = warnings
    labels = _scale_labels(t)
    experts = t("scale.row.experts", n=query.experts) if query.experts > 1 else ""
    for row in result["rows"]:
        row["label"] = labels.get(f"{row['group']}.{row['key']}", labels.get(row["key"]))
        if row["key"] == "ffn" and experts:
            row["label"] += f" × {experts}"
        if row["key"] == "output_projection" and not query.tied_output:
            row["label"] = t("scale.row.output_untied")
    result["figure"] = parameter_breakdown(result, labels, t("scale.parameters"))
    return result


@router.get("/api/scale", responses=errors(), tags=["model"])
def scale_calculator(query: Annotated[ScaleQuery, Query()], t: PageText) -> dict:
    """Parameters of every weight matrix for the given sizes (the page's calculator)."""
    return scale_result(query, t)


def _presets(translator) -> list[dict]:
    ours = from_config(asdict(translator.config))
    presets = [{"name": model["name"], "official": model["official"],
                "query": {**asdict(preset(model["name"])), "target_vocab": None}}
               for model in GPT_MODELS]
    presets.append({"name": "this", "official": True, "query": asdict(ours)})
    return presets


# -- figures --------------------------------------------------------------------------------------


def parameter_breakdown(result: dict, labels: dict[str, str], axis_label: str = "parameters") -> dict:
    """Where the parameters are: one horizontal bar per kind of weight (all layers together)."""
    rows = [row for row in result["rows"] if row["count"] > 0]
    names = [labels.get(f"{row['group']}.{row['key']}", labels.get(row["key"], row["key"]))
             for row in rows]
    total = result["total"] or 1
    bar = {
        "type": "bar", "orientation": "h",
        "y": unique_labels(names), "x": [row["count"] for row in rows],
        "text": [f"{100 * row['count'] / total:.1f}%" for row in rows], "textposition": "auto",
        "customdata": [[name, row["shape"], row["times"]] for name, row in zip(names, rows,
                                                                               strict=True)],
        "marker": {"color": [{"embedding": GREEN, "encoder": BLUE, "decoder": ORANGE}.get(
            row["group"], GREY) for row in rows]},
        "hovertemplate": "%{customdata[0]}<br>%{customdata[1]} × %{customdata[2]}<br>"
                         "%{x:,}<extra></extra>",
    }
    layout = base_layout("", 80 + 30 * len(rows), yaxis=category_axis(reverse=True),
                         xaxis={"title": {"text": axis_label}, "type": "log"})
    return {"data": [bar], "layout": layout}
