"""The encoder-decoder Transformer, written out in the order the documents draw it.

input ids → token embedding × √d_model + sinusoidal positional encoding
          → N encoder layers (self-attention → Add & Norm → FFN → Add & Norm)
          → N decoder layers (masked self-attention → Add & Norm
                              → cross-attention → Add & Norm → FFN → Add & Norm)
          → linear to the Chinese vocabulary → softmax

The only implementation of each layer: training runs it over the whole target prefix at once,
decoding over the new positions with a KV cache passed in (``cache=``, ``model/kv.py``).

Every attention call can write what it computed (Q, K, V, the raw, scaled and masked scores and
the weights) into a ``record`` dict, and every layer can record its Add & Norm and feed-forward
statistics, so a trace can show the real numbers without a second implementation. Each Add & Norm
is recorded under the name of the sublayer it follows (``ffn_add_norm`` on both sides);
``model/explain/record.py`` is the one reader of that layout.

``encode`` and ``decode`` also take an ``ablation=``: parts switched off for that one pass (heads,
sublayers, the positional encoding; ``model/parts_off.py``'s ``Ablation``). Like ``record``
it is a plain argument, never state on a module, and absent it costs nothing.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.parts_off import Ablation, LayerOff

if TYPE_CHECKING:
    from model.kv import AttentionCache, KVCache

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
NEVER_GENERATED = (PAD_ID, BOS_ID)  # the model may never output padding or a second <bos>
_NEVER_GENERATED = torch.tensor(NEVER_GENERATED)


def mask_special(logits: Tensor) -> Tensor:
    """Logits with <pad> and <bos> removed from the choice (probability exactly 0). A new tensor:
    ``logits`` itself is left as it was."""
    return logits.index_fill(-1, _NEVER_GENERATED, float("-inf"))


@dataclass(frozen=True)
class TransformerConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 256
    n_heads: int = 4
    n_encoder_layers: int = 3
    n_decoder_layers: int = 3
    d_ff: int = 1024
    dropout: float = 0.1
    max_positions: int = 256
    tie_output: bool = True
    # Options a converted model (e.g. a Hugging Face Marian model, model/adapters/marian.py) needs; the
    # defaults are this project's own architecture, so older config.json files load unchanged.
    activation: str = "relu"  # the FFN's non-linearity: relu, swish (= silu) or gelu
    position_layout: str = "interleaved"  # sin/cos interleaved, or "halves": all sin, then all cos
    scale_embedding: bool = True  # token vectors × √d_model before positions are added

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> TransformerConfig:
        return cls(**json.loads(path.read_text(encoding="utf-8")))


# -- Masks. Convention everywhere: True means "may attend", False means "blocked". ------------
def padding_mask(ids: Tensor) -> Tensor:
    """(B, S) ids → (B, 1, 1, S): every query may look at every non-padding key."""
    return (ids != PAD_ID)[:, None, None, :]


def causal_mask(length: int, device: torch.device | None = None) -> Tensor:
    """(1, 1, T, T) lower-triangular: position t may look at positions 0..t only."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]


def decoder_self_mask(tgt_ids: Tensor) -> Tensor:
    """Causal mask combined with the target's own padding mask: (B, 1, T, T)."""
    return causal_mask(tgt_ids.size(1), tgt_ids.device) & padding_mask(tgt_ids)


# -- Embeddings and positional encoding -------------------------------------------------------
def sinusoidal_positions(max_positions: int, d_model: int, layout: str = "interleaved") -> Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d)).

    ``layout="halves"`` puts the same numbers as [sin…, cos…] (Marian's table, computed in float64
    as Marian does, so it matches the Hugging Face table exactly).
    """
    if layout == "halves":
        position = torch.arange(max_positions, dtype=torch.float64)[:, None]
        angle = position / 10000 ** (2 * torch.arange(d_model // 2, dtype=torch.float64) / d_model)
        return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1).float()
    if layout != "interleaved":
        raise ValueError(f"unknown position_layout {layout!r}")
    position = torch.arange(max_positions, dtype=torch.float32)[:, None]
    frequency = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model)
    )
    encoding = torch.zeros(max_positions, d_model)
    encoding[:, 0::2] = torch.sin(position * frequency)
    encoding[:, 1::2] = torch.cos(position * frequency)
    return encoding


class Embedding(nn.Module):
    """Token embedding scaled by √d_model, plus the fixed sinusoidal positional encoding."""

    def __init__(self, vocab_size: int, config: TransformerConfig):
        super().__init__()
        self.d_model = config.d_model
        self.scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.tokens = nn.Embedding(vocab_size, config.d_model, padding_idx=PAD_ID)
        nn.init.normal_(self.tokens.weight, mean=0.0, std=config.d_model**-0.5)
        with torch.no_grad():
            self.tokens.weight[PAD_ID].zero_()
        self.register_buffer(
            "positions",
            sinusoidal_positions(config.max_positions, config.d_model, config.position_layout),
            persistent=False,
        )
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self, ids: Tensor, offset: int = 0, record: dict | None = None, token: Tensor | None = None,
        positions: bool = True,
    ) -> Tensor:
        """``token`` replaces the looked-up, scaled token vectors (attribution methods vary them);
        ``positions=False`` leaves the positional encoding out (an ablation)."""
        if token is None:
            token = self.tokens(ids) * self.scale
        position = self.positions[offset : offset + ids.size(1)][None]
        if not positions:
            position = torch.zeros_like(position)
        summed = token + position
        if record is not None:
            record["token"] = token
            record["position"] = position.expand_as(token)
            record["sum"] = summed
        return self.dropout(summed)


# -- Attention --------------------------------------------------------------------------------
def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    record: dict | None = None,
    dropout: nn.Module | None = None,
) -> tuple[Tensor, Tensor]:
    """softmax(QKᵀ / √d_k, masked) · V, written out step by step. Returns (output, weights).

    In training, ``dropout`` drops attention weights before they mix the values (as in the
    reference implementations); the returned and recorded weights are the undropped ones.
    """
    raw = q @ k.transpose(-2, -1)
    scaled = raw / math.sqrt(q.size(-1))
    masked = scaled if mask is None else scaled.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(masked, dim=-1)
    output = (weights if dropout is None else dropout(weights)) @ v
    if record is not None:
        record.update(q=q, k=k, v=v, raw=raw, scaled=scaled, masked=masked, weights=weights)
    return output, weights


class MultiHeadAttention(nn.Module):
    """Project to Q, K, V, split into heads, attend in each head, concatenate, project back."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_head = config.d_head
        self.w_q = nn.Linear(config.d_model, config.d_model)
        self.w_k = nn.Linear(config.d_model, config.d_model)
        self.w_v = nn.Linear(config.d_model, config.d_model)
        self.w_o = nn.Linear(config.d_model, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def split_heads(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, self.d_head).transpose(1, 2)

    def forward(
        self,
        query: Tensor,
        key_value: Tensor,
        mask: Tensor | None = None,
        record: dict | None = None,
        heads_off: tuple[Tensor, Tensor | float] | None = None,
        cache: AttentionCache | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Attend from ``query`` to ``key_value``.

        ``heads_off`` = (keep (B or 1, H, 1, 1), fill): where keep is False, a head's output is
        replaced by ``fill`` before W_O (an ablation; :class:`Ablation`). ``cache`` (decoding)
        gives the keys and values: those of the positions before plus ``key_value``'s
        (self-attention), or the encoder output's, projected on the first step only (cross).
        """
        q = self.split_heads(self.w_q(query))  # (B, H, T, K)

        def project() -> tuple[Tensor, Tensor]:
            return self.split_heads(self.w_k(key_value)), self.split_heads(self.w_v(key_value))

        k, v = project() if cache is None else cache.keys_values(project)  # (B, H, S, K) each
        heads, weights = scaled_dot_product_attention(q, k, v, mask, record, self.dropout)  # (B, H, T, K)
        if heads_off is not None:
            keep, fill = heads_off
            heads = torch.where(keep, heads, fill)
        batch, _, length, _ = heads.shape
        merged = heads.transpose(1, 2).reshape(batch, length, self.n_heads * self.d_head)
        return self.w_o(merged), weights


# -- Add & Norm and the position-wise feed-forward network ------------------------------------
ACTIVATIONS = {"relu": torch.relu, "swish": F.silu, "silu": F.silu, "gelu": F.gelu}


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W₁ + b₁) W₂ + b₂, applied to every position independently
    (another ``activation`` than ReLU replaces the max(0, ·), e.g. SiLU in Marian models)."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        if config.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}")
        self.linear1 = nn.Linear(config.d_model, config.d_ff)
        self.linear2 = nn.Linear(config.d_ff, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.activate = ACTIVATIONS[config.activation]

    def forward(self, x: Tensor, record: dict | None = None) -> Tensor:
        hidden = self.activate(self.linear1(x))
        if record is not None:
            record["hidden"] = hidden
        return self.linear2(self.dropout(hidden))


class AddNorm(nn.Module):
    """Post-norm residual block: LayerNorm(x + Dropout(sublayer(x)))."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.norm = nn.LayerNorm(config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor, sublayer_out: Tensor, record: dict | None = None) -> Tensor:
        summed = x + self.dropout(sublayer_out)
        normed = self.norm(summed)
        if record is not None:
            record.update(residual=x, sublayer=sublayer_out, sum=summed, normed=normed)
        return normed


# -- Encoder and decoder layers ---------------------------------------------------------------
class EncoderLayer(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.self_attention = MultiHeadAttention(config)
        self.add_norm1 = AddNorm(config)
        self.ffn = FeedForward(config)
        self.add_norm2 = AddNorm(config)

    def forward(
        self, x: Tensor, src_mask: Tensor, record: dict | None = None, off: LayerOff | None = None
    ) -> Tensor:
        r = _sub_records(record, "self_attention", "self_attention_add_norm", "ffn", "ffn_add_norm")
        attended, _ = self.self_attention(
            x, x, src_mask, record=r[0], heads_off=_heads_off(off, "self_attention")
        )
        x = self.add_norm1(x, _output(off, "self_attention", attended), r[1])
        return self.add_norm2(x, _output(off, "ffn", self.ffn(x, r[2])), r[3])


class DecoderLayer(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.self_attention = MultiHeadAttention(config)
        self.add_norm1 = AddNorm(config)
        self.cross_attention = MultiHeadAttention(config)
        self.add_norm2 = AddNorm(config)
        self.ffn = FeedForward(config)
        self.add_norm3 = AddNorm(config)

    def forward(
        self,
        y: Tensor,
        memory: Tensor | None,
        tgt_mask: Tensor | None,
        src_mask: Tensor | None,
        record: dict | None = None,
        off: LayerOff | None = None,
        cache: tuple[AttentionCache, AttentionCache] | None = None,
    ) -> Tensor:
        """The layer as drawn. ``cache`` (decoding: ``y`` holds the new positions only) is this
        layer's part of the KV cache, (self-attention, cross-attention)."""
        own_cache, cross_cache = (None, None) if cache is None else cache
        r = _sub_records(
            record, "self_attention", "self_attention_add_norm", "cross_attention",
            "cross_attention_add_norm", "ffn", "ffn_add_norm",
        )
        attended, _ = self.self_attention(
            y, y, tgt_mask, record=r[0], heads_off=_heads_off(off, "self_attention"), cache=own_cache
        )
        y = self.add_norm1(y, _output(off, "self_attention", attended), r[1])
        crossed, _ = self.cross_attention(
            y, memory, src_mask, record=r[2], heads_off=_heads_off(off, "cross_attention"),
            cache=cross_cache,
        )
        y = self.add_norm2(y, _output(off, "cross_attention", crossed), r[3])
        return self.add_norm3(y, _output(off, "ffn", self.ffn(y, r[4])), r[5])


def _sub_records(record: dict | None, *names: str) -> list[dict | None]:
    if record is None:
        return [None] * len(names)
    return [record.setdefault(name, {}) for name in names]


def _heads_off(off: LayerOff | None, sublayer: str) -> tuple[Tensor, Tensor | float] | None:
    return None if off is None else off.heads.get(sublayer)


def _output(off: LayerOff | None, sublayer: str, output: Tensor) -> Tensor:
    return output if off is None else off.output(sublayer, output)


# -- The whole model --------------------------------------------------------------------------
class Transformer(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        self.src_embedding = Embedding(config.src_vocab_size, config)
        self.tgt_embedding = Embedding(config.tgt_vocab_size, config)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(config) for _ in range(config.n_encoder_layers)
        )
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(config) for _ in range(config.n_decoder_layers)
        )
        self.output = nn.Linear(config.d_model, config.tgt_vocab_size)
        if config.tie_output:
            self.output.weight = self.tgt_embedding.tokens.weight

    def encode(
        self, src_ids: Tensor, record: dict | None = None, token_embeddings: Tensor | None = None,
        ablation: Ablation | None = None,
    ) -> Tensor:
        """Encoder stack → memory (B, S, D). ``token_embeddings`` (B, S, D), if given, stands in for
        the scaled token look-up (positions are still added), like Hugging Face's ``inputs_embeds``.
        ``ablation`` switches parts off for this pass."""
        src_mask = padding_mask(src_ids)
        x = self.src_embedding(
            src_ids, record=_layer_record(record, "embedding"), token=token_embeddings,
            positions=ablation is None or "encoder" not in ablation.positions,
        )
        for index, layer in enumerate(self.encoder_layers):
            off = None if ablation is None else ablation.layer("encoder", index, self.config.n_heads)
            x = layer(x, src_mask, record=_layer_record(record, "layers", index), off=off)
        return x

    def decode(
        self,
        tgt_ids: Tensor,
        memory: Tensor,
        src_ids: Tensor,
        record: dict | None = None,
        ablation: Ablation | None = None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """Decoder stack → logits for every position of ``tgt_ids`` (B, T, V); ``ablation``
        switches parts off for this pass.

        With a ``cache`` (``model/kv.py``), ``tgt_ids`` are the positions after those already in
        it: they attend to the cached keys and values as well as to their own, and the cache
        keeps theirs for the next call (what decoding does, one position per step)."""
        if cache is None:
            src_mask, tgt_mask, offset = padding_mask(src_ids), decoder_self_mask(tgt_ids), 0
        else:
            src_mask, tgt_mask, offset = cache.src_mask, cache.self_mask(tgt_ids.size(1)), cache.length
        y = self.tgt_embedding(
            tgt_ids, offset, record=_layer_record(record, "embedding"),
            positions=ablation is None or "decoder" not in ablation.positions,
        )
        for index, layer in enumerate(self.decoder_layers):
            off = None if ablation is None else ablation.layer("decoder", index, self.config.n_heads)
            y = layer(y, memory, tgt_mask, src_mask, record=_layer_record(record, "layers", index),
                      off=off, cache=None if cache is None else cache.layer(index))
        if cache is not None:
            cache.advance(tgt_ids.size(1))
        logits = self.output(y)
        if record is not None:
            record["final"] = y
            record["logits"] = logits
        return logits

    def forward(self, src_ids: Tensor, tgt_in: Tensor, ablation: Ablation | None = None) -> Tensor:
        """Teacher forcing: logits for every target position at once."""
        memory = self.encode(src_ids, ablation=ablation)
        return self.decode(tgt_in, memory, src_ids, ablation=ablation)


def _layer_record(record: dict | None, key: str, index: int | None = None) -> dict | None:
    if record is None:
        return None
    if index is None:
        return record.setdefault(key, {})
    layers = record.setdefault(key, [])
    while len(layers) <= index:
        layers.append({})
    return layers[index]


def count_parameters(model: Transformer) -> dict[str, int]:
    """Trainable parameters per component (a tied output projection is counted once)."""
    def size(module: nn.Module) -> int:
        return sum(p.numel() for p in module.parameters())

    counts = {
        "source_embedding": size(model.src_embedding),
        "target_embedding": size(model.tgt_embedding),
        "encoder": size(model.encoder_layers),
        "decoder": size(model.decoder_layers),
        "output_projection": model.output.bias.numel()
        + (0 if model.config.tie_output else model.output.weight.numel()),
    }
    counts["total"] = sum(p.numel() for p in model.parameters())
    return counts
