"""The model tests hold the decoders (with and without the KV cache) and the exports to one
another on a tiny *random* model: its translations run to max_len, so every comparison covers
long outputs. (The app and browser tests serve the tiny model that has learned
TINY_PAIRS, whose translations end after a few tokens: tests/conftest.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from model.translator import Translator
from tests.conftest import make_tiny_checkpoint


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    return make_tiny_checkpoint(tmp_path_factory.mktemp("tiny-random") / "checkpoint")


@pytest.fixture(scope="session")
def tiny_translator(tiny_checkpoint) -> Translator:
    return Translator.load(tiny_checkpoint)
