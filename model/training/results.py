"""A recipe run's stage results, kept in the repository so that no finished stage is lost with a
machine (a run of many hours does not fit one sitting, and a new machine has none of the old disk):

    python -m model.training.results keep runs/shipped model/training/results/shipped --data ../shared/data
    python -m model.training.train shipped --data ../shared/data --out OUT \
        --from model/training/results/shipped

``keep`` copies every stage the run in ``WORK`` has finished (and the folder lacks) into
``RESULTS/stageN/``: the stage's checkpoint (float16 weights, config, vocabularies, history.json)
and a ``result.json`` with the recipe's sha256, the stage's number, the data files' sha256 and the
code; the run's recipe text once, at the top. Stage 1 also brings the timeline (``/timeline``): its chosen
snapshots packed as ``model.training.snapshots`` packs them, its end stored as the stage result's own
file (the same bytes: git keeps one copy). ``train --from RESULTS`` seeds a new work folder from
those files and goes on at the next stage, on any machine; a result of another recipe, or made from
other data, is refused. The stage boundary rounds to float16 whether a run goes straight on or
resumes from here, so the two give the same weights (tests/model/test_results.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
import time
from pathlib import Path

from model.training.data import file_sha256
from model.training.recipe import extended_from

log = logging.getLogger("model.training.results")

VOCABULARIES = ("tokenizer_en.json", "vocab_zh.json")
# a whole checkpoint in each stage's folder (the vocabularies' bytes are the same: git keeps one copy)
STAGE_FILES = ("weights.safetensors", "config.json", *VOCABULARIES, "history.json")
RECIPE_FILE = "recipe.toml"
RECORD = "result.json"
TIMELINE_STEPS = ("0", "300", "1000", "final")


def recipe_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def stage_folders(results: Path) -> list[Path]:
    """``RESULTS/stage1 … stageK`` in order; a gap is refused (each stage starts from the one before)."""
    found = sorted((p for p in results.glob("stage*") if p.name[5:].isdigit() and (p / RECORD).is_file()),
                   key=lambda p: int(p.name[5:]))
    for index, folder in enumerate(found, start=1):
        if folder.name != f"stage{index}":
            raise SystemExit(f"{results} has {folder.name} without stage{index}: each stage starts "
                             "from the one before, so the results must run from stage 1 without a gap")
    return found


def finished_stages(work: Path) -> list[int]:
    numbers = []
    while (work / f"stage{len(numbers) + 1}" / "out" / "history.json").is_file():
        numbers.append(len(numbers) + 1)
    return numbers


def keep(work: Path, results: Path, data: Path | None, up_to: int | None = None,
         timeline_steps: tuple[str, ...] = TIMELINE_STEPS, shipped: Path | None = None) -> list[int]:
    """Copy the stages ``work`` has finished (up to ``up_to``) that ``results`` lacks; returns their
    numbers. ``data`` (the data folder) is needed to pack stage 1's timeline (its dev split)."""
    run = json.loads((work / "run.json").read_text(encoding="utf-8"))
    results.mkdir(parents=True, exist_ok=True)
    recipe_path = results / RECIPE_FILE
    if recipe_path.is_file() and recipe_sha256(recipe_path.read_text(encoding="utf-8")) != \
            recipe_sha256(run["text"]):
        raise SystemExit(f"{results} keeps a run of another recipe: give another folder")
    recipe_path.write_text(run["text"], encoding="utf-8")
    kept = []
    for number in finished_stages(work):
        if up_to is not None and number > up_to:
            break
        folder = results / f"stage{number}"
        if (folder / RECORD).is_file():
            continue
        folder.mkdir(exist_ok=True)
        out = work / f"stage{number}" / "out"
        for name in STAGE_FILES:
            shutil.copyfile(out / name, folder / name)
        history = json.loads((out / "history.json").read_text(encoding="utf-8"))
        record = {"recipe": run["name"], "recipe_sha256": recipe_sha256(run["text"]),
                  "stage": number, "data": run["data"], "code": run["code"],
                  "dev_bleu": history["final"]["dev_bleu"], "weights": history["final"]["weights"],
                  "weights_sha256": file_sha256(folder / "weights.safetensors"),
                  "kept": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        if number == 1 and data is not None and timeline_steps:
            pack_timeline(work / "stage1", folder / "timeline", timeline_steps, data, shipped)
            record["timeline"] = list(timeline_steps)
        (folder / RECORD).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        log.info("kept stage %d in %s (dev BLEU %s)", number, folder, record["dev_bleu"])
        kept.append(number)
    return kept


def pack_timeline(stage: Path, out: Path, steps: tuple[str, ...], data: Path,
                  shipped: Path | None) -> None:
    import torch

    from model.training.snapshots import pack
    from model.translator import DEFAULT_CHECKPOINT

    grad = torch.is_grad_enabled()
    try:
        pack(stage, out, list(steps), data, shipped or DEFAULT_CHECKPOINT)
    finally:
        torch.set_grad_enabled(grad)  # pack switches it off for the whole process


def _copy_same(source: Path, target: Path) -> None:
    if target.is_file() and target.read_bytes() != source.read_bytes():
        raise SystemExit(f"{target} differs from {source}: these results belong to another run")
    if not target.is_file():
        shutil.copyfile(source, target)


def seed_work(results: Path, work: Path, recipe, data_hashes: dict[str, str]) -> int:
    """Make ``work`` go on after the last stage kept in ``results``; returns that stage's number.

    Refused: results of another recipe (one that trains its kept stages otherwise; a recipe that
    only adds stages after them, or rewords labels, goes on), or made from data files whose sha256
    differ from ``data_hashes`` (the files given to this run)."""
    folders = stage_folders(results)
    if not folders:
        raise SystemExit(f"{results} holds no stage result ({RECORD} in stageN/)")
    text = (results / RECIPE_FILE).read_text(encoding="utf-8")
    if text != recipe.text:
        begun = extended_from(text, recipe)
        if begun is None or begun < len(folders):
            raise SystemExit(f"{results} was made by another recipe (or by this one before it was "
                             "edited): its stages would not be this recipe's")
    for folder in folders:
        record = json.loads((folder / RECORD).read_text(encoding="utf-8"))
        if record["recipe_sha256"] != recipe_sha256(text):
            raise SystemExit(f"{folder / RECORD} names another recipe than {results / RECIPE_FILE}")
        changed = sorted(name for name in data_hashes if record["data"].get(name) != data_hashes[name])
        if changed:
            raise SystemExit(f"{folder} was made from other data: {', '.join(changed)} differ from "
                             "the files given (--data)")
        if file_sha256(folder / "weights.safetensors") != record["weights_sha256"]:
            raise SystemExit(f"{folder / 'weights.safetensors'} is not the file its {RECORD} names")
    work.mkdir(parents=True, exist_ok=True)
    for name in VOCABULARIES:
        _copy_same(folders[0] / name, work / name)
    for folder in folders:
        out = work / folder.name / "out"
        if (out / "history.json").is_file():
            if file_sha256(out / "weights.safetensors") != file_sha256(folder / "weights.safetensors"):
                raise SystemExit(f"{out} holds another {folder.name} than {folder}: give another --work")
            continue
        out.mkdir(parents=True, exist_ok=True)
        for name in STAGE_FILES:
            shutil.copyfile(folder / name, out / name)
    run_path = work / "run.json"
    if not run_path.is_file():
        first = json.loads((folders[0] / RECORD).read_text(encoding="utf-8"))
        run = {"name": first["recipe"], "text": text, "data": first["data"],
               "code": first["code"], "from": str(results)}
        run_path.write_text(json.dumps(run, indent=1) + "\n", encoding="utf-8")
    log.info("going on from %s: stages 1-%d kept there", results, len(folders))
    return len(folders)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    keeping = commands.add_parser("keep", help="copy a run's finished stages into a results folder")
    keeping.add_argument("work", type=Path, help="the run's --work folder")
    keeping.add_argument("results", type=Path, help="the folder in the repository kept for the run")
    keeping.add_argument("--data", type=Path, default=None,
                         help="the data folder (stage 1's timeline scores its dev split)")
    keeping.add_argument("--up-to", type=int, default=None, help="keep stages up to this one only")
    keeping.add_argument("--timeline", default=",".join(TIMELINE_STEPS),
                         help="stage 1's snapshot steps for /timeline ('' for none)")
    keeping.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    import torch

    torch.set_num_threads(args.threads)
    steps = tuple(s.strip() for s in args.timeline.split(",") if s.strip())
    kept = keep(args.work, args.results, args.data, args.up_to, steps)
    print(f"kept stage(s) {', '.join(map(str, kept)) or 'none (all there already)'} in {args.results}")


if __name__ == "__main__":
    main()
