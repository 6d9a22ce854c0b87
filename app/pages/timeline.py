"""/timeline — watch it learn: the sentence in the box translated by the model as it was at a few
steps of a training run from random weights (``model/timeline.py``, packed by
``python -m model.training.snapshots``), and by the shipped model after all its stages.

At each snapshot: the translation, each character's probability, the cross-attention of a chosen
layer, the run's loss curve with the snapshot marked and its dev BLEU; any two side by side, with
where their translations part and how their attention differs. A snapshot is loaded when first
asked for (on the engine's model thread, admitted and cancellable like every model call) and kept
in the timeline's small LRU; readings are kept in a bounded cache here.

The page's state is its URL: ``/timeline?text=…&at=step001000&vs=shipped&layer=2&head=3``.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import Field, field_validator

from app.api import timed
from app.deps import EngineDep, LanguageDep, TranslatorDep, page_text
from app.engine import Engine
from app.layout import render_page
from app.plots import (
    BLUE,
    DIVERGING,
    GREY,
    ORANGE,
    attention_heatmap,
    base_layout,
    category_axis,
    unique_labels,
)
from app.schemas import ENGLISH, MAX_TEXT_CHARS, TOKENS_RULE, Strict, TranslateRequest, errors
from model.api import TIMELINE_FOLDER, TIMELINE_MANIFEST, Timeline, Translator, read_along

router = APIRouter()
PageText = page_text("timeline")

SHIPPED = "shipped"  # the served model, after all its training stages
READINGS = 24  # (snapshot, sentence) readings kept; one is ~0.3 MB of lists at 64 characters


def _manifest() -> dict:
    """timeline.json as committed (read once, here, for the request schema: no torch)."""
    path = TIMELINE_FOLDER / TIMELINE_MANIFEST
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


_PACKED = _manifest()
NAMES = [entry["name"] for entry in _PACKED.get("snapshots", [])]
_CONFIG = _PACKED.get("config", {})
MAX_LAYER = int(_CONFIG.get("n_decoder_layers", 64)) - 1
MAX_HEAD = int(_CONFIG.get("n_heads", 64)) - 1
# the schema lists the names there are; with no timeline packed, any short name (and a 404)
Name = Literal[tuple([*NAMES, SHIPPED])] if NAMES else Annotated[str, Field(max_length=16)]


class TimelineRequest(Strict):
    """A sentence, the snapshot to read it with, and optionally a second one beside it."""

    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, json_schema_extra=ENGLISH,
                      examples=["The cat sits on the mat."],
                      description=f"English text, 1–{MAX_TEXT_CHARS} characters with at least one "
                                  "Latin letter, and at most 128 tokens")
    snapshot: Name = Field(description="a snapshot of the training run (GET /api/timeline lists "
                                       f"them) or {SHIPPED!r}: the served model")
    compare: Name | None = Field(None, description="a second snapshot (or 'shipped') to show "
                                                   "beside the first")
    layer: int = Field(MAX_LAYER, ge=0, le=MAX_LAYER,
                       description="0-based decoder layer whose cross-attention is shown")
    head: int | None = Field(None, ge=0, le=MAX_HEAD,
                             description="0-based head; none: the mean over the layer's heads")

    @field_validator("text")
    @classmethod
    def english_text(cls, text: str) -> str:
        return TranslateRequest.english_text(text)


# -- the timeline and its readings ----------------------------------------------------------------

_lock = threading.Lock()


def timeline_of(request: Request) -> Timeline | None:
    """The app's timeline, opened on first use (the manifest and vocabularies, no weights)."""
    state = request.app.state
    with _lock:
        if not hasattr(state, "timeline"):
            state.timeline = Timeline.open()
            state.timeline_readings = OrderedDict()
        return state.timeline


def shipped_available(translator) -> bool:
    """The served model can be read along with when it is this project's own architecture."""
    return isinstance(translator, Translator)


def reading(request: Request, engine: Engine, translator, name: str, text: str) -> tuple[dict, float]:
    """One (snapshot, sentence) reading and the model milliseconds it cost (0 when kept)."""
    timeline = timeline_of(request)
    readings: OrderedDict = request.app.state.timeline_readings
    key = (name, text)
    with _lock:
        if key in readings:
            readings.move_to_end(key)
            return readings[key], 0.0
    if name == SHIPPED:
        if not shipped_available(translator):
            raise HTTPException(422, "the served model is not this project's own architecture: "
                                     "compare snapshots with each other")
        value, elapsed = engine.run(read_along, translator, text)
    else:
        timeline.entry(name)
        loaded = 0.0
        if not timeline.cached(name):  # the load is its own call: admitted and measured apart
            _, loaded = engine.run(timeline.load, name)
        value, elapsed = engine.run(timeline.read, name, text)
        elapsed += loaded
    with _lock:
        readings[key] = value
        while len(readings) > READINGS:
            readings.popitem(last=False)
    return value, elapsed


# -- routes ---------------------------------------------------------------------------------------

NOT_PACKED = ("no training timeline is packed in model/checkpoints/timeline: run "
              "`python -m model.training.snapshots pack RUN model/checkpoints/timeline`")


@router.get("/timeline", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep) -> HTMLResponse:
    return render_page(request, "timeline", lang, packed=bool(NAMES),
                       layers=MAX_LAYER + 1, heads=MAX_HEAD + 1)


@router.get("/api/timeline", tags=["model"], responses={404: {"description": NOT_PACKED}})
def timeline_summary(request: Request, translator: TranslatorDep, t: PageText) -> dict:
    """The snapshots of the training run (step, epoch, minutes, dev BLEU as stored and as
    trained, how they are stored), the run's recipe and loss curve, and the served model."""
    timeline = timeline_of(request)
    if timeline is None:
        raise HTTPException(404, NOT_PACKED)
    manifest = timeline.manifest
    history = getattr(translator, "history", {}) or {}
    stages = [*history.get("earlier_stages", []), history]
    steps = sum(int((stage.get("epochs") or [{}])[-1].get("step") or 0) for stage in stages)
    return {
        "run": manifest["run"],
        "dev": manifest["dev"],
        "snapshots": [_public(entry, t) for entry in manifest["snapshots"]],
        "shipped": {"name": SHIPPED, "available": shipped_available(translator),
                    "label": t("timeline.shipped_label"), "stages": len(stages),
                    "steps": steps or None, "continues_run": continues_run(manifest, stages),
                    **(manifest.get("shipped") or {})},
        "figure": curve_figure(manifest, [], t),
    }


@router.post("/api/timeline/read", responses=errors(TOKENS_RULE) | {404: {"description": NOT_PACKED}},
             tags=["model"])
def timeline_read(body: TimelineRequest, request: Request, engine: EngineDep,
                  translator: TranslatorDep, t: PageText, response: Response) -> dict:
    """The sentence through one snapshot (and a second beside it): the greedy translation, each
    character's probability (teacher-forced on it), the cross-attention of one decoder layer
    (one head or their mean) and how spread each layer's is; with ``compare``, where the two
    translations part and the difference of their attention where they read the same input."""
    timeline = timeline_of(request)
    if timeline is None:
        raise HTTPException(404, NOT_PACKED)
    names = [body.snapshot] + ([body.compare] if body.compare else [])
    sides, model_ms = [], 0.0
    for name in names:
        value, elapsed = reading(request, engine, translator, name, body.text)
        model_ms += elapsed
        sides.append(value)
    timed(response, model_ms)
    views = [_side(name, value, body.layer, body.head, timeline, translator, t)
             for name, value in zip(names, sides, strict=True)]
    answer: dict = {"text": body.text, "layer": body.layer, "head": body.head,
                    "a": views[0], "b": views[1] if len(views) > 1 else None,
                    "parted_at": None, "difference": None}
    steps = [view["step"] for view in views if view["step"] is not None]
    answer["figures"] = {"curve": curve_figure(timeline.manifest, steps, t)}
    if len(views) > 1:
        answer["parted_at"] = parted_at(sides[0]["labels"], sides[1]["labels"])
        answer["difference"] = attention_difference(views[0], views[1], answer["parted_at"], t)
    for view in views:
        view.pop("matrix")
    return answer


def continues_run(manifest: dict, stages: list[dict]) -> bool:
    """Whether the served model's first training stage is the timeline's run itself (same label,
    same last step): then it carried on from the run's end, with the run's vocabularies."""
    first = stages[0] if stages else {}
    ended = (first.get("epochs") or [{}])[-1].get("step")
    return bool(first.get("label")) and first.get("label") == manifest["run"].get("label") \
        and ended is not None and ended == (manifest.get("epochs") or [{}])[-1].get("step")


def _public(entry: dict, t) -> dict:
    """A snapshot's manifest entry as the page shows it (no file names)."""
    keys = ("name", "step", "epoch", "minutes", "dev_bleu", "dev_chrf", "dev_bleu_full",
            "identical", "bleu_against_full", "regenerated", "bytes", "stored_from")
    return {key: entry.get(key) for key in keys} | {"label": snapshot_label(entry, t)}


def snapshot_label(entry: dict, t) -> str:
    if entry["name"] == "final":
        return t("timeline.final_label", step=f"{entry['step']:,}")
    return t("timeline.step_label", step=f"{entry['step']:,}")


def _side(name: str, value: dict, layer: int, head: int | None, timeline: Timeline, translator,
          t) -> dict:
    """One side of the answer: the reading's tokens and probabilities, its chosen attention as a
    matrix and a figure, and its manifest entry."""
    cross = value["cross"]
    used = min(layer, len(cross) - 1)  # a served model may have fewer layers than the timeline
    heads = cross[used]
    used_head = None if head is None else min(head, len(heads) - 1)
    matrix = heads[used_head] if used_head is not None else [
        [round(sum(column) / len(heads), 4) for column in zip(*rows, strict=True)]
        for rows in zip(*heads, strict=True)]
    if name == SHIPPED:
        entry = {"name": SHIPPED, "step": None, "label": t("timeline.shipped_label"),
                 "model": getattr(translator, "about", {}).get("name")}
    else:
        entry = _public(timeline.entry(name), t)
    heading = (t("timeline.attention_title_mean", label=entry["label"], layer=used + 1)
               if used_head is None else
               t("timeline.attention_title_head", label=entry["label"], layer=used + 1,
                 head=used_head + 1))
    figure = attention_heatmap(matrix, value["labels"], value["source_tokens"], heading,
                               (t("timeline.rows"), t("timeline.columns")))
    return {**entry, "translation": value["translation"], "source_tokens": value["source_tokens"],
            "target_tokens": value["target_tokens"], "labels": value["labels"],
            "probs": value["probs"], "finished": value["finished"], "max_len": value["max_len"],
            "spread": value["spread"], "layer": used, "head": used_head, "matrix": matrix,
            "figure": figure}


def parted_at(a: list[str], b: list[str]) -> int | None:
    """The first position where two translations (with their <eos>) differ; None if the same."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def attention_difference(a: dict, b: dict, parted: int | None, t) -> dict:
    """B − A on the rows both read with the same input (up to and including where they part),
    when both cut the sentence into the same pieces; the mean total-variation distance of those
    rows (0: the same weights, 1: no overlap)."""
    if a["source_tokens"] != b["source_tokens"]:
        return {"comparable": False, "reason": t("timeline.other_pieces")}
    rows = min(len(a["matrix"]), len(b["matrix"]))
    if parted is not None:
        rows = min(rows, parted + 1)
    delta = [[round(y - x, 4) for x, y in zip(ra, rb, strict=True)]
             for ra, rb in zip(a["matrix"][:rows], b["matrix"][:rows], strict=True)]
    distance = [0.5 * sum(abs(v) for v in row) for row in delta]
    # a row is the step both read the same characters at; where they wrote different ones: "a / b"
    written = [x if x == y else f"{x} / {y}" for x, y in zip(a["labels"], b["labels"], strict=False)]
    heatmap = {"type": "heatmap", "z": delta, "x": a["figure"]["data"][0]["x"],
               "y": unique_labels(written[:rows]), "colorscale": DIVERGING, "zmid": 0,
               "zmin": -1, "zmax": 1, "xgap": 1, "ygap": 1,
               "hovertemplate": "%{y} → %{x}<br>Δ = %{z:.4f}<extra></extra>"}
    layout = base_layout(t("timeline.difference_title", a=a["label"], b=b["label"]),
                         max(260, min(560, 120 + 28 * rows)),
                         xaxis=category_axis(t("timeline.columns"), tickangle=-45),
                         yaxis=category_axis(t("timeline.rows"), reverse=True))
    return {"comparable": True, "rows": rows,
            "mean_distance": round(sum(distance) / len(distance), 4) if distance else None,
            "figure": {"data": [heatmap], "layout": layout}}


# -- figures --------------------------------------------------------------------------------------


def curve_figure(manifest: dict, marked: list[int], t) -> dict:
    """The run's logged loss by step, its dev BLEU after every epoch on the right axis, and a
    line at each marked step (the snapshot shown first in blue, the one beside it in orange)."""
    curve = manifest["curve"]
    epochs = [e for e in manifest.get("epochs", []) if e.get("dev_bleu") is not None]
    data = [
        {"type": "scatter", "mode": "lines", "name": t("timeline.loss"), "x": curve["step"],
         "y": curve["loss"], "line": {"color": GREY, "width": 1.5},
         "hovertemplate": f"{t('timeline.step')} %{{x}}: %{{y:.3f}}<extra></extra>"},
        {"type": "scatter", "mode": "markers", "name": t("timeline.dev_bleu"),
         "x": [e["step"] for e in epochs], "y": [e["dev_bleu"] for e in epochs], "yaxis": "y2",
         "marker": {"color": BLUE, "symbol": "diamond", "size": 6},
         "hovertemplate": f"{t('timeline.step')} %{{x}}: BLEU %{{y:.2f}}<extra></extra>"},
    ]
    shapes = [{"type": "line", "xref": "x", "yref": "paper", "x0": step, "x1": step, "y0": 0,
               "y1": 1, "line": {"color": colour, "width": 2.5}}
              for step, colour in zip(marked, (BLUE, ORANGE), strict=False)]
    last = max([*curve["step"], *marked, *(e.get("step") or 0 for e in manifest["snapshots"])])
    return {"data": data, "layout": base_layout(
        "", 280,  # the section's heading names the chart
        xaxis={"title": {"text": t("timeline.step")}, "range": [0, last * 1.03 or 1]},
        yaxis={"title": {"text": t("timeline.loss")}, "rangemode": "tozero"},
        yaxis2={"title": {"text": t("timeline.dev_bleu")}, "overlaying": "y", "side": "right",
                "showgrid": False, "rangemode": "tozero"},
        legend={"orientation": "h"}, shapes=shapes, margin={"l": 50, "r": 50, "t": 16, "b": 45})}
