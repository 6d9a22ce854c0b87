"""The KV-cache race (the same greedy decoding with and without the cache, timed step by step)
and what its cached run left in its cache, as plain data for the /kv-cache page."""

from __future__ import annotations

import time

import numpy as np
import torch

from model.decoding import DecodingOptions, generate
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


@torch.inference_mode()
def race(translator, text: str, steps: int, should_stop=None) -> dict:
    """The /kv-cache race: ``steps`` tokens generated greedily with and without the KV cache,
    every step timed.

    <eos> is kept from being chosen, so both runs do exactly ``steps`` steps however short the
    translation. Both runs are ``model.decoding.generate``, the decoding every page uses: the
    cached run feeds one new position per step and keeps its keys and values; the uncached run
    feeds the whole prefix each step, recomputing every key and value. Only the cache differs.
    ``cache`` is what the cached run's KV cache holds at the end, layer by layer (tensors, for the
    page to read).
    """
    src = torch.tensor([translator.source_ids(text)])
    memory = translator.model.encode(src)
    runs = {}
    for use_cache in (True, False):
        options = DecodingOptions(max_len=steps, use_cache=use_cache)
        step_ms: list[float] = []
        seen: dict = {}

        def timed(decoder, step_ms=step_ms, seen=seen) -> None:  # called after every step
            now = time.perf_counter()
            step_ms.append((now - seen["last"]) * 1000)
            seen["last"], seen["decoder"] = now, decoder
            if "cross" not in seen:  # the cross-attention's keys after the first step
                seen["cross"] = [cache.cross_keys for cache in decoder.caches]

        seen["last"] = time.perf_counter()
        result = generate(translator.model, src, options, memory=memory, min_len=steps,
                          on_step=timed, should_stop=should_stop)
        tokens = result.tokens
        runs["cached" if use_cache else "uncached"] = {
            "tokens": tokens, "step_ms": step_ms,
            "positions": [1 if use_cache else n + 1 for n in range(steps)],
        }
        if use_cache:  # what the cache holds at the end: the page reads it, not a rerun
            runs["cached"]["cache"] = [
                {"k": cache.keys[:, :, :steps], "v": cache.values[:, :, :steps],
                 "cross_k": cache.cross_keys, "cross_v": cache.cross_values,
                 "cross_reused": cache.cross_keys is first}
                for cache, first in zip(seen["decoder"].caches, seen["cross"], strict=True)
            ]
    cached, uncached = runs["cached"], runs["uncached"]
    return {
        "steps": steps,
        "cached_ms": round(sum(cached["step_ms"]), 3),
        "uncached_ms": round(sum(uncached["step_ms"]), 3),
        "identical": cached["tokens"] == uncached["tokens"],
        "tokens": translator.target_tokens(cached["tokens"]),
        "cached_step_ms": [round(x, 4) for x in cached["step_ms"]],
        "uncached_step_ms": [round(x, 4) for x in uncached["step_ms"]],
        "cached_positions": cached["positions"],
        "uncached_positions": uncached["positions"],
        "kv_rows": list(range(1, steps + 1)),
        "kv_floats_per_layer": [
            2 * translator.config.d_model * n for n in range(1, steps + 1)
        ],
        # per decoder layer, the cached run's cache after the last step (tensors: the API
        # picks what it shows and never sends this as it is)
        "cache": cached["cache"],
    }
