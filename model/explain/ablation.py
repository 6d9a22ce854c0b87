"""Switch parts of the model off and measure what changes.

Attention weights say where a head looked, not whether the translation needed it. This module asks
the second question the way researchers do — remove the part, measure — with the model's own
computation: ``model.parts_off.Ablation``, an argument of ``encode`` / ``decode``.

- :func:`retranslate`: translate again with some parts off, and the original translation's
  probability, character by character, with and without them (teacher-forced, one batched pass).
- :func:`head_importance`: for a translation held fixed, how its log-probability changes when each
  head alone is removed — every head of every kind and layer, one batch row per head.
- :func:`word_order`: with the encoder's positional encoding off, the encoder's output for the
  sentence's words shuffled is the same vectors, shuffled (self-attention and the FFN treat the
  positions as a set); measured, with what happens to the translation.

Parts are named as the pages' URLs name them, layers and heads counted from 1 as the pages count:
``enc.2.3`` (encoder self-attention, layer 2, head 3), ``dec.1.4`` (decoder masked
self-attention), ``cross.1.2`` (cross-attention); ``enc.2``, ``dec.1``, ``cross.3`` a whole attention
sublayer; ``encffn.2``, ``decffn.1`` a feed-forward sublayer; ``pos.enc``, ``pos.dec`` a side's
positional encoding.

Zero or mean: a head or sublayer that is off writes 0 (``"zero"``), or the average of what it wrote
over this sentence's positions with nothing off (``"mean"``, read from the trace's recorded pass, so
no extra pass). Zeroing removes what the part says and also its usual size and direction, which can
push the vectors where later layers never saw them; the mean keeps that constant part and removes only
what changes from token to token. A part can look vital under one and harmless under the other.
Positional encoding off is always removal (the mode does not apply).
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from model.decoding import DecodingOptions, check_stop, generate, mask_special, pad
from model.parts_off import Ablation, Head
from model.transformer import BOS_ID, EOS_ID, PAD_ID, TransformerConfig
from model.translator import InputError

if TYPE_CHECKING:
    from model.explain.record import RecordedPass
    from model.explain.trace import Trace
    from model.translator import Translator

MAX_PARTS = 32  # parts off at once; a whole sublayer counts as one
TOP_HEADS = 3  # the heads whose removal changes the translation's log-probability most are marked
LOGIT_BUDGET = 1 << 24  # logits (floats) one scoring pass may hold: 64 MB; more rows → more passes
# a name's prefix → (side, sublayer); heads and whole sublayers
KINDS = {
    "enc": ("encoder", "self_attention"),
    "dec": ("decoder", "self_attention"),
    "cross": ("decoder", "cross_attention"),
    "encffn": ("encoder", "ffn"),
    "decffn": ("decoder", "ffn"),
}
HEAD_KINDS = ("enc", "dec", "cross")
ATTENTION_PAGE_KIND = {"enc": "encoder", "dec": "decoder_self", "cross": "cross"}  # /attention's names
POSITIONS = {"pos.enc": "encoder", "pos.dec": "decoder"}
PART_PATTERN = r"^((enc|dec|cross)\.[0-9]{1,2}(\.[0-9]{1,2})?|(encffn|decffn)\.[0-9]{1,2}|pos\.(enc|dec))$"
_PART = re.compile(PART_PATTERN)


def part_pattern(config: TransformerConfig) -> str:
    """PART_PATTERN with this model's own layers and heads: exactly the names ``parse_part``
    accepts (/openapi.json states it once the model is loaded)."""
    def numbers(count: int) -> str:
        return "(" + "|".join(str(n) for n in range(1, count + 1)) + ")"

    layers = {"encoder": numbers(config.n_encoder_layers), "decoder": numbers(config.n_decoder_layers)}
    heads = numbers(config.n_heads)
    kinds = [f"{kind}\\.{layers[KINDS[kind][0]]}" + (f"(\\.{heads})?" if kind in HEAD_KINDS else "")
             for kind in KINDS]
    return "^(" + "|".join([*kinds, "pos\\.(enc|dec)"]) + ")$"


@dataclass(frozen=True)
class Part:
    """One part of the model that can be switched off."""

    name: str  # as the URL spells it: "cross.1.2"
    kind: str  # enc, dec, cross, encffn, decffn or pos
    side: str  # encoder or decoder
    sublayer: str | None = None  # the layer's module name; None for the positional encoding
    layer: int | None = None  # 0-based
    head: int | None = None  # 0-based; None for a whole sublayer

    @property
    def key(self) -> Head:
        return (self.side, self.sublayer, self.layer, self.head)


def parse_part(name: str, config: TransformerConfig) -> Part:
    """``"cross.1.2"`` → the Part, or :class:`InputError` naming the rule it breaks."""
    name = name.strip()
    if not _PART.match(name):
        raise InputError("off", f"{name!r} is not a part: write enc.L.H, dec.L.H, cross.L.H (a head), "
                                "enc.L, dec.L, cross.L, encffn.L, decffn.L (a sublayer), pos.enc or pos.dec")
    if name in POSITIONS:
        return Part(name, "pos", POSITIONS[name])
    kind, *numbers = name.split(".")
    side, sublayer = KINDS[kind]
    layers = config.n_encoder_layers if side == "encoder" else config.n_decoder_layers
    layer = int(numbers[0])
    if not 1 <= layer <= layers:
        raise InputError("off", f"{name}: the {side} has layers 1 to {layers}")
    head = int(numbers[1]) if len(numbers) > 1 else None
    if head is not None and not 1 <= head <= config.n_heads:
        raise InputError("off", f"{name}: each attention has heads 1 to {config.n_heads}")
    canonical = f"{kind}.{layer}" + ("" if head is None else f".{head}")
    return Part(canonical, kind, side, sublayer, layer - 1, None if head is None else head - 1)


def parse_parts(names: list[str], config: TransformerConfig) -> list[Part]:
    """Every named part, each once, in the order the data meets them."""
    if len(names) > MAX_PARTS:
        raise InputError("off", f"at most {MAX_PARTS} parts can be off at once ({len(names)} given): "
                                "switch a whole sublayer off instead of its heads one by one")
    parts = {part.name: part for part in (parse_part(name, config) for name in names)}
    return sorted(parts.values(), key=_order)


def _order(part: Part) -> tuple:
    kinds = ["pos", *KINDS]
    return (part.side != "encoder", part.layer if part.layer is not None else -1,
            kinds.index(part.kind), -1 if part.head is None else part.head)


def all_heads(config: TransformerConfig) -> list[Part]:
    """Every head, in the grid's order: by kind (enc, dec, cross), then layer, then head."""
    heads = []
    for kind in HEAD_KINDS:
        side, sublayer = KINDS[kind]
        layers = config.n_encoder_layers if side == "encoder" else config.n_decoder_layers
        for layer in range(layers):
            for head in range(config.n_heads):
                heads.append(Part(f"{kind}.{layer + 1}.{head + 1}", kind, side, sublayer, layer, head))
    return heads


def sentence_means(recorded: RecordedPass) -> tuple[dict, dict]:
    """What every head and every sublayer wrote, averaged over the positions of one recorded pass
    (the sentence, and its translation on the decoder side): ``Ablation``'s head and sublayer means."""
    head_means, sublayer_means = {}, {}
    for side, names in (("encoder", ("self_attention", "ffn")),
                        ("decoder", ("self_attention", "cross_attention", "ffn"))):
        for layer in range(recorded.n_layers(side)):
            for sublayer in names:
                if sublayer != "ffn":
                    head_means[(side, sublayer, layer)] = \
                        recorded.head_outputs(side, layer, sublayer).mean(dim=1)  # (H, K)
                sublayer_means[(side, sublayer, layer)] = \
                    recorded.sublayer_output(side, layer, sublayer).mean(dim=0)  # (D,)
    return head_means, sublayer_means


def ablation(parts: list[Part], mode: str = "zero", recorded: RecordedPass | None = None,
             rows: tuple[Head | None, ...] = ()) -> Ablation:
    """The ``Ablation`` that switches ``parts`` off (``mode="mean"`` reads its means from
    ``recorded``, the pass with nothing off)."""
    head_means, sublayer_means = sentence_means(recorded) if mode == "mean" else ({}, {})
    return Ablation(
        heads=frozenset(p.key for p in parts if p.head is not None),
        sublayers=frozenset(p.key[:3] for p in parts if p.head is None and p.sublayer is not None),
        positions=frozenset(p.side for p in parts if p.kind == "pos"),
        mode=mode, head_means=head_means, sublayer_means=sublayer_means, rows=rows,
    )


def _replay(tokens: list[int], finished: bool) -> tuple[list[int], list[int]]:
    """The decoder input that replays a translation, and the token each position chose."""
    labels = tokens + ([EOS_ID] if finished else [])
    return [BOS_ID, *tokens][: max(1, len(labels))], labels


def _options(trace: Trace) -> DecodingOptions:
    return DecodingOptions(**trace.options)


def _round(values, digits: int = 5) -> list[float]:
    return [round(float(v), digits) for v in values]


@torch.inference_mode()
def retranslate(translator: Translator, trace: Trace, parts: list[Part], mode: str = "zero") -> dict:
    """Translate ``trace``'s sentence again, with the same decoding options and forced prefix, with
    ``parts`` off; score the original translation and the new one teacher-forced with the parts
    off, both in one batched pass. The original's probabilities with every part are the trace's."""
    model = translator.model
    switched = ablation(parts, mode, trace.recorded)
    src = torch.tensor([trace.source_ids])
    memory = model.encode(src, ablation=switched)
    forced = [step.id for step in trace.steps if step.forced]
    result = generate(model, src, _options(trace), forced_prefix=forced, memory=memory,
                      ablation=switched)
    original_ids, original_labels = trace.decoder_ids, [step.id for step in trace.steps]
    new_ids, new_labels = _replay(result.tokens, result.finished)
    logits = model.decode(pad([original_ids, new_ids]), memory.expand(2, -1, -1), src.expand(2, -1),
                          ablation=switched)
    log_probs = torch.log_softmax(mask_special(logits).float(), dim=-1)
    without = log_probs[0, torch.arange(len(original_labels)), original_labels].tolist()
    new = log_probs[1, torch.arange(len(new_labels)), new_labels].tolist()
    parted = next((i for i, (a, b) in enumerate(zip(original_labels, new_labels, strict=False))
                   if a != b), None)
    if parted is None and len(original_labels) != len(new_labels):
        parted = min(len(original_labels), len(new_labels))

    def shown(labels: list[int]) -> list[str]:  # each token as the translation writes it (，not ,)
        return [translator.chinese.decode([i]) or token
                for i, token in zip(labels, translator.target_tokens(labels), strict=True)]

    return {
        "parts": [part.name for part in parts],
        "mode": mode,
        "original": {
            "translation": trace.translation,
            "tokens": [step.token for step in trace.steps],  # ends with <eos> when it finished
            "shown": shown(original_labels),
            "prob_with": [step.prob for step in trace.steps],
            "prob_without": _round((math.exp(v) for v in without), 6),
            "log_prob_with": round(sum(step.log_prob for step in trace.steps), 4),
            "log_prob_without": round(sum(without), 4),
        },
        "ablated": {
            "translation": translator.chinese.decode(result.tokens),
            "tokens": translator.target_tokens(new_labels),
            "shown": shown(new_labels),
            "prob": _round((math.exp(v) for v in new), 6),
            "log_prob": round(sum(new), 4),
            "finished": result.finished,
        },
        "same": parted is None,
        "parted_at": parted,
    }


@torch.inference_mode()
def head_importance(translator: Translator, trace: Trace, mode: str = "zero") -> dict:
    """For the trace's translation held fixed: Δ log p(translation) when each head alone is off,
    and per step the change of that step's character's probability.

    Row 0 of the batch has nothing off; row r has one head off. The encoder runs once on the
    rows of the encoder's heads (and row 0); the decoder's heads read row 0's memory. The decoder
    runs teacher-forced over rows, as many at once as ``LOGIT_BUDGET`` allows.
    """
    model = translator.model
    heads = all_heads(model.config)
    encoder_heads = [h for h in heads if h.side == "encoder"]
    decoder_heads = [h for h in heads if h.side == "decoder"]
    rows: tuple[Head | None, ...] = (None, *(h.key for h in encoder_heads + decoder_heads))
    labels = [step.id for step in trace.steps]
    decoder_ids = trace.decoder_ids
    means = ablation([], mode, trace.recorded)  # the means once; each pass gets its own rows

    def switched(rows_of_pass: tuple) -> Ablation:
        return Ablation(mode=mode, head_means=means.head_means, rows=rows_of_pass)

    src = torch.tensor([trace.source_ids])
    encoded = model.encode(src.expand(1 + len(encoder_heads), -1),
                           ablation=switched(rows[: 1 + len(encoder_heads)]))
    memory = torch.cat([encoded, encoded[:1].expand(len(decoder_heads), -1, -1)])
    tgt = torch.tensor([decoder_ids])
    label_index = torch.tensor(labels)[None, :, None]
    per_pass = max(1, LOGIT_BUDGET // (len(decoder_ids) * model.config.tgt_vocab_size))
    scores = []
    for start in range(0, len(rows), per_pass):
        check_stop()  # a server's call stops between passes once nobody waits for it
        chunk = rows[start : start + per_pass]
        n = len(chunk)
        logits = model.decode(tgt.expand(n, -1), memory[start : start + n], src.expand(n, -1),
                              ablation=switched(chunk))
        log_probs = torch.log_softmax(mask_special(logits).float(), dim=-1)
        scores.append(log_probs.gather(-1, label_index.expand(n, -1, -1))[..., 0])  # (n, T)
    scores = torch.cat(scores)
    clean = scores[0]
    deltas = (scores[1:].sum(dim=1) - clean.sum()).tolist()
    step_deltas = (scores[1:].exp() - clean.exp()).tolist()
    entries = [
        {"name": head.name, "kind": head.kind, "attention_kind": ATTENTION_PAGE_KIND[head.kind],
         "layer": head.layer, "head": head.head, "delta": round(delta, 5),
         "delta_steps": _round(steps)}
        for head, delta, steps in zip(heads, deltas, step_deltas, strict=True)
    ]
    top = sorted(entries, key=lambda e: -abs(e["delta"]))[:TOP_HEADS]
    return {
        "mode": mode,
        "tokens": [step.token for step in trace.steps],
        "log_prob": round(float(clean.sum()), 5),
        "step_probs": _round(clean.exp(), 6),
        "heads": entries,
        "top": [entry["name"] for entry in top],
        "rows": len(rows),
        "passes": 1 + math.ceil(len(rows) / per_pass),  # the encoder's and the decoder's
    }


def word_spans(tokens: list[str], ids: list[int]) -> list[tuple[int, int]]:
    """[start, end) of every word: a piece continues the word before it when it starts with ``##``
    (this project's BPE) or, in a SentencePiece vocabulary, does not start with ``▁``. Special
    tokens (<eos>) belong to no word, so a shuffle leaves them where they are."""
    sentencepiece = any(token.startswith("▁") for token in tokens)
    spans: list[list[int]] = []
    for position, (token, index) in enumerate(zip(tokens, ids, strict=True)):
        if index in (PAD_ID, BOS_ID, EOS_ID):
            continue
        continues = not token.startswith("▁") if sentencepiece else token.startswith("##")
        if continues and spans and spans[-1][1] == position:
            spans[-1][1] = position + 1
        else:
            spans.append([position, position + 1])
    return [(start, end) for start, end in spans]


def _word(tokens: list[str], span: tuple[int, int]) -> str:
    return "".join(tokens[i].removeprefix("##").removeprefix("▁") for i in range(*span))


def shuffled_order(tokens: list[str], ids: list[int], seed: int) -> tuple[list[int], list[int]]:
    """A shuffle of the sentence's words (never the order they came in, if there are two or more):
    the word order, and where each new position's token comes from."""
    spans = word_spans(tokens, ids)
    order = list(range(len(spans)))
    random.Random(seed).shuffle(order)
    if len(order) > 1 and order == sorted(order):
        order = order[1:] + order[:1]
    moved = iter([p for w in order for p in range(*spans[w])])
    in_words = {p for start, end in spans for p in range(start, end)}
    return order, [next(moved) if p in in_words else p for p in range(len(ids))]


@torch.inference_mode()
def word_order(translator: Translator, trace: Trace, seed: int = 1) -> dict:
    """The encoder's output for the sentence and for its words shuffled, with the positional
    encoding and without it (encoder side): how far each shuffled position's vector is from the
    original's vector of the same token; and the four translations. A shuffled sentence often
    makes the model repeat itself to the length limit, so these translations stop at twice the
    original's length (+ 8)."""
    model = translator.model
    tokens, ids = trace.source_tokens, trace.source_ids
    order, source = shuffled_order(tokens, ids, seed)
    shuffled_ids = [ids[p] for p in source]
    src, shuffled = torch.tensor([ids]), torch.tensor([shuffled_ids])
    options = _options(trace)
    options = replace(options, max_len=min(options.max_len, 2 * len(trace.steps) + 8))
    no_positions = Ablation(positions=frozenset({"encoder"}))
    spans = word_spans(tokens, ids)
    settings = {}
    for name, switched in (("with_positions", None), ("without_positions", no_positions)):
        original = model.encode(src, ablation=switched)
        moved = model.encode(shuffled, ablation=switched)
        expected = original[0, source]  # the original's vector of the token now at each position
        gap = (moved[0] - expected).norm(dim=-1) / expected.norm(dim=-1)
        translation = (trace.target_ids if switched is None else
                       generate(model, src, options, memory=original, ablation=switched).tokens)
        shuffled_translation = generate(model, shuffled, options, memory=moved,
                                        ablation=switched).tokens
        settings[name] = {
            "max_difference": float((moved[0] - expected).abs().max()),
            "typical_value": round(float(expected.abs().mean()), 5),
            "relative_gap": _round(gap, 7),  # per shuffled position: ‖moved − expected‖ / ‖expected‖
            "translation": translator.chinese.decode(translation),
            "shuffled_translation": translator.chinese.decode(shuffled_translation),
            "same_translation": translation == shuffled_translation,
        }
    return {
        "seed": seed,
        "max_len": options.max_len,
        "tokens": tokens,
        "shuffled_tokens": [tokens[p] for p in source],
        "source": source,  # shuffled position → the original position of its token
        "words": [_word(tokens, span) for span in spans],
        "shuffled_words": [_word(tokens, spans[w]) for w in order],
        **settings,
    }
