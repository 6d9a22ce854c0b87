"""The training command runs a recipe: a tiny one on made-up data learns, records what made it,
gives the same losses twice, and goes on where it stopped."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from model.decoding import DecodingOptions
from model.translator import Translator
from tests.training_run import TINY, WORDS, run_recipe, write_recipe, write_synthetic_data


@pytest.fixture()
def tiny(tmp_path):
    """(data folder, a function writing the tiny recipe with some epochs and warmup)."""
    write_synthetic_data(tmp_path / "data")

    def recipe(epochs: int = 2, warmup: int = 50, name: str = "tiny.toml"):
        return write_recipe(tmp_path / name, epochs, warmup)

    return tmp_path / "data", recipe


_run = run_recipe  # the name tests/model/test_recipe_precision.py imports
_write_synthetic_data = write_synthetic_data


def test_a_tiny_recipe_learns_a_synthetic_task_from_random_weights(tiny, tmp_path):
    data, recipe = tiny
    out = _run(recipe(epochs=25, warmup=100), data, tmp_path / "run")
    history = json.loads((out / "history.json").read_text())
    stage1 = history["earlier_stages"][0]
    assert stage1["init"] is None and history["init"]["from"] == "stage 1"
    first, last = stage1["steps"][0]["loss"], history["epochs"][-1]["train_loss"]
    assert last < first / 3, (first, last)
    assert history["epochs"][-1]["dev_bleu"] > 50
    assert Translator.load(out).translate("two five one", DecodingOptions()).translation == "二五一"


def test_the_checkpoint_records_the_recipe_the_data_hashes_the_code_and_every_stage(tiny_recipe_run):
    run = tiny_recipe_run
    path, data = run.recipe, run.data
    history = json.loads((run.out / "history.json").read_text())
    kept = history["recipe"]
    assert kept["name"] == "tiny" and kept["text"] == path.read_text()
    assert kept["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert kept["data"] == {name: hashlib.sha256((data / name).read_bytes()).hexdigest()
                            for name in ("tatoeba-cmn-eng.tsv", "hsk-sentences-en-zh.tsv")}
    assert kept["code"] and len(kept["code"][0]["commit"] or "0" * 40) == 40
    stages = [*history["earlier_stages"], history]
    assert [s["label"]["en"] for s in stages] == ["from random weights", "lower rate"]
    assert [len(s["epochs"]) for s in stages] == [2, 1] and all(s["steps"] for s in stages)
    assert stages[0]["added"] == {"concat": 20} and stages[0]["settings"]["transforms"]
    assert [s["step"] for s in stages[0]["snapshots"]] == [0, 5]
    assert (run.folder / "work" / "stage1" / "snapshots" / "step000005.safetensors").is_file()


def test_the_evaluator_rebuilds_what_a_recipe_trained_on_from_the_checkpoint(tiny_recipe_run, tmp_path):
    """``evaluate`` reads the recipe history.json keeps: its held-out sentences are not among
    the ones it counts as trained on, and every stage's pairs (joined ones too) are."""
    from model.training.data import _english_key
    from model.training.evaluate import rebuild_splits

    history = json.loads((tiny_recipe_run.out / "history.json").read_text())
    data = Path(shutil.copytree(tiny_recipe_run.data, tmp_path / "data"))  # the shared run's stays as it was
    # the wider domains are scored, though this recipe did not train on them
    for name in ("3am-captions-en-zh.tsv", "tico19-en-zh.tsv", "ntrex128-en-zh.tsv"):
        lines = "".join(f"{w} {name[:4]}\t{z}\n" for w, z in WORDS.items())
        (data / name).write_text(lines, encoding="utf-8")
    splits, seen = rebuild_splits(data, history)
    assert not {_english_key(p.english) for p in splits.test + splits.dev} & seen
    assert sum(len(key.split()) > 8 for key in seen) >= 10  # the joined pairs of both stages


def test_two_runs_of_a_recipe_give_the_same_losses(tiny_recipe_run, tmp_path):
    run = tiny_recipe_run
    a = json.loads((run.out / "history.json").read_text())
    b = json.loads((_run(run.recipe, run.data, tmp_path / "b") / "history.json").read_text())
    for one, other in zip([*a["earlier_stages"], a], [*b["earlier_stages"], b], strict=True):
        assert [s["loss"] for s in one["steps"]] == [s["loss"] for s in other["steps"]]
        assert [e["train_loss"] for e in one["epochs"]] == [e["train_loss"] for e in other["epochs"]]


def test_a_stopped_run_goes_on_with_the_same_command_and_ends_as_an_unbroken_one(tiny_recipe_run,
                                                                                 tmp_path):
    """``--max-steps`` stops mid-epoch, then mid-way through the second stage (as a kill would,
    after the last saved state); the same command without it ends with the weights, losses and
    planned schedule of a run never stopped."""
    from safetensors.torch import load_file

    from model.training.schedule import learning_rate, run_total_steps

    data, path, whole = tiny_recipe_run.data, tiny_recipe_run.recipe, tiny_recipe_run.out
    broken = tmp_path / "broken"
    _run(path, data, broken, "--max-steps", "11")
    assert not (broken / "out").exists() and (broken / "work" / "stage1" / "state.pt").is_file()
    stage1_steps = json.loads((whole / "history.json").read_text())["earlier_stages"][0]["epochs"][-1]["step"]
    _run(path, data, broken, "--max-steps", str(stage1_steps + 3))
    assert (broken / "work" / "stage1" / "out" / "history.json").is_file()
    assert not (broken / "out").exists()
    _run(path, data, broken)

    a, b = (json.loads((folder / "history.json").read_text()) for folder in (whole, broken / "out"))
    for one, other in zip([*a["earlier_stages"], a], [*b["earlier_stages"], b], strict=True):
        assert [e["train_loss"] for e in one["epochs"]] == [e["train_loss"] for e in other["epochs"]]
        total = run_total_steps(other["settings"])
        for logged in other["steps"]:
            assert logged["lr"] == pytest.approx(learning_rate(
                logged["step"], 32, other["settings"]["warmup"], other["settings"]["lr_factor"], total))
    assert len(b["recipe"]["code"]) == 3  # every start of the run is recorded
    x = load_file(str(whole / "weights.safetensors"))
    y = load_file(str(broken / "out" / "weights.safetensors"))
    assert x.keys() == y.keys() and all(x[k].equal(y[k]) for k in x)


def test_a_work_folder_of_another_recipe_or_other_data_is_refused(tiny, tmp_path):
    data, recipe = tiny
    _run(recipe(), data, tmp_path / "run", "--max-steps", "2")
    with pytest.raises(SystemExit, match="another recipe"):
        _run(recipe(epochs=3), data, tmp_path / "run")
    recipe()
    (data / "hsk-sentences-en-zh.tsv").chmod(0o644)
    with (data / "hsk-sentences-en-zh.tsv").open("a", encoding="utf-8") as handle:
        handle.write("h9\t1\tt\tsix six six\t六六六\t六六六\tx\n")
    with pytest.raises(SystemExit, match="hsk-sentences-en-zh.tsv .*differ"):
        _run(recipe(), data, tmp_path / "run")


def test_a_stage_added_after_the_last_goes_on_from_the_finished_run(tiny, tmp_path):
    """Stages appended to a recipe go on from the run's last stage (nothing before is trained
    again); a one-epoch stage with average = 2 weighs its end against the mean with its start.
    Any other edit is still refused."""
    data, recipe = tiny
    path = recipe()
    first = _run(path, data, tmp_path / "run")
    before = json.loads((first / "history.json").read_text())
    third = """[[stages]]
label = { en = "averaged with its start", zh = "与起点取平均" }
epochs = 1
warmup = 5
lr_factor = 0.1
average = 2
"""
    path.write_text(path.read_text() + third, encoding="utf-8")
    history = json.loads((_run(path, data, tmp_path / "run") / "history.json").read_text())
    assert [s["epochs"] for s in history["earlier_stages"]] == [
        *[s["epochs"] for s in before["earlier_stages"]], before["epochs"]]  # not trained again
    assert history["init"]["from"] == "stage 2" and len(history["epochs"]) == 1
    assert history["final"]["weights"] in ("last epoch",
                                           "average of the stage's start and its last 1 epoch(s)")
    assert (tmp_path / "run" / "work" / "stage3" / "epoch000.safetensors").is_file()
    run = json.loads((tmp_path / "run" / "work" / "run.json").read_text())
    assert run["text"] == path.read_text() and run["extended"][0]["stages_before"] == 2
    assert history["recipe"]["text"] == path.read_text()
    # labels are words for the pages: reworded, the finished run goes on (nothing trained again)
    # and its history carries the new words; a stage's training settings are not words
    path.write_text(path.read_text().replace('en = "averaged with its start"',
                                             'en = "its end or its mean with its start"'),
                    encoding="utf-8")
    reworded = json.loads((_run(path, data, tmp_path / "run") / "history.json").read_text())
    assert reworded["recipe"]["text"] == path.read_text()
    assert reworded["epochs"] == history["epochs"] and reworded["final"] == history["final"]
    run = json.loads((tmp_path / "run" / "work" / "run.json").read_text())
    assert len(run["extended"]) == 1 and len(run["reworded"]) == 1
    path.write_text(path.read_text().replace("lr_factor = 0.1", "lr_factor = 0.3"), encoding="utf-8")
    with pytest.raises(SystemExit, match="another recipe"):
        _run(path, data, tmp_path / "run")


def test_average_counts_the_start_at_most():
    from model.training.recipe import parse_recipe

    text = TINY.format(epochs=2, warmup=5)
    with pytest.raises(ValueError, match="average counts epochs"):
        parse_recipe(text.replace("average = 2", "average = 4"))
    assert parse_recipe(text.replace("average = 2", "average = 3")).stages[0].average == 3


REMOVED = ("--focus", "--focus-copies", "--replay", "--add-piece", "--retrain-piece",
           "--new-pieces-only", "--encoder-only", "--average-init", "--init", "--vary-numbers",
           "--vary-names", "--vary-titles", "--vary-latin", "--vary-acronyms", "--epochs", "--seed")


def test_the_command_takes_a_recipe_and_paths_and_at_most_twelve_flags():
    import model.training.train as train

    parser_source = __import__("inspect").getsource(train.parse_args)
    flags = [line.split('"')[1] for line in parser_source.splitlines() if "add_argument(" in line]
    assert flags[0] == "recipe" and len(flags) <= 12, flags
    assert not set(flags) & set(REMOVED)
    for flag in REMOVED:
        with pytest.raises(SystemExit):
            train.parse_args(["r.toml", "--data", "d", "--out", "o", flag, "1"])


@pytest.mark.parametrize(("change", "message"), [
    ("[transforms]\nfocus = { word = 'code' }", "unknown transform 'focus'"),
    ("[transforms]\ndrop_stops = { share = 2 }", "share takes a number between 0 and 1"),
    ("[transforms]\nconcat = { count = -5 }", "count takes a number 0 or more"),
    ("[transforms]\nnumbers = { copies = 1, digits = 3 }", "transform 'numbers'"),
    ("[transforms]\nconcat = { count = 20 }\n[model]\ninit = 'x'", "Cannot declare"),
    ("[transforms]\n[train2]\nunlikelihood = -1.0", "unknown key(s) train2"),
])
def test_a_recipe_that_asks_for_what_does_not_exist_is_refused_before_any_training(change, message):
    from model.training.recipe import parse_recipe

    text = TINY.format(epochs=1, warmup=10).replace("[transforms]\nconcat = { count = 20 }", change)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_recipe(text)
    for line, message in (("unlikelihood = -1.0", "unlikelihood takes a number ≥ 0"),
                          ("init = 'model/checkpoints'", r"unknown key\(s\) init")):
        with pytest.raises(ValueError, match=message):
            parse_recipe(TINY.format(epochs=1, warmup=10).replace("save_every = 4", line))


def test_a_stage_can_replace_or_switch_off_a_transform_of_the_recipe():
    from model.training.recipe import parse_recipe

    text = TINY.format(epochs=1, warmup=10) + "[stages.transforms]\nconcat = false\nnumbers = {}\n"
    first, second = parse_recipe(text).stages
    assert first.transforms == {"concat": {"count": 20}} and second.transforms == {"numbers": {}}


def test_the_shipped_recipe_reads_and_trains_from_random_weights_without_word_aimed_steps():
    from model.training.recipe import RECIPES, load_recipe

    recipe = load_recipe(RECIPES / "shipped.toml")
    assert recipe.name == "shipped" and len(recipe.stages) >= 1
    assert recipe.stages[0].lr_factor == 1.0 and recipe.stages[0].snapshots[0] == 0
    assert "tatoeba-cmn-eng.tsv" in recipe.files() and "cc-cedict-2023-11-07.u8.gz" in recipe.files()


def test_evaluation_rebuilds_the_splits_from_split_seed():
    from model.training.data import split_seed
    from model.training.evaluate import split_settings

    assert split_seed({"seed": 12, "split_seed": 0}) == 0
    assert split_seed({"seed": "12"}) == 12 and split_seed({}) is None

    assert split_settings({"seed": 12, "split_seed": 13})["seed"] == 13
    assert split_settings({"seed": 12})["seed"] == 12  # a run from before --split-seed
    assert split_settings({})["seed"] == 13


def test_an_old_checkpoints_flags_stand_for_a_one_stage_recipe():
    from model.training.recipe import recipe_from_settings

    recipe = recipe_from_settings({"seed": 16, "split_seed": 13, "narrow": False, "old_data": False,
                                   "upsample": "tatoeba=3,hsk=6", "rare_words": "10",
                                   "vary_numbers": True, "number_copies": 2, "drop_stops": 0.1,
                                   "vary_latin": 3, "latin_short": 0.5, "concat": 6000})
    (stage,) = recipe.stages
    assert "un" in recipe.sources and "bible" not in recipe.sources and stage.seed == 16
    assert stage.upsample == {"tatoeba": 3, "hsk": 6}
    assert stage.transforms == {"rare_words": {"max_pairs": 10, "copies": 1},
                                "numbers": {"copies": 2, "any_length": False},
                                "drop_stops": {"share": 0.1}, "latin": {"copies": 3, "short": 0.5},
                                "concat": {"count": 6000}}


def test_the_timeline_packer_scores_the_dev_sentences_its_run_held_out(tmp_path):
    """model/training/snapshots.py rebuilds a run's dev set from ``split_seed``, not ``seed``."""
    from model.training.data import load_pairs, split_pairs
    from model.training.snapshots import dev_pairs

    _write_synthetic_data(tmp_path / "data")
    settings = {"seed": 5, "split_seed": 13, "test_size": 40, "dev_size": 40, "narrow": True}
    expected = split_pairs(load_pairs(tmp_path / "data", wide=False), seed=13, n_test=40,
                           n_dev=40, n_test_hsk=40).dev_mix()
    other = split_pairs(load_pairs(tmp_path / "data", wide=False), seed=5, n_test=40,
                        n_dev=40, n_test_hsk=40).dev_mix()
    assert expected != other  # the two seeds hold out different sentences here
    assert dev_pairs(tmp_path / "data", settings) == expected


def test_learning_rate_decays_linearly_to_zero_when_the_run_length_is_known():
    """Warmup is the paper's either way; with a total the rate then falls on a straight line from
    the warmup's peak to zero at the last step."""
    from model.training.schedule import learning_rate, noam_lr

    for step in (1, 50, 100):
        assert learning_rate(step, 64, 100, 2.0, total=400) == noam_lr(step, 64, 100, 2.0)
    peak = noam_lr(100, 64, 100, 2.0)
    assert learning_rate(250, 64, 100, 2.0, total=400) == pytest.approx(peak / 2)
    assert learning_rate(400, 64, 100, 2.0, total=400) == 0.0
    assert learning_rate(401, 64, 100, 2.0, total=400) == 0.0
    assert learning_rate(250, 64, 100, 2.0) == noam_lr(250, 64, 100, 2.0)


def test_a_linear_stage_records_its_length_and_ends_near_zero(tiny, tmp_path):
    """A linear stage plans its steps from its epochs, records them in history.json, and the rates
    the loop logged lie on that schedule (what /training draws)."""
    from model.training.schedule import learning_rate, run_total_steps

    data, recipe = tiny
    history = json.loads((_run(recipe(epochs=3, warmup=20), data, tmp_path / "r") / "history.json")
                         .read_text())["earlier_stages"][0]
    total = run_total_steps(history["settings"])
    last = history["epochs"][-1]["step"]
    assert total and abs(total - last) <= 3, (total, last)  # batches per epoch vary by a shuffle
    for logged in history["steps"]:
        assert logged["lr"] == pytest.approx(learning_rate(logged["step"], 32, 20, 0.5, total))
    after_warmup = [s["lr"] for s in history["steps"] if s["step"] > 20]
    assert after_warmup == sorted(after_warmup, reverse=True) and len(after_warmup) >= 2
    assert learning_rate(last, 32, 20, 0.5, total) <= 0.1 * learning_rate(20, 32, 20, 0.5)


KEEP_FREED = """
import resource, sys, torch
from model.training.loop import keep_freed_memory
applied = keep_freed_memory() if sys.argv[1] == "keep" else None
torch.empty(3000, 4256).fill_(1.0)  # the logits of a 3,000-token batch, 51 MB
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    torch.empty(3000, 4256).fill_(1.0)
print(applied, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="glibc's malloc")
def test_training_keeps_freed_memory_so_a_steps_large_tensors_fault_no_new_pages():
    """A 51 MB block freed and allocated again ten times: by default glibc maps it afresh every
    time (12,500 pages faulted in each); after keep_freed_memory() the freed memory is reused."""
    import subprocess
    import sys

    # both at once (each counts its own faults): one torch import's wait instead of two
    runs = {mode: subprocess.Popen([sys.executable, "-c", KEEP_FREED, mode], stdout=subprocess.PIPE,
                                   text=True) for mode in ("default", "keep")}
    faults = {}
    for mode, process in runs.items():
        out, _ = process.communicate(timeout=300)
        assert process.returncode == 0, mode
        faults[mode] = out.split()
    assert int(faults["default"][1]) > 10 * 10_000  # ~12,500 pages a block, every time
    applied, kept = faults["keep"][0], int(faults["keep"][1])
    assert applied == "True" and kept < 2 * 12_500  # at most a block's worth once, not ten
