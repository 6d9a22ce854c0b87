"""Choose the translator to serve: our checkpoint folder, a Hugging Face Marian folder, or a hub id."""

from __future__ import annotations

from pathlib import Path

from model.marian import HUB_ID, MarianTranslator, is_marian_folder
from model.translator import CHECKPOINT_FILES, DEFAULT_CHECKPOINT, CheckpointError, Translator


def load_translator(source: str | Path | None = None) -> Translator:
    """``source``: a folder with our checkpoint (model/checkpoints by default), a local Hugging Face
    Marian folder (e.g. opus-mt-en-zh), or a hub id such as ``Helsinki-NLP/opus-mt-en-zh`` (fetched
    through the Hugging Face cache when this machine can reach the hub)."""
    if source is None or str(source) == "":
        return Translator.load(DEFAULT_CHECKPOINT)
    path = Path(source).expanduser()
    if path.is_dir():
        if is_marian_folder(path):
            return MarianTranslator.load(path)
        if any((path / name).is_file() for name in CHECKPOINT_FILES):
            return Translator.load(path)
        raise CheckpointError(
            f"no model in {path}: pass a folder with this project's checkpoint "
            f"({', '.join(CHECKPOINT_FILES)}) "
            "or a Hugging Face Marian folder (config.json, model.safetensors, source.spm, target.spm, "
            "vocab.json), e.g. from `huggingface-cli download Helsinki-NLP/opus-mt-en-zh --local-dir DIR`")
    text = str(source)
    if HUB_ID.match(text) and not text.startswith((".", "/", "~")):
        return MarianTranslator.load(text)
    raise CheckpointError(
        f"no model folder at {path}: pass an existing folder (this project's checkpoint or a Hugging "
        "Face Marian folder) or a hub id such as Helsinki-NLP/opus-mt-en-zh")
