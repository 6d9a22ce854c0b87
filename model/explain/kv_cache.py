"""What the KV-cache race's cached run left in its cache, as plain data for the /kv-cache page."""

from __future__ import annotations

import numpy as np
import torch

from model.transformer import BOS_ID

KV_DIMS = 8  # dimensions of each cached K/V row the page shows


def _window(tensor: torch.Tensor, head: int, dims: int) -> list[list[float]]:
    return np.round(tensor[0, head, :, :dims].double().numpy(), 4).tolist()


def kv_rows(translator, text: str, race: dict, layer: int = 0, head: int = 0,
            dims: int = KV_DIMS) -> dict:
    """What the race's cached run left in its KV cache (``race["cache"]``: no model run): the
    shape of layer ``layer``'s self-attention K after every step (one row more each step), the
    first ``dims`` numbers of every cached K and V row of ``head``, and the cross-attention K and
    V, projected from the encoder once and then reused unchanged."""
    own = race["cache"][layer]
    steps, (_, heads, _, d_head) = race["steps"], own["k"].shape
    fed = [BOS_ID, *translator.target_ids(race["tokens"])][:steps]  # the race's inputs
    return {
        "layer": layer, "head": head, "dims": dims,
        "self": {"shapes": [[1, heads, n, d_head] for n in range(1, steps + 1)],
                 "tokens": translator.target_tokens(fed),
                 "k": _window(own["k"], head, dims),
                 "v": _window(own["v"], head, dims)},
        "cross": {"shape": list(own["cross_k"].shape),
                  "tokens": translator.source_tokens(translator.source_ids(text)),
                  "k": _window(own["cross_k"], head, dims),
                  "v": _window(own["cross_v"], head, dims), "reused": own["cross_reused"]},
    }


