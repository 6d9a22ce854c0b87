"""Make a model from its recipe: ``python -m model.training.train RECIPE --data ../shared/data --out DIR``.

The recipe (``model/training/recipes/*.toml``, read by ``recipe.py``) declares everything; this
command runs it from random weights to a finished checkpoint: it reads the data and hashes every
file, draws the held-out splits, builds each stage's training pairs (``transforms.py``), trains the
tokenizers, and trains the stages one after the other (``loop.py``), each from the weights the one
before ended with. Everything it needs to go on is kept in ``--work``: killed at any point, the
same command goes on from the last saved state (SIGTERM or Ctrl-C save it first). The checkpoint's
history.json keeps the recipe's text, the data files' sha256, the code's git commit and every
stage's curves.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
import subprocess
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

from model.tokenizer import MAX_SOURCE_TOKENS, MAX_TARGET_TOKENS, ChineseTokenizer, EnglishTokenizer
from model.training.data import Pair, file_sha256
from model.training.loop import (
    StageJob,
    StopRequest,
    keep_freed_memory,
    load_saved,
    train_stage,
)
from model.training.recipe import Recipe, extended_from, held_out_splits, load_recipe, stage_pairs
from model.training.results import seed_work
from model.transformer import Transformer, TransformerConfig

log = logging.getLogger("model.training")
ROOT = Path(__file__).resolve().parents[2]
SHIPPED_FILES = ("weights.safetensors", "config.json", "tokenizer_en.json", "vocab_zh.json")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipe", type=Path,
                        help="the recipe file (or a name in model/training/recipes/, e.g. shipped)")
    parser.add_argument("--data", type=Path, required=True, help="the folder of the data files")
    parser.add_argument("--out", type=Path, required=True, help="where the finished checkpoint goes")
    parser.add_argument("--work", type=Path, default=None,
                        help="the run's state, to go on from when stopped (default: runs/RECIPE-NAME)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads (default: the recipe's); the same count gives the same losses")
    parser.add_argument("--max-steps", type=int, default=None, metavar="N",
                        help="stop after N steps of the whole recipe, the state saved (the same "
                             "command without it goes on)")
    parser.add_argument("--from", dest="from_results", type=Path, default=None, metavar="RESULTS",
                        help="go on after the stages kept in this folder (model.training.results "
                             "keep): a new machine resumes from the repository")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def code_version() -> dict:
    """The git commit this code is, and whether model/ has changes not committed."""
    def git(*command: str) -> str:
        return subprocess.run(["git", *command], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    try:
        return {"commit": git("rev-parse", "HEAD"),
                "dirty": bool(git("status", "--porcelain", "--", "model"))}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}


def data_hashes(recipe: Recipe, data: Path) -> dict[str, str]:
    return {name: file_sha256(data / name) for name in recipe.files()}


def begin_run(work: Path, recipe: Recipe, data: Path, hashes: dict[str, str] | None = None) -> dict:
    """The run's record (``WORK/run.json``): the recipe's text, the data files' sha256 and the code
    of every start. A work folder begun with another recipe or other data is refused."""
    hashes = hashes or data_hashes(recipe, data)
    path = work / "run.json"
    if path.is_file():
        run = json.loads(path.read_text(encoding="utf-8"))
        if run["text"] != recipe.text:
            begun = extended_from(run["text"], recipe)
            if begun is None:
                raise SystemExit(f"{work} holds a run of another recipe (or of this one before it "
                                 "was edited): give another --work, or delete that folder to start "
                                 "again (stages added after the last one go on from it)")
            at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            if len(recipe.stages) > begun:
                log.info("the recipe has %d stage(s) more than when this run began: they go on "
                         "from stage %d", len(recipe.stages) - begun, begun)
                run.setdefault("extended", []).append({"stages_before": begun, "at": at})
            else:
                log.info("the recipe's description or stage labels were reworded since this run "
                         "began: the run goes on, its history with the new words")
                run.setdefault("reworded", []).append(at)
            run["text"] = recipe.text
        changed = [name for name in hashes if run["data"].get(name) != hashes[name]]
        if changed:
            raise SystemExit(f"{', '.join(changed)} in {data} differ from the files this run began "
                             f"with in {work}: use those files, or another --work to start again")
    else:
        run = {"name": recipe.name, "text": recipe.text, "data": hashes, "code": []}
    run["code"].append({**code_version(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    path.write_text(json.dumps(run, indent=1) + "\n", encoding="utf-8")
    return run


def encode(pairs: list[Pair], english: EnglishTokenizer,
           chinese: ChineseTokenizer) -> list[tuple[list[int], list[int]]]:
    """Token ids of every pair that fits the model's lengths."""
    examples = []
    for pair in pairs:
        src, tgt = english.encode(pair.english), chinese.encode(pair.chinese)
        if 1 < len(src) <= MAX_SOURCE_TOKENS and 0 < len(tgt) < MAX_TARGET_TOKENS:
            examples.append((src, tgt))
    return examples


def tokenizers(work: Path, recipe: Recipe, pairs_of) -> tuple[EnglishTokenizer, ChineseTokenizer]:
    """The run's vocabularies, trained once and kept in ``work``: English BPE pieces from the first
    stage's pairs, a Chinese character for every character of any stage's pairs."""
    english_path, chinese_path = work / "tokenizer_en.json", work / "vocab_zh.json"
    if english_path.is_file() and chinese_path.is_file():
        return EnglishTokenizer.load(english_path), ChineseTokenizer.load(chinese_path)
    english = EnglishTokenizer.train((p.english for p in pairs_of(1)[0]), recipe.english_vocab)
    chinese = ChineseTokenizer.train(
        p.chinese for number in range(1, len(recipe.stages) + 1) for p in pairs_of(number)[0]
        if p.source != "cedict")
    english.save(english_path)
    chinese.save(chinese_path)
    return english, chinese


def continued_from(stage: dict, number: int) -> dict:
    """history's ``init`` for the stage after ``stage``: what it starts from and what that cost."""
    minutes = (stage.get("init") or {}).get("total_minutes", 0) + stage["epochs"][-1]["minutes"]
    return {"from": f"stage {number}", "epochs": len(stage["epochs"]),
            "total_minutes": round(minutes, 1), "train_pairs": stage.get("train_pairs")}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    recipe = load_recipe(args.recipe)
    work = args.work or Path("runs") / recipe.name
    work.mkdir(parents=True, exist_ok=True)
    hashes = data_hashes(recipe, args.data)
    if args.from_results is not None:
        seed_work(args.from_results, work, recipe, hashes)
    run = begin_run(work, recipe, args.data, hashes)
    keep_freed_memory()
    torch.set_num_threads(args.threads or recipe.threads)
    stop = StopRequest()
    try:
        train_recipe(recipe, work, args, run, stop)
    finally:
        stop.restore()


def train_recipe(recipe: Recipe, work: Path, args: argparse.Namespace, run: dict,
                 stop: StopRequest) -> None:
    """Every stage not finished yet, then the checkpoint to ``args.out``."""
    splits = held_out_splits(args.data, recipe)
    cache: dict[int, tuple[list[Pair], dict[str, int]]] = {}

    def pairs_of(number: int) -> tuple[list[Pair], dict[str, int]]:
        if number not in cache:
            cache[number] = stage_pairs(splits.train, recipe.stages[number - 1], args.data)
            log.info("stage %d: %d training pairs (%s added)", number, len(cache[number][0]),
                     ", ".join(f"{k} {v:,}" for k, v in cache[number][1].items()) or "none")
        return cache[number]

    english, chinese = tokenizers(work, recipe, pairs_of)
    config = TransformerConfig(
        src_vocab_size=english.vocab_size, tgt_vocab_size=chinese.vocab_size,
        d_model=recipe.d_model, n_heads=recipe.n_heads, n_encoder_layers=recipe.n_layers,
        n_decoder_layers=recipe.n_layers, d_ff=recipe.d_ff, dropout=recipe.dropout)
    finished: list[dict] = []
    for number, stage in enumerate(recipe.stages, start=1):
        folder = work / f"stage{number}"
        if (folder / "out" / "history.json").is_file():
            finished.append(json.loads((folder / "out" / "history.json").read_text(encoding="utf-8")))
            continue
        torch.manual_seed(stage.seed)
        model = Transformer(config)  # stage 1's random start: /timeline rebuilds it from config and seed
        if number > 1:
            load_saved(model, load_file(str(work / f"stage{number - 1}" / "out" / "weights.safetensors")))
        pairs, added = pairs_of(number)
        cache.clear()  # the pairs of a stage are read once; keep memory for the next
        job = StageJob(number=number, of=len(recipe.stages), stage=stage, recipe=recipe,
                       examples=encode(pairs, english, chinese), added=added, dev=splits.dev_mix(),
                       folder=folder, init=continued_from(finished[-1], number - 1) if finished else None)
        del pairs
        steps_before = sum(h["epochs"][-1]["step"] for h in finished)
        stop_after = None if args.max_steps is None else max(0, args.max_steps - steps_before)
        history = train_stage(model, english, chinese, job, stop_after, not args.no_progress, stop)
        if history is None:
            return
        finished.append(history)
    ship(work / f"stage{len(recipe.stages)}" / "out", args.out, finished, run)


def ship(result: Path, out: Path, stages: list[dict], run: dict) -> None:
    """The last stage's weights and vocabularies to ``out``, with a history.json that keeps every
    stage (``earlier_stages``, oldest first) and the recipe (text, data sha256, code)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in SHIPPED_FILES:
        shutil.copy(result / name, out / name)
    recipe = {"name": run["name"], "text": run["text"],
              "sha256": hashlib.sha256(run["text"].encode()).hexdigest(),
              "data": run["data"], "code": run["code"]}
    history = {**stages[-1], "earlier_stages": stages[:-1], "recipe": recipe}
    (out / "history.json").write_text(json.dumps(history, ensure_ascii=False) + "\n", encoding="utf-8")
    log.info("saved %s (%s, dev BLEU %s)", out, history["final"]["weights"], history["final"]["dev_bleu"])


if __name__ == "__main__":
    main()
