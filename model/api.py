"""The model's public face: everything the web app (``app/``) uses of ``model/``, in one place.

``app/`` imports the model through this module only (``tests/test_boundary.py`` checks it): the
translator and its errors, the decoding options and their rules, the trace and the questions
asked of it, the constants, the training timeline and the recipe's schedule. What comes back is
plain data — traces, dicts, lists, arrays — never a ``torch.nn.Module``; a call the app no
longer wants stops through :func:`stop_when` (the decoding loop asks ``should_stop`` before
every step), never through a hook on a layer.

Inside ``model/`` the modules import each other directly; this file gathers names, and adds
only what turns a module-taking function into one that takes the translator.
"""

from __future__ import annotations

from model.adapters.loading import load_translator
from model.decoding import (
    LENGTH_PENALTY,
    LIMITS,
    MAX_SEED,
    MIN_TEMPERATURE,
    STRATEGIES,
    DecodingOptions,
    Stopped,
    rank_hypotheses,
    stop_when,
)
from model.explain import ablation, arrays, interpret, record
from model.explain.arrays import stage_vectors
from model.explain.blocks import block_positions, open_block
from model.explain.kv_cache import kv_rows
from model.explain.record import ADD_NORM_NAMES, RecordedPass, Side, block_names, layout
from model.explain.trace import Trace, asdict_list, shown_hypotheses
from model.timeline import FOLDER as TIMELINE_FOLDER
from model.timeline import MANIFEST as TIMELINE_MANIFEST
from model.timeline import MAX_LEN as TIMELINE_MAX_LEN
from model.timeline import Timeline
from model.timeline import read_along as _read_along
from model.tokenizer import MAX_SOURCE_TOKENS, ChineseTokenizer, EnglishTokenizer
from model.training.recipe import RECIPES, parse_recipe
from model.training.schedule import learning_rate, run_total_steps
from model.transformer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from model.translator import CheckpointError, InputError, Translator, set_threads

__all__ = [
    "ADD_NORM_NAMES", "BOS_ID", "EOS_ID", "LENGTH_PENALTY", "LIMITS", "MAX_SEED", "MAX_SOURCE_TOKENS",
    "MIN_TEMPERATURE", "PAD_ID",
    "RECIPES", "STRATEGIES", "TIMELINE_FOLDER", "TIMELINE_MANIFEST", "UNK_ID",
    "CheckpointError", "ChineseTokenizer", "DecodingOptions", "EnglishTokenizer", "InputError",
    "RecordedPass", "Side", "Stopped", "Timeline", "Trace", "Translator",
    "ablation", "arrays", "asdict_list", "block_names", "block_positions", "interpret", "kv_rows",
    "layout", "learning_rate", "load_translator", "open_block", "parse_recipe", "rank_hypotheses",
    "read_along", "record", "run_total_steps", "set_threads", "shown_hypotheses", "stage_vectors",
    "stop_when",
]


def read_along(translator: Translator, text: str, max_len: int = TIMELINE_MAX_LEN) -> dict:
    """``model.timeline.read_along`` with the served model (the /timeline page's "shipped"): the
    greedy translation, each character's probability and every layer's cross-attention."""
    return _read_along(translator.model, translator.english, translator.chinese, text, max_len)
