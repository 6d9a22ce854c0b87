"""/kv-cache — the same generation with and without cached keys and values, timed over several
runs on this machine, which K/V rows each step computes or reads from the cache, and a window
onto the real cached K and V tensors as they grow."""

from __future__ import annotations

import statistics
import time
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import Field

from app.api import timed
from app.deps import EngineDep, LanguageDep, TranslatorDep, page_text
from app.layout import render_page
from app.palette import PLOT_FONT_PX
from app.plots import (
    BLUE,
    DIVERGING,
    LEGEND_TOP,
    ORANGE,
    TWO_AXES_MARGIN,
    VERMILION,
    base_layout,
    category_axis,
    plain_axis,
    unique_labels,
)
from app.schemas import ERRORS, TextQuery, model_limit
from model.api import InputError, Translator, kv_rows

router = APIRouter()
PageText = page_text("kv_cache")
MAX_KV_STEPS = 128
MAX_RUNS = 9
DEFAULT_STEPS = 32
RACE_BUDGET_S = 6.0  # after the first race, start another only while the races so far took less


class KVCacheQuery(TextQuery):
    steps: int = Field(DEFAULT_STEPS, ge=1, le=MAX_KV_STEPS,
                       description=f"tokens to generate in each run, 1–{MAX_KV_STEPS}")
    runs: int = Field(3, ge=1, le=MAX_RUNS,
                      description=f"races to time (1–{MAX_RUNS}); fewer are run when the first ones "
                                  f"already took {RACE_BUDGET_S:g} s, and the answer says how many")
    layer: int = Field(0, ge=0, le=63, json_schema_extra=model_limit("decoder_layer"),
                       description="decoder layer whose cached K/V rows are shown")
    head: int = Field(0, ge=0, le=63, json_schema_extra=model_limit("head"),
                      description="attention head whose cached K/V rows are shown")


def steps_value(raw: str | None) -> str:
    """The page's steps field: at most three ASCII digits within the limits, else the default
    (never a 500: "²" or "١٢" pass str.isdigit() but are not numbers a form or the API accepts,
    and int() refuses more than 4,300 digits, so the length is checked before converting)."""
    if raw and len(raw) <= len(str(MAX_KV_STEPS)) and raw.isascii() and raw.isdigit() \
            and 1 <= int(raw) <= MAX_KV_STEPS:
        return str(int(raw))
    return str(DEFAULT_STEPS)


@router.get("/kv-cache", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep) -> HTMLResponse:
    return render_page(request, "kv_cache", lang, steps=steps_value(request.query_params.get("steps")))


@router.get("/api/kv-cache", responses=ERRORS, tags=["model"])
def kv_cache(query: Annotated[KVCacheQuery, Query()], engine: EngineDep, translator: TranslatorDep,
             t: PageText, response: Response) -> dict:
    """Generate ``steps`` tokens with and without the KV cache on the live model, several times:
    the median and spread of the timings, and the real cached K and V rows of one layer and head."""
    config = translator.config
    if query.layer >= config.n_decoder_layers:
        raise InputError("layer", f"layer must be between 0 and {config.n_decoder_layers - 1}")
    if query.head >= config.n_heads:
        raise InputError("head", f"head must be between 0 and {config.n_heads - 1}")
    races, _ = engine.run(race_runs, translator, query.text, query.steps, query.runs)
    race = summarise_races(races)
    rows = kv_rows(translator, query.text, races[0], query.layer, query.head)
    names = (t("kv.cached"), t("kv.uncached"))
    step, position = t("common.step"), t("common.position")
    legend = (t("kv.fresh"), t("kv.reused"), "")
    timed(response, sum(r["cached_ms"] + r["uncached_ms"] for r in races))
    words = {"position": position, "dimension": t("common.dimension")}
    return {
        "text": query.text,
        **race,
        "d_model": config.d_model,
        "layers": config.n_decoder_layers,
        "kv": rows,
        "figures": {
            "timing": kv_timing_figure(race, names, t("kv.ms"), step),
            "k_rows": kv_rows_figure(rows["self"]["k"], rows["self"]["tokens"], words),
            "v_rows": kv_rows_figure(rows["self"]["v"], rows["self"]["tokens"], words),
            "cross_k": kv_rows_figure(rows["cross"]["k"], rows["cross"]["tokens"], words),
            "cross_v": kv_rows_figure(rows["cross"]["v"], rows["cross"]["tokens"], words),
            "work": kv_work_figure(race, names, t("kv.positions"), step),
            "cached_grid": kv_grid(race, True, t("kv.grid_cached"), legend, step, position),
            "uncached_grid": kv_grid(race, False, t("kv.grid_uncached"), legend, step, position),
        },
    }


# -- several races, and the real cache --------------------------------------------------------------


def race_runs(translator: Translator, text: str, steps: int, runs: int,
              budget_s: float = RACE_BUDGET_S) -> list[dict]:
    """Up to ``runs`` races; after the first, another starts only if the time spent so far plus
    one more race of the same length stays within ``budget_s`` (a busy machine runs fewer)."""
    races: list[dict] = []
    started = time.perf_counter()
    while len(races) < runs:
        one = time.perf_counter()
        races.append(translator.kv_cache_race(text, steps))
        spent, last = time.perf_counter() - started, time.perf_counter() - one
        if spent + last > budget_s:
            break
    return races


# what the engine plans for a race before it has timed one on this machine: the budget, and the
# one race that may start just inside it
race_runs.prior_s = 1.5 * RACE_BUDGET_S


def summarise_races(races: list[dict]) -> dict:
    """The first race's tokens and positions; per step and in total, the median time over the
    races and its spread (fastest and slowest run)."""
    first = races[0]
    out = {key: first[key] for key in ("steps", "tokens", "cached_positions", "uncached_positions",
                                       "kv_rows", "kv_floats_per_layer")}
    out["identical"] = all(r["identical"] for r in races) and all(
        r["tokens"] == first["tokens"] for r in races)
    out["runs"] = len(races)
    for mode in ("cached", "uncached"):
        per_step = list(zip(*(r[f"{mode}_step_ms"] for r in races), strict=True))
        totals = [r[f"{mode}_ms"] for r in races]
        out[f"{mode}_step_ms"] = [round(statistics.median(v), 4) for v in per_step]
        out[f"{mode}_step_min"] = [round(min(v), 4) for v in per_step]
        out[f"{mode}_step_max"] = [round(max(v), 4) for v in per_step]
        out[f"{mode}_runs_ms"] = totals
        out[f"{mode}_ms"] = round(statistics.median(totals), 3)
        out[f"{mode}_min_ms"] = round(min(totals), 3)
        out[f"{mode}_max_ms"] = round(max(totals), 3)
    return out


# -- figures --------------------------------------------------------------------------------------


def kv_rows_figure(rows: list[list[float]], tokens: list[str], words: dict[str, str] | None = None) -> dict:
    """Cached rows as a heatmap: one row per position (its token), one column per dimension."""
    words = {"position": "position", "dimension": "dimension", **(words or {})}
    labels = [f"{i} {token}" for i, token in enumerate(unique_labels(tokens))]
    top = max((abs(v) for row in rows for v in row), default=1.0) or 1.0
    heatmap = {"type": "heatmap", "z": rows, "x": list(range(len(rows[0]) if rows else 0)),
               "y": labels, "colorscale": DIVERGING, "zmin": -top, "zmax": top,
               "xgap": 1, "ygap": 1, "colorbar": {"thickness": 8},
               "texttemplate": "%{z:.2f}" if len(rows) <= 24 else "", "textfont": {"size": PLOT_FONT_PX},
               "hovertemplate": f"{words['position']} %{{y}} · {words['dimension']} %{{x}}: "
                                f"%{{z:.4f}}<extra></extra>"}
    layout = base_layout("", 80 + 22 * max(len(rows), 3), xaxis=plain_axis(words["dimension"], dtick=1),
                         yaxis=category_axis(reverse=True), margin={"l": 80, "r": 10, "t": 10, "b": 45})
    return {"data": [heatmap], "layout": layout}



def kv_timing_figure(race: dict, names: tuple[str, str], ms_label: str = "ms",
                     step_label: str = "step") -> dict:
    """Milliseconds per generated token, with and without the cache, as the output grows: the
    median over the runs (line) inside the band from the fastest to the slowest run."""
    x = list(range(1, race["steps"] + 1))
    data = []
    for mode, name, colour in (("cached", names[0], BLUE), ("uncached", names[1], VERMILION)):
        low, high = race.get(f"{mode}_step_min"), race.get(f"{mode}_step_max")
        if low and high:
            data.append({"type": "scatter", "mode": "lines", "x": x + x[::-1], "y": high + low[::-1],
                         "fill": "toself", "fillcolor": colour, "opacity": 0.2,
                         "line": {"width": 0}, "hoverinfo": "skip", "showlegend": False})
        data.append({"type": "scatter", "mode": "lines+markers", "name": name, "x": x,
                     "y": race[f"{mode}_step_ms"], "line": {"color": colour}, "marker": {"size": 4},
                     "customdata": list(zip(low or race[f"{mode}_step_ms"],
                                            high or race[f"{mode}_step_ms"], strict=True)),
                     "hovertemplate": f"{step_label} %{{x}}: %{{y:.2f}} ms "
                                      f"(%{{customdata[0]:.2f}}–%{{customdata[1]:.2f}})"
                                      f"<extra>{name}</extra>"})
    layout = base_layout("", 320, xaxis={"title": {"text": step_label}},
                         yaxis={"title": {"text": ms_label}, "rangemode": "tozero"},
                         legend=LEGEND_TOP)
    return {"data": data, "layout": layout}


def kv_work_figure(race: dict, names: tuple[str, str], ylabel: str = "positions",
                   step_label: str = "step") -> dict:
    """Positions pushed through the decoder at each step, and the running total (dotted)."""
    x = list(range(1, race["steps"] + 1))
    data = []
    for key, name, colour in (("cached_positions", names[0], BLUE),
                              ("uncached_positions", names[1], VERMILION)):
        values = race[key]
        running = [sum(values[: i + 1]) for i in range(len(values))]
        data.append({"type": "bar", "name": name, "x": x, "y": values,
                     "marker": {"color": colour},
                     "hovertemplate": f"{step_label} %{{x}}: %{{y}}<extra>{name}</extra>"})
        data.append({"type": "scatter", "mode": "lines", "name": f"Σ {name}", "x": x,
                     "y": running, "yaxis": "y2", "line": {"color": colour, "dash": "dot"},
                     "hovertemplate": f"{step_label} %{{x}}: Σ %{{y}}<extra>{name}</extra>"})
    layout = base_layout("", 320, barmode="group", xaxis={"title": {"text": step_label}},
                         yaxis={"title": {"text": ylabel}, "rangemode": "tozero"},
                         yaxis2={"title": {"text": "Σ"}, "overlaying": "y", "side": "right",
                                 "showgrid": False, "rangemode": "tozero"},
                         legend={**LEGEND_TOP, "y": 1.2},
                         margin=TWO_AXES_MARGIN)
    return {"data": data, "layout": layout}


def kv_grid(race: dict, cached: bool, heading: str, legend: tuple[str, str, str],
            step_label: str = "step", position_label: str = "position") -> dict:
    """Which K/V rows exist at each step: computed this step (orange), read from the cache
    (blue), not yet generated (blank). Without a cache every row is recomputed every step."""
    steps = race["steps"]
    positions = race["cached_positions"] if cached else race["uncached_positions"]
    z, text = [], []
    for step in range(steps):
        rows = step + 1  # K/V rows this step's attention reads: <bos> + tokens so far
        fresh = positions[step]
        row, labels = [], []
        for position in range(steps):
            if position >= rows:
                row.append(None)
                labels.append("")
            elif position >= rows - fresh:
                row.append(1)
                labels.append(legend[0])
            else:
                row.append(0.5)
                labels.append(legend[1])
        z.append(row)
        text.append(labels)
    heatmap = {
        "type": "heatmap", "z": z, "text": text,
        "x": list(range(steps)), "y": list(range(1, steps + 1)),
        "colorscale": [[0, BLUE], [0.5, BLUE], [0.51, ORANGE], [1, ORANGE]],
        "zmin": 0, "zmax": 1, "showscale": False, "xgap": 1 if steps <= 40 else 0,
        "ygap": 1 if steps <= 40 else 0,
        "hovertemplate": f"{step_label} %{{y}} · {position_label} %{{x}}: %{{text}}<extra></extra>",
    }
    layout = base_layout(heading, 320, xaxis=plain_axis(position_label),
                         yaxis=plain_axis(step_label, autorange="reversed"))
    return {"data": [heatmap], "layout": layout}
