"""One stage of training: the steps, the losses, the resumable state, the averaging at the end.

Teacher forcing (the decoder reads the reference shifted right by one and predicts every next
character at once), label-smoothed cross-entropy (plus, when the recipe weights it, unlikelihood
against repeating), Adam (β = 0.9, 0.98) with a warmup schedule, gradient clipping. After every
epoch the dev set is translated greedily and scored (BLEU, chrF). The state is written to the
stage's folder every ``save_every`` steps and after every epoch, so a stopped run goes on from
there; at the end the last epochs' weights are averaged, and the better of "last" and "averaged"
on dev is the stage's result.
"""

from __future__ import annotations

import ctypes
import json
import logging
import random
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from model.decoding import pad
from model.tokenizer import ChineseTokenizer, EnglishTokenizer
from model.training.data import Pair
from model.training.recipe import Recipe, Stage
from model.training.schedule import learning_rate
from model.training.scoring import bleu_chrf, translate_batch
from model.transformer import BOS_ID, EOS_ID, PAD_ID, Transformer

log = logging.getLogger("model.training")


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep the memory training frees, for the next step to reuse.

    A step allocates and frees tensors of tens of megabytes (the logits of a 3,000-token batch
    and their gradients are 51 MB each). By default glibc maps every block over 32 MB afresh and
    unmaps it when freed, so each step faults ~60,000 new pages in, which the kernel zeroes: on
    the 2-core VM of 2026-12-04, ~39,000 faults a second; with this, none (vmstat: 0 % system
    time), and 500 steps of the same run took 13.2 min instead of 14.9 (1.79 →
    1.59 s a step). Off: no block is mapped on its own and the heap's top
    is never handed back. Memory stays at the run's peak, which it reaches anyway. Returns
    whether it applied (glibc's Linux only; elsewhere training runs as before)."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_max = -1, -4  # glibc's <malloc.h>
    return bool(mallopt(m_mmap_max, 0)) and bool(mallopt(m_trim_threshold, 2**31 - 1))


def smoothed_cross_entropy(logits: Tensor, labels: Tensor, smoothing: float) -> Tensor:
    """Label-smoothed cross-entropy over the non-padding labels.

    The smoothing mass goes only to tokens decoding can emit: none to <pad> or <bos>, which it
    never produces, so the model is not taught to keep probability on them.
    """
    logits = logits.reshape(-1, logits.size(-1))  # (B·T, V)
    labels = labels.reshape(-1)
    keep = labels != PAD_ID
    log_probs = torch.log_softmax(logits[keep], dim=-1)
    nll = -log_probs.gather(1, labels[keep, None]).squeeze(1)
    emittable = torch.ones(logits.size(-1), dtype=torch.bool)
    emittable[[PAD_ID, BOS_ID]] = False
    uniform = -log_probs[:, emittable].mean(dim=-1)
    return ((1 - smoothing) * nll + smoothing * uniform).mean()


def repetition_unlikelihood(logits: Tensor, tgt_in: Tensor, labels: Tensor, window: int = 4) -> Tensor:
    """Token-level unlikelihood against repeating the last few tokens (Welleck et al., 2019).

    A weak decoder that loses its place falls back on writing again what it just wrote
    (国国国国, 传播传播传播). At every position this adds −log(1 − p(c)) for each of the ``window``
    previous target tokens ``c`` that is not the reference's next token, so probability on
    "the same again" is pushed down exactly where the reference does not repeat; a real
    repetition in the reference (谢谢, 常常) is the label there, so it is never penalised.
    Summed per position, averaged over the non-padding labels.
    """
    batch, length = labels.shape
    previous = []  # the token k positions back, for k = 1 … window (<pad> where there is none)
    for k in range(1, window + 1):
        shifted = torch.full_like(tgt_in, PAD_ID)
        shifted[:, k - 1 :] = tgt_in[:, : length - k + 1]
        previous.append(shifted)
    candidates = torch.stack(previous, dim=-1)  # (B, T, window)
    valid = (candidates != labels[..., None]) & (candidates != PAD_ID) & (candidates != BOS_ID)
    valid &= (labels != PAD_ID)[..., None]
    for k in range(1, window):  # each distinct token once per position
        valid[..., k] &= (candidates[..., k, None] != candidates[..., :k]).all(dim=-1)
    probs = torch.softmax(logits, dim=-1).gather(-1, candidates)
    penalty = -torch.log((1 - probs).clamp_min(1e-5)) * valid
    return penalty.sum() / (labels != PAD_ID).sum().clamp_min(1)


def make_batches(
    examples: list[tuple[list[int], list[int]]], max_tokens: int, rng: random.Random
) -> list[list[int]]:
    """Group examples of similar length so little padding is wasted; shuffle the groups."""
    order = sorted(range(len(examples)), key=lambda i: (len(examples[i][0]), rng.random()))
    batches, current, longest = [], [], 0
    for index in order:
        size = max(len(examples[index][0]), len(examples[index][1]) + 1)
        if current and max(longest, size) * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(index)
        longest = max(longest, size)
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


def collate(examples: list[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, ...]:
    """Source ids, decoder input (<bos> + reference) and labels (reference + <eos>)."""
    src = pad([s for s, _ in examples])
    tgt_in = pad([[BOS_ID] + t for _, t in examples])
    labels = pad([t + [EOS_ID] for _, t in examples])
    return src, tgt_in, labels


def average_weights(paths: list[Path]) -> dict[str, torch.Tensor]:
    total: dict[str, torch.Tensor] = {}
    for path in paths:
        for name, tensor in load_file(str(path)).items():
            total[name] = total.get(name, 0) + tensor.double()
    return {name: (tensor / len(paths)).float() for name, tensor in total.items()}


def state_for_saving(model: Transformer) -> dict[str, torch.Tensor]:
    """Weights with the tied output projection stored once (safetensors refuses shared memory)."""
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_output:
        state.pop("output.weight", None)
    return state


def save_snapshot(
    model: Transformer, work: Path, history: dict, step: int, epoch: int, minutes: float
) -> None:
    """A float16 copy of the weights as they are after ``step`` steps, listed in the history."""
    folder = work / "snapshots"
    folder.mkdir(exist_ok=True)
    name = f"step{step:06d}.safetensors"
    state = {k: v.half() for k, v in state_for_saving(model).items()}
    save_file(state, str(folder / name), metadata={"format": "pt", "step": str(step)})
    history["snapshots"].append({"step": step, "epoch": epoch, "minutes": round(minutes, 2),
                                 "file": f"snapshots/{name}"})


def load_saved(model: Transformer, state: dict[str, torch.Tensor]) -> None:
    """Load weights stored as ``state_for_saving`` stores them (tied output once)."""
    loadable = dict(state)
    if model.config.tie_output:
        loadable["output.weight"] = state["tgt_embedding.tokens.weight"]
    model.load_state_dict(loadable, strict=True)




class StopRequest:
    """SIGTERM or SIGINT: the running step ends, the state is saved, and the run exits; the same
    command goes on from there."""

    def __init__(self) -> None:
        self.requested = False
        self._before = {sig: signal.signal(sig, self._request) for sig in (signal.SIGTERM, signal.SIGINT)}

    def _request(self, signum, frame) -> None:
        self.requested = True

    def restore(self) -> None:
        """Hand the signals back to whoever had them before (a test runner, a shell)."""
        for sig, handler in self._before.items():
            signal.signal(sig, handler)


@dataclass
class StageJob:
    """What one stage trains on and where it keeps its state."""

    number: int  # from 1
    of: int  # stages in the recipe
    stage: Stage
    recipe: Recipe
    examples: list[tuple[list[int], list[int]]]  # (English ids, Chinese ids)
    added: dict[str, int]  # pairs each transform added
    dev: list[Pair]
    folder: Path  # WORK/stageN: state.pt, epoch weights, snapshots/, out/
    init: dict | None = None  # the stage this one continues from (history's "init")


def planned_steps(job: StageJob) -> int:
    """The stage's steps: epochs × the batches of one shuffle (they vary by a few)."""
    return job.stage.epochs * len(make_batches(job.examples, job.recipe.batch_tokens,
                                               random.Random(job.stage.seed)))


def train_stage(model: Transformer, english: EnglishTokenizer, chinese: ChineseTokenizer,
                job: StageJob, stop_after: int | None = None, progress: bool = True,
                stop: StopRequest | None = None) -> dict | None:
    """Train one stage to its end and return its history, or return None after ``stop_after`` of
    its steps or a stop request, the state saved for the next run to go on from."""
    stage, recipe, folder = job.stage, job.recipe, job.folder
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(stage.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    planned = planned_steps(job)
    total = planned if stage.decay == "linear" else None
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: learning_rate(
        step + 1, model.config.d_model, stage.warmup, stage.lr_factor, total, stage.lr_end))
    history: dict = {"settings": recipe.settings(stage, total), "config": asdict(model.config),
                     "train_pairs": len(job.examples), "added": job.added, "init": job.init,
                     "label": stage.label or None, "steps": [], "epochs": [], "snapshots": []}
    start_epoch, step, earlier, within = 1, 0, 0.0, None
    state_path = folder / "state.pt"
    if state_path.exists():
        state = torch.load(state_path, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        history, step, start_epoch = state["history"], state["step"], state["epoch"] + 1
        rng.setstate(state["rng"])
        torch.set_rng_state(state["torch_rng"])
        within, earlier = state["within"], state["minutes"]
        where = (f"{within['batches']} batches into epoch {start_epoch}" if within
                 else f"after epoch {state['epoch']}")
        log.info("stage %d: resumed %s (step %d)", job.number, where, step)
    if step == 0 and 0 in stage.snapshots:
        save_snapshot(model, folder, history, 0, 0, 0.0)
    if step == 0 and stage.average > stage.epochs:  # the start is one of the weights averaged
        save_file(state_for_saving(model), str(folder / "epoch000.safetensors"))
    started = time.time() - earlier * 60  # the curve's time axis stays cumulative over resumes
    dev_src, dev_ref = [p.english for p in job.dev], [p.chinese for p in job.dev]

    def save_state(epoch_done: int, part: dict | None) -> None:
        torch.save(
            {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "schedule": schedule.state_dict(), "history": history, "step": step,
             "epoch": epoch_done, "rng": rng.getstate(), "torch_rng": torch.get_rng_state(),
             "minutes": round((time.time() - started) / 60, 2), "within": part},
            state_path.with_suffix(".tmp"),
        )
        state_path.with_suffix(".tmp").replace(state_path)

    bar = _progress_bar(planned, step, f"stage {job.number}/{job.of}", progress)
    for epoch in range(start_epoch, stage.epochs + 1):
        model.train()
        if within:  # the same shuffle as before the stop, without the batches already trained on
            rng.setstate(within["rng"])
        epoch_rng = rng.getstate()
        batches = make_batches(job.examples, recipe.batch_tokens, rng)
        done = within["batches"] if within else 0
        epoch_loss, epoch_tokens = (within["loss"], within["tokens"]) if within else (0.0, 0)
        within = None
        for batch in batches[done:]:
            if (stop is not None and stop.requested) or (stop_after is not None and step >= stop_after):
                save_state(epoch - 1, {"rng": epoch_rng, "batches": done, "loss": epoch_loss,
                                       "tokens": epoch_tokens})
                log.info("stage %d: stopped after step %d, state saved in %s; the same command "
                         "goes on from there", job.number, step, folder)
                return None
            src, tgt_in, labels = collate([job.examples[i] for i in batch])
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=recipe.precision == "bfloat16"):
                logits = model(src, tgt_in)
            logits = logits.float()  # the loss and the gradients' start in float32
            loss = smoothed_cross_entropy(logits, labels, recipe.label_smoothing)
            objective = loss
            if recipe.unlikelihood:
                objective = loss + recipe.unlikelihood * repetition_unlikelihood(logits, tgt_in, labels)
            optimizer.zero_grad(set_to_none=True)
            objective.backward()
            grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.clip))
            lr = optimizer.param_groups[0]["lr"]
            optimizer.step()
            schedule.step()
            step += 1
            done += 1
            tokens = int((labels != PAD_ID).sum())
            epoch_loss += loss.item() * tokens
            epoch_tokens += tokens
            if step in stage.snapshots:
                save_snapshot(model, folder, history, step, epoch, (time.time() - started) / 60)
            if step % 25 == 0 or step == 1:
                history["steps"].append({"step": step, "loss": round(loss.item(), 4), "lr": lr,
                                         "grad_norm": round(grad_norm, 4), "epoch": epoch})
            if bar is not None:
                bar.set_postfix(loss=f"{loss.item():.3f}", lr=f"{lr:.2e}", refresh=False)
                bar.update()  # drawn with this step's loss
            if recipe.save_every and step % recipe.save_every == 0 and done < len(batches):
                save_state(epoch - 1, {"rng": epoch_rng, "batches": done, "loss": epoch_loss,
                                       "tokens": epoch_tokens})
        bleu, chrf = bleu_chrf(translate_batch(model, english, chinese, dev_src), dev_ref)
        record = {"epoch": epoch, "step": step, "train_loss": round(epoch_loss / epoch_tokens, 4),
                  "dev_bleu": bleu, "dev_chrf": chrf,
                  "minutes": round((time.time() - started) / 60, 2)}
        history["epochs"].append(record)
        log.info("stage %d: %s", job.number, json.dumps(record))
        save_file(state_for_saving(model), str(folder / f"epoch{epoch:03d}.safetensors"))
        stale = folder / f"epoch{epoch - stage.average:03d}.safetensors"
        if stale.exists():
            stale.unlink()
        save_state(epoch, None)
    if bar is not None:
        bar.close()
    return finish_stage(model, english, chinese, history, job, dev_src, dev_ref)


def finish_stage(model, english, chinese, history: dict, job: StageJob, dev_src: list[str],
                 dev_ref: list[str]) -> dict:
    """Average the last epochs, keep whichever of last/averaged is better on dev, and write the
    stage's result to its ``out/`` (weights, config, tokenizers, history.json)."""
    last = history["epochs"][-1]
    candidates = sorted(job.folder.glob("epoch*.safetensors"))[-job.stage.average:]
    chosen = {"weights": "last epoch", "dev_bleu": last["dev_bleu"], "dev_chrf": last["dev_chrf"]}
    final_state = state_for_saving(model)
    if len(candidates) > 1:
        averaged = average_weights(candidates)
        load_saved(model, averaged)
        bleu, chrf = bleu_chrf(translate_batch(model, english, chinese, dev_src), dev_ref)
        log.info("stage %d: averaged %d epochs: dev BLEU %s, chrF %s", job.number, len(candidates),
                 bleu, chrf)
        if bleu >= last["dev_bleu"]:
            what = (f"average of the stage's start and its last {len(candidates) - 1} epoch(s)"
                    if candidates[0].name == "epoch000.safetensors"
                    else f"average of last {len(candidates)} epochs")
            chosen = {"weights": what,
                      "dev_bleu": bleu, "dev_chrf": chrf}
            final_state = averaged
    # the result is kept in float16 (the app computes in float32): the next stage starts from these
    # rounded weights whether it runs straight on or on another machine from the committed result
    final_state = {name: tensor.half().float() for name, tensor in final_state.items()}
    load_saved(model, final_state)
    history["final"] = {**chosen, "stored": "float16"}
    write_checkpoint(job.folder / "out", model, english, chinese, history)
    return history


def write_checkpoint(out: Path, model: Transformer, english: EnglishTokenizer,
                     chinese: ChineseTokenizer, history: dict) -> None:
    """The shipped form: weights.safetensors, config.json, both tokenizers and history.json."""
    out.mkdir(parents=True, exist_ok=True)
    weights = {name: tensor.half() for name, tensor in state_for_saving(model).items()}
    save_file(weights, str(out / "weights.safetensors"), metadata={"format": "pt"})
    model.config.save(out / "config.json")
    english.save(out / "tokenizer_en.json")
    chinese.save(out / "vocab_zh.json")
    (out / "history.json").write_text(json.dumps(history, ensure_ascii=False) + "\n", encoding="utf-8")


def _progress_bar(total: int, done: int, title: str, shown: bool):
    if not shown:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=done, desc=title, unit="step", mininterval=10, smoothing=0.05)
