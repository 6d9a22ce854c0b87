"""Plain-data views of the model for the explanation pages (data preparation, positions).

Each function runs the model's own code (its tokenizers, ``padding_mask``, ``causal_mask``,
``decoder_self_mask`` and positional table) and returns lists, numbers and strings only.
"""

from __future__ import annotations

import torch

from model.trace import _round
from model.transformer import BOS_ID, EOS_ID, PAD_ID, causal_mask, decoder_self_mask, padding_mask
from model.translator import Translator

MAX_POSITIONS_SHOWN = 128


def _pad(rows: list[list[int]]) -> torch.Tensor:
    width = max(len(row) for row in rows)
    return torch.tensor([row + [PAD_ID] * (width - len(row)) for row in rows])


def padded_batch(translator: Translator, sources: list[str], targets: list[str]) -> dict:
    """Tokenize (source, target) pairs, pad them into one mini-batch and build every mask.

    Masks are 1 where attention is allowed and 0 where it is blocked, exactly as the model uses
    them: the encoder's self-attention and the cross-attention block padded source keys, the
    decoder's self-attention blocks future positions and padded target keys.
    """
    src_rows = [translator.source_ids(text) for text in sources]
    tgt_rows = [translator.chinese.encode(text) for text in targets]
    src = _pad(src_rows)  # (B, S)
    tgt_in = _pad([[BOS_ID, *row] for row in tgt_rows])  # (B, T)
    labels = _pad([[*row, EOS_ID] for row in tgt_rows])  # (B, T): tgt_in shifted left by one
    src_keys = padding_mask(src)  # (B, 1, 1, S)
    batch, s_len = src.shape
    t_len = tgt_in.size(1)
    encoder_mask = src_keys.expand(batch, 1, s_len, s_len)[:, 0]  # (B, S, S)
    decoder_mask = decoder_self_mask(tgt_in)[:, 0]  # (B, T, T)
    cross_mask = src_keys.expand(batch, 1, t_len, s_len)[:, 0]  # (B, T, S)
    return {
        "sources": sources,
        "targets": targets,
        "source_ids": src.tolist(),
        "source_tokens": [translator.source_tokens(row) for row in src.tolist()],
        "source_lengths": [len(row) for row in src_rows],
        "decoder_ids": tgt_in.tolist(),
        "decoder_tokens": [translator.target_tokens(row) for row in tgt_in.tolist()],
        "label_ids": labels.tolist(),
        "label_tokens": [translator.target_tokens(row) for row in labels.tolist()],
        "target_lengths": [len(row) + 1 for row in tgt_rows],
        "source_padding": src_keys[:, 0, 0].int().tolist(),  # (B, S)
        "target_padding": (tgt_in != PAD_ID).int().tolist(),  # (B, T)
        "causal": causal_mask(t_len)[0, 0].int().tolist(),  # (T, T) before padding is added
        "encoder_mask": encoder_mask.int().tolist(),
        "decoder_mask": decoder_mask.int().tolist(),
        "cross_mask": cross_mask.int().tolist(),
        "special": {"pad": PAD_ID, "bos": BOS_ID, "eos": EOS_ID},
    }


def positional_encoding(translator: Translator, positions: int) -> dict:
    """The model's fixed sinusoidal table for the first ``positions`` positions, and the cosine
    similarity between every pair of positions."""
    positions = max(1, min(positions, MAX_POSITIONS_SHOWN, translator.config.max_positions))
    table = translator.model.src_embedding.positions[:positions]  # (P, D)
    unit = table / table.norm(dim=-1, keepdim=True)
    return {
        "d_model": translator.config.d_model,
        "table": _round(table, 4),
        "cosine": _round(unit @ unit.T, 4),
        "norm": round(float(table[0].norm()), 4),  # the same for every position: √(D/2)
    }
