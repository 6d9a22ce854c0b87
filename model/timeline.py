"""The training timeline: one training run's weights at a few of its steps, read on demand.

``model/checkpoints/timeline/`` holds what ``python -m model.training.snapshots pack`` wrote: the
run's vocabularies and config, ``timeline.json`` (each snapshot's step, epoch, minutes and dev
BLEU, the run's loss curve, how far the stored weights are from the ones training wrote) and one
safetensors file per snapshot. A snapshot is stored compressed: every weight matrix as int8 with
one float32 scale per row (symmetric, ``max |w| / 127``), every vector as float16. Step 0 is not
stored at all: it is the random initialisation, rebuilt from the config and the run's seed (the
packer checked that the rebuilt weights equal the run's own step-0 file, and kept their hash).

    timeline = Timeline.open()                  # None when the folder is absent
    timeline.read("step001000", "The cat sits on the mat.")   # plain data, no tensors

A loaded snapshot is a float32 model kept in a small LRU (``cache_size`` models); loading and
reading run wherever the caller runs them (the web app: on its engine's model thread).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import Tensor

from model.decoding import DecodingOptions, generate, mask_special
from model.explain.record import RecordedPass
from model.tokenizer import MAX_SOURCE_TOKENS, ChineseTokenizer, EnglishTokenizer
from model.transformer import BOS_ID, EOS_ID, Transformer, TransformerConfig
from model.translator import InputError

FOLDER = Path(__file__).parent / "checkpoints" / "timeline"
MANIFEST = "timeline.json"
SCALE = ".scale"  # a quantised matrix ``name`` keeps its row scales as ``name.scale``
MAX_LEN = 64  # characters a snapshot may write (an early one repeats itself to the limit)
DIGITS = 4


# -- the stored form ------------------------------------------------------------------------------


def quantise(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Matrices → int8 rows with a float32 scale each (symmetric); vectors → float16."""
    stored: dict[str, Tensor] = {}
    for name, tensor in sorted(state.items()):
        weights = tensor.float()
        if weights.dim() == 2:
            scale = (weights.abs().amax(dim=1) / 127).clamp_min(1e-12)  # (rows,)
            stored[name] = torch.round(weights / scale[:, None]).clamp(-127, 127).to(torch.int8)
            stored[name + SCALE] = scale.contiguous()
        else:
            stored[name] = weights.half().contiguous()
    return stored


def dequantise(stored: dict[str, Tensor]) -> dict[str, Tensor]:
    """The float32 weights a stored snapshot stands for."""
    state = {}
    for name, tensor in stored.items():
        if name.endswith(SCALE):
            continue
        if tensor.dtype == torch.int8:
            state[name] = tensor.float() * stored[name + SCALE][:, None]
        else:
            state[name] = tensor.float()
    return state


def initial_weights(config: TransformerConfig, seed: int) -> dict[str, Tensor]:
    """Step 0: the weights ``Transformer(config)`` draws after ``torch.manual_seed(seed)``, as
    ``model/training/train.py`` draws them (the global random state is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Transformer(config)
    state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    if config.tie_output:  # stored once, as the Chinese embedding
        state.pop("output.weight", None)
    return state


def weights_hash(state: dict[str, Tensor]) -> str:
    """sha256 of the float16 bytes of every tensor, in name order (how step 0 is checked)."""
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode())
        digest.update(state[name].half().contiguous().view(torch.int16).numpy().tobytes())
    return digest.hexdigest()


def build_model(config: TransformerConfig, state: dict[str, Tensor]) -> Transformer:
    """A float32 model in evaluation mode holding ``state`` (the tied output filled in)."""
    model = Transformer(config)
    state = dict(state)
    if config.tie_output:
        state["output.weight"] = state["tgt_embedding.tokens.weight"]
    model.load_state_dict(state, strict=True)
    return model.eval()


# -- reading a sentence -------------------------------------------------------------------------


def _rounded(tensor: Tensor) -> list:
    return torch.round(tensor.float() * 10**DIGITS).div(10**DIGITS).tolist()


@torch.inference_mode()
def read_along(model: Transformer, english: EnglishTokenizer, chinese: ChineseTokenizer,
               text: str, max_len: int = MAX_LEN) -> dict:
    """Greedy translation of ``text`` and, teacher-forced on it, each character's probability and
    every layer's cross-attention (plain lists: ``cross[layer][head][row][source]``)."""
    source_ids = english.encode(text)
    if len(source_ids) > MAX_SOURCE_TOKENS:
        raise InputError("text", f"text is {len(source_ids)} tokens long; the limit is "
                                 f"{MAX_SOURCE_TOKENS} tokens")
    result = generate(model, torch.tensor([source_ids]), DecodingOptions(max_len=max_len))
    labels = result.tokens + ([EOS_ID] if result.finished else [])
    decoder_ids = [BOS_ID, *result.tokens][: len(labels)]
    recorded = RecordedPass.run(model, source_ids, decoder_ids)
    probs = torch.softmax(mask_special(recorded.unmasked_logits).float(), dim=-1)
    label_probs = probs[torch.arange(len(labels)), torch.tensor(labels)]
    cross = [recorded.attention("decoder", layer, "cross_attention")["weights"][0]
             for layer in range(len(model.decoder_layers))]  # (H, T, S) each
    uniform = math.log(len(source_ids)) if len(source_ids) > 1 else 1.0
    return {
        "source_tokens": [english.id_to_token(i) for i in source_ids],
        "target_ids": result.tokens,
        "target_tokens": [chinese.id_to_token(i) for i in result.tokens],
        "labels": [chinese.id_to_token(i) for i in labels],  # + <eos> when it finished
        "translation": chinese.decode(result.tokens),
        "finished": result.finished,
        "max_len": max_len,
        "probs": _rounded(label_probs),
        "cross": [_rounded(weights) for weights in cross],
        # how spread each layer's cross-attention is: the rows' mean entropy ÷ log(source length)
        # (1: uniform over the source, 0: every row on one token)
        "spread": [round(float(_entropy(weights).mean()) / uniform, DIGITS) for weights in cross],
    }


def _entropy(weights: Tensor) -> Tensor:
    return -(weights * weights.clamp_min(1e-12).log()).sum(dim=-1)


# -- the packed folder ----------------------------------------------------------------------------


class TimelineError(ValueError):
    """A snapshot name the timeline does not have."""


class Timeline:
    """The packed snapshots of one run: the manifest at once, each snapshot's weights on demand."""

    def __init__(self, folder: Path, manifest: dict, cache_size: int = 2):
        self.folder = folder
        self.manifest = manifest
        self.cache_size = cache_size
        self.config = TransformerConfig(**manifest["config"])
        self.english = EnglishTokenizer.load(folder / "tokenizer_en.json")
        self.chinese = ChineseTokenizer.load(folder / "vocab_zh.json")
        self.snapshots = {entry["name"]: entry for entry in manifest["snapshots"]}
        self._models: OrderedDict[str, Transformer] = OrderedDict()
        self._lock = threading.Lock()
        self.loads = 0  # snapshots read from disk (tests read this)

    @classmethod
    def open(cls, folder: Path = FOLDER, cache_size: int = 2) -> Timeline | None:
        """The timeline in ``folder``, or None when it has no manifest."""
        path = folder / MANIFEST
        if not path.is_file():
            return None
        return cls(folder, json.loads(path.read_text(encoding="utf-8")), cache_size)

    @property
    def names(self) -> list[str]:
        return list(self.snapshots)

    def entry(self, name: str) -> dict:
        if name not in self.snapshots:
            raise TimelineError(f"no snapshot {name!r}; this timeline has {', '.join(self.names)}")
        return self.snapshots[name]

    def cached(self, name: str) -> bool:
        with self._lock:
            return name in self._models

    def state(self, name: str) -> dict[str, Tensor]:
        """A snapshot's float32 weights as stored (step 0: rebuilt from the config and seed)."""
        entry = self.entry(name)
        if entry.get("regenerated"):
            return initial_weights(self.config, int(self.manifest["run"]["seed"]))
        return dequantise(load_file(str(self.folder / entry["file"])))

    def model(self, name: str) -> Transformer:
        """The snapshot as a float32 model: from the cache, else loaded (the oldest one leaves)."""
        with self._lock:
            if name in self._models:
                self._models.move_to_end(name)
                return self._models[name]
        model = build_model(self.config, self.state(name))
        with self._lock:
            self.loads += 1
            self._models[name] = model
            self._models.move_to_end(name)
            while len(self._models) > self.cache_size:
                self._models.popitem(last=False)
        return model

    def load(self, name: str) -> None:
        """Load snapshot ``name`` into the cache, returning nothing (a caller holds only data)."""
        self.model(name)

    def read(self, name: str, text: str, max_len: int = MAX_LEN) -> dict:
        """``read_along`` with snapshot ``name`` (loaded first if it is not in the cache)."""
        return read_along(self.model(name), self.english, self.chinese, text, max_len)
