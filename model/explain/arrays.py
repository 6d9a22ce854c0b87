"""A recorded pass as numpy arrays, stage by stage in the model's own order: what a page packs
for the browser (the x-ray's ``app/xray/``) without touching torch. Nothing is rounded here
unless the trace rounds it too (its decimals are said)."""

from __future__ import annotations

import numpy as np

from model.explain.record import ADD_NORM_NAMES, ATTENTION_KINDS, SUBLAYERS, RecordedPass, Side
from model.explain.trace import active_shares, add_norm_sizes, head_codes


def stage_vectors(recorded: RecordedPass, side: Side) -> np.ndarray:
    """(stages, L, D) float32: every position's vector after every stage, in
    ``RecordedPass.stages``' order (``record.layout``'s entries with a stage)."""
    return np.stack([vectors.detach().float().numpy() for _, _, vectors in recorded.stages(side)])


def attention_codes(recorded: RecordedPass) -> dict[str, np.ndarray]:
    """Every attention weight as its trace code (w × 10⁵, uint32): kind (``ATTENTION_KINDS``) →
    [layer][head][query][key]."""
    return {kind: head_codes(recorded.records(side, f"attention:{sublayer}"))
            for kind, (side, sublayer) in ATTENTION_KINDS.items()}


def norm_sizes(recorded: RecordedPass, side: Side, names: tuple[str, ...]) -> np.ndarray:
    """(layers, Add & Norms, names, L): each Add & Norm's vector sizes ("residual", "sublayer",
    "normed"), rounded to the trace's 3 decimals."""
    records = [r for sub in SUBLAYERS[side] for r in recorded.records(side, f"add_norm:{sub}")]
    sizes = add_norm_sizes(records, names)
    sizes = sizes.reshape(len(names), len(SUBLAYERS[side]), recorded.n_layers(side), -1)
    return sizes.transpose(2, 1, 0, 3)


def ffn_shares(recorded: RecordedPass, side: Side) -> np.ndarray:
    """(layers, L): the share of each position's FFN hidden units above 0 (4 decimals)."""
    return active_shares(recorded.records(side, "ffn"))


def logits(recorded: RecordedPass, steps: int) -> np.ndarray:
    """(steps, V) float32: the model's logits, −inf where it may never produce the token."""
    return recorded.logits[:steps].float().numpy()


def embedding_head(recorded: RecordedPass, side: Side, dims: int, digits: int) -> list:
    """[position][dims]: the first ``dims`` numbers of each position's embedding, rounded."""
    return np.round(recorded.embedding(side)[:, :dims].double().numpy(), digits).tolist()


def norm_parameters(model) -> dict[str, list[tuple[np.ndarray, np.ndarray, float]]]:
    """Each side's Add & Norm LayerNorms in the order of ``RecordedPass.stages``: (γ, β, ε)."""
    out = {}
    for side in ("encoder", "decoder"):
        layers = model.encoder_layers if side == "encoder" else model.decoder_layers
        norms = [getattr(layer, ADD_NORM_NAMES[side][sublayer]).norm
                 for layer in layers for sublayer in SUBLAYERS[side]]
        out[side] = [(norm.weight.detach().double().numpy(), norm.bias.detach().double().numpy(),
                      float(norm.eps)) for norm in norms]
    return out
