"""Train the translator: ``python -m model.training.train --data ../shared/data``.

Teacher forcing (the decoder reads the reference shifted right by one and predicts every next
character at once), label-smoothed cross-entropy, Adam (β = 0.9, 0.98) with the paper's warmup
schedule, gradient clipping at 1.0. After every epoch the dev set is translated greedily and scored
(BLEU, chrF); a resumable state is written to ``--work``. At the end the last few epochs' weights are
averaged, and the better of "last" and "averaged" on dev is shipped to ``--out``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import random
import shutil
import signal
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from model.decoding import pad
from model.tokenizer import MAX_SOURCE_TOKENS, MAX_TARGET_TOKENS, ChineseTokenizer, EnglishTokenizer
from model.training.data import (
    CEDICT_FILE,
    concatenate_pairs,
    drop_final_stops,
    load_pairs,
    rare_word_pairs,
    read_acronyms,
    read_names,
    split_pairs,
    split_seed,
    vary_acronyms,
    vary_latin,
    vary_names,
    vary_numbers,
    vary_titles,
)
from model.training.evaluate import bleu_chrf, translate_batch
from model.training.schedule import learning_rate, run_total_steps
from model.transformer import BOS_ID, EOS_ID, PAD_ID, Transformer, TransformerConfig

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "checkpoints"


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


def warm_start(
    path: Path, train_pairs: list
) -> tuple[EnglishTokenizer, ChineseTokenizer, dict[str, torch.Tensor]]:
    """Tokenizers and weights of an earlier checkpoint, to continue training on more data.

    The English pieces stay as they were (digits are now split one per piece; single digits are
    in every BPE alphabet). Chinese characters the new data has and the vocabulary lacks are
    appended, so every old id keeps its meaning.
    """
    english = EnglishTokenizer.load(path / "tokenizer_en.json")
    english.split_digits()
    old = ChineseTokenizer.load(path / "vocab_zh.json")
    grown = ChineseTokenizer.train(p.chinese for p in train_pairs if p.source != "cedict")
    known = set(old.vocabulary)
    chinese = ChineseTokenizer(old.vocabulary + [c for c in grown.vocabulary if c not in known])
    state = load_file(str(path / "weights.safetensors"))
    return english, chinese, {name: tensor.float() for name, tensor in state.items()}


def add_pieces(english: EnglishTokenizer, initial: dict[str, torch.Tensor], pieces: list[str]) -> None:
    """Join each ``WORD[=GLOSS]`` into one English piece (:meth:`EnglishTokenizer.add_piece`) and
    give it an embedding row to start from: the mean of the rows of the pieces GLOSS is read as
    ("ai=artificial intelligence"), or of the two pieces WORD was cut into."""
    rows = initial["src_embedding.tokens.weight"]
    added = []
    for spec in pieces:
        word, _, gloss = spec.partition("=")
        ids = english.encode(gloss or word, add_eos=False)
        english.add_piece(word)
        added.append(rows[ids].mean(0))
    if added:
        initial["src_embedding.tokens.weight"] = torch.cat([rows, torch.stack(added)])


def freeze_all_but_rows(model: Transformer, rows: set[int]) -> None:
    """Only the English embedding rows in ``rows`` learn: every other parameter stops taking
    gradients, and the other rows' gradient is zeroed, so Adam (no weight decay) leaves them bit
    for bit as they were."""
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(name == "src_embedding.tokens.weight")
    mask = torch.zeros(model.config.src_vocab_size, 1)
    mask[sorted(rows)] = 1.0
    model.src_embedding.tokens.weight.register_hook(lambda grad: grad * mask)


def retrained_rows(english: EnglishTokenizer, words: list[str]) -> set[int]:
    """The ids of the existing pieces ``--retrain-piece`` or ``--focus`` names; each word must be
    one piece."""
    rows = set()
    for word in words:
        ids = english.encode(word, add_eos=False)
        if len(ids) != 1:
            raise SystemExit(f"{word!r} is {len(ids)} English pieces, not one "
                             f"(--add-piece makes a word one piece)")
        rows.add(ids[0])
    return rows


def grown_state(model: Transformer, initial: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The initial weights in the model's shapes: rows for new vocabulary entries keep the fresh
    model's random initialisation (their output bias starts at zero)."""
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    for name, tensor in initial.items():
        rows = tensor.shape[0]
        state[name][:rows] = tensor
    if model.config.tie_output:
        state["output.weight"] = state["tgt_embedding.tokens.weight"]
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


def stage_record(history: dict) -> dict:
    """One finished training run as the next run keeps it: its curves, settings, label and
    scores, without the stages it itself carried (those stay one flat list, oldest first)."""
    return {key: value for key, value in history.items() if key != "earlier_stages"}


def earlier_stages(path: Path | None) -> list[dict]:
    """Every run before this one, oldest first: the initial checkpoint's own earlier stages and
    that checkpoint's run (empty when training starts from random weights)."""
    if path is None:
        return []
    earlier = json.loads((path / "history.json").read_text(encoding="utf-8"))
    return [*earlier.get("earlier_stages", []), stage_record(earlier)]


def _init_record(path: Path | None) -> dict | None:
    """Where training started from, and how many CPU minutes that checkpoint had cost."""
    if path is None:
        return None
    earlier = json.loads((path / "history.json").read_text(encoding="utf-8"))
    epochs = earlier.get("epochs", [])
    minutes = (earlier.get("init") or {}).get("total_minutes", 0) + (
        epochs[-1]["minutes"] if epochs else 0)
    return {"from": str(path), "epochs": len(epochs), "total_minutes": round(minutes, 1),
            "train_pairs": earlier.get("train_pairs")}


class GracefulStop:
    """SIGTERM or SIGINT ends the current epoch after the running step; the epoch is then scored,
    saved and the checkpoint shipped as usual, so a run can be cut short without losing it."""

    def __init__(self) -> None:
        self.requested = False
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._request)

    def _request(self, signum, frame) -> None:
        self.requested = True


def _rare_words(value: str) -> str:
    """--rare-words' N or N:COPIES, whole numbers with COPIES ≥ 1 (argparse says so otherwise)."""
    max_pairs, _, copies = value.partition(":")
    if value and not max_pairs.isdigit() or not (copies or "1").isdigit() or int(copies or 1) < 1:
        raise argparse.ArgumentTypeError(f"want N or N:COPIES (whole numbers, COPIES >= 1), not {value!r}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="folder with the data files")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the checkpoint goes")
    parser.add_argument("--work", type=Path, default=Path("runs/train"), help="resumable state")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-tokens", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=1500)
    parser.add_argument("--lr-factor", type=float, default=1.0)
    parser.add_argument("--decay", choices=("noam", "linear"), default="noam",
                        help="after warmup: 1/sqrt(step) (the paper's), or linearly to zero at "
                        "the last step of --epochs (for a run of a known length)")
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--clip", type=float, default=1.0)
    parser.add_argument("--unlikelihood", type=float, default=0.0, metavar="ALPHA",
                        help="weight of the loss against repeating the last 4 tokens (0: off)")
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--en-vocab", type=int, default=8000)
    parser.add_argument("--average", type=int, default=5, help="average the last N epochs")
    parser.add_argument("--dictionary", action="store_true", help="add CC-CEDICT word pairs")
    parser.add_argument("--init", type=Path, default=None,
                        help="start from this checkpoint's weights and vocabularies (new Chinese "
                             "characters of the training data are added to its vocabulary)")
    parser.add_argument("--add-piece", action="append", default=[], metavar="WORD[=GLOSS]",
                        help="with --init: make WORD one English piece of its own (ai, which the "
                        "pieces read as the article a + ##i), its embedding starting as the mean of "
                        "GLOSS's pieces; repeatable")
    parser.add_argument("--retrain-piece", action="append", default=[], metavar="WORD",
                        help="with --new-pieces-only: the embedding row of this existing English "
                        "piece trains too (code, which the model reads as 号码 where it means "
                        "代码); repeatable")
    parser.add_argument("--new-pieces-only", type=int, default=0, metavar="COPIES",
                        help="with --add-piece or --retrain-piece: train only the embedding rows of "
                        "the new and named pieces, every other weight frozen, on the training pairs "
                        "whose English has one of them, each COPIES times an epoch (the rest of the "
                        "model stays exactly as it was)")
    parser.add_argument("--focus", action="append", default=[], metavar="WORD",
                        help="with --init: train (the whole model, or the encoder with "
                        "--encoder-only) on the training pairs whose English has this one-piece "
                        "word, each --focus-copies times an epoch, plus --replay other pairs drawn "
                        "at random; repeatable")
    parser.add_argument("--focus-copies", type=int, default=1, metavar="COPIES")
    parser.add_argument("--replay", type=int, default=0, metavar="N",
                        help="with --focus: N other training pairs an epoch, so the rest of what "
                        "the model knows keeps being rehearsed; with --init alone: an epoch is N "
                        "training pairs drawn at random (a short pass at a low rate)")
    parser.add_argument("--encoder-only", action="store_true",
                        help="with --init: only the English embedding and the encoder layers "
                        "train; the decoder, the Chinese embedding and the output stay bit for bit")
    parser.add_argument("--average-init", action="store_true",
                        help="ship the mean of the --init weights and this stage's final weights "
                             "(keeps what the earlier stage knew better; dev figures of both kept)")
    parser.add_argument("--narrow", action="store_true",
                        help="only Tatoeba and HSK (the first model's data), no wider domains")
    parser.add_argument("--upsample", default="", metavar="SOURCE=N,...",
                        help="repeat a source's training pairs N times, e.g. tatoeba=2,hsk=2")
    parser.add_argument("--rare-words", default="", metavar="N[:COPIES]", type=_rare_words,
                        help="COPIES (default 1) more copies of each everyday pair (Tatoeba, HSK) "
                        "whose English has a word found in at most N such pairs")
    parser.add_argument("--vary-numbers", action="store_true",
                        help="add a copy of each pair with numbers, its numbers changed")
    parser.add_argument("--number-copies", type=int, default=1, metavar="N",
                        help="--vary-numbers adds N copies of each such pair")
    parser.add_argument("--numbers-any-length", action="store_true",
                        help="--vary-numbers' new numbers have 1 to 5 digits (half the time the old length)")
    parser.add_argument("--vary-names", type=int, default=0, metavar="COPIES",
                        help="add COPIES copies of each pair with a person's name on both sides, "
                        "the name swapped for another from CC-CEDICT's name entries")
    parser.add_argument("--names-wide", action="store_true",
                        help="--vary-names also finds and swaps in CC-CEDICT's place names and other "
                        "proper nouns (~1,900 instead of ~560)")
    parser.add_argument("--names-limit", type=int, default=20000, metavar="N",
                        help="at most N name-swapped pairs")
    parser.add_argument("--vary-titles", type=int, default=0, metavar="COPIES",
                        help="add COPIES copies of each pair with a person's name on both sides, "
                        "that name swapped for another with a title (Dr. X / X博士)")
    parser.add_argument("--titles-limit", type=int, default=10000, metavar="N",
                        help="at most N titled pairs")
    parser.add_argument("--vary-acronyms", type=int, default=0, metavar="COPIES",
                        help="add COPIES copies of each pair with a person's name on both sides, "
                        "that name swapped for a short acronym kept on both sides (I love AI. / 我爱AI。)")
    parser.add_argument("--acronyms-limit", type=int, default=8000, metavar="N",
                        help="at most N acronym pairs")
    parser.add_argument("--acronym-terms", type=float, default=0.0, metavar="SHARE",
                        help="with --vary-acronyms, this share (0–1) of the acronyms are CC-CEDICT's "
                        "with the Chinese term they stand for (I love AI. / 我爱人工智能。)")
    parser.add_argument("--vary-latin", type=int, default=0, metavar="COPIES",
                        help="add COPIES copies of each pair whose Chinese keeps an English word "
                        "as it is (AI, COVID-19), the word swapped for a random one of its shape")
    parser.add_argument("--latin-short", type=float, default=0.0, metavar="SHARE",
                        help="with --vary-latin, swap this share (0–1) of the words of capitals "
                        "for a 2–3-letter acronym, half of them beginning with A or I (AI is read "
                        "as a + ##i, like the article)")
    parser.add_argument("--drop-stops", type=float, default=0.0, metavar="SHARE",
                        help="add a copy of this share (0–1) of the pairs that end in . ! or ? on "
                        "both sides, without those final marks (learners often type none)")
    parser.add_argument("--bible", action="store_true", help="add the KJV × CUV Bible verses")
    parser.add_argument("--old-data", action="store_true",
                        help="leave out the files added on 2026-12-01 (Tatoeba extra, UN)")
    parser.add_argument("--snapshots", default="0,100,300,1000,3000,10000,30000,60000",
                        metavar="STEP,...", help="steps after which a float16 copy of the weights "
                        "goes to WORK/snapshots/ (how the model looked during training)")
    parser.add_argument("--concat", type=int, default=0, metavar="N",
                        help="add N long examples, each a few training pairs joined end to end")
    parser.add_argument("--label", nargs=2, metavar=("EN", "ZH"),
                        help="what this run is, in English and Chinese (the /training page's stages)")
    parser.add_argument("--seed", type=int, default=13,
                        help="shuffling, dropout and the augmentations' draws")
    parser.add_argument("--split-seed", type=int, default=13,
                        help="which sentences are held out for dev and test (every shipped stage "
                        "used 13; a continued run must keep its --init checkpoint's)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    parser.add_argument("--test-size", type=int, default=1000, help="held-out test sentences")
    parser.add_argument("--dev-size", type=int, default=500, help="held-out dev sentences")
    parser.add_argument("--limit", type=int, default=0, help="use only N training pairs (smoke)")
    parser.add_argument("--save-every", type=int, default=500, metavar="STEPS",
                        help="also write the resumable state every STEPS steps inside an epoch "
                        "(a run killed mid-epoch resumes at its last save; 0: only after epochs)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if min(args.concat, args.unlikelihood, args.vary_names, args.vary_latin, args.vary_titles,
           args.vary_acronyms) < 0:
        parser.error("--concat, --unlikelihood, --vary-names, --vary-titles, --vary-acronyms and "
                     "--vary-latin take "
                     "a number ≥ 0 "
                     "(a negative weight rewards repeating)")
    if args.names_limit < 0 or args.titles_limit < 0 or args.acronyms_limit < 0:
        parser.error("--names-limit and --titles-limit take a number of pairs ≥ 0 (so does --acronyms-limit)")
    if not 0 <= args.drop_stops <= 1:
        parser.error("--drop-stops takes a share between 0 and 1")
    if not 0 <= args.acronym_terms <= 1:
        parser.error("--acronym-terms takes a share between 0 and 1")
    if args.acronym_terms and not args.vary_acronyms:
        parser.error("--acronym-terms needs --vary-acronyms (the swaps it draws its share of)")
    if not 0 <= args.latin_short <= 1:
        parser.error("--latin-short takes a share between 0 and 1")
    if args.add_piece and args.init is None:
        parser.error("--add-piece needs --init (a new tokenizer learns its own pieces)")
    if args.new_pieces_only < 0 or (args.new_pieces_only
                                    and not (args.add_piece or args.retrain_piece)):
        parser.error("--new-pieces-only takes a number of copies ≥ 0 and needs --add-piece "
                     "or --retrain-piece")
    if args.new_pieces_only and args.init is None:
        parser.error("--new-pieces-only needs --init (it trains rows of an existing model)")
    if args.focus and (args.init is None or args.new_pieces_only):
        parser.error("--focus needs --init, and not --new-pieces-only (which trains rows alone)")
    if args.focus_copies < 1 or args.replay < 0 or (args.focus_copies > 1 and not args.focus):
        parser.error("--focus-copies takes a number ≥ 1 (with --focus) and --replay one ≥ 0")
    if args.replay and (args.init is None or args.new_pieces_only):
        parser.error("--replay needs --init, and not --new-pieces-only (which trains rows alone)")
    if args.encoder_only and (args.init is None or args.new_pieces_only):
        parser.error("--encoder-only needs --init (and --new-pieces-only trains rows alone)")
    if args.retrain_piece and not args.new_pieces_only:
        parser.error("--retrain-piece needs --new-pieces-only (it names rows to train alone)")
    if args.new_pieces_only and args.average_init:
        parser.error("--new-pieces-only changes only new rows: --average-init would halve nothing")
    if args.average_init and args.init is None:
        parser.error("--average-init needs --init (the weights to average with)")
    if args.init is not None:
        held_out = init_split(args.init)
        ours = {"split_seed": args.split_seed, "test_size": args.test_size, "dev_size": args.dev_size}
        differ = [f"{name} {held_out[name]} (here {ours[name]})" for name in ours
                  if held_out.get(name) is not None and held_out[name] != ours[name]]
        if differ:
            parser.error(f"{args.init} was trained with {', '.join(differ)}: other held-out "
                         "splits would put its dev and test sentences into this run's training "
                         "pairs; pass the same values")
    return args


def init_split(checkpoint: Path) -> dict:
    """How the checkpoint's training drew its held-out splits (its history.json's settings).
    Empty when nothing says."""
    try:
        settings = json.loads((checkpoint / "history.json").read_text(encoding="utf-8"))["settings"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {"split_seed": split_seed(settings),
            "test_size": settings.get("test_size"), "dev_size": settings.get("dev_size")}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    keep_freed_memory()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)

    splits = split_pairs(
        load_pairs(args.data, use_dictionary=args.dictionary, wide=not args.narrow,
                   bible=args.bible, new=not args.old_data),
        seed=args.split_seed, n_test=args.test_size, n_dev=args.dev_size,
        n_test_hsk=min(300, args.test_size),
    )
    train_pairs = splits.train[: args.limit] if args.limit else splits.train
    for item in filter(None, args.upsample.split(",")):
        source, times = item.split("=")
        train_pairs = train_pairs + [p for p in train_pairs if p.source == source] * (int(times) - 1)
    if args.rare_words:
        max_pairs, _, copies = args.rare_words.partition(":")
        rare = rare_word_pairs(train_pairs, int(max_pairs), int(copies or 1))
        print(f"rare words: {len(rare)} more copies of pairs with a word in <= {max_pairs} pairs",
              flush=True)
        train_pairs = train_pairs + rare
    if args.vary_names:
        names = read_names(args.data / CEDICT_FILE, wide=args.names_wide)
        train_pairs = train_pairs + vary_names(train_pairs, names, args.vary_names, args.seed,
                                               limit=args.names_limit)
    if args.vary_titles:
        titled = vary_titles(train_pairs, read_names(args.data / CEDICT_FILE), args.vary_titles,
                             args.seed, limit=args.titles_limit)
        print(f"titles: {len(titled)} copies with a title before a name", flush=True)
        train_pairs = train_pairs + titled
    if args.vary_latin:
        latin = vary_latin(train_pairs, args.seed, args.vary_latin, args.latin_short)
        print(f"latin words: {len(latin)} copies with a kept English word swapped", flush=True)
        train_pairs = train_pairs + latin
    if args.vary_acronyms:
        acronyms = vary_acronyms(train_pairs, read_names(args.data / CEDICT_FILE), args.vary_acronyms,
                                 args.seed, limit=args.acronyms_limit,
                                 terms=read_acronyms(args.data / CEDICT_FILE) if args.acronym_terms else None,
                                 term_share=args.acronym_terms)
        print(f"acronyms: {len(acronyms)} copies with a name swapped for an acronym", flush=True)
        train_pairs = train_pairs + acronyms
    if args.drop_stops:
        stops = drop_final_stops(train_pairs, args.drop_stops, args.seed)
        print(f"final stops: {len(stops)} copies without the final . ! ? / 。！？", flush=True)
        train_pairs = train_pairs + stops
    if args.vary_numbers:
        train_pairs = train_pairs + vary_numbers(train_pairs, args.seed, args.number_copies,
                                                 args.numbers_any_length)
    if args.concat:
        train_pairs = train_pairs + concatenate_pairs(train_pairs, args.concat, args.seed)
    dev_pairs = splits.dev_mix()
    print(
        f"pairs: train {len(train_pairs)}, dev {len(dev_pairs)}, "
        + ", ".join(f"{name} {len(pairs)}" for name, pairs in splits.test_sets().items()),
        flush=True,
    )
    initial = None
    if (args.work / "state.pt").exists():  # resuming: keep the exact vocabularies
        english = EnglishTokenizer.load(args.work / "tokenizer_en.json")
        chinese = ChineseTokenizer.load(args.work / "vocab_zh.json")
    elif args.init:
        english, chinese, initial = warm_start(args.init, train_pairs)
        add_pieces(english, initial, args.add_piece)
    else:
        english = EnglishTokenizer.train((p.english for p in train_pairs), args.en_vocab)
        chinese = ChineseTokenizer.train(p.chinese for p in train_pairs if p.source != "cedict")
    examples = []
    for pair in train_pairs:
        src = english.encode(pair.english)
        tgt = chinese.encode(pair.chinese)
        if 1 < len(src) <= MAX_SOURCE_TOKENS and 0 < len(tgt) < MAX_TARGET_TOKENS:
            examples.append((src, tgt))
    trained_rows: set[int] = set()
    if args.new_pieces_only:
        first_new = EnglishTokenizer.load(args.init / "tokenizer_en.json").vocab_size
        trained_rows = (set(range(first_new, english.vocab_size))
                        | retrained_rows(english, args.retrain_piece))
        examples = [e for e in examples if trained_rows.intersection(e[0])] * args.new_pieces_only
        print(f"new pieces only: {len(examples)} examples with a trained piece", flush=True)
        if not examples:
            raise SystemExit("--new-pieces-only: no training pair has a new or retrained piece")
    if args.focus:
        focus = retrained_rows(english, args.focus)
        focused = [e for e in examples if focus.intersection(e[0])]
        others = [e for e in examples if not focus.intersection(e[0])]
        replay = random.Random(args.seed).sample(others, min(args.replay, len(others)))
        examples = focused * args.focus_copies + replay
        print(f"focus: {len(focused)} examples with {', '.join(args.focus)} × {args.focus_copies}"
              f" + {len(replay)} others", flush=True)
        if not focused:
            raise SystemExit("--focus: no training pair has " + ", ".join(args.focus))
    elif args.replay:
        examples = random.Random(args.seed).sample(examples, min(args.replay, len(examples)))
        print(f"replay: {len(examples)} training examples drawn at random", flush=True)
    if args.init:  # the architecture is the initial checkpoint's
        base = TransformerConfig.load(args.init / "config.json")
        config = replace(base, src_vocab_size=english.vocab_size,
                         tgt_vocab_size=chinese.vocab_size, dropout=args.dropout)
    else:
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
    if initial is not None:
        model.load_state_dict(grown_state(model, initial), strict=True)
    if args.new_pieces_only or args.encoder_only:
        grown = config.tgt_vocab_size - TransformerConfig.load(args.init / "config.json").tgt_vocab_size
        if grown:  # their rows would stay at their random start, frozen
            flag = "--new-pieces-only" if args.new_pieces_only else "--encoder-only"
            raise SystemExit(f"{flag}: the data has {grown} Chinese characters {args.init} lacks, "
                             f"and their rows would not train")
    if args.new_pieces_only:
        freeze_all_but_rows(model, trained_rows)
    if args.encoder_only:
        for name, parameter in model.named_parameters():
            parameter.requires_grad_(name.startswith(("src_embedding.", "encoder_layers.")))
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    if args.decay == "linear":  # batches per epoch vary by a few with the shuffle: one draw
        settings["lr_total_steps"] = args.epochs * len(
            make_batches(examples, args.batch_tokens, random.Random(args.seed)))
    total = run_total_steps(settings)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: learning_rate(step + 1, config.d_model, args.warmup, args.lr_factor, total),
    )
    history: dict = {
        "settings": settings,
        "config": asdict(config),
        "train_pairs": len(examples),
        "init": _init_record(args.init),
        # every run since random initialisation, so /training can draw the whole training
        "earlier_stages": earlier_stages(args.init),
        "label": {"en": args.label[0], "zh": args.label[1]} if args.label else None,
        "steps": [],
        "epochs": [],
    }
    start_epoch, step, earlier, within = 1, 0, 0.0, None
    state_path = args.work / "state.pt"
    if state_path.exists():
        state = torch.load(state_path, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        history, step, start_epoch = state["history"], state["step"], state["epoch"] + 1
        # the schedule planned when the run began, whatever --decay / --epochs say now: the rates
        # stay on the curve /training draws from history.json
        total = run_total_steps(history["settings"])
        rng.setstate(state["rng"])
        torch.set_rng_state(state["torch_rng"])
        within = state.get("within")  # saved part-way through epoch start_epoch
        earlier = state.get("minutes", history["epochs"][-1]["minutes"] if history["epochs"] else 0.0)
        where = (f"{within['batches']} batches into epoch {start_epoch}" if within
                 else f"after epoch {state['epoch']}")
        print(f"resumed {where} (step {step})", flush=True)
    english.save(args.work / "tokenizer_en.json")
    chinese.save(args.work / "vocab_zh.json")

    snapshot_steps = {int(s) for s in filter(None, args.snapshots.split(","))}
    history.setdefault("snapshots", [])
    if step == 0 and 0 in snapshot_steps:
        save_snapshot(model, args.work, history, step, 0, 0.0)
    stop = GracefulStop()
    dev_src = [p.english for p in dev_pairs]
    dev_ref = [p.chinese for p in dev_pairs]
    # minutes already spent before a resume, so the curve's time axis stays cumulative
    started = time.time() - earlier * 60

    def save_state(epoch_done: int, part: dict | None) -> None:
        torch.save(
            {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "schedule": schedule.state_dict(), "history": history, "step": step,
             "epoch": epoch_done, "rng": rng.getstate(), "torch_rng": torch.get_rng_state(),
             "minutes": round((time.time() - started) / 60, 2), "within": part},
            state_path.with_suffix(".tmp"),
        )
        state_path.with_suffix(".tmp").replace(state_path)

    for epoch in range(start_epoch, args.epochs + 1):
        model.train()
        if within:  # the same shuffle as before the stop, without the batches already trained on
            rng.setstate(within["rng"])
        epoch_rng = rng.getstate()
        batches = make_batches(examples, args.batch_tokens, rng)
        done = within["batches"] if within else 0
        epoch_loss, epoch_tokens = (within["loss"], within["tokens"]) if within else (0.0, 0)
        within = None
        progress = _progress(batches[done:], epoch, args)
        for batch in progress:
            if stop.requested:
                break
            src, tgt_in, labels = collate([examples[i] for i in batch])
            logits = model(src, tgt_in)
            loss = smoothed_cross_entropy(logits, labels, args.label_smoothing)
            objective = loss
            if args.unlikelihood:
                objective = loss + args.unlikelihood * repetition_unlikelihood(logits, tgt_in, labels)
            optimizer.zero_grad(set_to_none=True)
            objective.backward()
            grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip))
            lr = optimizer.param_groups[0]["lr"]
            optimizer.step()
            schedule.step()
            step += 1
            tokens = int((labels != PAD_ID).sum())
            epoch_loss += loss.item() * tokens
            epoch_tokens += tokens
            if step in snapshot_steps:
                save_snapshot(model, args.work, history, step, epoch, (time.time() - started) / 60)
            if step % 25 == 0 or step == 1:
                history["steps"].append(
                    {"step": step, "loss": round(loss.item(), 4), "lr": lr,
                     "grad_norm": round(grad_norm, 4), "epoch": epoch}
                )
            if hasattr(progress, "set_postfix"):
                progress.set_postfix(loss=f"{float(loss):.3f}", lr=f"{lr:.2e}")
            done += 1
            if args.save_every and step % args.save_every == 0 and done < len(batches):
                save_state(epoch - 1, {"rng": epoch_rng, "batches": done, "loss": epoch_loss,
                                       "tokens": epoch_tokens})
        hypotheses = translate_batch(model, english, chinese, dev_src)
        bleu, chrf = bleu_chrf(hypotheses, dev_ref)
        record = {
            "epoch": epoch, "step": step, "train_loss": round(epoch_loss / epoch_tokens, 4),
            "dev_bleu": bleu, "dev_chrf": chrf, "minutes": round((time.time() - started) / 60, 2),
        }
        if stop.requested:
            record["stopped_early"] = True  # this epoch saw only part of the data
        history["epochs"].append(record)
        print(json.dumps(record), flush=True)
        save_file(state_for_saving(model), str(args.work / f"epoch{epoch:03d}.safetensors"))
        stale = args.work / f"epoch{epoch - args.average:03d}.safetensors"
        if stale.exists():
            stale.unlink()
        save_state(epoch, None)
        if stop.requested:
            print(f"stopped by signal during epoch {epoch}: finishing with what was learned", flush=True)
            break

    finish(model, english, chinese, history, args, dev_src, dev_ref)


def finish(model, english, chinese, history, args, dev_src, dev_ref) -> None:
    """Average the last epochs, keep whichever of last/averaged is better on dev, and ship it."""
    last = history["epochs"][-1]
    candidates = sorted(args.work.glob("epoch*.safetensors"))[-args.average :]
    chosen = {"weights": "last epoch", "dev_bleu": last["dev_bleu"], "dev_chrf": last["dev_chrf"]}
    final_state = state_for_saving(model)
    if len(candidates) > 1:
        averaged = average_weights(candidates)
        _load_saved(model, averaged)
        bleu, chrf = bleu_chrf(translate_batch(model, english, chinese, dev_src), dev_ref)
        print(f"averaged {len(candidates)} epochs: dev BLEU {bleu}, chrF {chrf}", flush=True)
        if bleu >= last["dev_bleu"]:
            chosen = {"weights": f"average of last {len(candidates)} epochs",
                      "dev_bleu": bleu, "dev_chrf": chrf}
            final_state = averaged
    if args.average_init:
        final_state, chosen = _mean_with_init(model, english, chinese, final_state, chosen, args,
                                              dev_src, dev_ref)
        history["settings"]["average_init"] = True
    history["final"] = chosen
    out = args.out
    save_file(final_state, str(out / "weights.safetensors"), metadata={"format": "pt"})
    model.config.save(out / "config.json")
    english.save(out / "tokenizer_en.json")
    chinese.save(out / "vocab_zh.json")
    (out / "history.json").write_text(json.dumps(history) + "\n", encoding="utf-8")
    shutil.copy(out / "history.json", args.work / "history.json")
    print(f"saved {out} ({chosen['weights']}, dev BLEU {chosen['dev_bleu']})", flush=True)


def _mean_with_init(model, english, chinese, final_state, chosen, args, dev_src, dev_ref):
    """The mean of the --init checkpoint's weights and ``final_state``, scored on dev.

    Rows the warm start added (new Chinese characters, English pieces from ``--add-piece``) have
    no initial value: they keep this stage's trained rows.
    """
    _load_saved(model, final_state)
    saved = load_file(str(args.init / "weights.safetensors"))
    start = grown_state(model, {name: tensor.float() for name, tensor in saved.items()})
    mixed = {name: ((tensor.double() + start[name].double()) / 2).float()
             for name, tensor in final_state.items()}
    _load_saved(model, mixed)
    bleu, chrf = bleu_chrf(translate_batch(model, english, chinese, dev_src), dev_ref)
    print(f"mean with {args.init}: dev BLEU {bleu}, chrF {chrf}", flush=True)
    return mixed, {"weights": f"mean of the --init weights and the {chosen['weights']}",
                   "dev_bleu": bleu, "dev_chrf": chrf, "without_init": chosen}


def _load_saved(model: Transformer, state: dict[str, torch.Tensor]) -> None:
    """Load weights stored as ``state_for_saving`` stores them (tied output once)."""
    loadable = dict(state)
    if model.config.tie_output:
        loadable["output.weight"] = state["tgt_embedding.tokens.weight"]
    model.load_state_dict(loadable, strict=True)


def _progress(batches, epoch: int, args: argparse.Namespace):
    if args.no_progress:
        return batches
    from tqdm import tqdm

    return tqdm(batches, desc=f"epoch {epoch}/{args.epochs}", mininterval=5, leave=False)


if __name__ == "__main__":
    main()
