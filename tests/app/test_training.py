"""/training: the teacher-forced score against a real backward pass, the schedule, the curves."""

from __future__ import annotations

import math

import pytest
import torch

from app.pages import training as figs
from model.schedule import noam_lr
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
    html = app_client.get("/training").text
    assert 'id="eval-mode"' in html and "dropout switched off" in html


def test_adam_settings_are_the_ones_training_uses():
    import inspect

    from app.pages import training
    from model import train

    adam = training.ADAM
    assert (f"betas=({adam['beta1']}, {adam['beta2']}), eps={adam['eps']:.0e}".replace("e-09", "e-9")
            in inspect.getsource(train))


def test_default_reference_is_a_human_translation_when_there_is_one(app_client):
    html = app_client.get("/training", params={"text": "The cat sits on the mat."}).text
    assert 'data-human="猫坐在垫子上。"' in html
    assert 'data-human=""' in app_client.get("/training", params={"text": "I like green tea."}).text
    assert "β₁ = 0.9" in html and "β₂ = 0.98" in html
