"""Pack a training run's snapshots for the timeline page (``/timeline``):

    python -m model.training.snapshots pack runs/shipped/stage1 model/checkpoints/timeline \
        --steps 0,300,1000,3000,final

Training writes a float16 copy of the weights after the steps a recipe's stage lists (``snapshots =
[...]``) to ``WORK/stageN/snapshots/``; this command stores the chosen ones compactly beside the
shipped checkpoint (``model/timeline.py``: matrices int8 with a scale per row, vectors float16;
step 0 rebuilt from the config and seed instead of stored, once that is checked to give the run's
own step-0 weights), with ``timeline.json``: each snapshot's step, epoch and minutes, the run's
loss curve, and each snapshot's BLEU on the run's dev split both as stored and as training wrote
it, with how often the two translate a dev sentence identically. ``final`` is the weights the stage
ended with (``WORK/stageN/out/weights.safetensors``; a float16 one is stored as that very file).
The shipped model is scored on the same dev sentences, so the page can put the timeline's end
beside it.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from model.timeline import (
    MANIFEST,
    build_model,
    dequantise,
    initial_weights,
    quantise,
    read_along,
    weights_hash,
)
from model.tokenizer import ChineseTokenizer, EnglishTokenizer
from model.training.data import file_sha256
from model.training.recipe import held_out_splits, recipe_from_settings
from model.training.scoring import bleu_chrf, translate_batch
from model.transformer import TransformerConfig
from model.translator import DEFAULT_CHECKPOINT, Translator

log = logging.getLogger("model.training.snapshots")
PROBE_TEXT = "The cat sits on the mat."  # the sentence whose tokens tests/model check
MAX_BYTES = 40 * 1024 * 1024  # the whole timeline folder, as the repository allows
BATCH = 256  # dev sentences decoded at once: an early snapshot writes 128 characters for each


def run_history(run: Path) -> dict:
    """The run's history: ``out/history.json`` once it has finished, else its last saved state."""
    finished = run / "out" / "history.json"
    if finished.is_file():
        return json.loads(finished.read_text(encoding="utf-8"))
    state = run / "state.pt"
    if not state.is_file():
        raise SystemExit(f"{run} has no history yet (state.pt is written after the first epoch)")
    return torch.load(state, weights_only=False, map_location="cpu")["history"]


def dev_pairs(data: Path, settings: dict) -> list:
    """The dev sentences the run scored every epoch on, rebuilt as training built them (a run
    from before recipes read every wider domain unless its settings say otherwise)."""
    recipe = recipe_from_settings({"narrow": False, "old_data": False, **settings})
    return held_out_splits(data, recipe).dev_mix()


def _source(run: Path, history: dict, step: str) -> tuple[str, dict, dict[str, torch.Tensor]]:
    """(name, record, weights as training wrote them) of one chosen step or ``final``."""
    if step == "final":
        path = run / "out" / "weights.safetensors"
        if not (run / "out" / "history.json").is_file() or not path.is_file():
            raise SystemExit(f"{run} has not finished: no final weights in {run / 'out'} yet")
        last = history["epochs"][-1]
        record = {"step": last["step"], "epoch": last["epoch"], "minutes": last["minutes"],
                  "weights": (history.get("final") or {}).get("weights", "last epoch"),
                  }
        written = load_file(str(path))
        record["stored_from"] = "float16" if {t.dtype for t in written.values()} == {
            torch.float16} else "float32"
        return "final", record, written
    number = int(step)
    kept = {s["step"]: s for s in history.get("snapshots", [])}
    path = run / "snapshots" / f"step{number:06d}.safetensors"
    if not path.is_file():
        raise SystemExit(f"no snapshot of step {number} in {run / 'snapshots'} (yet)")
    if number in kept:
        record = {key: kept[number][key] for key in ("step", "epoch", "minutes")}
    else:  # written after the last saved state: its epoch is the next one, its minute the file's
        first = run / "snapshots" / "step000000.safetensors"
        minutes = (path.stat().st_mtime - first.stat().st_mtime) / 60 if first.is_file() else None
        record = {"step": number, "epoch": 1 + sum(e["step"] < number for e in history["epochs"]),
                  "minutes": None if minutes is None else round(minutes, 2),
                  "minutes_from": "file times"}
    return f"step{number:06d}", {**record, "stored_from": "float16"}, load_file(str(path))


MEASURES = ("dev_bleu", "dev_chrf", "dev_bleu_full", "dev_chrf_full", "identical",
            "bleu_against_full", "probe")


def earlier_measures(out: Path, pairs: int) -> dict[str, dict]:
    """The measures an earlier pack into ``out`` took, by snapshot name, when it scored the same
    number of dev sentences (a snapshot whose weights hash the same is not decoded again)."""
    path = out / MANIFEST
    if not path.is_file():
        return {}
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if manifest.get("dev", {}).get("pairs") != pairs:
        return {}
    return {entry["name"]: entry for entry in manifest.get("snapshots", [])
            if all(key in entry for key in MEASURES)}


def _agreement(served: list[str], full: list[str], references: list[str]) -> dict:
    bleu, chrf = bleu_chrf(served, references)
    bleu_full, chrf_full = bleu_chrf(full, references)
    same, _ = bleu_chrf(served, full)
    return {"dev_bleu": bleu, "dev_chrf": chrf, "dev_bleu_full": bleu_full,
            "dev_chrf_full": chrf_full,
            "identical": sum(a == b for a, b in zip(served, full, strict=True)),
            "bleu_against_full": same}


def score_shipped(shipped: Path, out: Path, sources: list[str], references: list[str]) -> dict:
    """The shipped checkpoint's BLEU on the same dev sentences (kept from an earlier pack when its
    weights file is the same)."""
    digest = file_sha256(shipped / "weights.safetensors")
    path = out / MANIFEST
    if path.is_file():
        earlier = json.loads(path.read_text(encoding="utf-8"))
        if (earlier.get("shipped") or {}).get("weights_sha256") == digest and \
                earlier.get("dev", {}).get("pairs") == len(sources):
            return earlier["shipped"]
    translator = Translator.load(shipped)
    outputs = translate_batch(translator.model, translator.english, translator.chinese, sources)
    bleu, chrf = bleu_chrf(outputs, references)
    return {"dev_bleu": bleu, "dev_chrf": chrf, "weights_sha256": digest}


def pack(run: Path, out: Path, steps: list[str], data: Path, shipped: Path | None) -> dict:
    """Write the chosen snapshots and timeline.json to ``out``; return the manifest."""
    history = run_history(run)
    settings = history["settings"]
    config = TransformerConfig(**history["config"])
    # a recipe's stage folder (WORK/stageN) finds the run's vocabularies in WORK
    vocabularies = run if (run / "tokenizer_en.json").is_file() else run.parent
    english = EnglishTokenizer.load(vocabularies / "tokenizer_en.json")
    chinese = ChineseTokenizer.load(vocabularies / "vocab_zh.json")
    pairs = dev_pairs(data, settings)
    sources, references = [p.english for p in pairs], [p.chinese for p in pairs]
    out.mkdir(parents=True, exist_ok=True)
    measured = earlier_measures(out, len(pairs))
    for old in out.glob("*.safetensors"):
        old.unlink()
    english.save(out / "tokenizer_en.json")
    chinese.save(out / "vocab_zh.json")
    config.save(out / "config.json")

    torch.set_grad_enabled(False)
    snapshots = []
    for step in steps:
        started = time.perf_counter()
        name, record, written = _source(run, history, step)
        full = build_model(config, {k: v.float() for k, v in written.items()})
        entry = {"name": name, **record, "source_sha256": weights_hash(written)}
        if record["step"] == 0 and name != "final":
            rebuilt = initial_weights(config, int(settings["seed"]))
            if weights_hash(rebuilt) != weights_hash(written):
                raise SystemExit("step 0 rebuilt from the config and seed differs from the run's "
                                 "step-0 file: pack it as stored (leave 0 out of --steps)")
            served = build_model(config, rebuilt)
            entry |= {"regenerated": True, "weights_sha256": weights_hash(rebuilt),
                      "stored_as": "rebuilt from config and seed (float32)", "bytes": 0}
        elif name == "final" and {t.dtype for t in written.values()} == {torch.float16}:
            # a stage result is float16 already: its own file, the same bytes (git keeps one copy
            # for the stage result, the timeline and the shipped weights)
            file = out / f"{name}.safetensors"
            shutil.copyfile(run / "out" / "weights.safetensors", file)
            file.chmod(0o644)
            served = full
            entry |= {"file": file.name, "bytes": file.stat().st_size,
                      "stored_as": "float16, the stage result's own file"}
        else:
            stored = quantise(written)
            file = out / f"{name}.safetensors"
            # one metadata key: safetensors writes several in a random order, and a re-pack should
            # write the same bytes for the same snapshot (git then keeps one copy)
            save_file(stored, str(file), metadata={"format": "pt"})
            file.chmod(0o644)
            served = build_model(config, dequantise(stored))
            entry |= {"file": file.name, "bytes": file.stat().st_size,
                      "stored_as": "int8 matrices (a float32 scale per row), float16 vectors"}
        if measured.get(name, {}).get("source_sha256") == entry["source_sha256"]:
            entry |= {key: measured[name][key] for key in MEASURES}  # the same weights: kept
            snapshots.append(entry)
            log.info("%s: measured before, kept", name)
            continue
        outputs = translate_batch(served, english, chinese, sources, batch_size=BATCH)
        # step 0 is served as training drew it (float32): the same weights, the same outputs
        outputs_full = outputs if entry.get("regenerated") else translate_batch(
            full, english, chinese, sources, batch_size=BATCH)
        entry |= _agreement(outputs, outputs_full, references)
        entry["probe"] = {"text": PROBE_TEXT,
                          "tokens": read_along(served, english, chinese, PROBE_TEXT)["target_ids"],
                          "tokens_full": read_along(full, english, chinese, PROBE_TEXT)["target_ids"]}
        log.info("%s: dev BLEU %.2f (as trained %.2f), %d/%d identical, %.0f s", name,
                 entry["dev_bleu"], entry["dev_bleu_full"], entry["identical"], len(pairs),
                 time.perf_counter() - started)
        snapshots.append(entry)

    manifest = {
        "run": {
            "label": history.get("label"),
            "seed": int(settings["seed"]),
            "epochs_planned": int(settings["epochs"]),
            "epochs_done": len(history["epochs"]),
            "finished": (run / "out" / "history.json").is_file(),
            "train_pairs": history.get("train_pairs"),
            "recipe": {key: settings.get(key) for key in (
                "narrow", "epochs", "batch_tokens", "warmup", "lr_factor", "label_smoothing",
                "clip", "dropout", "average")},
        },
        "config": history["config"],
        "dev": {"pairs": len(pairs), "decoding": "greedy", "tokenize": "zh"},
        "curve": {"step": [s["step"] for s in history["steps"]],
                  "loss": [s["loss"] for s in history["steps"]]},
        "epochs": [{key: e.get(key) for key in ("epoch", "step", "minutes", "train_loss", "dev_bleu")}
                   for e in history["epochs"]],
        "snapshots": snapshots,
    }
    if shipped is not None:
        manifest["shipped"] = score_shipped(shipped, out, sources, references)
    (out / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n",
                                encoding="utf-8")
    total = sum(path.stat().st_size for path in out.iterdir() if path.is_file())
    log.info("wrote %s: %.1f MB in all", out, total / 1e6)
    if total > MAX_BYTES:
        raise SystemExit(f"{out} is {total / 2**20:.1f} MiB, over the 40 MiB the repository "
                         "allows: choose fewer steps")
    return manifest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="store chosen snapshots compactly, with timeline.json")
    packing.add_argument("run", type=Path, help="the run's --work folder (snapshots/, state.pt)")
    packing.add_argument("out", type=Path, help="where the timeline goes")
    packing.add_argument("--steps", default="0,100,400,1600,final",
                         help="snapshot steps to keep, comma-separated; 'final' for the shipped weights")
    packing.add_argument("--data", type=Path, default=Path("../shared/data"),
                         help="the data folder (to rebuild the dev split)")
    packing.add_argument("--shipped", type=Path, default=DEFAULT_CHECKPOINT,
                         help="the checkpoint to score on the same dev sentences")
    packing.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(args.threads)
    pack(args.run, args.out, [s.strip() for s in args.steps.split(",") if s.strip()], args.data,
         args.shipped)


if __name__ == "__main__":
    main()
