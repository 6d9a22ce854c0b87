"""Choose the translator to serve: our checkpoint folder, a Hugging Face Marian folder, or a hub id."""

from __future__ import annotations

from pathlib import Path

from model.adapters.marian import HUB_ID, MarianTranslator, is_marian_folder
from model.translator import DEFAULT_CHECKPOINT, CheckpointError, Translator

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
    if path.is_dir() and is_marian_folder(path):
        return MarianTranslator.load(path)
    text = str(source)
    if not path.exists() and HUB_ID.match(text) and not text.startswith((".", "/", "~")):
        return MarianTranslator.load(text)
    try:
        return Translator.load(path)
    except CheckpointError as error:
        raise CheckpointError(f"{error}; {MARIAN_HINT}") from error
