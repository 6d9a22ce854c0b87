"""The same weights in CTranslate2: the yardstick ``bench.engine`` times us against (bench only:
CTranslate2 is in the dev lock, not the runtime one, and nothing the app runs imports it).

``ctranslate2_spec`` lays our tensors out as a CTranslate2 post-norm Transformer (same weights,
same vocabularies); ``convert`` writes it to a folder; ``load`` gives a ``ctranslate2.Translator``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from model.transformer import BOS_ID, EOS_ID, UNK_ID

if TYPE_CHECKING:
    from model.translator import Translator


def ctranslate2_spec(translator: Translator):
    """Our weights as a CTranslate2 post-norm Transformer: same tensors, same vocabularies."""
    from ctranslate2.specs import common_spec, transformer_spec

    model, config = translator.model, translator.config
    activations = {"relu": common_spec.Activation.RELU, "silu": common_spec.Activation.SWISH,
                   "swish": common_spec.Activation.SWISH, "gelu": common_spec.Activation.GELU}
    if config.activation not in activations:
        raise ValueError(f"no CTranslate2 activation for {config.activation!r}")
    spec = transformer_spec.TransformerSpec.from_config(
        (config.n_encoder_layers, config.n_decoder_layers), config.n_heads, pre_norm=False,
        activation=activations[config.activation],
    )

    def numpy(tensor: torch.Tensor) -> np.ndarray:
        return tensor.detach().float().numpy().copy()

    def linear(target, *modules) -> None:  # several modules: fused along the output dimension
        target.weight = numpy(torch.cat([m.weight for m in modules]))
        target.bias = numpy(torch.cat([m.bias for m in modules]))

    def norm(target, module) -> None:
        target.gamma, target.beta = numpy(module.weight), numpy(module.bias)

    def embeddings(target, table, embedding) -> None:
        table.weight = numpy(embedding.tokens.weight)
        target.scale_embeddings = embedding.scale != 1.0  # by √d_model, or not at all
        target.position_encodings.encodings = numpy(embedding.positions)

    embeddings(spec.encoder, spec.encoder.embeddings[0], model.src_embedding)
    for layer_spec, layer in zip(spec.encoder.layer, model.encoder_layers, strict=True):
        attention = layer.self_attention
        linear(layer_spec.self_attention.linear[0], attention.w_q, attention.w_k, attention.w_v)
        linear(layer_spec.self_attention.linear[1], attention.w_o)
        norm(layer_spec.self_attention.layer_norm, layer.add_norm1.norm)
        linear(layer_spec.ffn.linear_0, layer.ffn.linear1)
        linear(layer_spec.ffn.linear_1, layer.ffn.linear2)
        norm(layer_spec.ffn.layer_norm, layer.add_norm2.norm)
    embeddings(spec.decoder, spec.decoder.embeddings, model.tgt_embedding)
    linear(spec.decoder.projection, model.output)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder_layers, strict=True):
        own, cross = layer.self_attention, layer.cross_attention
        linear(layer_spec.self_attention.linear[0], own.w_q, own.w_k, own.w_v)
        linear(layer_spec.self_attention.linear[1], own.w_o)
        norm(layer_spec.self_attention.layer_norm, layer.add_norm1.norm)
        linear(layer_spec.attention.linear[0], cross.w_q)
        linear(layer_spec.attention.linear[1], cross.w_k, cross.w_v)
        linear(layer_spec.attention.linear[2], cross.w_o)
        norm(layer_spec.attention.layer_norm, layer.add_norm2.norm)
        linear(layer_spec.ffn.linear_0, layer.ffn.linear1)
        linear(layer_spec.ffn.linear_1, layer.ffn.linear2)
        norm(layer_spec.ffn.layer_norm, layer.add_norm3.norm)

    english = [translator.english.id_to_token(i) for i in range(translator.english.vocab_size)]
    chinese = [translator.chinese.id_to_token(i) for i in range(translator.chinese.vocab_size)]
    spec.register_source_vocabulary(english)
    spec.register_target_vocabulary(chinese)
    spec.config.bos_token = chinese[BOS_ID]
    spec.config.eos_token = chinese[EOS_ID]
    spec.config.unk_token = chinese[UNK_ID]
    spec.config.decoder_start_token = chinese[BOS_ID]
    spec.config.add_source_bos = False
    spec.config.add_source_eos = False  # our source ids already end in <eos>
    spec.config.layer_norm_epsilon = model.encoder_layers[0].add_norm1.norm.eps
    return spec


def convert(translator: Translator, folder: Path) -> Path:
    """Write the checkpoint as a CTranslate2 float32 model into ``folder``."""
    from ctranslate2.converters.converter import Converter

    class OurCheckpoint(Converter):
        def _load(self):
            return ctranslate2_spec(translator)

    return Path(OurCheckpoint().convert(str(folder), force=True))


def load(translator: Translator, compute_type: str = "float32", threads: int = 1):
    """A ``ctranslate2.Translator`` on ``translator``'s weights (converted through a temporary
    folder, which is gone once the weights are in memory)."""
    import ctranslate2

    with tempfile.TemporaryDirectory() as tmp:
        return ctranslate2.Translator(str(convert(translator, Path(tmp) / "ct2")), device="cpu",
                                      compute_type=compute_type, intra_threads=threads,
                                      inter_threads=1)
