"""/training — how the shipped model was trained (loss, learning-rate schedule, gradient norm,
BLEU per epoch and CPU minutes, from history.json), how good it is on held-out test sets (from
eval.json, beside the previous checkpoint's figures when eval.json keeps them), and the
teacher-forced loss and gradient of a pair the reader types."""

from __future__ import annotations

import csv
import re
import unicodedata
from dataclasses import asdict
from functools import cache
from pathlib import Path

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import Field, field_validator

from app.api import timed
from app.deps import EngineDep, LanguageDep, TranslatorDep, page_text
from app.layout import DEFAULT_TEXT, render_page
from app.pages.training_eval import evaluation_view
from app.palette import PLOT_FONT_PX
from app.plots import (
    BLUE,
    GREEN,
    GREY,
    LEGEND_TOP,
    ORANGE,
    STAGE_COLOURS,
    TWO_AXES_MARGIN,
    VERMILION,
    base_layout,
    category_axis,
    unique_labels,
)
from app.schemas import ENGLISH, ERRORS, MAX_TEXT_CHARS, Strict, TranslateRequest
from model.api import RECIPES, learning_rate, parse_recipe, run_total_steps

router = APIRouter()
PageText = page_text("training")
SCHEDULE_POINTS = 200
MAX_REFERENCE_CHARS = 200
CHINESE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")  # the schema's pattern
# What NFC makes of a text that has one: a few compatibility ideographs (U+F900–U+FAFF) become
# ideographs outside the Basic Multilingual Plane, which the server's check also counts.
CHINESE_AFTER_NFC = re.compile("[" + CHINESE.pattern[1:-1] + "".join(sorted(
    {unicodedata.normalize("NFC", chr(c)) for c in range(0xF900, 0xFB00)}
    - {chr(c) for c in range(0x3400, 0xFB00)})) + "]")
# Human translations of the project's hand-written probe sentences: the default reference when the
# sentence is one of them, because the model's own output as reference makes teacher forcing and
# free running agree everywhere by construction.
PROBE_FILE = Path(__file__).resolve().parents[2] / "model" / "training" / "probe.tsv"
# The optimizer model/training/loop.py builds: torch.optim.Adam(betas=(0.9, 0.98), eps=1e-9), its learning
# rate set every step by the warmup schedule (tests/app/test_training.py checks the two agree).
ADAM = {"beta1": 0.9, "beta2": 0.98, "eps": 1e-9}


class ScoreRequest(Strict):
    """A sentence pair to score with teacher forcing (one backward pass, no update)."""

    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, json_schema_extra=ENGLISH,
                      examples=["The cat sits on the mat."],
                      description=f"English source, 1–{MAX_TEXT_CHARS} characters with at least "
                                  "one Latin letter")
    reference: str = Field(min_length=1, max_length=MAX_REFERENCE_CHARS,
                           json_schema_extra={"pattern": CHINESE.pattern},
                           examples=["猫坐在垫子上。"],
                           description=f"Chinese reference, 1–{MAX_REFERENCE_CHARS} characters, "
                                       "with at least one Chinese character")

    @field_validator("text")
    @classmethod
    def english_text(cls, text: str) -> str:
        return TranslateRequest.english_text(text)

    @field_validator("reference")
    @classmethod
    def chinese_reference(cls, reference: str) -> str:
        # the reference arrives NFC-normalised (Strict), and NFC keeps a Chinese character one
        if not CHINESE_AFTER_NFC.search(reference):
            raise ValueError("reference must contain Chinese characters: it is the translation "
                             "the model is scored against")
        return reference.strip()


# -- routes ---------------------------------------------------------------------------------------


@cache
def human_references() -> dict[str, str]:
    """English sentence → its human Chinese translation, from model/training/probe.tsv (empty if absent)."""
    if not PROBE_FILE.exists():
        return {}
    with PROBE_FILE.open(encoding="utf-8", newline="") as handle:
        return {row["english"]: row["chinese"] for row in csv.DictReader(handle, delimiter="\t")}


def human_reference(text: str) -> str:
    return human_references().get(" ".join(text.split()), "")


# sentence pairs with a human translation to offer when the learner's sentence has none: the
# first of a few categories of the probe set (a sentence whose reference differs from what the
# model writes is what shows teacher forcing and free running parting)
PRESET_CATEGORIES = ("everyday", "questions", "people", "numbers")


@cache
def preset_pairs() -> list[dict[str, str]]:
    """One (english, chinese) pair per category in ``PRESET_CATEGORIES``, from the probe set."""
    if not PROBE_FILE.exists():
        return []
    with PROBE_FILE.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    firsts = {}
    for row in rows:
        firsts.setdefault(row["category"], {"english": row["english"], "chinese": row["chinese"]})
    return [firsts[name] for name in PRESET_CATEGORIES if name in firsts]


@router.get("/training", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep, translator: TranslatorDep) -> HTMLResponse:
    settings = translator.history.get("settings", {})
    text = request.query_params.get("text") or DEFAULT_TEXT
    return render_page(request, "training", lang,
                       reference=request.query_params.get("reference", "")[:200],
                       human_reference=human_reference(text[:200]), pairs=preset_pairs(),
                       clip=settings.get("clip", 1.0), warmup=settings.get("warmup", 1500),
                       total_steps=run_total_steps(settings),
                       adam={**ADAM, "eps": f"{ADAM['eps']:.0e}".replace("e-0", "e-")},
                       beta1_steps=round(1 / (1 - ADAM["beta1"])),
                       beta2_steps=round(1 / (1 - ADAM["beta2"])),
                       recipe=recipe_view(translator.history, lang))


def recipe_view(history: dict, lang: str) -> dict:
    """What made the checkpoint: its recipe's name, stages, data files' sha256 and code commit
    (history.json's ``recipe``); for a checkpoint from before recipes, only the recipe that now
    makes the shipped model (``shipped``) and its file."""
    kept = history.get("recipe") or {}
    if not kept.get("text"):
        return {"made_by_recipe": False, "name": "shipped",
                "file": str((RECIPES / "shipped.toml").relative_to(RECIPES.parents[2]))}
    recipe = parse_recipe(kept["text"], kept.get("name", "recipe"))
    code = (kept.get("code") or [{}])[-1]
    return {
        "made_by_recipe": True, "name": recipe.name, "text": kept["text"],
        "description": recipe.description.get(lang) or recipe.description.get("en", ""),
        "stages": [{"number": number, "label": stage.label.get(lang) or stage.label.get("en", ""),
                    "epochs": stage.epochs, "warmup": stage.warmup, "lr_factor": f"{stage.lr_factor:g}",
                    "decay": stage.decay, "transforms": ", ".join(stage.transforms) or "–"}
                   for number, stage in enumerate(recipe.stages, start=1)],
        "data": [{"file": name, "sha256": digest} for name, digest in kept.get("data", {}).items()],
        "commit": (code.get("commit") or "")[:12], "dirty": bool(code.get("dirty")),
    }


@router.post("/api/score", responses=ERRORS, tags=["model"])
def score(request: ScoreRequest, engine: EngineDep, translator: TranslatorDep, t: PageText,
          response: Response) -> dict:
    """Teacher-forced loss of (text, reference): per-position label probability and
    cross-entropy, the loss, and the gradient norm before and after clipping (no update).

    The model is in evaluation mode (dropout off), so the gradient is the same on every call;
    ``dropout`` says so, and the page says it in words."""
    settings = translator.history.get("settings", {})
    result, score_ms = engine.run(
        translator.score, request.text, request.reference,
        label_smoothing=float(settings.get("label_smoothing", 0.1)),
        clip=float(settings.get("clip", 1.0)),
    )
    trace, model_ms = engine.trace(TranslateRequest.model_construct(text=request.text))
    data = asdict(result)
    timed(response, score_ms + model_ms)
    return {
        **data,
        "text": request.text,
        "reference": request.reference,
        "dropout": False,
        "greedy": trace.target_tokens + (["<eos>"] if trace.finished else []),
        "greedy_translation": trace.translation,
        "figures": {"positions": score_figure(data, (t("training.prob"), t("training.ce")))},
    }


@router.get("/api/training", tags=["model"])
def training_history(translator: TranslatorDep, t: PageText) -> dict:
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
    total = run_total_steps(settings)
    # the training loop logs the rate used for step s, which LambdaLR computed as learning_rate(s)
    end = float(settings.get("lr_end", 0.0))  # a stage of a longer schedule ends above zero
    curve_lr = [learning_rate(s, d, warmup, factor, total, end) for s in curve_steps]
    step = t("common.step")
    names = t("training.schedule_names").split("|")
    return {
        "d_model": d,
        "warmup": warmup,
        "lr_factor": factor,
        "peak_lr": learning_rate(warmup, d, warmup, factor),
        "decay": "linear" if total else "noam",
        "settings": public_settings(settings),
        "final": history.get("final"),
        "epochs": epochs,
        "has_history": bool(steps or epochs),
        "story": training_story(history, t),
        "evaluation": evaluation_view(translator.evaluation, t),
        "figures": {
            "schedule": lr_schedule_figure(
                curve_steps, curve_lr, [s["step"] for s in steps], [s["lr"] for s in steps],
                warmup, (*names, t("training.lr"), step)),
            "curves": training_curves(steps, {
                "loss": t("training.loss_name"), "grad_norm": t("training.grad_name"),
                "step": step, "clip": str(settings.get("clip", 1.0))}) if steps else None,
            "epochs": epoch_curves(epochs, {
                "train_loss": t("training.train_loss"), "epoch": t("training.epoch")})
            if epochs else None,
            "whole": whole_training(history, t.lang, {
                name: t(f"training.whole.{name}")
                for name in ("stage", "missing", "minutes", "raw", "smooth", "bleu", "loss")}),
        },
        "stages": training_stages(history, t.lang),
    }


def public_settings(settings: dict) -> dict:
    """The training settings without the training machine's paths (--data, --out, --work, ...)."""
    return {name: value for name, value in settings.items()
            if not (isinstance(value, str) and ("/" in value or "\\" in value))}


# -- the training story and the held-out evaluation -----------------------------------------------

def training_story(history: dict, t) -> dict | None:
    """How long training took in all and on what: this run's minutes plus, when it was
    warm-started, the total of the checkpoint it started from (history["init"])."""
    epochs = history.get("epochs") or []
    if not epochs:
        return None
    last = epochs[-1]
    run = float(last.get("minutes") or 0.0)
    init = history.get("init") or None
    earlier = float(init.get("total_minutes") or 0.0) if init else 0.0
    total = round(earlier + run, 1)
    pairs = history.get("train_pairs")
    story = {
        "total_minutes": total, "run_minutes": round(run, 1), "earlier_minutes": round(earlier, 1),
        "warm_started": init is not None, "train_pairs": pairs, "epochs": len(epochs),
        "steps": last.get("step"),
    }
    lines = [t("training.story.total", minutes=f"{total:,.1f}", epochs=len(epochs),
               steps=f"{last.get('step', 0):,}")]
    if pairs:
        lines.append(t("training.story.pairs", pairs=f"{pairs:,}"))
    settings = history.get("settings") or {}
    if settings.get("concat"):
        lines.append(t("training.story.concat", joined=f"{int(settings['concat']):,}"))
    if settings.get("unlikelihood"):
        lines.append(t("training.story.unlikelihood", alpha=f"{float(settings['unlikelihood']):g}"))
    if init is not None:
        lines.append(t("training.story.warm", earlier=f"{earlier:,.1f}", run=f"{run:,.1f}",
                       epochs=init.get("epochs", "?"),
                       pairs=f"{init['train_pairs']:,}" if init.get("train_pairs") else "?"))
    story["lines"] = lines
    return story


def score_figure(score: dict, titles: tuple[str, str]) -> dict:
    """Per position: p(right label) on the left axis, its cross-entropy −log p on the right."""
    labels = [f"{i} → {lab}" for i, lab in zip(score["decoder_input"], score["labels"],
                                                 strict=True)]
    x = unique_labels(labels)
    data = [
        {"type": "bar", "name": titles[0], "x": x, "y": score["label_prob"],
         "marker": {"color": BLUE}, "customdata": labels, "offsetgroup": "p",
         "hovertemplate": "%{customdata}<br>p = %{y:.4f}<extra></extra>"},
        {"type": "bar", "name": titles[1], "x": x, "y": score["cross_entropy"], "yaxis": "y2",
         "marker": {"color": ORANGE}, "customdata": labels, "offsetgroup": "ce",
         "hovertemplate": "%{customdata}<br>−log p = %{y:.3f}<extra></extra>"},
    ]
    layout = base_layout(
        "", 320, barmode="group",
        xaxis=category_axis(tickangle=-45),
        yaxis={"title": {"text": titles[0]}, "range": [0, 1]},
        yaxis2={"title": {"text": titles[1]}, "overlaying": "y", "side": "right",
                "rangemode": "tozero", "showgrid": False},
        legend=LEGEND_TOP,
        margin=TWO_AXES_MARGIN,
    )
    return {"data": data, "layout": layout}


def lr_schedule_figure(
    curve_steps: list[int], curve_lr: list[float], logged_steps: list[int], logged_lr: list[float],
    warmup: int, names: tuple[str, ...] = ("schedule", "logged", "warmup", "lr", "step"),
) -> dict:
    """The warmup schedule as a line, the learning rates logged during training as dots."""
    data = [
        {"type": "scatter", "mode": "lines", "name": names[0], "x": curve_steps, "y": curve_lr,
         "line": {"color": BLUE, "width": 2},
         "hovertemplate": f"{names[4]} %{{x}}: %{{y:.2e}}<extra></extra>"},
    ]
    if logged_steps:
        data.append({"type": "scatter", "mode": "markers", "name": names[1], "x": logged_steps,
                     "y": logged_lr, "marker": {"color": ORANGE, "size": 5},
                     "hovertemplate": f"{names[4]} %{{x}}: %{{y:.2e}}<extra></extra>"})
    peak = max(curve_lr) if curve_lr else 0
    layout = base_layout(
        "", 300, xaxis={"title": {"text": names[4]}},
        yaxis={"title": {"text": names[3]}, "exponentformat": "e"},
        shapes=[{"type": "line", "x0": warmup, "x1": warmup, "y0": 0, "y1": peak,
                 "line": {"color": GREY, "dash": "dot"}}],
        annotations=[{"text": f"{names[2]} = {warmup}", "x": warmup, "y": peak, "showarrow": False,
                      "yanchor": "bottom", "font": {"color": "#555"}}],
        legend=LEGEND_TOP,
    )
    return {"data": data, "layout": layout}


def training_curves(steps: list[dict], names: dict[str, str]) -> dict:
    """Loss and gradient norm (before clipping) over training steps, two stacked panels."""
    x = [s["step"] for s in steps]
    step_hover = f"{names.get('step', 'step')} %{{x}}: %{{y:.3f}}<extra></extra>"
    data = [
        {"type": "scatter", "mode": "lines", "name": names["loss"], "x": x,
         "y": [s["loss"] for s in steps], "line": {"color": BLUE}, "xaxis": "x", "yaxis": "y",
         "hovertemplate": step_hover},
        {"type": "scatter", "mode": "lines", "name": names["grad_norm"], "x": x,
         "y": [s["grad_norm"] for s in steps], "line": {"color": VERMILION}, "xaxis": "x2",
         "yaxis": "y2", "hovertemplate": step_hover},
    ]
    layout = base_layout(
        "", 420,
        xaxis={"domain": [0, 1], "anchor": "y", "showticklabels": False},
        yaxis={"domain": [0.55, 1], "title": {"text": names["loss"]}},
        xaxis2={"domain": [0, 1], "anchor": "y2", "title": {"text": names.get("step", "step")},
                "matches": "x"},
        yaxis2={"domain": [0, 0.45], "title": {"text": names["grad_norm"]}},
        legend={**LEGEND_TOP, "y": 1.1},
    )
    if "clip" in names:
        layout["shapes"] = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y2",
                             "y0": float(names["clip"]), "y1": float(names["clip"]),
                             "line": {"color": GREY, "dash": "dot"}}]
    return {"data": data, "layout": layout}


def _stage_minutes(stage: dict) -> list[tuple[int, float]]:
    """(step, minutes) at the start and after every epoch of one run: where its time went."""
    points = [(0, 0.0)] + [(int(e["step"]), float(e["minutes"])) for e in stage.get("epochs", [])
                           if "step" in e and "minutes" in e]
    return points


def _minutes_at(step: int, points: list[tuple[int, float]]) -> float:
    """A logged step's minute within its run, interpolated between the epochs around it."""
    for (s0, m0), (s1, m1) in zip(points, points[1:], strict=False):
        if step <= s1:
            return m0 + (m1 - m0) * (step - s0) / max(1, s1 - s0)
    s_last, m_last = points[-1]
    return m_last


def smoothed(values: list[float], weight: float = 0.9) -> list[float]:
    """An exponential moving average, debiased at the start (as TensorBoard draws a curve)."""
    out, average = [], 0.0
    for index, value in enumerate(values, start=1):
        average = weight * average + (1 - weight) * value
        out.append(round(average / (1 - weight ** index), 4))
    return out


def whole_training(history: dict, lang: str, names: dict[str, str]) -> dict | None:
    """Every run since random weights, end to end on one axis of CPU minutes: the logged loss
    (faint) and its moving average per run, each run's dev BLEU after every epoch, a dashed line
    where a run starts from the previous one, and a band where a run left no curve."""
    stages = [*history.get("earlier_stages", []), history]
    if len(stages) < 2 or not any(stage.get("steps") for stage in stages):
        return None
    data, shapes, annotations, offset = [], [], [], 0.0
    for number, stage in enumerate(stages, start=1):
        label = stage.get("label") or {}
        title = label.get(lang) or label.get("en") or names["stage"].format(n=number)
        points = _stage_minutes(stage)
        epochs = stage.get("epochs") or [{}]
        length = float(epochs[-1].get("minutes") or points[-1][1])
        colour = STAGE_COLOURS[number % len(STAGE_COLOURS)]
        if number > 1:
            shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": offset, "x1": offset,
                           "y0": 0, "y1": 1, "line": {"color": GREY, "dash": "dash", "width": 1}})
        annotations.append({"x": offset + length / 2, "xref": "x", "y": 1.02, "yref": "paper",
                            "text": str(number), "showarrow": False, "hovertext": title,
                            "font": {"size": 12, "color": colour}})
        if stage.get("missing") or not stage.get("steps"):
            shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": offset,
                           "x1": offset + length, "y0": 0, "y1": 1, "line": {"width": 0},
                           "fillcolor": "rgba(128,128,128,0.12)"})
            annotations.append({"x": offset + length / 2, "xref": "x", "y": 0.5, "yref": "paper",
                                "text": names["missing"], "showarrow": False,
                                "font": {"size": PLOT_FONT_PX, "color": GREY}})
            offset += length
            continue
        steps = stage["steps"]
        x = [round(offset + _minutes_at(int(r["step"]), points), 2) for r in steps]
        loss = [r["loss"] for r in steps]
        hover = f"{title}<br>{names['minutes']} %{{x:.1f}} · %{{y:.3f}}<extra></extra>"
        data.append({"type": "scatter", "mode": "lines", "x": x, "y": loss, "name": names["raw"],
                     "legendgroup": "raw", "showlegend": number == len(stages),
                     "line": {"color": colour, "width": 1}, "opacity": 0.3,
                     "hovertemplate": hover})
        data.append({"type": "scatter", "mode": "lines", "x": x, "y": smoothed(loss),
                     "name": names["smooth"], "legendgroup": "smooth",
                     "showlegend": number == len(stages), "line": {"color": colour, "width": 2.5},
                     "hovertemplate": hover})
        epochs = [e for e in epochs if e.get("dev_bleu") is not None]
        data.append({"type": "scatter", "mode": "markers", "name": names["bleu"],
                     "legendgroup": "bleu", "showlegend": number == len(stages),
                     "x": [round(offset + e["minutes"], 2) for e in epochs],
                     "y": [e["dev_bleu"] for e in epochs], "yaxis": "y2",
                     "marker": {"color": colour, "symbol": "diamond", "size": 7},
                     "hovertemplate": f"{title}<br>{names['bleu']} %{{y:.2f}}<extra></extra>"})
        offset += length
    _part_close_numbers([a for a in annotations if a["y"] == 1.02], offset)
    layout = base_layout(
        "", 380, xaxis={"title": {"text": names["minutes"]}, "rangemode": "tozero"},
        yaxis={"title": {"text": names["loss"]}, "rangemode": "tozero"},
        yaxis2={"title": {"text": names["bleu"]}, "overlaying": "y", "side": "right",
                "showgrid": False, "rangemode": "tozero"},
        legend={**LEGEND_TOP, "y": 1.22}, margin={**TWO_AXES_MARGIN, "t": 60},
        shapes=shapes, annotations=annotations,
    )
    return {"data": data, "layout": layout}


def _part_close_numbers(numbers: list[dict], total: float) -> None:
    """Two short stages side by side (stage 5's 6.5 minutes, stage 6's 9.2, of some 400) put
    their numbers on top of each other on a phone: each such pair is pushed a few pixels apart."""
    for left, right in zip(numbers, numbers[1:], strict=False):
        if right["x"] - left["x"] < 0.04 * total:
            left["xshift"], right["xshift"] = left.get("xshift", 0) - 6, 6


def training_stages(history: dict, lang: str) -> list[dict]:
    """Each run since random weights, oldest first: its label, minutes, epochs and pairs."""
    stages = [*history.get("earlier_stages", []), history]
    out = []
    for number, stage in enumerate(stages, start=1):
        label = stage.get("label") or {}
        epochs = stage.get("epochs", [])
        out.append({"number": number, "label": label.get(lang) or label.get("en") or "",
                    "minutes": round(float(epochs[-1]["minutes"]), 1) if epochs else None,
                    "epochs": len(epochs) if not stage.get("missing") else None,
                    "train_pairs": stage.get("train_pairs"), "recorded": bool(stage.get("steps"))})
    return out


def epoch_curves(epochs: list[dict], names: dict[str, str]) -> dict:
    """Dev BLEU and chrF after every epoch (greedy decoding of the dev set)."""
    x = [e["epoch"] for e in epochs]
    data = [
        {"type": "scatter", "mode": "lines+markers", "name": "BLEU", "x": x,
         "y": [e.get("dev_bleu") for e in epochs], "line": {"color": BLUE}},
        {"type": "scatter", "mode": "lines+markers", "name": "chrF", "x": x,
         "y": [e.get("dev_chrf") for e in epochs], "line": {"color": GREEN}},
        {"type": "scatter", "mode": "lines+markers", "name": names["train_loss"], "x": x,
         "y": [e.get("train_loss") for e in epochs], "line": {"color": ORANGE, "dash": "dot"},
         "yaxis": "y2"},
    ]
    layout = base_layout(
        "", 300, xaxis={"title": {"text": names["epoch"]}, "dtick": 1 if len(x) <= 30 else None},
        yaxis={"title": {"text": "BLEU / chrF"}, "rangemode": "tozero"},
        yaxis2={"title": {"text": names["train_loss"]}, "overlaying": "y", "side": "right",
                "showgrid": False, "rangemode": "tozero"},
        legend=LEGEND_TOP,
        margin=TWO_AXES_MARGIN,
    )
    return {"data": data, "layout": layout}
