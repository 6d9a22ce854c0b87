"""Ship a recipe's stage result: ``python -m model.training.ship model/training/results/shipped/stageN``.

Scores the result and the shipped checkpoint on the very same held-out sentences (the result's own
recipe rebuilds the splits; the shipped checkpoint's outputs are read from its
``eval_outputs.json.gz`` when they are of those sentences, else translated again), applies the ship
rule (``ship_rule.py``: dev higher, the mean higher, no split lower beyond its noise) and prints the
table with each figure's interval. A result that fails is refused, with the reasons. One that passes
replaces the shipped checkpoint in one go: its files (float16 weights) and a history.json with every
stage and the recipe, ``eval.json`` with the checkpoint before it under ``previous`` and the rule's
figures under ``ship`` (the final test split reported here, once), ``eval_outputs.json.gz``, the
timeline its run's stage 1 kept, the README's held-out table and the pinned translations the
browser tests read (``tests/e2e/conftest.py``); then the pages' calibrations (``CALIBRATIONS``) are
measured again on the new weights. Dev BLEU is checked first: a result that is not higher there is
refused in minutes, before the held-out splits are scored.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from model.training.data import file_sha256
from model.training.evaluate import (
    FIXTURE_FILE,
    LEARNER_FILE,
    OUTPUTS_FILE,
    PROBE_FILE,
    UNSEEN_FILE,
    evaluate,
    previous_figures,
    read_table,
    rebuild_splits,
    split_settings,
)
from model.training.results import RECIPE_FILE, RECORD, STAGE_FILES, stage_folders
from model.training.scoring import bleu_chrf, translate_batch, translate_beam
from model.training.ship_rule import SAMPLES, compare, read_outputs, report, verdict, write_outputs
from model.training.snapshots import dev_pairs, score_shipped
from model.translator import Translator

log = logging.getLogger("model.training.ship")
ROOT = Path(__file__).resolve().parents[2]
TABLE_START = "| held-out split |"
# The page thresholds measured on the served weights (each file records their sha256; a page whose
# calibration is of other weights says "not judged"), so every ship measures them again.
CALIBRATIONS = ("bench.coreference_calibration", "bench.warning_calibration")  # the latter reads --data


def full_history(stage: Path) -> dict:
    """The history.json a checkpoint of ``stage`` keeps: the stage's own, every stage before it
    (``earlier_stages``) and the recipe (text, sha256, data sha256, code), as ``train`` writes it."""
    results = stage.parent
    number = int(stage.name[5:])
    folders = stage_folders(results)[:number]
    text = (results / RECIPE_FILE).read_text(encoding="utf-8")
    record = json.loads((stage / RECORD).read_text(encoding="utf-8"))
    histories = [json.loads((f / "history.json").read_text(encoding="utf-8")) for f in folders]
    recipe = {"name": record["recipe"], "text": text, "sha256": hashlib.sha256(text.encode()).hexdigest(),
              "data": record["data"], "code": record["code"], "stage": number}
    return {**histories[-1], "earlier_stages": histories[:-1], "recipe": recipe}


def score(translator: Translator, splits, seen: set[str]) -> tuple[dict, dict]:
    """(eval.json's report, every output as scored) on ``splits``, the final split included."""
    outputs: dict = {}
    unseen = read_table(UNSEEN_FILE) if UNSEEN_FILE.is_file() else None
    learner = read_table(LEARNER_FILE) if LEARNER_FILE.is_file() else None
    figures = evaluate(translator, splits, seen, read_table(PROBE_FILE), FIXTURE_FILE, 4, 10,
                       unseen, learner, outputs, final=True)
    return figures, outputs


def dev_bleu(translator: Translator, splits) -> float:
    """Greedy BLEU on the dev sentences, as training scores every epoch."""
    pairs = splits.dev_mix()
    hypotheses = translate_batch(translator.model, translator.english, translator.chinese,
                                 [p.english for p in pairs])
    return bleu_chrf(hypotheses, [p.chinese for p in pairs])[0]


def same_sentences(outputs: dict, other: dict) -> bool:
    return all(name in other and other[name]["english"] == split["english"]
               and other[name]["reference"] == split["reference"] for name, split in outputs.items())


def ship(stage: Path, data: Path, root: Path = ROOT, samples: int = SAMPLES,
         label: tuple[str, str] = ("the checkpoint before", "之前的检查点")) -> list[str]:
    """Score, judge and (if it passes) install ``stage``; returns the reasons it did not ship."""
    checkpoint = root / "model" / "checkpoints"
    record = json.loads((stage / RECORD).read_text(encoding="utf-8"))
    changed = sorted(name for name, digest in record["data"].items() if file_sha256(data / name) != digest)
    if changed:
        raise SystemExit(f"{stage} was made from other data than {data}: {', '.join(changed)} differ")
    with tempfile.TemporaryDirectory() as scratch:
        candidate_dir = Path(scratch) / "candidate"
        candidate_dir.mkdir()
        for name in STAGE_FILES:
            if name != "history.json":
                shutil.copyfile(stage / name, candidate_dir / name)
        history = full_history(stage)
        (candidate_dir / "history.json").write_text(json.dumps(history, ensure_ascii=False) + "\n",
                                                    encoding="utf-8")
        candidate = Translator.load(candidate_dir)
        shipped = Translator.load(checkpoint)
        splits, seen = rebuild_splits(data, history)
        dev_old, dev_new = dev_bleu(shipped, splits), dev_bleu(candidate, splits)
        if not dev_new > dev_old:  # rule (a) first: it costs minutes, the held-out scoring much more
            print(f"dev BLEU: shipped {dev_old:.2f}, candidate {dev_new:.2f}")
            return verdict([], dev_old, dev_new)
        log.info("scoring %s", stage)
        new_report, new_outputs = score(candidate, splits, seen)
        old_path = checkpoint / OUTPUTS_FILE
        old_report = json.loads((checkpoint / "eval.json").read_text(encoding="utf-8"))
        old_outputs = read_outputs(old_path) if old_path.is_file() else {}
        if not same_sentences(new_outputs, old_outputs):
            log.info("scoring the shipped checkpoint on the same sentences")
            _, old_seen = rebuild_splits(data, shipped.history)
            old_report, old_outputs = score(shipped, splits, old_seen)
        figures = compare(old_outputs, new_outputs, samples)
        print(report(figures, dev_old, dev_new))
        reasons = verdict(figures, dev_old, dev_new)
        if reasons:
            return reasons
        new_report = {"checkpoint": checkpoint.name, "split": split_settings(history.get("settings", {})),
                      **new_report,
                      "previous": previous_figures(old_report, label) | {"final": old_report.get("final")},
                      "ship": {"result": f"{stage.parent.name}/{stage.name}", "samples": samples,
                               "dev_bleu": {"shipped": dev_old, "candidate": dev_new},
                               "figures": [f.as_dict() for f in figures]}}
        install(candidate_dir, stage, checkpoint, new_report, new_outputs, data)
    write_readme_table(root / "README.md", new_report)
    pin_translations(root / "tests" / "e2e" / "conftest.py", Translator.load(checkpoint))
    return []


def install(candidate: Path, stage: Path, checkpoint: Path, figures: dict, outputs: dict,
            data: Path) -> None:
    for name in STAGE_FILES:
        shutil.copyfile(candidate / name, checkpoint / name)
    (checkpoint / "eval.json").write_text(json.dumps(figures, ensure_ascii=False, indent=1) + "\n",
                                          encoding="utf-8")
    write_outputs(outputs, checkpoint / OUTPUTS_FILE)
    timeline = stage.parent / "stage1" / "timeline"
    target = checkpoint / "timeline"
    if timeline.is_dir():
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(timeline, target)
        manifest = json.loads((target / "timeline.json").read_text(encoding="utf-8"))
        stage1 = json.loads((stage.parent / "stage1" / "history.json").read_text(encoding="utf-8"))
        pairs = dev_pairs(data, stage1["settings"])
        manifest["shipped"] = score_shipped(checkpoint, target, [p.english for p in pairs],
                                            [p.chinese for p in pairs])
        (target / "timeline.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n",
                                              encoding="utf-8")
    log.info("installed %s in %s", stage, checkpoint)


def write_readme_table(readme: Path, figures: dict) -> None:
    """Replace the README's held-out table with the new checkpoint's (``scripts/heldout_table.py``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("heldout_table", ROOT / "scripts" / "heldout_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = readme.read_text(encoding="utf-8")
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(TABLE_START))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    lines[start:end] = module.table(figures).splitlines()
    readme.write_text("\n".join(lines) + "\n", encoding="utf-8")


def pin_translations(conftest: Path, translator: Translator) -> None:
    """``SHIPPED_TRANSLATIONS``: the new checkpoint's greedy translation of each pinned sentence
    (a sentence that beam 4 translates otherwise is named: the browser tests expect both alike)."""
    text = conftest.read_text(encoding="utf-8")
    block = re.search(r"SHIPPED_TRANSLATIONS = \{\n(.*?)\n\}", text, re.S)
    sentences = re.findall(r'^    "(.*?)": "', block.group(1), re.M)
    greedy = translate_batch(translator.model, translator.english, translator.chinese, sentences)
    beam = translate_beam(translator.model, translator.english, translator.chinese, sentences, 4)
    for sentence, one, other in zip(sentences, greedy, beam, strict=True):
        if one != other:
            log.warning("%r: greedy %s, beam 4 %s (the browser tests expect both alike: pin "
                        "another sentence)", sentence, one, other)
    body = "\n".join(f'    "{s}": "{z}",' for s, z in zip(sentences, greedy, strict=True))
    conftest.write_text(text[:block.start(1)] + body + text[block.end(1):], encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=Path, help="a stage result (model/training/results/RUN/stageN)")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(args.threads)
    reasons = ship(args.result.resolve(), args.data)
    if reasons:
        raise SystemExit(f"{args.result} does not ship:\n- " + "\n- ".join(reasons))
    for module in CALIBRATIONS:  # tied to the weights' sha256: measured again on the new weights
        log.info("recalibrating: python -m %s --write", module)
        extra = ["--data", str(args.data.resolve())] if module == "bench.warning_calibration" else []
        subprocess.run([sys.executable, "-m", module, "--write", *extra], cwd=ROOT, check=True)
    print(f"shipped {args.result}: run the suite (bash scripts/test.sh) and look at /, /training and "
          "/timeline in both languages")


if __name__ == "__main__":
    main()
