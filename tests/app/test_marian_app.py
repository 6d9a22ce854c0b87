"""The web app on a Hugging Face Marian model: --model / ITT_MODEL, one-line errors, every page and
JSON route answering, the footer naming the model, /training saying what belongs to our checkpoint."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.app.test_cli import run

TEXT = "The cat sits on the mat."
PAGES = ["/", "/pipeline", "/tokens", "/embeddings", "/attention", "/coreference", "/decode",
         "/kv-cache", "/training", "/scale", "/tour", "/docs"]


@pytest.fixture(scope="module")
def marian_client(tiny_marian):
    app = create_app(Settings(model=str(tiny_marian), cache_size=8, access_log=False))
    with TestClient(app) as client:
        yield client


def test_model_setting_from_flag_and_environment(monkeypatch, tiny_marian):
    assert Settings().model is None
    monkeypatch.setenv("ITT_MODEL", str(tiny_marian))
    settings = Settings()
    assert settings.model == str(tiny_marian) and settings.model_source == str(tiny_marian)


@pytest.mark.parametrize("model", ["Helsinki-NLP/opus-mt-xx-yy", "/nowhere/opus-mt-en-zh"])
def test_unreachable_model_is_a_one_line_error(tmp_path, model):
    result = run("-m", "app", "--model", model, "--port", "1",
                 env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "huggingface-cli download" in lines[0] and "Traceback" not in result.stderr


def test_every_page_renders_and_names_the_model(marian_client, tiny_marian):
    for path in PAGES:
        for lang in ("en", "zh"):
            marian_client.cookies.set("lang", lang)
            response = marian_client.get(path)
            assert response.status_code == 200, path
            line = re.search(r'<p class="model-line"[^>]*>(.*?)</p>', response.text, re.S).group(1)
            assert tiny_marian.name in line and "Marian" in line
            assert ("English → Chinese" if lang == "en" else "英文 → 中文") in line
            assert "SiLU" in line  # the FFN activation, unlike our own model's ReLU
    marian_client.cookies.clear()
    training = marian_client.get("/training").text
    assert 'id="marian-training"' in training


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_pages_name_the_models_own_ffn_activation(marian_client, app_client, lang):
    """A Marian model's FFN is SiLU: the decode page's FFN box and the x-ray's labels (from the
    page data) say so, and describe what SiLU does; our model's pages say ReLU, with no note."""
    for client, act, other in ((marian_client, "SiLU", "ReLU"), (app_client, "ReLU", "SiLU")):
        client.cookies.set("lang", lang)
        html = client.get("/decode").text
        box = re.search(r'id="box-ffn">(.*?)</section>', html, re.S).group(1)
        assert act in box and other not in box
        assert ("sigmoid" in box) == (act == "SiLU")
        data = json.loads(re.search(r'id="page-data">(.*?)</script>', client.get("/").text).group(1))
        assert data["config"]["activation"] == act
        line = re.search(r'<p class="model-line"[^>]*>(.*?)</p>', html, re.S).group(1)
        assert (act in line) == (act == "SiLU")
        client.cookies.clear()


def test_model_api_counts_the_hf_tensors(marian_client):
    info = marian_client.get("/api/model").json()
    assert info["config"]["activation"] == "swish"
    assert info["config"]["position_layout"] == "halves"
    assert info["parameters"]["total"] == sum(
        info["parameters"][k] for k in ("source_embedding", "encoder", "decoder"))


@pytest.mark.parametrize("strategy", ["greedy", "beam", "sample"])
def test_json_routes_answer(marian_client, strategy):
    body = {"text": TEXT, "strategy": strategy, "max_len": 12, "seed": 1}
    for path in ["/api/trace", "/api/translate", "/api/figures/pipeline", "/api/figures/tokens",
                 "/api/figures/embeddings", "/api/figures/attention", "/api/figures/decode",
                 "/api/xray/view", "/api/xray/strips", "/api/xray/heads", "/api/xray/logits"]:
        response = marian_client.post(path, json=body)
        assert response.status_code == 200, (path, response.text[:300])
    for block in ("embedding", "self_attention", "cross_attention", "ffn", "add_norm3", "output"):
        response = marian_client.post("/api/xray/block", json={
            **body, "side": "decoder", "block": block, "layer": 1, "position": 0})
        assert response.status_code == 200, (block, response.text[:300])
    assert marian_client.get("/api/kv-cache", params={"text": TEXT, "steps": 6}).status_code == 200
    assert marian_client.get("/api/training").status_code == 200
    score = marian_client.post("/api/score", json={"text": TEXT, "reference": "猫坐在垫子上。"})
    assert score.status_code == 200 and score.json()["loss"] > 0
