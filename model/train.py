"""Train the translator: ``python -m model.train --data ../shared/data``.

Teacher forcing (the decoder reads the reference shifted right by one and predicts every next
character at once), label-smoothed cross-entropy, Adam (β = 0.9, 0.98) with the paper's warmup
schedule, gradient clipping at 1.0. After every epoch the dev set is translated greedily and scored
(BLEU, chrF); a resumable state is written to ``--work``. At the end the last few epochs' weights are
averaged, and the better of "last" and "averaged" on dev is shipped to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from model.data import load_pairs, split_pairs
from model.decoding import greedy_batch
from model.tokenizer import ChineseTokenizer, EnglishTokenizer
from model.transformer import BOS_ID, EOS_ID, PAD_ID, Transformer, TransformerConfig

DEFAULT_OUT = Path(__file__).parent / "checkpoints"
MAX_SRC_TOKENS = 64
MAX_TGT_TOKENS = 80


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """lr = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5): rise, then decay as 1/√step."""
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


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


def pad(sequences: list[list[int]]) -> torch.Tensor:
    width = max(len(s) for s in sequences)
    return torch.tensor([s + [PAD_ID] * (width - len(s)) for s in sequences], dtype=torch.long)


def collate(examples: list[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, ...]:
    """Source ids, decoder input (<bos> + reference) and labels (reference + <eos>)."""
    src = pad([s for s, _ in examples])
    tgt_in = pad([[BOS_ID] + t for _, t in examples])
    labels = pad([t + [EOS_ID] for _, t in examples])
    return src, tgt_in, labels


def translate_batch(
    model: Transformer, english: EnglishTokenizer, chinese: ChineseTokenizer, sentences: list[str],
    batch_size: int = 64,
) -> list[str]:
    outputs = []
    encoded = [english.encode(s)[:MAX_SRC_TOKENS] for s in sentences]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    results: dict[int, str] = {}
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        ids = greedy_batch(model, pad([encoded[i] for i in chunk]), max_len=MAX_TGT_TOKENS)
        for index, tokens in zip(chunk, ids, strict=True):
            results[index] = chinese.decode(tokens)
    outputs = [results[i] for i in range(len(sentences))]
    return outputs


def bleu_chrf(hypotheses: list[str], references: list[str]) -> tuple[float, float]:
    import sacrebleu

    bleu = sacrebleu.corpus_bleu(hypotheses, [references], tokenize="zh").score
    chrf = sacrebleu.corpus_chrf(hypotheses, [references]).score
    return round(bleu, 2), round(chrf, 2)


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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="folder with the data files")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the checkpoint goes")
    parser.add_argument("--work", type=Path, default=Path("runs/train"), help="resumable state")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-tokens", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=1500)
    parser.add_argument("--lr-factor", type=float, default=1.0)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--clip", type=float, default=1.0)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--en-vocab", type=int, default=8000)
    parser.add_argument("--average", type=int, default=5, help="average the last N epochs")
    parser.add_argument("--dictionary", action="store_true", help="add CC-CEDICT word pairs")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    parser.add_argument("--test-size", type=int, default=1000, help="held-out test sentences")
    parser.add_argument("--dev-size", type=int, default=500, help="held-out dev sentences")
    parser.add_argument("--limit", type=int, default=0, help="use only N training pairs (smoke)")
    parser.add_argument("--no-progress", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)

    splits = split_pairs(
        load_pairs(args.data, use_dictionary=args.dictionary), seed=args.seed,
        n_test=args.test_size, n_dev=args.dev_size, n_test_hsk=min(300, args.test_size),
    )
    train_pairs = splits.train[: args.limit] if args.limit else splits.train
    print(
        f"pairs: train {len(train_pairs)}, dev {len(splits.dev)}, test {len(splits.test)}, "
        f"test-hsk {len(splits.test_hsk)}",
        flush=True,
    )
    if (args.work / "state.pt").exists():  # resuming: keep the exact vocabularies
        english = EnglishTokenizer.load(args.work / "tokenizer_en.json")
        chinese = ChineseTokenizer.load(args.work / "vocab_zh.json")
    else:
        english = EnglishTokenizer.train((p.english for p in train_pairs), args.en_vocab)
        chinese = ChineseTokenizer.train(p.chinese for p in train_pairs if p.source != "cedict")
    examples = []
    for pair in train_pairs:
        src = english.encode(pair.english)
        tgt = chinese.encode(pair.chinese)
        if 1 < len(src) <= MAX_SRC_TOKENS and 0 < len(tgt) < MAX_TGT_TOKENS:
            examples.append((src, tgt))
    config = TransformerConfig(
        src_vocab_size=english.vocab_size,
        tgt_vocab_size=chinese.vocab_size,
        d_model=args.d_model,
        n_heads=args.heads,
        n_encoder_layers=args.layers,
        n_decoder_layers=args.layers,
        d_ff=args.d_ff,
        dropout=args.dropout,
    )
    model = Transformer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: noam_lr(step + 1, config.d_model, args.warmup, args.lr_factor)
    )
    history: dict = {
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "config": asdict(config),
        "train_pairs": len(examples),
        "steps": [],
        "epochs": [],
    }
    start_epoch, step = 1, 0
    state_path = args.work / "state.pt"
    if state_path.exists():
        state = torch.load(state_path, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        history, step, start_epoch = state["history"], state["step"], state["epoch"] + 1
        rng.setstate(state["rng"])
        torch.set_rng_state(state["torch_rng"])
        print(f"resumed after epoch {state['epoch']} (step {step})", flush=True)
    english.save(args.work / "tokenizer_en.json")
    chinese.save(args.work / "vocab_zh.json")

    dev_src = [p.english for p in splits.dev]
    dev_ref = [p.chinese for p in splits.dev]
    # minutes already spent before a resume, so the curve's time axis stays cumulative
    earlier = history["epochs"][-1]["minutes"] if history["epochs"] else 0.0
    started = time.time() - earlier * 60
    for epoch in range(start_epoch, args.epochs + 1):
        model.train()
        batches = make_batches(examples, args.batch_tokens, rng)
        progress = _progress(batches, epoch, args)
        epoch_loss, epoch_tokens = 0.0, 0
        for batch in progress:
            src, tgt_in, labels = collate([examples[i] for i in batch])
            logits = model(src, tgt_in)
            loss = F.cross_entropy(
                logits.view(-1, logits.size(-1)), labels.view(-1),
                ignore_index=PAD_ID, label_smoothing=args.label_smoothing,
            )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip))
            lr = optimizer.param_groups[0]["lr"]
            optimizer.step()
            schedule.step()
            step += 1
            tokens = int((labels != PAD_ID).sum())
            epoch_loss += loss.item() * tokens
            epoch_tokens += tokens
            if step % 25 == 0 or step == 1:
                history["steps"].append(
                    {"step": step, "loss": round(loss.item(), 4), "lr": lr,
                     "grad_norm": round(grad_norm, 4), "epoch": epoch}
                )
            if hasattr(progress, "set_postfix"):
                progress.set_postfix(loss=f"{float(loss):.3f}", lr=f"{lr:.2e}")
        hypotheses = translate_batch(model, english, chinese, dev_src)
        bleu, chrf = bleu_chrf(hypotheses, dev_ref)
        record = {
            "epoch": epoch, "step": step, "train_loss": round(epoch_loss / epoch_tokens, 4),
            "dev_bleu": bleu, "dev_chrf": chrf, "minutes": round((time.time() - started) / 60, 2),
        }
        history["epochs"].append(record)
        print(json.dumps(record), flush=True)
        save_file(state_for_saving(model), str(args.work / f"epoch{epoch:03d}.safetensors"))
        stale = args.work / f"epoch{epoch - args.average:03d}.safetensors"
        if stale.exists():
            stale.unlink()
        torch.save(
            {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "schedule": schedule.state_dict(), "history": history, "step": step, "epoch": epoch,
             "rng": rng.getstate(), "torch_rng": torch.get_rng_state()},
            state_path.with_suffix(".tmp"),
        )
        state_path.with_suffix(".tmp").replace(state_path)

    finish(model, english, chinese, history, args, dev_src, dev_ref)


def finish(model, english, chinese, history, args, dev_src, dev_ref) -> None:
    """Average the last epochs, keep whichever of last/averaged is better on dev, and ship it."""
    last = history["epochs"][-1]
    candidates = sorted(args.work.glob("epoch*.safetensors"))[-args.average :]
    chosen = {"weights": "last epoch", "dev_bleu": last["dev_bleu"], "dev_chrf": last["dev_chrf"]}
    final_state = state_for_saving(model)
    if len(candidates) > 1:
        averaged = average_weights(candidates)
        model.load_state_dict(averaged, strict=False)
        bleu, chrf = bleu_chrf(translate_batch(model, english, chinese, dev_src), dev_ref)
        print(f"averaged {len(candidates)} epochs: dev BLEU {bleu}, chrF {chrf}", flush=True)
        if bleu >= last["dev_bleu"]:
            chosen = {"weights": f"average of last {len(candidates)} epochs",
                      "dev_bleu": bleu, "dev_chrf": chrf}
            final_state = averaged
    history["final"] = chosen
    out = args.out
    save_file(final_state, str(out / "weights.safetensors"), metadata={"format": "pt"})
    model.config.save(out / "config.json")
    english.save(out / "tokenizer_en.json")
    chinese.save(out / "vocab_zh.json")
    (out / "history.json").write_text(json.dumps(history) + "\n", encoding="utf-8")
    shutil.copy(out / "history.json", args.work / "history.json")
    print(f"saved {out} ({chosen['weights']}, dev BLEU {chosen['dev_bleu']})", flush=True)


def _progress(batches, epoch: int, args: argparse.Namespace):
    if args.no_progress:
        return batches
    from tqdm import tqdm

    return tqdm(batches, desc=f"epoch {epoch}/{args.epochs}", mininterval=5, leave=False)


if __name__ == "__main__":
    main()
