"""Old decoder against new on the same sentences: do the translations and every shown digit agree?

    git worktree add --detach /tmp/old-main <commit>
    python -m bench.decoder_parity --before /tmp/old-main [--sentences 240] [--keep FILE]

Runs the earlier tree's model package in a subprocess (its own ``model/``, imported from
``--before``) and this tree's in this process, on the same weights (this tree's checkpoint) and
the same ~240 English sentences of 1 to ~45 words, and counts, per sentence:

- greedy: identical tokens, identical per-step log-probabilities (floats as they are);
- beam 4: identical chosen hypothesis, identical tree (tokens, parents, ended, selected), node
  scores identical as floats and rounded to 4 decimals (as the pages show them), the largest
  score difference;
- sampling (temperature 1, top-p 0.9, one seed per sentence): identical tokens;
- parts switched off (a cross-attention head, a decoder FFN): identical greedy tokens;
- the whole trace a page reads (``Trace.to_dict()``: every rounded number of every view, timing
  left out), greedy and beam 4, and /decode's beam lineage (its ranked hypotheses): identical.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
CHECKPOINT = HERE.parent.parent / "model" / "checkpoints"

HANDWRITTEN = [
    "Hello.", "Thank you.", "Good morning!", "Where is the station?", "I am tired.",
    "It is raining again.", "She likes green tea.", "We will leave at six.",
    "Do you speak English?", "My brother works in a hospital.", "The cat sits on the mat.",
    "How much does this book cost?", "Please close the window.", "I lost my keys yesterday.",
    "The children are playing in the park.", "He has lived here for ten years.",
    "Can you help me carry these boxes?", "Our teacher gave us a lot of homework today.",
    "The train to Beijing leaves in twenty minutes.", "I don't know what to say.",
    "Why did you come so late?", "This restaurant serves the best noodles in town.",
    "They bought a new car last month.", "Would you like some coffee or tea?",
    "The weather is very cold in winter.", "My mother cooks dinner every evening.",
    "I want to learn Chinese because I love the culture.", "Turn left at the second light.",
    "The meeting has been moved to Friday afternoon.", "Don't forget to call your grandmother.",
    "He reads a newspaper while he eats breakfast.", "Is there a bank near here?",
    "We should protect the environment for our children.", "The doctor told me to rest.",
    "She sings beautifully.", "Everyone was surprised by the news.",
    "I have never seen such a big dog.", "The shop opens at nine and closes at eight.",
    "Please write your name and address on this form.", "What time is it now?",
    "My phone battery is almost empty.", "The river flows through the middle of the city.",
    "They have been friends since primary school.", "I will visit my parents next weekend.",
    "Could you speak a little more slowly, please?", "The price of vegetables went up again.",
    "Tom is taller than his father.", "We watched a movie and then went home.",
    "If it rains tomorrow, we will stay at home.", "Reading books makes people wiser.",
    "The students listened carefully to the lecture.", "Happy birthday!",
    "I'm sorry, I made a mistake.", "There are three apples on the table.",
    "The airport is forty kilometres from the hotel.", "He forgot his umbrella on the bus.",
    "Learning a language takes time and patience.", "She opened the door and smiled.",
    "Who wrote this letter?", "Spring is my favourite season.",
    "The company hired fifty new workers this year.", "Let's meet in front of the library.",
    "My computer stopped working this morning.", "You need to drink more water.",
    "The old man walks his dog every day.", "We ran out of milk.",
    "I can't find my glasses anywhere.", "The museum is closed on Mondays.",
    "Whenever I hear this song, I think of my hometown and the friends I left behind.",
    "After the long meeting, the manager asked everyone to send their reports by Thursday.",
    "Although the test was difficult, most of the students passed it with good marks.",
    "The little girl who lives next door plays the piano every evening after dinner.",
]
OPENERS = ["Yesterday, ", "I think ", "My friend said that ", "Maybe ", "In the morning, "]
CLOSERS = [" Is that right?", " I was very happy.", " Then we went home.", " Nobody knew why."]


def texts(count: int) -> list[str]:
    """``count`` distinct sentences: the handwritten ones, then variations of each in turn (an
    opener in front, a second sentence after, two joined, three joined), of 1 to ~45 words."""
    out = list(HANDWRITTEN)
    n = len(HANDWRITTEN)
    for index, base in enumerate(HANDWRITTEN):
        other, third = HANDWRITTEN[(index * 7 + 3) % n], HANDWRITTEN[n - 1 - index % 4]
        out += [OPENERS[index % len(OPENERS)] + base[0].lower() + base[1:],
                base + CLOSERS[index % len(CLOSERS)], f"{base} {other}", f"{base} {other} {third}"]
    out = list(dict.fromkeys(out))
    if count > len(out):
        raise ValueError(f"at most {len(out)} sentences")
    return out[:count]


def _digest(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _trace_digest(trace) -> str:
    data = trace.to_dict()
    data.pop("model_ms", None)
    return _digest(data)


def records(count: int) -> list[dict]:
    """Everything compared, for every sentence, from whichever ``model`` package is importable."""
    import torch

    from app.pages.decode import beam_lineage
    from model.decoding import DecodingOptions, generate
    from model.transformer import Ablation
    from model.translator import Translator

    torch.set_num_threads(1)
    translator = Translator.load(CHECKPOINT)
    model = translator.model
    greedy = DecodingOptions()
    beam = DecodingOptions(strategy="beam", beam_size=4)
    head_off = Ablation(heads=frozenset({("decoder", "cross_attention", 0, 1)}))
    ffn_off = Ablation(sublayers=frozenset({("decoder", "ffn", 1)}))
    out = []
    for index, text in enumerate(texts(count)):
        src = torch.tensor([translator.source_ids(text)])
        g = generate(model, src, greedy)
        b = generate(model, src, beam)
        s = generate(model, src, DecodingOptions(strategy="sample", top_p=0.9, seed=index))
        beam_trace = translator.trace(text, beam)
        out.append({
            "greedy": g.tokens, "greedy_scores": g.scores,
            "beam": b.tokens, "beam_finished": b.finished,
            "beam_tree": [(n.step, n.token_id, n.parent, n.finished, n.selected) for n in b.beam_nodes],
            "beam_scores": [n.score for n in b.beam_nodes],
            "sample": s.tokens,
            "head_off": generate(model, src, greedy, ablation=head_off).tokens,
            "ffn_off": generate(model, src, greedy, ablation=ffn_off).tokens,
            "greedy_trace": _trace_digest(translator.trace(text, greedy)),
            "beam_trace": _trace_digest(beam_trace),
            "beam_lineage": _digest(beam_lineage(beam_trace)),
        })
    return out


def compare(old: list[dict], new: list[dict]) -> dict:
    counts = dict.fromkeys(
        ("greedy tokens", "greedy log-probs (exact)", "beam hypothesis", "beam tree",
         "beam scores (exact)", "beam scores (4 decimals)", "sample tokens", "head-off tokens",
         "ffn-off tokens", "greedy trace", "beam trace", "/decode beam lineage"), 0)
    largest = 0.0
    nodes = flips4 = flips2 = 0
    for a, b in zip(old, new, strict=True):
        counts["greedy tokens"] += a["greedy"] == b["greedy"]
        counts["greedy log-probs (exact)"] += a["greedy_scores"] == b["greedy_scores"]
        counts["beam hypothesis"] += a["beam"] == b["beam"] and a["beam_finished"] == b["beam_finished"]
        same_tree = [tuple(n) for n in a["beam_tree"]] == [tuple(n) for n in b["beam_tree"]]
        counts["beam tree"] += same_tree
        counts["beam scores (exact)"] += a["beam_scores"] == b["beam_scores"]
        counts["beam scores (4 decimals)"] += ([round(x, 4) for x in a["beam_scores"]]
                                               == [round(x, 4) for x in b["beam_scores"]])
        if same_tree:
            pairs = list(zip(a["beam_scores"], b["beam_scores"], strict=True))
            nodes += len(pairs)
            flips4 += sum(round(x, 4) != round(y, 4) for x, y in pairs)
            flips2 += sum(f"{x:.2f}" != f"{y:.2f}" for x, y in pairs)
            largest = max([largest, *(abs(x - y) for x, y in zip(a["beam_scores"], b["beam_scores"],
                                                                  strict=True))])
        counts["sample tokens"] += a["sample"] == b["sample"]
        counts["head-off tokens"] += a["head_off"] == b["head_off"]
        counts["ffn-off tokens"] += a["ffn_off"] == b["ffn_off"]
        counts["greedy trace"] += a["greedy_trace"] == b["greedy_trace"]
        counts["beam trace"] += a["beam_trace"] == b["beam_trace"]
        counts["/decode beam lineage"] += a["beam_lineage"] == b["beam_lineage"]
    return {"counts": counts, "largest beam score difference": largest,
            "nodes": nodes, "flips4": flips4, "flips2": flips2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="a checkout of the earlier tree")
    parser.add_argument("--sentences", type=int, default=240)
    parser.add_argument("--keep", type=Path, help="save the earlier tree's records here, or read "
                        "them from here when the file exists (the earlier tree never changes)")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # write records here, exit
    args = parser.parse_args()
    if args.worker:
        args.worker.write_text(json.dumps(records(args.sentences)))
        return
    if args.before is None:
        parser.error("--before TREE is needed (git worktree add --detach /tmp/old-main <commit>)")
    if args.keep is not None and args.keep.is_file():  # the earlier tree's records, kept
        old = json.loads(args.keep.read_text())
        if len(old) != args.sentences:
            parser.error(f"{args.keep} holds {len(old)} sentences' records, not {args.sentences}")
    else:
        with tempfile.TemporaryDirectory() as folder:
            dump = Path(folder) / "old.json"
            env = {**os.environ, "PYTHONPATH": str(args.before.resolve())}
            subprocess.run([sys.executable, str(HERE), "--worker", str(dump), "--sentences",
                            str(args.sentences)], check=True, cwd=args.before, env=env)
            old = json.loads(dump.read_text())
        if args.keep is not None:
            args.keep.write_text(json.dumps(old))
    new = json.loads(json.dumps(records(args.sentences)))  # tuples as lists, as the old ones
    result = compare(old, new)
    total = len(new)
    words = [len(text.split()) for text in texts(args.sentences)]
    print(f"{total} sentences of {min(words)}–{max(words)} words; before: {args.before}")
    for name, count in result["counts"].items():
        print(f"  {name:28s} {count:4d} / {total}")
    print(f"  largest beam node score difference: {result['largest beam score difference']:.3g}")
    print(f"  beam nodes whose shown score changes: {result['flips4']} / {result['nodes']} at 4 "
          f"decimals (trace, hypothesis table), {result['flips2']} at 2 (the tree's labels)")


if __name__ == "__main__":
    main()
