"""/training: the teacher-forced score against a real backward pass, the schedule, the curves."""

from __future__ import annotations

import math

import pytest
import torch

from app.pages import training as figs
from model.training.schedule import noam_lr
from tests.app.checks import field_of

CAT = "The cat sits on the mat."


def test_score_shapes_and_no_update(app_client, tiny_translator):
    before = [p.detach().clone() for p in tiny_translator.model.parameters()]
    body = app_client.post("/api/score", json={"text": CAT, "reference": "猫坐在垫子上。"}).json()
    n = len("猫坐在垫子上。") + 1
    assert body["decoder_input"][0] == "<bos>" and body["labels"][-1] == "<eos>"
    assert body["decoder_input"][1:] == body["labels"][:-1]
    assert len(body["label_prob"]) == len(body["cross_entropy"]) == len(body["predicted"]) == n
    for p, ce in zip(body["label_prob"], body["cross_entropy"], strict=True):
        assert ce == pytest.approx(-math.log(p), rel=1e-3, abs=1e-3)
    assert body["loss"] == pytest.approx(sum(body["cross_entropy"]) / n, abs=1e-3)
    assert body["clipped_grad_norm"] == pytest.approx(min(body["grad_norm"], body["clip"]), abs=1e-4)
    assert isinstance(body["greedy"], list)
    assert body["figures"]["positions"]["data"][0]["type"] == "bar"
    after = list(tiny_translator.model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert all(p.grad is None for p in after)


@pytest.mark.parametrize(("body", "field"), [
    ({"text": CAT, "reference": "the cat"}, "reference"),
    ({"text": CAT, "reference": "猫" * 201}, "reference"),
    ({"text": CAT, "reference": ""}, "reference"),
    ({"text": "", "reference": "猫"}, "text"),
    ({"text": CAT}, "reference"),
])
def test_score_limits(app_client, body, field):
    assert field_of(app_client.post("/api/score", json=body)) == field


def test_training_history_and_schedule(app_client, tiny_translator):
    body = app_client.get("/api/training").json()
    assert body["d_model"] == tiny_translator.config.d_model
    assert body["has_history"] is True
    schedule = body["figures"]["schedule"]["data"][0]
    lr = schedule["y"]
    peak = lr.index(max(lr))
    warmup = body["warmup"]
    assert abs(schedule["x"][peak] - warmup) <= schedule["x"][1] - schedule["x"][0]
    assert body["peak_lr"] == pytest.approx(tiny_translator.config.d_model ** -0.5 * warmup ** -0.5)
    history = tiny_translator.history["steps"]
    loss, grad = body["figures"]["curves"]["data"]
    assert loss["y"] == [s["loss"] for s in history] and grad["y"] == [s["grad_norm"] for s in history]


def test_schedule_uses_the_checkpoints_own_settings(tiny_checkpoint, tiny_translator):
    """The curve comes from noam_lr with this model's d_model and history's warmup; a history
    logged by the training loop (lr of step s = noam_lr(s)) lies exactly on it."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings
    from model.translator import Translator

    d = tiny_translator.config.d_model
    history = {"settings": {"warmup": 40, "lr_factor": 2.0, "clip": 0.5},
               "steps": [{"step": s, "loss": 1.0, "grad_norm": 1.0, "epoch": 1,
                          "lr": noam_lr(s, d, 40, 2.0)} for s in range(1, 200, 7)],
               "epochs": []}
    translator = Translator(tiny_translator.model, tiny_translator.english,
                            tiny_translator.chinese, history=history)
    with TestClient(create_app(Settings(checkpoint=tiny_checkpoint), translator)) as client:
        body = client.get("/api/training").json()
        assert (body["warmup"], body["lr_factor"]) == (40, 2.0)
        curve, logged = body["figures"]["schedule"]["data"]
        on_curve = dict(zip(curve["x"], curve["y"], strict=True))
        for step, lr in zip(logged["x"], logged["y"], strict=True):
            assert lr == pytest.approx(on_curve[step])
        assert body["figures"]["epochs"] is None
        score = client.post("/api/score", json={"text": CAT, "reference": "猫"}).json()
        assert score["clip"] == 0.5


def test_score_and_training_figures():
    score = {"decoder_input": ["<bos>", "猫"], "labels": ["猫", "<eos>"],
             "label_prob": [0.5, 0.25], "cross_entropy": [0.69, 1.39]}
    figure = figs.score_figure(score, ("p", "ce"))
    assert [t["type"] for t in figure["data"]] == ["bar", "bar"]
    assert figure["data"][0]["customdata"] == ["<bos> → 猫", "猫 → <eos>"]
    assert figure["data"][1]["yaxis"] == "y2"
    schedule = figs.lr_schedule_figure([1, 2, 3], [0.1, 0.2, 0.1], [2], [0.2], 2)
    assert len(schedule["data"]) == 2 and schedule["layout"]["shapes"][0]["x0"] == 2
    steps = [{"step": 1, "loss": 3.0, "grad_norm": 2.0}, {"step": 2, "loss": 2.0, "grad_norm": 1.0}]
    curves = figs.training_curves(steps, {"loss": "loss", "grad_norm": "grad", "clip": "1.0"})
    assert [t["yaxis"] for t in curves["data"]] == ["y", "y2"]
    epochs = figs.epoch_curves([{"epoch": 1, "dev_bleu": 3.0, "dev_chrf": 9.0, "train_loss": 4.0}],
                               {"train_loss": "train loss", "epoch": "epoch"})
    assert [t["name"] for t in epochs["data"]][:2] == ["BLEU", "chrF"]


def test_gradient_norm_is_a_real_backward_pass(app_client, tiny_translator):
    """The page's gradient norm equals ``loss.backward()`` + ``clip_grad_norm_`` on a copy of the
    model, in evaluation mode (dropout off) as the page says, with the training loss."""
    import copy

    import torch.nn.functional as F

    from model.transformer import BOS_ID, EOS_ID

    reference = "猫坐在垫子上。"
    body = app_client.post("/api/score", json={"text": CAT, "reference": reference}).json()
    assert body["dropout"] is False
    model = copy.deepcopy(tiny_translator.model).eval()
    target = tiny_translator.chinese.encode(reference)
    src = torch.tensor([tiny_translator.source_ids(CAT)])
    logits = model(src, torch.tensor([[BOS_ID, *target]]))[0]
    loss = F.cross_entropy(logits, torch.tensor([*target, EOS_ID]),
                           label_smoothing=body["label_smoothing"])
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=body["clip"])
    after = torch.linalg.vector_norm(
        torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None]))
    assert body["smoothed_loss"] == pytest.approx(loss.item(), abs=1e-4)
    assert body["grad_norm"] == pytest.approx(norm.item(), rel=1e-4, abs=1e-5)
    assert body["clipped_grad_norm"] == pytest.approx(after.item(), rel=1e-3, abs=1e-5)


def test_the_page_says_the_gradient_is_eval_mode(app_client):
    app_client.cookies.clear()  # a language cookie another test left must not decide the language
    html = app_client.get("/training").text
    assert 'id="eval-mode"' in html and "dropout switched off" in html


def test_adam_settings_are_the_ones_training_uses(tiny_recipe_run):
    """/training's β₁, β₂ and ε are the ones a real training run's optimizer stepped with: read
    from the optimizer state every stage of a run saves (work/stageN/state.pt)."""
    from app.pages import training

    adam = training.ADAM
    for stage in ("stage1", "stage2"):
        state = torch.load(tiny_recipe_run.folder / "work" / stage / "state.pt", weights_only=False)
        (group,) = state["optimizer"]["param_groups"]
        assert tuple(group["betas"]) == (adam["beta1"], adam["beta2"]), (stage, group)
        assert group["eps"] == adam["eps"], (stage, group)
        assert state["optimizer"]["state"], stage  # it stepped: Adam's moments are there


def test_default_reference_is_a_human_translation_when_there_is_one(app_client):
    html = app_client.get("/training", params={"text": "The cat sits on the mat."}).text
    assert 'data-human="猫坐在垫子上。"' in html
    assert 'data-human=""' in app_client.get("/training", params={"text": "I like green tea."}).text
    assert "β₁ = 0.9" in html and "β₂ = 0.98" in html


# -- the held-out evaluation and the training story (eval.json, history.json) ---------------------

SPLITS = ("tatoeba_test", "hsk_test", "captions_test", "tico_test", "ntrex_test")
DECODINGS = ("greedy", "beam4")
METRIC_KEYS = ("bleu", "chrf", "repetition_pct")


def made_up_figures(seed: float) -> dict:
    return {d: {"bleu": round(seed + i, 2), "chrf": round(seed / 2 + i, 2),
                "repetition_pct": round(seed / 10 + i, 2), "seconds": 1.0}
            for i, d in enumerate(DECODINGS)}


def made_up_evaluation(previous: bool) -> dict:
    """An eval.json in model/training/evaluate.py's format with figures no real model produced."""
    evaluation: dict = {
        "tokenize": "zh",
        "decodings": {"greedy": {}, "beam4": {"beam_size": 4, "length_penalty": 0.6}},
        "sets": {name: {"pairs": 100 + n, "sentences": 100 + n, "seen_in_training": 0,
                        **made_up_figures(11.11 * (n + 1)),
                        "examples": [{"english": f"Sentence {n}.", "reference": f"句子{n}。",
                                      "greedy": f"句{n}。", "beam4": f"句子{n}。"}]}
                 for n, name in enumerate(SPLITS)},
        "probe": {"pairs": 3, **made_up_figures(33.3),
                  "categories": {"numbers": {"pairs": 2, **made_up_figures(21.5)},
                                 "idioms": {"pairs": 1, **made_up_figures(7.25)}},
                  "outputs": [{"category": "numbers", "english": "I have 3 cats.",
                               "reference": "我有3只猫。", "greedy": "我有三猫。",
                               "beam4": "我有3只猫。"}]},
        "test": {"bleu": 12.11, "chrf": 6.56, "decoding": "beam 4"},
    }
    if previous:
        evaluation["previous"] = {
            "label": "made-up earlier checkpoint",
            "sets": {name: made_up_figures(5.5 * (n + 1)) for n, name in enumerate(SPLITS)},
            "probe": {**made_up_figures(30.0),
                      "categories": {"numbers": made_up_figures(25.0),
                                     "idioms": made_up_figures(7.25)}},
        }
    return evaluation


@pytest.fixture()
def evaluated_checkpoint(tmp_path, tiny_checkpoint):
    """The tiny checkpoint copied to a fresh folder, with a made-up eval.json and a history.json
    that says it was warm-started; returns a function that writes eval.json and opens an app."""
    import json
    import shutil
    from contextlib import contextmanager

    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings
    from model.translator import Translator

    folder = tmp_path / "checkpoint"
    shutil.copytree(tiny_checkpoint, folder)
    history = json.loads((folder / "history.json").read_text(encoding="utf-8"))
    history["train_pairs"] = 12345
    history["settings"] = history.get("settings", {}) | {"concat": 8000, "unlikelihood": 1.0}
    history["epochs"][-1]["minutes"] = 20.25
    history["init"] = {"from": "somewhere", "epochs": 24, "total_minutes": 72.5,
                       "train_pairs": 31508}
    (folder / "history.json").write_text(json.dumps(history), encoding="utf-8")

    @contextmanager
    def open_app(evaluation: dict):
        (folder / "eval.json").write_text(json.dumps(evaluation, ensure_ascii=False),
                                          encoding="utf-8")
        translator = Translator.load(folder)
        with TestClient(create_app(Settings(checkpoint=folder), translator)) as client:
            yield client

    return open_app


@pytest.mark.parametrize("previous", [False, True])
def test_evaluation_shows_eval_json_figures(evaluated_checkpoint, previous):
    evaluation = made_up_evaluation(previous)
    with evaluated_checkpoint(evaluation) as client:
        view = client.get("/api/training").json()["evaluation"]
    assert [s["name"] for s in view["sets"]] == list(SPLITS)
    assert (view["previous"] is not None) is previous
    for shown in view["sets"]:
        figures = evaluation["sets"][shown["name"]]
        assert shown["pairs"] == figures["pairs"]
        assert f"{figures['pairs']:,}" in shown["caption"]
        rows = shown["table"]["rows"]
        expected = [figures[d][m] for m in METRIC_KEYS for d in DECODINGS]
        if previous:
            assert len(shown["table"]["head"]) == 4  # metric | before | now | change
            before = [evaluation["previous"]["sets"][shown["name"]][d][m]
                      for m in METRIC_KEYS for d in DECODINGS]
            assert [r[1] for r in rows] == before
            assert [r[2] for r in rows] == expected
            assert [r[3]["value"] for r in rows] == [round(a - b, 2)
                                                      for a, b in zip(expected, before, strict=True)]
            # BLEU and chrF went up: better; the repetition rate went up too: worse
            assert [r[3]["better"] for r in rows] == [True] * 4 + [False] * 2
        else:
            assert len(shown["table"]["head"]) == 2  # metric | score
            assert [r[1] for r in rows] == expected
        example = figures["examples"][0]
        assert shown["examples"][0]["english"] == example["english"]
        assert shown["examples"][0]["reference"] == example["reference"]
        assert [o["text"] for o in shown["examples"][0]["outputs"]] == [example[d] for d in DECODINGS]
    probe = evaluation["probe"]
    rows = view["probe"]["table"]["rows"]
    assert [r[2 if previous else 1] for r in rows] == [probe[d][m] for m in METRIC_KEYS
                                                        for d in DECODINGS]
    categories = view["probe"]["categories"]
    assert [r[1] for r in categories["rows"]] == ["2", "1"]
    numbers = categories["rows"][0][2:]
    expected = [probe["categories"]["numbers"][d][m] for m in METRIC_KEYS for d in DECODINGS]
    if previous:
        assert [c["value"] for c in numbers] == expected
        earlier = evaluation["previous"]["probe"]["categories"]["numbers"]
        assert [c["before"] for c in numbers] == [earlier[d][m] for m in METRIC_KEYS
                                                 for d in DECODINGS]
        idioms = categories["rows"][1][2:]
        assert {c["better"] for c in idioms} == {None}  # the same figures: no change
    else:
        assert numbers == expected
    assert view["probe"]["examples"][0]["english"] == "I have 3 cats."


def test_evaluation_absent_without_test_sets(app_client):
    """The tiny checkpoint's eval.json has no test sets: no evaluation (the page says so)."""
    assert app_client.get("/api/training").json()["evaluation"] is None


def test_training_story_from_history(evaluated_checkpoint):
    with evaluated_checkpoint(made_up_evaluation(False)) as client:
        en = client.get("/api/training").json()["story"]
        client.cookies.set("lang", "zh")
        zh = client.get("/api/training").json()["story"]
    assert en["total_minutes"] == round(72.5 + 20.25, 1) and en["warm_started"] is True
    assert (en["train_pairs"], en["run_minutes"], en["earlier_minutes"]) == (12345, 20.2, 72.5)
    text = " ".join(en["lines"])
    assert "92.8 CPU minutes" in text and "12,345" in text and "Warm-started" in text
    assert "72.5" in text and "31,508" in text
    assert "热启动" in " ".join(zh["lines"]) and "92.8" in " ".join(zh["lines"])
    assert "8,000 long examples" in text and "second term (weight 1)" in text
    assert "8,000 个长样本" in " ".join(zh["lines"]) and "权重 1" in " ".join(zh["lines"])


def test_training_story_without_warm_start(app_client, tiny_translator):
    story = app_client.get("/api/training").json()["story"]
    minutes = tiny_translator.history["epochs"][-1]["minutes"]
    assert story["warm_started"] is False and story["total_minutes"] == round(minutes, 1)
    assert not any("Warm-started" in line for line in story["lines"])
    assert not any("long examples" in line or "second term" in line for line in story["lines"])


def test_the_shipped_eval_json_is_shown_as_it_is():
    """The real eval.json (whatever its age) gives a table per split that it lists."""
    import json

    from app.i18n import Translate
    from tests.conftest import SHIPPED_CHECKPOINT

    evaluation = json.loads((SHIPPED_CHECKPOINT / "eval.json").read_text(encoding="utf-8"))
    view = figs.evaluation_view(evaluation, Translate("en", "training"))
    assert [s["name"] for s in view["sets"]] == list(evaluation["sets"]) + [
        f"{name}-no-stops" for name in evaluation.get("no_stops") or {}]
    tatoeba = evaluation["sets"]["tatoeba_test"]
    now = 2 if "previous" in evaluation else 1  # with a previous checkpoint: metric, before, now, change
    rows = {r[0]: r[now] for r in view["sets"][0]["table"]["rows"]}
    assert rows["BLEU · greedy"] == tatoeba["greedy"]["bleu"]
    assert rows["BLEU · beam 4"] == tatoeba["beam4"]["bleu"]
    # a measure the file lacks (older eval.json files have no repetition rate) gets no row
    assert ("repetition % · greedy" in rows) == ("repetition_pct" in tatoeba["greedy"])


def test_the_splits_typed_without_final_stops_get_their_own_cards_beside_their_before():
    from app.i18n import Translate

    evaluation = made_up_evaluation(True)
    evaluation["no_stops"] = {"tatoeba_test": made_up_figures(9.75)}
    evaluation["previous"]["no_stops"] = {"tatoeba_test": made_up_figures(4.5)}
    for lang, title in (("en", "Tatoeba: everyday sentences, typed without the final full stop"),
                        ("zh", "Tatoeba：日常句子（输入时句末不带句号）")):
        view = figs.evaluation_view(evaluation, Translate(lang, "training"))
        card = view["sets"][-1]
        assert card["name"] == "tatoeba_test-no-stops" and card["title"] == title
        assert [s["name"] for s in view["sets"][:-1]] == list(SPLITS)
        bleu = card["table"]["rows"][0]  # BLEU · greedy: before, now, change
        assert bleu[1:3] == [evaluation["previous"]["no_stops"]["tatoeba_test"]["greedy"]["bleu"],
                             evaluation["no_stops"]["tatoeba_test"]["greedy"]["bleu"]]
        assert bleu[3]["better"] is True
    del evaluation["previous"]["no_stops"]  # an earlier eval.json without them: no before
    row = figs.evaluation_view(evaluation, Translate("en", "training"))["sets"][-1]["table"]["rows"][0]
    assert row[1] is None and row[3] is None


def test_the_learner_probe_shows_every_output_beside_its_before():
    from app.i18n import Translate

    evaluation = made_up_evaluation(True)
    outputs = [{"category": c, "english": f"Sentence {i}", "reference": "句子", "greedy": f"句{i}",
                "beam4": f"句子{i}"} for i, c in enumerate(["titles", "titles", "no_stop"])]
    evaluation["probe_learner"] = {"pairs": 3, **made_up_figures(40.0), "outputs": outputs,
                                   "categories": {"titles": {"pairs": 2, **made_up_figures(30.0)},
                                                  "no_stop": {"pairs": 1, **made_up_figures(50.0)}}}
    evaluation["previous"]["probe_learner"] = {**made_up_figures(35.0), "outputs": outputs[:1]}
    assert figs.evaluation_view(made_up_evaluation(True), Translate("en", "training"))["learner"] is None
    learner = figs.evaluation_view(evaluation, Translate("zh", "training"))["learner"]
    assert [e["english"] for e in learner["examples"]] == ["Sentence 0", "Sentence 1", "Sentence 2"]
    assert [e["category"] for e in learner["examples"]] == ["名字前的称谓", "名字前的称谓", "句末无句号"]
    assert len(learner["examples"][0]["outputs"]) == 4 and len(learner["examples"][1]["outputs"]) == 2
    assert learner["table"]["rows"][0][1:3] == [35.0, 40.0]  # BLEU · greedy: before, now
    assert [row[0] for row in learner["categories"]["rows"]] == ["名字前的称谓", "句末无句号"]


def test_previous_label_in_the_readers_language():
    from app.i18n import Translate

    evaluation = made_up_evaluation(True)
    evaluation["previous"]["label"] = {"en": "the old model", "zh": "旧模型"}
    assert figs.evaluation_view(evaluation, Translate("zh", "training"))["previous"] == {
        "label": "旧模型"}
    assert figs.evaluation_view(evaluation, Translate("en", "training"))["previous"] == {
        "label": "the old model"}


def test_the_whole_training_spans_every_stage_on_one_axis():
    from app.pages.training import smoothed, whole_training

    def run(minutes: float, steps: int, label: str, **extra) -> dict:
        return {"label": {"en": label}, "epochs": [{"epoch": 1, "step": steps, "minutes": minutes,
                                                    "dev_bleu": 10.0}],
                "steps": [{"step": s, "loss": 5.0 - s / steps} for s in range(1, steps + 1, 25)],
                **extra}

    names = {"stage": "stage {n}", "missing": "not recorded", "minutes": "minutes", "raw": "raw",
             "smooth": "smooth", "bleu": "BLEU", "loss": "loss"}
    history = run(30.0, 500, "fourth")
    history["earlier_stages"] = [run(60.0, 1000, "first"),
                                 {"label": {"en": "second"}, "missing": True, "steps": [],
                                  "epochs": [{"epoch": 2, "minutes": 20.0}]},
                                 run(10.0, 200, "third")]
    figure = whole_training(history, "en", names)
    curves = [trace for trace in figure["data"] if trace["name"] == "raw"]
    assert len(curves) == 3  # the stage without a curve draws none
    # end to end: each stage starts where the one before ended (60, then 20 unrecorded, then 10)
    assert curves[0]["x"][0] < 1 and curves[0]["x"][-1] <= 60
    assert 80 <= curves[1]["x"][0] < curves[1]["x"][-1] <= 90
    assert curves[2]["x"][0] >= 90 and curves[2]["x"][-1] <= 120
    bands = [shape for shape in figure["layout"]["shapes"] if shape["type"] == "rect"]
    assert [(band["x0"], band["x1"]) for band in bands] == [(60.0, 80.0)]
    assert sum(shape["type"] == "line" for shape in figure["layout"]["shapes"]) == 3
    assert smoothed([2.0, 2.0, 2.0]) == [2.0, 2.0, 2.0]
    assert whole_training(run(5.0, 100, "only"), "en", names) is None  # one run: the curves above
    # two short stages side by side: their numbers are pushed apart, a long one's stays put
    history = run(9.0, 200, "sixth")
    history["earlier_stages"] = [run(300.0, 1000, "first"), run(6.5, 100, "fifth")]
    numbers = [a for a in whole_training(history, "en", names)["layout"]["annotations"]
               if a["text"] in ("1", "2", "3")]
    assert [a.get("xshift", 0) for a in numbers] == [0, -6, 6]


def test_the_shipped_history_reaches_back_to_random_weights(shipped_translator):
    history = shipped_translator.history
    first = history["earlier_stages"][0]
    assert not first.get("init") and first["epochs"][0]["epoch"] == 1
    assert first["steps"][0]["step"] == 1


def test_a_linear_decay_run_gets_its_own_curve_and_words(tiny_checkpoint, tiny_translator):
    """A run trained with --decay linear: the drawn curve falls to zero at the run's planned last
    step, the logged rates lie on it, and the page's text describes that schedule, not 1/√step."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings
    from model.training.schedule import learning_rate
    from model.translator import Translator

    d = tiny_translator.config.d_model
    history = {"settings": {"warmup": 40, "lr_factor": 2.0, "decay": "linear",
                            "lr_total_steps": 300},
               "steps": [{"step": s, "loss": 1.0, "grad_norm": 1.0, "epoch": 1,
                          "lr": learning_rate(s, d, 40, 2.0, 300)} for s in range(1, 300, 7)],
               "epochs": []}
    translator = Translator(tiny_translator.model, tiny_translator.english,
                            tiny_translator.chinese, history=history)
    with TestClient(create_app(Settings(checkpoint=tiny_checkpoint), translator)) as client:
        body = client.get("/api/training").json()
        assert body["decay"] == "linear"
        curve, logged = body["figures"]["schedule"]["data"]
        on_curve = dict(zip(curve["x"], curve["y"], strict=True))
        for step, lr in zip(logged["x"], logged["y"], strict=True):
            assert lr == pytest.approx(on_curve[step])
        assert max(curve["y"]) == pytest.approx(noam_lr(40, d, 40, 2.0), rel=0.05)
        assert on_curve.get(300, 0.0) == 0.0 and curve["y"][-1] < 0.05 * max(curve["y"])
        for lang, words in (("en", "to zero at step 300"), ("zh", "降到第 300 步")):
            client.cookies.set("lang", lang)
            page = client.get("/training").text
            assert words in page and "1/√" not in page


RECIPE_TEXT = """name = "tiny"
description = { en = "counting words", zh = "数词" }
[data]
sources = ["tatoeba", "hsk"]
[[stages]]
label = { en = "from random weights", zh = "从随机权重开始" }
epochs = 2
warmup = 50
lr_factor = 0.5
[[stages]]
label = { en = "lower rate", zh = "较低学习率" }
epochs = 1
warmup = 10
lr_factor = 0.2
transforms = { numbers = { copies = 2 } }
"""
RECIPE = {"name": "tiny", "text": RECIPE_TEXT, "sha256": "0" * 64,
          "data": {"tatoeba-cmn-eng.tsv": "ab" * 32, "hsk-sentences-en-zh.tsv": "cd" * 32},
          "code": [{"commit": "1234567890abcdef" * 2 + "12345678", "dirty": False}]}


def test_the_recipe_card_names_the_recipe_its_stages_and_the_data_hashes():
    from app.pages.training import recipe_view

    view = recipe_view({"recipe": RECIPE}, "zh")
    assert view["made_by_recipe"] and view["name"] == "tiny" and view["description"] == "数词"
    assert [(s["label"], s["epochs"], s["transforms"]) for s in view["stages"]] == [
        ("从随机权重开始", 2, "–"), ("较低学习率", 1, "numbers")]
    assert view["data"][0] == {"file": "tatoeba-cmn-eng.tsv", "sha256": "ab" * 32}
    assert view["commit"] == "1234567890ab" and view["dirty"] is False
    before = recipe_view({"settings": {"epochs": 1}}, "en")
    assert before == {"made_by_recipe": False, "name": "shipped",
                      "file": "model/training/recipes/shipped.toml"}


def test_the_training_page_shows_the_recipe_in_both_languages(tiny_checkpoint, tmp_path):
    import json
    import shutil

    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(tiny_checkpoint, checkpoint)
    history = json.loads((checkpoint / "history.json").read_text(encoding="utf-8"))
    (checkpoint / "history.json").write_text(json.dumps({**history, "recipe": RECIPE}), encoding="utf-8")
    with TestClient(create_app(Settings(checkpoint=checkpoint))) as client:
        en = client.get("/training").text
        client.cookies.set("lang", "zh")
        zh = client.get("/training").text
    assert 'id="recipe-stages"' in en and "from random weights" in en and "ab" * 8 in en
    assert "model/training/recipes/tiny.toml" in en and "1234567890ab" in en
    assert "从随机权重开始" in zh and "训练配方" in zh and "线性" in zh


def test_a_checkpoint_from_before_recipes_points_to_the_shipped_recipe(app_client):
    page = app_client.get("/training").text
    assert 'id="recipe-none"' in page and "model/training/recipes/shipped.toml" in page
