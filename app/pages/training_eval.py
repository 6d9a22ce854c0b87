"""/training's held-out evaluation: eval.json's figures per test set and decoding (BLEU, chrF,
repetition), beside the previous checkpoint's when eval.json keeps them, the probe and learner
sets by category, and a few example translations — as plain tables the template draws."""

from __future__ import annotations

import math
import re

# eval.json's metrics per decoding, in the order the tables show them; for the repetition rate
# lower is better.
METRICS = (("bleu", "BLEU", True), ("chrf", "chrF", True), ("repetition_pct", "", False))
DECODING_NAME = re.compile(r"^(greedy|beam(\d+))$")
PROBE_EXAMPLES_PER_CATEGORY = 1


def decodings_of(evaluation: dict) -> list[str]:
    """The decodings eval.json reports (``greedy``, ``beam4``), greedy first."""
    names = list(evaluation.get("decodings") or {})
    if not names:
        for figures in (evaluation.get("sets") or {}).values():
            names = [key for key in figures if DECODING_NAME.match(key)]
            break
    return sorted(names, key=lambda name: (name != "greedy", name))


def decoding_label(name: str, t) -> str:
    match = DECODING_NAME.match(name)
    if match and match.group(2):
        return t("training.eval.beam", n=match.group(2))
    return t("training.eval.greedy") if name == "greedy" else name


def _number(value) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _change(now: float | None, before: float | None, higher_is_better: bool) -> dict | None:
    """The signed difference now − before, and whether it is an improvement (None: no change)."""
    if now is None or before is None:
        return None
    change = round(now - before, 2)
    better = None if change == 0 else (change > 0) == higher_is_better
    return {"value": change, "signed": True, "better": better}


def metrics_table(figures: dict, previous: dict | None, decodings: list[str], t) -> dict:
    """One set's scores: a row per metric and decoding; with the previous checkpoint's figures,
    columns before | now | change."""
    rows = []
    for metric, name, higher in METRICS:
        for decoding in decodings:
            now = _number((figures.get(decoding) or {}).get(metric))
            before = _number(((previous or {}).get(decoding) or {}).get(metric))
            if now is None and before is None:  # e.g. an eval.json older than the measure
                continue
            label = f"{name or t('training.eval.repetition')} · {decoding_label(decoding, t)}"
            if previous is None:
                rows.append([label, now])
            else:
                rows.append([label, before, now, _change(now, before, higher)])
    head = ([""] + ([t("training.eval.before"), t("training.eval.now"), t("training.eval.change")]
                    if previous is not None else [t("training.eval.score")]))
    return {"head": head, "rows": rows}


def category_table(categories: dict, previous: dict | None, decodings: list[str], t) -> dict:
    """The probe set per category: a row per category, a column per metric and decoding; with the
    previous checkpoint's figures, each cell carries its before value and the change."""
    columns = [(metric, name, higher, decoding) for metric, name, higher in METRICS
               for decoding in decodings]
    head = [t("training.eval.category"), t("training.eval.pairs")] + [
        f"{name or t('training.eval.repetition')} · {decoding_label(decoding, t)}"
        for _, name, _, decoding in columns]
    rows = []
    for category, figures in categories.items():
        row: list = [category_title(category, t), str(figures.get("pairs", ""))]
        for metric, _, higher, decoding in columns:
            now = _number((figures.get(decoding) or {}).get(metric))
            if previous is None:
                row.append(now)
                continue
            before_figures = (previous.get(category) or {}).get(decoding) or {}
            before = _number(before_figures.get(metric))
            change = _change(now, before, higher)
            row.append({"value": now, "before": before,
                        "better": change["better"] if change else None})
        rows.append(row)
    return {"head": head, "rows": rows}


def set_title(name: str, t) -> str:
    key = f"training.eval.set.{name}"
    title = t(key)
    return name if title == key else title


def category_title(name: str, t) -> str:
    key = f"training.eval.category.{name}"
    title = t(key)
    return name if title == key else title


def examples_view(examples: list[dict], previous: list[dict] | None, decodings: list[str],
                  t) -> list[dict]:
    """Source, reference and each decoding's output; the previous checkpoint's output of the same
    sentence too, when eval.json keeps it."""
    before = {e.get("english"): e for e in previous or []}
    view = []
    for example in examples:
        outputs = [{"label": decoding_label(d, t), "text": example[d]}
                   for d in decodings if isinstance(example.get(d), str)]
        earlier = before.get(example.get("english"))
        if earlier is not None:
            outputs += [{"label": f"{decoding_label(d, t)} · {t('training.eval.before')}",
                         "text": earlier[d], "before": True}
                        for d in decodings if isinstance(earlier.get(d), str)]
        view.append({"english": example.get("english", ""), "reference": example.get("reference", ""),
                     "category": category_title(example["category"], t)
                     if example.get("category") else None,
                     "outputs": outputs})
    return view


def _label(label, t) -> str:
    """A label written once (a string) or per language (``{"en": ..., "zh": ...}``)."""
    if isinstance(label, dict):
        return str(label.get(getattr(t, "lang", "en")) or label.get("en") or "")
    return str(label or "")


def evaluation_view(evaluation: dict, t) -> dict | None:
    """eval.json as the page shows it: a metrics table and examples per held-out test split, the
    probe set overall and per category. With ``previous`` (the previous checkpoint's figures,
    each part optional: ``{"label": "..." or {"en": ..., "zh": ...}, "sets": {split: {"greedy":
    {...}, "beam4": {...}, "examples": [...]}}, "probe": {"greedy": ..., "beam4": ...,
    "categories": {category: {"greedy": ..., "beam4": ...}}, "outputs": [...]}}``, i.e. the
    same shape as eval.json itself) every table shows them beside, and an example shows the
    previous output of the same English sentence when ``previous`` keeps it."""
    sets = evaluation.get("sets") or {}
    if not sets and not evaluation.get("probe"):
        return None
    decodings = decodings_of(evaluation)
    previous = evaluation.get("previous") if isinstance(evaluation.get("previous"), dict) else None
    previous_sets = (previous or {}).get("sets") or {}
    view: dict = {
        "previous": None if previous is None else {"label": _label(previous.get("label"), t)},
        "decodings": [decoding_label(d, t) for d in decodings],
        "tokenize": evaluation.get("tokenize"),
        "sets": [],
        "probe": None,
    }
    # the everyday splits as learners often type them, without the final full stop (no_stops)
    no_stops = evaluation.get("no_stops") or {}
    previous_no_stops = (previous or {}).get("no_stops") or {}
    shown = [(name, name, figures, previous_sets, set_title(name, t))
             for name, figures in sets.items()]
    shown += [(f"{name}-no-stops", name, figures, previous_no_stops,
               t("training.eval.no_stops", title=set_title(name, t)))
              for name, figures in no_stops.items()]
    for card, name, figures, earlier, title in shown:
        before = None if previous is None else earlier.get(name) or {}
        view["sets"].append({
            "name": card,
            "title": title,
            "pairs": figures.get("pairs"),
            "caption": t("training.eval.pairs_line", pairs=f"{figures.get('pairs', 0):,}"),
            "table": metrics_table(figures, before, decodings, t),
            "examples": examples_view(figures.get("examples") or [],
                                      (before or {}).get("examples"), decodings, t),
        })
    view["probe"] = probe_view(evaluation.get("probe"), previous, "probe", decodings, t,
                               PROBE_EXAMPLES_PER_CATEGORY)
    view["learner"] = probe_view(evaluation.get("probe_learner"), previous, "probe_learner",
                                 decodings, t, None)
    return view


def probe_view(probe: dict | None, previous: dict | None, key: str, decodings: list[str], t,
               per_category: int | None) -> dict | None:
    """A probe set (eval.json's ``probe`` or ``probe_learner``): overall, per category, and the
    first ``per_category`` outputs of each category (None: every output)."""
    if not probe:
        return None
    before = None if previous is None else previous.get(key) or {}
    outputs = probe.get("outputs") or []
    shown, counts = [], {}
    for output in outputs:
        category = output.get("category")
        counts[category] = counts.get(category, 0) + 1
        if per_category is None or counts[category] <= per_category:
            shown.append(output)
    return {
        "pairs": probe.get("pairs"),
        "caption": t("training.eval.pairs_line", pairs=f"{probe.get('pairs', 0):,}"),
        "table": metrics_table(probe, before, decodings, t),
        "categories": category_table(probe.get("categories") or {},
                                     None if before is None else before.get("categories") or {},
                                     decodings, t),
        "examples": examples_view(shown, (before or {}).get("outputs"), decodings, t),
    }


# -- figures --------------------------------------------------------------------------------------
