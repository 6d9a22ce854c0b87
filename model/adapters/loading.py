"""Choose the translator to serve: our checkpoint folder, a Hugging Face Marian folder, or a hub id."""

from __future__ import annotations

import json
import math
import struct
from dataclasses import asdict, fields
from pathlib import Path

import torch

from model.adapters.marian import HUB_ID, MarianTranslator, is_marian_folder
from model.decoding import DecodingOptions
from model.transformer import TransformerConfig
from model.translator import DEFAULT_CHECKPOINT, RESTORE, CheckpointError, Translator, corrupt

MARIAN_HINT = ("or pass --model with a Hugging Face Marian folder (config.json, model.safetensors, "
               "source.spm, target.spm, vocab.json; `huggingface-cli download "
               "Helsinki-NLP/opus-mt-en-zh --local-dir DIR` fetches one)")


MARIAN_FIX = ("download the folder again (`huggingface-cli download Helsinki-NLP/opus-mt-en-zh "
              "--local-dir DIR`) and pass --model DIR")
# Translated once when a model loads: a model whose weights are finite can still overflow (its
# numbers turn to inf and NaN inside), and would then answer every request with nothing.
PROBE = "The cat sits on the mat."


def load_translator(source: str | Path | None = None) -> Translator:
    """``source``: a folder with our checkpoint (model/checkpoints by default), a local Hugging Face
    Marian folder (e.g. opus-mt-en-zh), or a hub id such as ``Helsinki-NLP/opus-mt-en-zh`` (fetched
    through the Hugging Face cache when this machine can reach the hub). A model whose weights are
    not all finite, or that cannot translate ``PROBE``, is refused with a CheckpointError."""
    return usable(_load(source))


def _load(source: str | Path | None) -> Translator:
    if source is None or str(source) == "":
        return Translator.load(DEFAULT_CHECKPOINT)
    path = Path(source).expanduser()
    if path.is_dir() and _names_marian(path):
        return _marian(path)
    text = str(source)
    if not path.exists() and HUB_ID.match(text) and not text.startswith((".", "/", "~")):
        return _marian(text)
    try:
        if (path / "config.json").is_file() and (path / "weights.safetensors").is_file():
            check_sizes(path)  # before Translator.load allocates a tensor
        return Translator.load(path)
    except CheckpointError as error:
        raise CheckpointError(f"{error}; {MARIAN_HINT}") from error


def usable(translator: Translator) -> Translator:
    """``translator`` if every weight is finite and it translates ``PROBE`` with finite
    probabilities; else one line naming the file (or folder) and the fix."""
    marian = isinstance(translator, MarianTranslator)
    folder = translator.path or Path("the model")
    fix = MARIAN_FIX if marian else RESTORE
    weights = folder / ("model.safetensors" if marian else "weights.safetensors")
    for name, tensor in [*translator.model.named_parameters(), *translator.model.named_buffers()]:
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise CheckpointError(f"{weights} holds weights that are not finite ({bad:,} NaN or "
                                  f"infinite values in {name}); {fix}")
    try:
        result = translator.translate(PROBE, DecodingOptions(max_len=16))
        why = None if result.steps and all(math.isfinite(step.prob) for step in result.steps) \
            else "its probabilities are not finite numbers"
    except Exception as error:  # the model raised on a plain sentence
        first = (str(error).strip().splitlines() or [""])[0][:200]
        why = f"{type(error).__name__}: {first}" if first else type(error).__name__
    if why:
        raise CheckpointError(f"{folder} cannot translate the probe sentence {PROBE!r} ({why}); "
                              f"{fix}")
    return translator


def _names_marian(path: Path) -> bool:
    try:
        return is_marian_folder(path)
    except Exception:  # config.json is not an object: Translator.load says which file is bad
        return False


def _marian(source: str | Path) -> Translator:
    """A Marian model, or one line naming the folder when one of its files is garbage."""
    try:
        return MarianTranslator.load(source)
    except CheckpointError:
        raise
    except Exception as error:  # e.g. a corrupt vocab.json read after the model loaded
        raise CheckpointError(corrupt(Path(source), error, MARIAN_FIX)) from error


HEADER_LIMIT = 100 * 1024 * 1024  # a safetensors header larger than this is not a header


def safetensors_shapes(file: Path) -> dict[str, tuple[int, ...]]:
    """Each tensor's shape, read from a safetensors file's header alone (8 bytes of length, then
    JSON), without reading any tensor."""
    with open(file, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise ValueError("the file is shorter than a safetensors header")
        (length,) = struct.unpack("<Q", head)
        if length > HEADER_LIMIT:
            raise ValueError(f"its header claims {length:,} bytes")
        header = json.loads(handle.read(length))
    return {name: tuple(entry["shape"]) for name, entry in header.items() if name != "__metadata__"}


def check_sizes(folder: Path) -> None:
    """Refuse, before any tensor is allocated, a config.json whose sizes disagree with
    weights.safetensors' header: one line naming the field and the tensor, never cut. The shapes
    are worked out from the sizes (``expected_shapes``), so an absurd d_model costs nothing.
    (Building the model on torch's meta device instead cost 8-11 s of torch imports.)"""
    config_file, weights = folder / "config.json", folder / "weights.safetensors"
    try:
        config = TransformerConfig.load(config_file)
    except Exception:  # Translator.load names the file and says why
        return
    sizes = {f.name: v for f in fields(config) if isinstance(v := getattr(config, f.name), int)
             and not isinstance(v, bool)}
    bad = [f"{name} = {value}" for name, value in sizes.items() if value < 1]
    if config.n_heads >= 1 and config.d_model % config.n_heads:
        bad.append(f"d_model = {config.d_model} is not a multiple of n_heads = {config.n_heads}")
    if bad:
        raise CheckpointError(f"{config_file} has sizes no model can have ({'; '.join(bad)}); "
                              f"{RESTORE}")
    try:
        stored = safetensors_shapes(weights)
    except Exception as error:  # Translator.load names the file and says why
        raise CheckpointError(corrupt(weights, error, RESTORE)) from error
    for name, want in expected_shapes(config).items():
        have = stored.get(name)
        if have is None or want == have:
            continue  # a missing tensor: load_state_dict names it
        culprit = next((field for dim in range(min(len(want), len(have))) if want[dim] != have[dim]
                        for field, value in sizes.items() if value == want[dim]), None)
        blame = (f"{culprit} = {sizes[culprit]} in {config_file.name}" if culprit
                 else f"the sizes in {config_file.name} ({json.dumps(asdict(config))})")
        raise CheckpointError(f"{config_file} does not match {weights}: {blame} makes "
                              f"{name} {list(want)}, the file holds {list(have)}; restore the "
                              f"config.json that was saved with these weights, or {RESTORE}")


def expected_shapes(config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """The shapes model/transformer.py gives the weights a config's sizes decide (embeddings,
    attention, feed-forward, norms); tests/model/test_config_sizes.py holds them to the model's."""
    d, ff = config.d_model, config.d_ff
    shapes = {"src_embedding.tokens.weight": (config.src_vocab_size, d),
              "tgt_embedding.tokens.weight": (config.tgt_vocab_size, d)}
    stacks = [("encoder_layers", config.n_encoder_layers, ("self_attention",)),
              ("decoder_layers", config.n_decoder_layers, ("self_attention", "cross_attention"))]
    for stack, count, attentions in stacks:
        for i in range(count):
            layer = f"{stack}.{i}"
            for attention in attentions:
                for w in ("w_q", "w_k", "w_v", "w_o"):
                    shapes[f"{layer}.{attention}.{w}.weight"] = (d, d)
                    shapes[f"{layer}.{attention}.{w}.bias"] = (d,)
            shapes[f"{layer}.ffn.linear1.weight"] = (ff, d)
            shapes[f"{layer}.ffn.linear1.bias"] = (ff,)
            shapes[f"{layer}.ffn.linear2.weight"] = (d, ff)
            shapes[f"{layer}.ffn.linear2.bias"] = (d,)
    return shapes
