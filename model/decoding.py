"""Autoregressive decoding: greedy, temperature / top-k / top-p sampling, and beam search.

The encoder runs once; the decoder then produces one token per step. Every strategy, forcing,
parts switched off (``ablation=``, ``model.parts_off.Ablation``), the /kv-cache race and the
training timeline decode here, through one :class:`Decoder`, which runs the layers of
``model/transformer.py``. With ``use_cache=True`` (the default) each layer keeps the keys and
values of the positions already decoded (the KV cache, ``model/kv.py``), so a step feeds only the
newest token; with ``use_cache=False`` every step re-runs the decoder over the whole prefix. Both
give the same tokens, which the tests check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from operator import itemgetter

import torch
from torch import Tensor

from model.kv import KVCache, LayerCache
from model.parts_off import Ablation
from model.tokenizer import MAX_TARGET_TOKENS
from model.transformer import (
    BOS_ID,
    EOS_ID,
    NEVER_GENERATED,
    PAD_ID,
    Transformer,
    mask_special,
)

STRATEGIES = ("greedy", "sample", "beam")
LENGTH_PENALTY = 0.6  # GNMT's α: the default of every beam search; pages read it from a trace's options
# Below this, logits / temperature overflows float32 for confident steps (softmax turns to NaN).
MIN_TEMPERATURE = 0.05
MAX_SEED = 2**31 - 1
__all__ = ["NEVER_GENERATED", "mask_special"]  # decoding's names, defined with the model's output


@dataclass(frozen=True)
class Limit:
    """The values one decoding option may take: ``minimum``–``maximum`` (the minimum itself
    excluded when ``above``); ``optional``: None is allowed too (the option is off)."""

    minimum: float
    maximum: float
    integer: bool = False
    above: bool = False
    optional: bool = False

    def allows(self, value) -> bool:
        if value is None:
            return self.optional
        if self.integer and (isinstance(value, bool) or not isinstance(value, int)):
            return False
        low = value > self.minimum if self.above else value >= self.minimum
        return low and value <= self.maximum

    @property
    def span(self) -> str:
        """The range in words: "1–8", "(0, 1]"."""
        low, high = (f"{v}" if isinstance(v, int) else f"{v:g}" for v in (self.minimum, self.maximum))
        return f"({low}, {high}]" if self.above else f"{low}–{high}"

    def bounds(self) -> dict[str, float]:
        """The range as a JSON-schema / pydantic ``Field`` takes it: ge or gt, and le."""
        return {"gt" if self.above else "ge": self.minimum, "le": self.maximum}


# Every option a caller may set, with its limits; which strategy reads which is STRATEGY_OPTIONS.
LIMITS: dict[str, Limit] = {
    "temperature": Limit(MIN_TEMPERATURE, 5.0),
    "top_k": Limit(1, 1000, integer=True, optional=True),
    "top_p": Limit(0.0, 1.0, above=True, optional=True),
    "beam_size": Limit(1, 8, integer=True),
    "max_len": Limit(1, 256, integer=True),
    "seed": Limit(0, MAX_SEED, integer=True, optional=True),
}
# The options each strategy reads besides max_len, which all of them read (the others it ignores:
# two requests that differ only there are the same translation, one cache entry).
STRATEGY_OPTIONS: dict[str, tuple[str, ...]] = {
    "greedy": (),
    "sample": ("temperature", "top_k", "top_p", "seed"),
    "beam": ("beam_size", "length_penalty"),
}
EVERY_STRATEGY = ("max_len",)


@dataclass(frozen=True)
class DecodingOptions:
    """How to decode: the strategy and the options it reads. It checks its own values
    (:data:`LIMITS`), knows which options each strategy reads (:meth:`reads`) and gives the key
    under which two equal decodings are one (:meth:`cache_key`)."""

    strategy: str = "greedy"
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    beam_size: int = 4
    length_penalty: float = LENGTH_PENALTY
    max_len: int = 64
    seed: int | None = None
    use_cache: bool = True

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}")
        for name, limit in LIMITS.items():
            if not limit.allows(getattr(self, name)):
                kind = "a whole number" if limit.integer else "a number"
                none = " or null" if limit.optional else ""
                raise ValueError(f"{name} must be {kind} in {limit.span}{none}")

    @staticmethod
    def reads(strategy: str) -> tuple[str, ...]:
        """The options ``strategy`` reads (max_len included)."""
        return (*STRATEGY_OPTIONS[strategy], *EVERY_STRATEGY)

    def cache_key(self) -> tuple:
        """Equal decodings → equal keys: the strategy and the options it reads, the others left
        out (an unseeded sampling draws with seed 0, so None and 0 are one key)."""
        read = self.reads(self.strategy)
        values = {name: getattr(self, name) if name in read else None for name in (
            "temperature", "top_k", "top_p", "seed", "beam_size", "length_penalty", "max_len")}
        if self.strategy == "sample":
            values["seed"] = self.seed or 0
        return (self.strategy, *values.values(), self.use_cache)

    @staticmethod
    def contract() -> dict:
        """The strategies and their options as the pages read them (JSON in every page): what
        each strategy reads, and each option's type, range and default."""
        defaults = DecodingOptions()
        return {
            "strategies": list(STRATEGIES),
            "default": defaults.strategy,
            "reads": {strategy: [name for name in DecodingOptions.reads(strategy) if name in LIMITS]
                      for strategy in STRATEGIES},
            "options": {name: {"type": "integer" if limit.integer else "number",
                               "min": limit.minimum, "max": limit.maximum, "above": limit.above,
                               "optional": limit.optional, "default": getattr(defaults, name)}
                        for name, limit in LIMITS.items()},
        }


@dataclass(slots=True)  # a search makes hundreds: no __dict__ each
class BeamNode:
    """One hypothesis at one step of beam search, for drawing the beam tree."""

    step: int
    token_id: int
    parent: int  # index into the list of nodes; -1 for the root
    score: float  # cumulative log-probability
    finished: bool = False
    selected: bool = False


@dataclass
class DecodeResult:
    tokens: list[int]  # generated ids, without <bos>, ending before <eos>
    finished: bool  # True when <eos> was produced within max_len
    beam_nodes: list[BeamNode] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)  # per-step log-prob of the chosen token
    hypotheses: list[Hypothesis] = field(default_factory=list)  # beam search's, ranked, best first


def filter_distribution(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> Tensor:
    """The distribution a sampler draws from: softmax(logits / T), cut to top-k, then top-p.

    Top-p keeps the smallest set of most likely tokens whose total probability reaches p.
    The result is renormalised; tokens that were cut have probability exactly 0.
    """
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_k is not None and top_k < probs.size(-1):
        kth = torch.topk(probs, top_k, dim=-1).values[..., -1:]
        probs = torch.where(probs >= kth, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(-1, keepdim=True)
    if top_p is not None and top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        keep_sorted = mass_before < top_p
        keep_sorted[..., 0] = True  # the most likely token always stays (p may round to 0)
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        probs = torch.where(keep, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


class Stopped(RuntimeError):
    """Decoding stopped because its ``should_stop`` said so (the caller no longer wants the answer)."""


# The ``should_stop`` of the calls the current thread makes, for callers that cannot pass one to
# every decoding function they reach (a server runs many kinds of call: see :func:`stop_when`).
_SHOULD_STOP: ContextVar[Callable[[], bool] | None] = ContextVar("itt_should_stop", default=None)


@contextmanager
def stop_when(should_stop: Callable[[], bool]) -> Iterator[None]:
    """Every decoding step (and every pass of a batched scoring) run inside this block first asks
    ``should_stop``; when it answers True the call raises :class:`Stopped`. A ``should_stop``
    passed to a function directly is asked instead."""
    token = _SHOULD_STOP.set(should_stop)
    try:
        yield
    finally:
        _SHOULD_STOP.reset(token)


def check_stop(should_stop: Callable[[], bool] | None = None) -> None:
    """Raise :class:`Stopped` if ``should_stop`` (else the one :func:`stop_when` set) says so."""
    stop = should_stop if should_stop is not None else _SHOULD_STOP.get()
    if stop is not None and stop():
        raise Stopped("decoding was asked to stop")


class Decoder:
    """Steps the decoder of ``model/transformer.py``: new tokens in, the next position's logits
    out, <pad> and <bos> at -inf. With ``use_cache`` (the default) a step runs the layers over the
    new positions only, reading the keys and values kept in a KV cache (``model/kv.py``); without,
    every step runs them over the whole prefix again. The same layers either way, so both choose
    the same tokens (the tests check). ``ablation`` switches parts off at every step.

    ``should_stop``, if given (else the one :func:`stop_when` set), is called before every step;
    when it answers True the step raises :class:`Stopped` instead of running (how a server stops
    a call nobody waits for any more)."""

    def __init__(self, model: Transformer, src_ids: Tensor, memory: Tensor, capacity: int,
                 ablation: Ablation | None = None, use_cache: bool = True,
                 should_stop: Callable[[], bool] | None = None):
        self.model, self.src_ids, self.memory, self.ablation = model, src_ids, memory, ablation
        self.should_stop = should_stop
        self.cache = KVCache(model, src_ids, capacity) if use_cache else None
        self.prefix = torch.full((src_ids.size(0), 0), BOS_ID, dtype=torch.long)

    @property
    def caches(self) -> list[LayerCache]:
        """Every layer's KV cache (views, not copies; the /kv-cache page reads them)."""
        return [] if self.cache is None else self.cache.caches

    def step(self, new_ids: Tensor) -> Tensor:
        """Append ``new_ids`` (B,) and return the logits for the next position (B, V)."""
        check_stop(self.should_stop)
        if self.cache is not None:
            logits = self.model.decode(new_ids[:, None], self.memory, self.src_ids,
                                       ablation=self.ablation, cache=self.cache)
        else:
            self.prefix = torch.cat([self.prefix, new_ids[:, None]], dim=1)
            logits = self.model.decode(self.prefix, self.memory, self.src_ids, ablation=self.ablation)
        return mask_special(logits[:, -1])

    def reorder(self, indices: Tensor) -> None:
        """Keep only the hypotheses at ``indices`` (beam search): rows may repeat or vanish."""
        if self.cache is not None:
            self.cache.reorder(indices)
            return
        self.prefix = self.prefix[indices]
        self.memory, self.src_ids = self.memory[indices], self.src_ids[indices]


@torch.inference_mode()
def generate(
    model: Transformer,
    src_ids: Tensor,
    options: DecodingOptions,
    forced_prefix: list[int] | None = None,
    memory: Tensor | None = None,
    ablation: Ablation | None = None,
    should_stop: Callable[[], bool] | None = None,
    min_len: int = 0,
    on_step: Callable[[Decoder], object] | None = None,
) -> DecodeResult:
    """Translate one source sentence (``src_ids`` of shape (1, S)). ``memory``, if given, is the
    encoder's output for ``src_ids`` (a caller that already ran the encoder passes it);
    ``ablation`` switches parts of the model off in the encoder and at every step;
    ``should_stop`` is called before every step (:class:`Decoder`). Greedy and sampling only:
    ``min_len`` keeps <eos> from being chosen before that many tokens, and ``on_step`` is called
    with the decoder after every step (the /kv-cache race times the steps with it)."""
    if model.training:  # eval() walks every submodule: ~0.3 ms a call, for nothing when set
        model.eval()
    forced = list(forced_prefix or [])
    if memory is None:
        memory = model.encode(src_ids, ablation=ablation)
    if options.strategy == "beam":
        return beam_search(model, src_ids, memory, options, forced, ablation, should_stop)[0]
    decoder = Decoder(model, src_ids, memory, options.max_len + 1, ablation, options.use_cache,
                      should_stop)
    generator = None
    if options.strategy == "sample":
        generator = torch.Generator().manual_seed(options.seed if options.seed is not None else 0)
    tokens: list[int] = []
    scores: list[float] = []
    logits = decoder.step(torch.tensor([BOS_ID]))
    for position in range(options.max_len):
        if on_step is not None:
            on_step(decoder)
        if position < min_len:
            logits[:, EOS_ID] = float("-inf")
        log_probs = torch.log_softmax(logits[0], dim=-1)
        if position < len(forced):
            choice = forced[position]
        elif options.strategy == "sample":
            probs = filter_distribution(logits[0], options.temperature, options.top_k, options.top_p)
            choice = int(torch.multinomial(probs, 1, generator=generator))
        else:
            choice = int(torch.argmax(log_probs))
        if choice == EOS_ID:
            return DecodeResult(tokens, True, scores=scores)
        tokens.append(choice)
        scores.append(float(log_probs[choice]))
        if position + 1 < options.max_len:
            logits = decoder.step(torch.tensor([choice]))
    return DecodeResult(tokens, False, scores=scores)


def length_penalty(length: int, alpha: float = LENGTH_PENALTY) -> float:
    """GNMT length penalty ((5 + |Y|) / 6)^α: without it beam search prefers short outputs."""
    return ((5.0 + length) / 6.0) ** alpha


@dataclass(frozen=True)
class Hypothesis:
    """One translation beam search ranked at the end: ended with <eos>, or still open when the
    search stopped (only when none ended)."""

    node: int  # its last node in ``beam_nodes`` (the <eos> node when it ended)
    length: int  # its tokens, <eos> not counted
    log_prob: float  # cumulative log-probability (the node's score)
    penalty: float  # length_penalty(length, α)
    score: float  # log_prob / penalty: what the search ranks by


def rank_hypotheses(nodes: Sequence[BeamNode], alpha: float = LENGTH_PENALTY) -> list[Hypothesis]:
    """A finished beam tree's hypotheses, best first: those that ended with <eos> (when none did,
    those still open at the last step), each scored log p / length_penalty(length) with <eos> not
    counted; of equal scores, the later node first. Any nodes with ``step``, ``finished`` and
    ``score`` in tree order will do (a trace's ``BeamNodeInfo`` too)."""
    ended = [index for index, node in enumerate(nodes) if node.finished]
    if not ended:
        last = max(node.step for node in nodes)
        ended = [index for index, node in enumerate(nodes) if index > 0 and node.step == last]
    hypotheses = []
    for index in ended:
        node = nodes[index]
        length = node.step - 1 if node.finished else node.step
        penalty = length_penalty(length, alpha)
        hypotheses.append(Hypothesis(index, length, node.score, penalty, node.score / penalty))
    return sorted(hypotheses, key=lambda h: (h.score, h.node), reverse=True)


class _Beam:
    """One sentence's beam: the tree so far and its ended nodes, then its result."""

    def __init__(self) -> None:
        self.nodes = [BeamNode(step=0, token_id=BOS_ID, parent=-1, score=0.0)]
        self.ended: list[int] = []
        self.result: DecodeResult | None = None

    def add(self, step: int, token: int, parent: int, score: float) -> int:
        self.nodes.append(BeamNode(step, token, parent, score, finished=token == EOS_ID))
        return len(self.nodes) - 1

    def finish(self, alpha: float) -> None:
        """Rank the hypotheses and mark the best one's path."""
        nodes = self.nodes
        ranked = rank_hypotheses(nodes, alpha)
        path, node = [], ranked[0].node
        while node > 0:
            nodes[node].selected = True
            path.append(node)
            node = nodes[node].parent
        nodes[0].selected = True
        path.reverse()
        tokens = [nodes[n].token_id for n in path if nodes[n].token_id != EOS_ID]
        scores = [nodes[n].score - nodes[nodes[n].parent].score for n in path]
        self.result = DecodeResult(tokens, bool(self.ended), beam_nodes=nodes,
                                   scores=scores[: len(tokens)], hypotheses=ranked)


def beam_search(
    model: Transformer, src_ids: Tensor, memory: Tensor, options: DecodingOptions,
    forced: list[int] | None = None, ablation: Ablation | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> list[DecodeResult]:
    """Beam search for every sentence of a padded batch (B, S), each with its own beam: the tree
    (``beam_nodes``), the ranked hypotheses and the best one's tokens, per sentence.

    As in fairseq, an ending counts only if it ranks within the beam, and a sentence stops once
    ``beam_size`` hypotheses have ended. All live hypotheses of all sentences are rows of one
    decoder batch; a sentence that stops leaves the batch. ``forced`` tokens are imposed on every
    sentence's first steps.
    """
    beam, alpha, forced = options.beam_size, options.length_penalty, forced or []
    decoder = Decoder(model, src_ids, memory, options.max_len + 1, ablation, options.use_cache,
                      should_stop)
    batch = src_ids.size(0)
    beams = [_Beam() for _ in range(batch)]
    owner = list(range(batch))  # the sentence of each decoder row; a sentence's rows are adjacent
    row_nodes = [0] * batch  # each row's hypothesis: its last node in its sentence's tree
    scores = torch.zeros(batch)  # cumulative log-probability of each row
    logits = decoder.step(torch.full((batch,), BOS_ID, dtype=torch.long))
    for position in range(options.max_len):
        log_probs = torch.log_softmax(logits, dim=-1)
        if position < len(forced):
            mask = torch.full_like(log_probs, float("-inf"))
            mask[:, forced[position]] = 0.0
            log_probs = log_probs + mask
        # each row's 2·beam best continuations (R, 2·beam), scores + log p: a sentence's best
        # 2·beam are among its rows' (one top-k for every row, not one per sentence)
        top_scores, top_tokens = torch.topk(log_probs.add_(scores[:, None]),
                                            min(2 * beam, log_probs.size(-1)), dim=-1)
        top_scores, top_tokens = top_scores.tolist(), top_tokens.tolist()
        rows, tokens, next_scores, next_owner, next_nodes = [], [], [], [], []
        start = 0
        while start < len(owner):
            sentence = owner[start]
            end = start
            while end < len(owner) and owner[end] == sentence:
                end += 1
            search = beams[sentence]
            ranked = sorted(  # best first; of equal scores, the earlier row and rank
                ((score, row, token) for row in range(start, end)
                 for score, token in zip(top_scores[row], top_tokens[row], strict=True)),
                key=itemgetter(0), reverse=True)
            live = []  # (row, token, score, node)
            for rank, (score, row, token) in enumerate(ranked):
                if score == float("-inf") or len(live) == beam:
                    break
                if token == EOS_ID and rank >= beam:
                    continue  # as in fairseq: an ending counts only if it ranks within the beam
                node = search.add(position + 1, token, row_nodes[row], score)
                if token == EOS_ID:
                    search.ended.append(node)
                else:
                    live.append((row, token, score, node))
            if len(search.ended) >= beam or not live or position + 1 == options.max_len:
                search.finish(alpha)
            else:
                for row, token, score, node in live:
                    rows.append(row)
                    tokens.append(token)
                    next_scores.append(score)
                    next_owner.append(sentence)
                    next_nodes.append(node)
            start = end
        if not rows:
            break
        decoder.reorder(torch.tensor(rows))
        owner, row_nodes, scores = next_owner, next_nodes, torch.tensor(next_scores)
        logits = decoder.step(torch.tensor(tokens))
    return [search.result for search in beams]


@torch.inference_mode()
def greedy_batch(model: Transformer, src_ids: Tensor, max_len: int = 64) -> list[list[int]]:
    """Greedy decoding of a padded batch with the KV cache (used for dev/test evaluation)."""
    model.eval()
    memory = model.encode(src_ids)
    decoder = Decoder(model, src_ids, memory, capacity=max_len + 1)
    batch = src_ids.size(0)
    outputs = torch.full((batch, 0), PAD_ID, dtype=torch.long)
    done = torch.zeros(batch, dtype=torch.bool)
    logits = decoder.step(torch.full((batch,), BOS_ID, dtype=torch.long))
    for _ in range(max_len):
        choice = torch.argmax(logits, dim=-1)
        choice = torch.where(done, torch.full_like(choice, PAD_ID), choice)
        outputs = torch.cat([outputs, choice[:, None]], dim=1)
        done |= choice == EOS_ID
        if bool(done.all()):
            break
        logits = decoder.step(choice)
    results = []
    for row in outputs.tolist():
        tokens = []
        for token in row:
            if token in (EOS_ID, PAD_ID):
                break
            tokens.append(token)
        results.append(tokens)
    return results


def pad(sequences: list[list[int]]) -> torch.Tensor:
    width = max(len(s) for s in sequences)
    return torch.tensor([s + [PAD_ID] * (width - len(s)) for s in sequences], dtype=torch.long)


@torch.inference_mode()
def beam_batch(
    model: Transformer, src_ids: Tensor, beam_size: int = 4, max_len: int = MAX_TARGET_TOKENS,
    alpha: float = LENGTH_PENALTY,
) -> list[list[int]]:
    """Beam search over a padded batch (B, S): per sentence, the tokens ``generate`` chooses."""
    model.eval()
    options = DecodingOptions(strategy="beam", beam_size=beam_size, length_penalty=alpha,
                              max_len=max_len)
    return [result.tokens for result in beam_search(model, src_ids, model.encode(src_ids), options)]
