"""``model.training.ship`` on a tiny run: a result better than the shipped checkpoint replaces it in
one go (files, eval.json with the rule's figures, outputs, timeline, README table, pinned
translations); the same result again is refused, with the reason; the rule reads noise."""

import json
import shutil

from safetensors.torch import load_file, save_file

from model.training.results import keep
from model.training.ship import full_history, ship
from model.training.ship_rule import Figure, paired, verdict
from tests.training_run import WORDS

README = ("# tiny\n\nfigures:\n\n| held-out split | pairs | x | y |\n|---|---|---|---|\n"
          "| old | 1 | 2 | 3 |\n\nend\n")
PINS = ('SHIPPED_TRANSLATIONS = {\n    "one two": "old",\n    "three four five": "old",\n}\n\n\n'
        "def f():\n    pass\n")


def _root(tmp_path, results, work):
    """A project tree whose shipped checkpoint is stage 1's files with its step-0 (random) weights."""
    root = tmp_path / "root"
    checkpoint = root / "model" / "checkpoints"
    shutil.copytree(results / "stage1", checkpoint, ignore=shutil.ignore_patterns("timeline", "result.json"))
    random = load_file(str(work / "stage1" / "snapshots" / "step000000.safetensors"))
    save_file(random, str(checkpoint / "weights.safetensors"))
    (checkpoint / "history.json").write_text(json.dumps(full_history(results / "stage1")))
    (checkpoint / "eval.json").write_text("{}")
    (root / "README.md").write_text(README)
    (root / "tests" / "e2e").mkdir(parents=True)
    (root / "tests" / "e2e" / "conftest.py").write_text(PINS)
    return root


def test_a_better_result_ships_in_one_go_and_the_same_one_again_is_refused(tiny_recipe_run, tmp_path, capsys):
    run = tiny_recipe_run
    results = tmp_path / "results"
    keep(run.folder / "work", results, run.data, timeline_steps=("0", "5", "final"))
    root = _root(tmp_path, results, run.folder / "work")
    checkpoint = root / "model" / "checkpoints"
    data = shutil.copytree(run.data, tmp_path / "data")
    for name in ("3am-captions-en-zh.tsv", "tico19-en-zh.tsv", "ntrex128-en-zh.tsv"):  # scored only
        lines = "".join(f"{w} {name[:4]}\t{z}\n" for w, z in WORDS.items())
        (data / name).write_text(lines, encoding="utf-8")

    assert ship(results / "stage2", data, root, samples=100) == []
    printed = capsys.readouterr().out
    assert "verdict: ships" in printed and "±" in printed
    kept = (results / "stage2" / "weights.safetensors").read_bytes()
    assert (checkpoint / "weights.safetensors").read_bytes() == kept
    history = json.loads((checkpoint / "history.json").read_text())
    assert history["recipe"]["stage"] == 2 and len(history["earlier_stages"]) == 1
    figures = json.loads((checkpoint / "eval.json").read_text())
    assert figures["ship"]["dev_bleu"]["candidate"] > figures["ship"]["dev_bleu"]["shipped"]
    assert {f["split"] for f in figures["ship"]["figures"]} >= {"tatoeba_test", "hsk_test", "probe"}
    assert (checkpoint / "eval_outputs.json.gz").is_file()
    assert (checkpoint / "timeline" / "final.safetensors").read_bytes() == \
        (results / "stage1" / "weights.safetensors").read_bytes()
    timeline = json.loads((checkpoint / "timeline" / "timeline.json").read_text())
    assert timeline["shipped"]["dev_bleu"] == figures["ship"]["dev_bleu"]["candidate"]
    readme = (root / "README.md").read_text()
    assert "| old | 1 |" not in readme and "→ **" in readme and readme.endswith("\nend\n")
    pins = (root / "tests" / "e2e" / "conftest.py").read_text()
    assert '"old"' not in pins and pins.endswith("def f():\n    pass\n")

    reasons = ship(results / "stage2", data, root, samples=100)  # the same weights again
    assert any("dev BLEU" in reason and "not higher" in reason for reason in reasons)
    assert json.loads((checkpoint / "eval.json").read_text()) == figures  # nothing was replaced


def test_a_drop_inside_a_splits_noise_does_not_block_a_ship_and_one_beyond_it_does():
    references = [f"句子{i}是很好的一句话。" for i in range(200)]
    one_wrong = [*references[:-1], "错"]
    base, _, new, _, p = paired(references, one_wrong, references, samples=200)
    assert new < base and p > 0.05  # one sentence of 200: noise
    half = [r if i % 2 else "错" for i, r in enumerate(references)]
    base, _, new, _, p = paired(references, half, references, samples=200)
    assert new < base and p < 0.05
    def figure(old, new, p_value):
        return Figure("x_test", "greedy", 200, old, 1.0, new, 1.0, p_value)
    assert verdict([figure(30, 29.5, 0.3), figure(20, 22, 0.01)], 24.0, 25.0) == []
    reasons = verdict([figure(30, 26, 0.001), figure(20, 25, 0.01)], 24.0, 25.0)
    assert len(reasons) == 1 and "beyond the split's noise" in reasons[0]
