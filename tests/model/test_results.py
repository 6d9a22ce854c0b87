"""A run's stage results kept in the repository (``model.training.results``): a run resumed from
them on a fresh work folder ends with the very weights of a run straight through; results of
another recipe or other data are refused."""

import json
import shutil

import pytest
from safetensors.torch import load_file

from model.training.results import keep
from tests.training_run import run_recipe


def test_a_run_resumed_from_a_kept_stage_ends_as_one_run_straight_through(tiny_recipe_run, tmp_path):
    run = tiny_recipe_run
    results = tmp_path / "results"
    assert keep(run.folder / "work", results, run.data, up_to=1, timeline_steps=("0", "5", "final")) == [1]
    stage1 = results / "stage1"
    record = json.loads((stage1 / "result.json").read_text())
    assert record["stage"] == 1 and record["recipe"] == "tiny" and len(record["recipe_sha256"]) == 64
    assert set(record["data"]) == {"tatoeba-cmn-eng.tsv", "hsk-sentences-en-zh.tsv"}
    assert not (results / "stage2").exists()
    weights = stage1 / "weights.safetensors"
    assert {str(t.dtype) for t in load_file(str(weights)).values()} == {"torch.float16"}
    # the timeline's end is the stage result's own file: git stores it once
    assert (stage1 / "timeline" / "final.safetensors").read_bytes() == weights.read_bytes()
    assert keep(run.folder / "work", results, None, up_to=1) == []  # kept already

    resumed = run_recipe(run.recipe, run.data, tmp_path / "elsewhere", "--from", str(results))
    straight = load_file(str(run.out / "weights.safetensors"))
    again = load_file(str(resumed / "weights.safetensors"))
    assert straight.keys() == again.keys() and all(straight[k].equal(again[k]) for k in straight)
    a, b = (json.loads((folder / "history.json").read_text()) for folder in (run.out, resumed))
    assert [e["train_loss"] for e in a["epochs"]] == [e["train_loss"] for e in b["epochs"]]
    assert b["earlier_stages"] == a["earlier_stages"]
    assert b["recipe"]["sha256"] == a["recipe"]["sha256"] and b["recipe"]["data"] == a["recipe"]["data"]


def test_results_of_another_recipe_or_made_from_other_data_are_refused(tiny_recipe_run, tmp_path):
    run = tiny_recipe_run
    results = tmp_path / "results"
    keep(run.folder / "work", results, None, up_to=1)
    other = tmp_path / "other.toml"
    other.write_text(run.recipe.read_text().replace("lr_factor = 0.5", "lr_factor = 0.6"))
    with pytest.raises(SystemExit, match="another recipe"):
        run_recipe(other, run.data, tmp_path / "a", "--from", str(results))
    data = tmp_path / "data"
    shutil.copytree(run.data, data)
    (data / "hsk-sentences-en-zh.tsv").chmod(0o644)
    with (data / "hsk-sentences-en-zh.tsv").open("a", encoding="utf-8") as handle:
        handle.write("h9\t1\tt\tsix six six\t六六六\t六六六\tx\n")
    with pytest.raises(SystemExit, match="other data: hsk-sentences-en-zh.tsv"):
        run_recipe(run.recipe, data, tmp_path / "b", "--from", str(results))
    # a weights file that is not the one its record names
    (results / "stage1" / "weights.safetensors").chmod(0o644)
    with (results / "stage1" / "weights.safetensors").open("ab") as handle:
        handle.write(b" ")
    with pytest.raises(SystemExit, match="not the file its result.json names"):
        run_recipe(run.recipe, run.data, tmp_path / "c", "--from", str(results))
