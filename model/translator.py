"""Translator: load the shipped checkpoint, then translate, trace, score and time decoding.

    translator = Translator.load()            # model/checkpoints by default
    translator.translate("The cat sits on the mat.").translation
    trace = translator.trace("The cat sits on the mat.", DecodingOptions(strategy="beam"))

Loading reads safetensors weights and JSON files only (no pickle).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file

from model.decoding import (
    DecodeResult,
    DecodingOptions,
    filter_distribution,
    generate,
    mask_special,
)
from model.explain import kv_cache
from model.explain.arrays import norm_parameters
from model.explain.record import RecordedPass
from model.explain.score import Score, teacher_forced_score
from model.explain.trace import (
    TOP_CANDIDATES,
    BeamNodeInfo,
    Candidate,
    Step,
    Trace,
    entropy_per_row,
    shown_hypotheses,
)
from model.tokenizer import MAX_SOURCE_TOKENS, ChineseTokenizer, EnglishTokenizer
from model.transformer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    Transformer,
    TransformerConfig,
    count_parameters,
)

DEFAULT_CHECKPOINT = Path(__file__).parent / "checkpoints"
CHECKPOINT_FILES = ("weights.safetensors", "config.json", "tokenizer_en.json", "vocab_zh.json")


def set_threads(threads: int) -> None:
    """Intra-op threads for every later model call in this process (``torch.set_num_threads``)."""
    torch.set_num_threads(threads)


class CheckpointError(RuntimeError):
    """The checkpoint folder is missing, incomplete or corrupt."""


def corrupt(file: Path, error: Exception, fix: str) -> str:
    """One line: which file could not be read, why (the error's first line), and the fix."""
    why = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
    return f"{file} is corrupt or unreadable ({type(error).__name__}{': ' + why if why else ''}); {fix}"


def _read(path: Path, name: str, reader):
    """``reader(path / name)``, or a CheckpointError naming the file."""
    try:
        return reader(path / name)
    except CheckpointError:
        raise
    except Exception as error:  # a garbage or truncated file: one line, never a traceback
        raise CheckpointError(corrupt(path / name, error, RESTORE)) from error


TRAIN = ("`python -m model.training.train model/training/recipes/shipped.toml --data ../shared/data "
         "--out model/checkpoints`")
RESTORE = ("restore the checkpoint folder (`git checkout model/checkpoints` for the shipped one) or "
           f"train one with {TRAIN}")


class InputError(ValueError):
    """The request cannot be translated as given (e.g. too many source tokens)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass
class Translation:
    text: str
    translation: str
    source_tokens: list[str]
    target_tokens: list[str]
    steps: list[Step]
    finished: bool  # False when max_len cut it off before <eos>


def _replay_positions(result: DecodeResult) -> tuple[list[int], list[int]]:
    """The decoder input that replays a decoded translation, and the token each position chose."""
    labels = result.tokens + ([EOS_ID] if result.finished else [])
    decoder_ids = [BOS_ID, *result.tokens]
    if not result.finished:  # the last position's prediction was cut off by max_len
        decoder_ids = decoder_ids[: len(labels)] if labels else [BOS_ID]
    return decoder_ids, labels


class Translator:
    def __init__(
        self,
        model: Transformer,
        english: EnglishTokenizer,
        chinese: ChineseTokenizer,
        history: dict | None = None,
        evaluation: dict | None = None,
        path: Path | None = None,
    ):
        self.model = model.eval()
        self.english = english
        self.chinese = chinese
        self.history = history or {}
        self.evaluation = evaluation or {}
        self.path = path

    @property
    def config(self) -> TransformerConfig:
        return self.model.config

    @property
    def about(self) -> dict:
        """Which model this is and which languages it reads and writes (the pages name them)."""
        return {"kind": "checkpoint", "name": self.path.name if self.path else "checkpoint",
                "source": {"code": "en", "en": "English", "zh": "英文"},
                "target": {"code": "zh", "en": "Chinese", "zh": "中文"}}

    @classmethod
    def load(cls, path: Path | str = DEFAULT_CHECKPOINT) -> Translator:
        path = Path(path)
        missing = [name for name in CHECKPOINT_FILES if not (path / name).is_file()]
        if missing:
            raise CheckpointError(
                f"no usable checkpoint in {path} (missing {', '.join(missing)}); "
                f"train one with {TRAIN} or pass --checkpoint"
            )
        config = _read(path, "config.json", TransformerConfig.load)
        model = _read(path, "config.json", lambda _: Transformer(config))

        def weights(file: Path) -> None:
            state = {name: tensor.float() for name, tensor in load_file(str(file)).items()}
            if config.tie_output:
                state["output.weight"] = state["tgt_embedding.tokens.weight"]
            model.load_state_dict(state)  # names and shapes must be config.json's

        _read(path, "weights.safetensors", weights)

        def json_object(file: Path) -> dict:
            data = json.loads(file.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError(f"a JSON object was expected, not {type(data).__name__}")
            return data

        def optional_json(name: str) -> dict:
            return _read(path, name, json_object) if (path / name).is_file() else {}

        return cls(
            model,
            _read(path, "tokenizer_en.json", EnglishTokenizer.load),
            _read(path, "vocab_zh.json", ChineseTokenizer.load),
            history=optional_json("history.json"),
            evaluation=optional_json("eval.json"),
            path=path,
        )

    # -- inputs ----------------------------------------------------------------------------

    def source_ids(self, text: str) -> list[int]:
        ids = self.english.encode(text)
        if len(ids) > MAX_SOURCE_TOKENS:
            raise InputError(
                "text", f"text is {len(ids)} tokens long; the limit is {MAX_SOURCE_TOKENS} tokens: "
                        f"cut at least {len(ids) - MAX_SOURCE_TOKENS} to fit"
            )
        return ids

    def target_ids(self, tokens: list[str]) -> list[int]:
        ids = []
        for token in tokens:
            if token not in self.chinese.index or self.chinese.index[token] in (PAD_ID, BOS_ID):
                raise InputError("forced_prefix", f"{token!r} is not in the Chinese vocabulary")
            ids.append(self.chinese.index[token])
        return ids

    def source_tokens(self, ids: list[int]) -> list[str]:
        return [self.english.id_to_token(i) for i in ids]

    def target_tokens(self, ids: list[int]) -> list[str]:
        return [self.chinese.id_to_token(i) for i in ids]

    # -- translation and tracing -----------------------------------------------------------

    @torch.inference_mode()
    def translate(self, text: str, options: DecodingOptions | None = None,
                  should_stop: Callable[[], bool] | None = None) -> Translation:
        """The translation and its per-step probabilities: ``trace`` without the recording (the
        same passes through the same model, so the same numbers)."""
        options = options or DecodingOptions()
        src_list = self.source_ids(text)
        src = torch.tensor([src_list])
        memory = self.model.encode(src)
        result, logits, _ = self._decode_and_replay(src, memory, options, [], False, should_stop)
        _, labels = _replay_positions(result)
        return Translation(
            text, self.chinese.decode(result.tokens), self.source_tokens(src_list),
            self.target_tokens(result.tokens), self._steps(logits, labels, options, 0),
            result.finished,
        )

    @torch.inference_mode()
    def trace(
        self,
        text: str,
        options: DecodingOptions | None = None,
        forced_prefix: list[str] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> Trace:
        """Translate once and record everything the pages show (``should_stop``: called before
        every decoding step, it stops the call by raising ``model.decoding.Stopped``)."""
        options = options or DecodingOptions()
        started = time.perf_counter()
        src_list = self.source_ids(text)
        forced = self.target_ids(forced_prefix or [])
        if len(forced) > options.max_len:
            raise InputError("forced_prefix", "forced_prefix is longer than max_len")
        src = torch.tensor([src_list])
        encoder_record: dict = {}
        memory = self.model.encode(src, record=encoder_record)  # once: decoding reuses it
        result, logits, decoder_record = self._decode_and_replay(
            src, memory, options, forced, True, should_stop
        )
        output = result.tokens
        decoder_ids, labels = _replay_positions(result)
        model_ms = (time.perf_counter() - started) * 1000

        source_tokens = self.source_tokens(src_list)
        decoder_input = self.target_tokens(decoder_ids)
        steps = self._steps(logits, labels, options, len(forced))
        recorded = RecordedPass(encoder_record, decoder_record)
        beam = [
            BeamNodeInfo(
                id=i, step=node.step, token=self.chinese.id_to_token(node.token_id),
                parent=node.parent, score=round(node.score, 4), finished=node.finished,
                selected=node.selected,
            )
            for i, node in enumerate(result.beam_nodes)
        ]
        return Trace(
            text=text,
            options=asdict(options),
            source_tokens=source_tokens,
            source_ids=src_list,
            target_tokens=self.target_tokens(output),
            target_ids=output,
            decoder_input=decoder_input,
            translation=self.chinese.decode(output),
            finished=result.finished,
            steps=steps,
            beam=beam,
            hypotheses=shown_hypotheses(result.hypotheses, beam),
            model_ms=round(model_ms, 2),
            recorded=recorded,
        )

    def _decode_and_replay(
        self, src: torch.Tensor, memory: torch.Tensor, options: DecodingOptions,
        forced: list[int], record: bool, should_stop: Callable[[], bool] | None = None,
    ) -> tuple[DecodeResult, torch.Tensor, dict]:
        """Decode (``model/decoding.py``), then replay the chosen tokens teacher-forced through
        the same layers in one pass, recording: the result, the replay's logits (T, V) with
        <pad>/<bos> masked, and what it recorded.

        The decoder is causal, so position t of the replay computes what decoding step t computed
        (the same layers on the same inputs; only the last bits of a sum can differ, as one
        product over T rows is not T products over one): its attention rows, Add & Norm vectors
        and probabilities are decoding's own, and its most likely token is the one a greedy step
        chose (``tests/model/test_translator.py`` holds the two to each other)."""
        result = generate(self.model, src, options, forced_prefix=forced, memory=memory,
                          should_stop=should_stop)
        decoder_ids, _ = _replay_positions(result)
        decoder_record: dict | None = {} if record else None
        logits = self.model.decode(torch.tensor([decoder_ids]), memory, src, record=decoder_record)
        return result, mask_special(logits[0]), decoder_record or {}

    def _steps(
        self, logits: torch.Tensor, labels: list[int], options: DecodingOptions, n_forced: int
    ) -> list[Step]:
        """Per decoded position: the chosen token's probability, the entropy and the top candidates."""
        probs = torch.softmax(logits.float(), dim=-1)
        if options.strategy == "sample":
            sample_probs = filter_distribution(
                logits.float(), options.temperature, options.top_k, options.top_p
            )
        else:
            sample_probs = probs
        count = len(labels)
        top = torch.topk(probs[:count], k=min(TOP_CANDIDATES, probs.size(-1)), dim=-1)
        label_index = torch.tensor(labels, dtype=torch.long)[:, None]
        # every number as a list at once; the per-step loop below only assembles them
        label_probs = probs[:count].gather(-1, label_index)[:, 0].tolist()
        top_ids = top.indices.tolist()
        top_probs = top.values.tolist()
        top_sample = sample_probs[:count].gather(-1, top.indices).tolist()
        entropies = entropy_per_row(probs[:count])
        token = self.chinese.id_to_token
        steps = []
        for position, (label, p, entropy, ids, id_probs, id_sample_probs) in enumerate(
            zip(labels, label_probs, entropies, top_ids, top_probs, top_sample, strict=True)
        ):
            steps.append(
                Step(
                    position=position,
                    token=token(label),
                    id=label,
                    prob=round(p, 6),
                    log_prob=round(math.log(max(p, 1e-30)), 5),
                    entropy=round(entropy, 5),
                    forced=position < n_forced,
                    # Candidate(token, id, prob, sample_prob) by position: with ten per step,
                    # keyword arguments cost a sizeable share of the loop
                    top=[
                        Candidate(token(i), i, round(prob, 6), round(sample, 6))
                        for i, prob, sample in zip(ids, id_probs, id_sample_probs, strict=True)
                    ],
                )
            )
        return steps

    # -- training view ---------------------------------------------------------------------

    def score(
        self, source: str, reference: str, label_smoothing: float = 0.1, clip: float = 1.0
    ) -> Score:
        """Teacher-forced loss of a pair and the gradient it would produce, no weight update
        (``model/explain/score.py``)."""
        src_list = self.source_ids(source)
        reference_ids = self.chinese.encode(reference)
        if not reference_ids:
            raise InputError("reference", "reference must contain at least one character")
        return teacher_forced_score(self, src_list, reference, reference_ids, label_smoothing, clip)

    # -- KV cache --------------------------------------------------------------------------

    def kv_cache_race(self, text: str, steps: int) -> dict:
        """Greedy decoding of ``text`` for ``steps`` steps with and without the KV cache, timed
        step by step (``model/explain/kv_cache.py``, ``race``)."""
        return kv_cache.race(self, text, steps)

    # -- interpretation hooks: model/explain/interpret.py reads a model only through these three and the
    # trace's recorded pass (a translator for another architecture, e.g. a Hugging Face Marian
    # model, implements the same three and gets the logit lens and the attributions for free)

    def output_logits(self, states: torch.Tensor) -> torch.Tensor:
        """What the real output path applies after the last decoder layer: (…, D) → (…, V).

        Here that is the output projection (+ bias), with <pad>/<bos> masked as decoding masks them.
        No LayerNorm: the model is post-norm, so every decoder layer already ends in one (a pre-norm
        model's final LayerNorm would belong in here).
        """
        return mask_special(self.model.output(states))

    def source_token_embeddings(self, source_ids: list[int]) -> torch.Tensor:
        """The source tokens' scaled embedding vectors (S, D), before positions are added."""
        embedding = self.model.src_embedding
        return embedding.tokens(torch.tensor(source_ids)) * math.sqrt(embedding.d_model)

    def logits_from_source_embeddings(
        self, embeddings: torch.Tensor, source_ids: list[int], decoder_ids: list[int]
    ) -> torch.Tensor:
        """Next-token logits (B, T, V) when the source token vectors are ``embeddings`` (B, S, D)."""
        batch = embeddings.size(0)
        src = torch.tensor([source_ids]).expand(batch, -1)
        memory = self.model.encode(src, token_embeddings=embeddings)
        logits = self.model.decode(torch.tensor([decoder_ids]).expand(batch, -1), memory, src)
        return mask_special(logits)

    # -- plain data the pages read from the model itself (the app never holds the module) ----

    def norm_parameters(self) -> dict:
        """Each side's Add & Norm LayerNorms as (γ, β, ε) numpy arrays, in the order of
        ``RecordedPass.stages`` (the x-ray's strips go as corrections to them)."""
        return norm_parameters(self.model)

    def position_table(self, positions: int) -> torch.Tensor:
        """The first ``positions`` rows of the model's sinusoidal position table (P, D), a copy."""
        return self.model.src_embedding.positions[:positions].detach().clone()

    # -- summary ---------------------------------------------------------------------------

    def parameter_counts(self) -> dict[str, int]:
        return count_parameters(self.model)
