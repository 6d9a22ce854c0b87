"""The round trip: the shipped checkpoint exported as a Hugging Face Marian folder
(model/adapters/export_hf.py) and served with ``--model`` is the shipped checkpoint again — the
same weights bit for bit, the same traces and model answers."""

from __future__ import annotations

import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from model.adapters.loading import load_translator

pytest.importorskip("transformers")

SENTENCES = ["There are 365 days in a year.", "The woman said that she was tired."]
OPTIONS = [{}, {"strategy": "beam", "beam_size": 3}, {"strategy": "sample", "seed": 7, "top_p": 0.9}]


def test_the_export_loads_as_the_shipped_model(hf_export, shipped_translator):
    from model.adapters.marian import MarianTranslator

    served = load_translator(hf_export)  # what --model DIR / ITT_MODEL loads
    assert isinstance(served, MarianTranslator) and served.about["name"] == hf_export.name
    assert served.config == shipped_translator.config  # interleaved again, training dropout too
    ours, theirs = shipped_translator.model.state_dict(), served.model.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[name], theirs[name]) for name in ours)
    assert served.parameter_counts() == shipped_translator.parameter_counts()
    # the tokenizers are read from the folder's tokenizer.json and target/tokenizer.json
    assert served.chinese.vocabulary == shipped_translator.chinese.vocabulary
    for text in SENTENCES:
        assert served.english.encode(text) == shipped_translator.english.encode(text)


def test_served_with_model_it_gives_our_traces(hf_export, shipped_translator):
    """/api/trace (greedy, beam, sampling) and /api/model answer alike for the export served with
    ``--model`` and for the shipped checkpoint."""
    answers = []
    for app in (create_app(Settings(model=str(hf_export), access_log=False)),
                create_app(Settings(access_log=False), translator=shipped_translator)):
        with TestClient(app) as client:
            found = []
            for text in SENTENCES:
                for options in OPTIONS:
                    response = client.post("/api/trace", json={"text": text, **options})
                    assert response.status_code == 200, response.text
                    trace = response.json()
                    trace.pop("model_ms")  # how long it took, the one thing allowed to differ
                    found.append(trace)
            model = client.get("/api/model").json()
            found.append((model["config"], model["parameters"]))
            answers.append(found)
    exported, shipped = answers
    assert exported == shipped
    assert all(trace["translation"] for trace in exported[:-1])


def test_an_incomplete_export_says_what_to_do(hf_export, tmp_path):
    import shutil

    from model.translator import CheckpointError

    broken = tmp_path / "broken"
    shutil.copytree(hf_export, broken, ignore=shutil.ignore_patterns("target"))
    with pytest.raises(CheckpointError, match="missing target/tokenizer.json.*export_hf"):
        load_translator(broken)
