"""The packed training timeline (model/checkpoints/timeline, model/timeline.py): each snapshot's
tokens on a fixed sentence equal a direct decode with its weights, step 0 is the run's own
initialisation, the stored form is what it says, and the folder fits the repository."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from model.decoding import DecodingOptions, generate
from model.timeline import (
    FOLDER,
    MANIFEST,
    MAX_LEN,
    Timeline,
    dequantise,
    initial_weights,
    quantise,
    weights_hash,
)
from model.transformer import Transformer, TransformerConfig

MANIFEST_DATA = json.loads((FOLDER / MANIFEST).read_text(encoding="utf-8"))
SNAPSHOTS = MANIFEST_DATA["snapshots"]
CONFIG = TransformerConfig(**MANIFEST_DATA["config"])


@pytest.fixture(scope="module")
def timeline() -> Timeline:
    return Timeline.open(cache_size=1)


def direct_weights(entry: dict) -> dict[str, torch.Tensor]:
    """The snapshot's weights read from its file without model/timeline.py: int8 × row scale."""
    if entry.get("regenerated"):
        torch.manual_seed(MANIFEST_DATA["run"]["seed"])
        state = Transformer(CONFIG).state_dict()
        return {k: v.clone() for k, v in state.items()}
    stored = load_file(str(FOLDER / entry["file"]))
    state = {}
    for name, tensor in stored.items():
        if name.endswith(".scale"):
            continue
        if tensor.dtype == torch.int8:
            state[name] = tensor.to(torch.float32) * stored[f"{name}.scale"].unsqueeze(1)
        else:
            state[name] = tensor.to(torch.float32)
    state["output.weight"] = state["tgt_embedding.tokens.weight"]
    return state


@pytest.mark.parametrize("entry", SNAPSHOTS, ids=[e["name"] for e in SNAPSHOTS])
def test_each_snapshot_translates_as_a_direct_decode_with_its_weights(timeline, entry):
    model = Transformer(CONFIG)
    model.load_state_dict(direct_weights(entry))
    text = entry["probe"]["text"]
    source = torch.tensor([timeline.english.encode(text)])
    with torch.inference_mode():
        direct = generate(model.eval(), source, DecodingOptions(max_len=MAX_LEN)).tokens
    served = timeline.read(entry["name"], text)
    assert served["target_ids"] == direct
    assert direct == entry["probe"]["tokens"]  # what the packer recorded from these weights
    assert len(served["probs"]) == len(served["labels"]) == len(direct) + served["finished"]
    for layer in served["cross"]:  # every row of every head a distribution over the source
        for head in layer:
            assert all(abs(sum(row) - 1) < 1e-3 for row in head)


def test_step_zero_is_the_runs_own_initialisation():
    zero = [e for e in SNAPSHOTS if e["step"] == 0]
    assert zero and zero[0]["regenerated"] and zero[0]["bytes"] == 0
    rebuilt = initial_weights(CONFIG, MANIFEST_DATA["run"]["seed"])
    # the hash of the run's step-0 file, taken when it was packed
    assert weights_hash(rebuilt) == zero[0]["weights_sha256"] == zero[0]["source_sha256"]
    before = torch.get_rng_state()
    initial_weights(CONFIG, 1)
    assert torch.equal(torch.get_rng_state(), before)  # the global random state is left alone


def test_the_stored_form_is_int8_rows_and_float16_vectors():
    torch.manual_seed(0)
    state = {"w": torch.randn(5, 7) * torch.arange(1, 6)[:, None], "b": torch.randn(7)}
    stored = quantise(state)
    assert stored["w"].dtype == torch.int8 and stored["w.scale"].shape == (5,)
    assert stored["b"].dtype == torch.float16
    back = dequantise(stored)
    # symmetric rounding: at most half a step (max |row| / 127 / 2) from the original
    step = state["w"].abs().amax(dim=1, keepdim=True) / 127
    assert ((back["w"] - state["w"]).abs() <= step / 2 + 1e-7).all()
    for entry in SNAPSHOTS:
        if not entry.get("regenerated"):
            stored = load_file(str(FOLDER / entry["file"]))
            assert {t.dtype for t in stored.values()} <= {torch.int8, torch.float32, torch.float16}


def test_the_folder_fits_in_40_mb_and_lists_every_file():
    files = {path.name for path in FOLDER.iterdir()}
    stored = {e["file"] for e in SNAPSHOTS if not e.get("regenerated")}
    assert stored <= files
    assert {p for p in files if p.endswith(".safetensors")} == stored
    assert sum(path.stat().st_size for path in FOLDER.iterdir()) <= 40 * 1024 * 1024
    for entry in SNAPSHOTS:  # the compression was measured on the dev split
        assert 0 <= entry["identical"] <= MANIFEST_DATA["dev"]["pairs"]
        assert entry["dev_bleu"] >= 0 and entry["dev_bleu_full"] >= 0


def test_the_cache_keeps_at_most_its_size(timeline):
    first, second = [e["name"] for e in SNAPSHOTS][:2]
    timeline.model(first)
    timeline.model(second)
    loads = timeline.loads
    timeline.model(second)  # kept
    assert timeline.loads == loads
    assert timeline.cached(second) and not timeline.cached(first)  # cache_size=1: it left
