"""Choose the translator to serve: our checkpoint folder, a Hugging Face Marian folder, or a hub id."""

from __future__ import annotations

from pathlib import Path

from model.adapters.marian import HUB_ID, MarianTranslator, is_marian_folder
from model.translator import DEFAULT_CHECKPOINT, CheckpointError, Translator, corrupt

MARIAN_HINT = ("or pass --model with a Hugging Face Marian folder (config.json, model.safetensors, "
               "source.spm, target.spm, vocab.json; `huggingface-cli download "
               "Helsinki-NLP/opus-mt-en-zh --local-dir DIR` fetches one)")


def load_translator(source: str | Path | None = None) -> Translator:
    """``source``: a folder with our checkpoint (model/checkpoints by default), a local Hugging Face
    Marian folder (e.g. opus-mt-en-zh), or a hub id such as ``Helsinki-NLP/opus-mt-en-zh`` (fetched
    through the Hugging Face cache when this machine can reach the hub)."""
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
        raise CheckpointError(corrupt(Path(source), error, "download the folder again "
                                      "(`huggingface-cli download Helsinki-NLP/opus-mt-en-zh "
                                      "--local-dir DIR`) and pass --model DIR")) from error
