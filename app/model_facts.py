"""What the pages say about the loaded model, read from its config and its tokenizers: the one
owner of every explanation that differs between this project's checkpoint and a converted Marian
model (templates pick their strings by these values, e.g. ``emb.pe_formula.halves``)."""

from __future__ import annotations

from model.api import ChineseTokenizer, EnglishTokenizer

ACTIVATION_NAMES = {"relu": "ReLU", "swish": "SiLU", "silu": "SiLU", "gelu": "GELU"}


def activation_name(config) -> str:
    """The FFN's non-linearity as the pages name it: ReLU for this project's model, SiLU for
    Hugging Face Marian ones."""
    return ACTIVATION_NAMES.get(config.activation, config.activation)


def model_facts(translator) -> dict:
    """Plain facts: the position table's layout (``interleaved`` sin/cos, or Marian's ``halves``),
    how each side is cut (``bpe`` pieces with ## on later ones, ``characters`` one id each, or
    ``sentencepiece`` pieces with ▁ at a word's start), the layer counts, the FFN activation and
    where LayerNorm sits (after each sublayer: the Transformer in model/transformer.py is
    post-norm, for our weights and a Marian model's alike)."""
    config = translator.config
    return {
        "position_layout": config.position_layout,
        "source_pieces": "bpe" if isinstance(translator.english, EnglishTokenizer) else "sentencepiece",
        "target_pieces": "characters" if isinstance(translator.chinese, ChineseTokenizer)
        else "sentencepiece",
        "layers": f"{config.n_encoder_layers}+{config.n_decoder_layers}",
        "activation": activation_name(config),
        "norm": "post",
    }
