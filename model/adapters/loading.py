"""Choose the translator to serve: our checkpoint folder, a Hugging Face Marian folder, or a hub id."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from model.adapters.marian import HUB_ID, MarianTranslator, is_marian_folder
from model.decoding import DecodingOptions
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
