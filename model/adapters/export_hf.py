"""Our checkpoint as a Hugging Face Marian folder: ``python -m model.adapters.export_hf DIR``.

The folder is what BertViz, inseq and transformers read (``MarianMTModel.from_pretrained(DIR)``):

    config.json, generation_config.json, model.safetensors   the same weights as a MarianMTModel
    tokenizer.json, tokenizer_config.json                    the English side: our BPE, our ids
    target/tokenizer.json, target/tokenizer_config.json      the Chinese side: one id per character
    tokenization_inside_transformer.py                       both in one tokenizer (opt-in code)
    README.md                                                what this is, how to load it, licence

Marian is the architecture model/transformer.py writes out (post-norm, ReLU here, embeddings × √d,
sinusoidal positions, output tied to the target embedding), with two differences the export
bridges without changing what the model computes:

* **Position table.** Marian's is [sin…, cos…]; ours interleaves sin and cos. Every weight's hidden
  dimension is permuted by ``hidden_order`` (our dimension ``order[i]`` becomes Marian's ``i``):
  LayerNorm and residual sums work dimension by dimension, so the permuted model computes the same
  function, head by head. ``config.json`` says so (``inside_transformer``), and
  model/adapters/marian.py undoes it when the folder comes back through ``--model``.
* **What may be generated.** Our decoding never picks <pad> or <bos> (``mask_special``: logit
  −inf). The folder says the same to ``generate`` with ``suppress_tokens: [0, 1]`` in
  generation_config.json (transformers sets those scores to −inf at every step);
  ``final_logits_bias`` holds our output bias, finite, so the model's own logits equal ours.

Our ids stay as they are on both sides: <pad>=0, <bos>=1 (the decoder start), <eos>=2, <unk>=3;
source and target vocabularies are separate (``share_encoder_decoder_embeddings: false``).
transformers' Marian tokenizer is SentencePiece, which cannot cut words as our BPE does, so the
tokenizers are ``PreTrainedTokenizerFast`` files: ``AutoTokenizer.from_pretrained(DIR)`` reads
English, ``AutoTokenizer.from_pretrained(DIR, subfolder="target")`` Chinese (the model's outputs).
Tools that hold one tokenizer for both sides (inseq) get one with ``trust_remote_code=True``:
model/adapters/tokenization_inside_transformer.py, copied into the folder, English in and Chinese
out as transformers' ``MarianTokenizer`` with separate vocabularies.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import torch

from model.tokenizer import (
    FULL_WIDTH,
    MAX_SOURCE_TOKENS,
    MAX_TARGET_TOKENS,
    SPECIAL_TOKENS,
    ChineseTokenizer,
    EnglishTokenizer,
)
from model.transformer import BOS_ID, EOS_ID, NEVER_GENERATED, PAD_ID, Transformer
from model.translator import DEFAULT_CHECKPOINT, CheckpointError, Translator

log = logging.getLogger(__name__)

MARKER = "inside_transformer"  # the config.json key that says the folder is ours, and how
TARGET_FOLDER = "target"
# Python's str.isspace() characters: ChineseTokenizer drops exactly these (after NFKC)
_SPACES = "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())


# ---------------------------------------------------------------------------------------------
# The hidden dimension: our interleaved order ↔ Marian's halves
# ---------------------------------------------------------------------------------------------


def hidden_order(d_model: int) -> torch.Tensor:
    """Our dimensions in Marian's order: sin parts (our even dimensions), then cos parts (odd)."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def _axis(name: str) -> int | None:
    """The axis of a parameter that runs along the hidden dimension (None: it has none)."""
    if name.endswith(("tokens.weight", "output.weight", "w_q.weight", "w_k.weight", "w_v.weight",
                      "linear1.weight")):
        return 1  # reads the hidden vector: its input columns
    if name.endswith(("w_o.weight", "w_o.bias", "linear2.weight", "linear2.bias", "norm.weight",
                      "norm.bias")):
        return 0  # writes the hidden vector (or normalises it): its output rows
    if name.endswith(("w_q.bias", "w_k.bias", "w_v.bias", "linear1.bias", "output.bias")):
        return None  # per head dimension, FFN unit or vocabulary entry
    raise ValueError(f"no hidden-dimension rule for parameter {name!r}")


@torch.no_grad()
def permute_hidden(model: Transformer, order: torch.Tensor, layout: str, **config) -> Transformer:
    """A copy of ``model`` whose hidden dimension i is ``model``'s dimension ``order[i]``, with the
    position table laid out as ``layout`` — the same function, every number in a new place
    (``config``: other settings of the copy, e.g. its training dropout)."""
    copy = Transformer(replace(model.config, position_layout=layout, **config)).eval()
    state = {}
    for name, tensor in model.state_dict().items():
        axis = _axis(name)
        state[name] = tensor.clone() if axis is None else tensor.index_select(axis, order).clone()
    copy.load_state_dict(state)
    return copy


def to_marian_order(model: Transformer) -> Transformer:
    """Our interleaved model with its hidden dimensions in Marian's [sin…, cos…] order."""
    if model.config.position_layout != "interleaved":
        raise ValueError("only an interleaved model needs its hidden dimensions permuted")
    return permute_hidden(model, hidden_order(model.config.d_model), "halves")


def from_marian_order(model: Transformer, **config) -> Transformer:
    """The inverse of ``to_marian_order``: the exported weights back in our own order."""
    inverse = torch.argsort(hidden_order(model.config.d_model))
    return permute_hidden(model, inverse, "interleaved", **config)


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------


def marian_config(translator: Translator):
    """The ``MarianConfig`` of our model (our ids, separate vocabularies, tied output)."""
    from transformers import MarianConfig

    config = translator.config
    return MarianConfig(
        vocab_size=config.src_vocab_size,
        decoder_vocab_size=config.tgt_vocab_size,
        share_encoder_decoder_embeddings=False,
        tie_word_embeddings=config.tie_output,
        d_model=config.d_model,
        encoder_layers=config.n_encoder_layers,
        decoder_layers=config.n_decoder_layers,
        encoder_attention_heads=config.n_heads,
        decoder_attention_heads=config.n_heads,
        encoder_ffn_dim=config.d_ff,
        decoder_ffn_dim=config.d_ff,
        activation_function=config.activation,
        # training's dropout, in the three places ours drops (sublayer outputs, attention
        # weights, FFN units); from_pretrained returns the model in eval mode, where none applies
        dropout=config.dropout,
        attention_dropout=config.dropout,
        activation_dropout=config.dropout,
        max_position_embeddings=config.max_positions,
        scale_embedding=config.scale_embedding,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        decoder_start_token_id=BOS_ID,
        forced_eos_token_id=None,  # our decoding never forces <eos> at the length limit
        architectures=["MarianMTModel"],
        # read back by model/adapters/marian.py: our layout, and that the weights are permuted
        **{MARKER: {"position_layout": config.position_layout,
                    "hidden_order": "model.adapters.export_hf.hidden_order"}},
    )


def generation_config(max_len: int):
    """Greedy decoding as ours does it: start from <bos>, stop at <eos>, never <pad> or <bos>."""
    from transformers import GenerationConfig

    return GenerationConfig(
        decoder_start_token_id=BOS_ID, bos_token_id=BOS_ID, eos_token_id=EOS_ID,
        pad_token_id=PAD_ID, suppress_tokens=list(NEVER_GENERATED),
        max_length=max_len + 1,  # the decoder start + DecodingOptions.max_len tokens
        num_beams=1, do_sample=False,
    )


def _copy_linear(theirs, ours) -> None:
    theirs.weight.copy_(ours.weight)
    theirs.bias.copy_(ours.bias)


def _copy_attention(theirs, ours) -> None:
    for name, mine in (("q_proj", ours.w_q), ("k_proj", ours.w_k), ("v_proj", ours.w_v),
                       ("out_proj", ours.w_o)):
        _copy_linear(getattr(theirs, name), mine)


@torch.no_grad()
def to_marian(translator: Translator, max_len: int = 64):
    """A ``MarianMTModel`` holding ``translator``'s weights (hidden dimensions in Marian's order)."""
    from transformers import MarianMTModel

    if translator.config.position_layout == "interleaved":
        model = to_marian_order(translator.model)
    else:
        model = translator.model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf_model = MarianMTModel(marian_config(translator)).eval()
    hf = hf_model.model
    hf.encoder.embed_tokens.weight.copy_(model.src_embedding.tokens.weight)
    hf.decoder.embed_tokens.weight.copy_(model.tgt_embedding.tokens.weight)
    if not translator.config.tie_output:
        hf_model.lm_head.weight.copy_(model.output.weight)
    hf_model.final_logits_bias.copy_(model.output.bias[None])
    for theirs, mine in zip(hf.encoder.layers, model.encoder_layers, strict=True):
        _copy_attention(theirs.self_attn, mine.self_attention)
        _copy_linear(theirs.self_attn_layer_norm, mine.add_norm1.norm)
        _copy_linear(theirs.fc1, mine.ffn.linear1)
        _copy_linear(theirs.fc2, mine.ffn.linear2)
        _copy_linear(theirs.final_layer_norm, mine.add_norm2.norm)
    for theirs, mine in zip(hf.decoder.layers, model.decoder_layers, strict=True):
        _copy_attention(theirs.self_attn, mine.self_attention)
        _copy_linear(theirs.self_attn_layer_norm, mine.add_norm1.norm)
        _copy_attention(theirs.encoder_attn, mine.cross_attention)
        _copy_linear(theirs.encoder_attn_layer_norm, mine.add_norm2.norm)
        _copy_linear(theirs.fc1, mine.ffn.linear1)
        _copy_linear(theirs.fc2, mine.ffn.linear2)
        _copy_linear(theirs.final_layer_norm, mine.add_norm3.norm)
    hf_model.generation_config = generation_config(max_len)
    return hf_model


# ---------------------------------------------------------------------------------------------
# The tokenizers
# ---------------------------------------------------------------------------------------------

_SPECIALS = dict(zip(("pad_token", "bos_token", "eos_token", "unk_token"), SPECIAL_TOKENS,
                     strict=True))


def source_tokenizer(english: EnglishTokenizer):
    """Our English tokenizer as a ``PreTrainedTokenizerFast``: the same tokenizers pipeline
    (NFKC, lower case, words and single digits, BPE), then <eos>, as ``EnglishTokenizer.encode``."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=english.tokenizer, add_bos_token=False, add_eos_token=True,
        model_max_length=MAX_SOURCE_TOKENS, clean_up_tokenization_spaces=False, **_SPECIALS)


def target_tokenizer(chinese: ChineseTokenizer):
    """Our Chinese tokenizer as a ``PreTrainedTokenizerFast``: NFKC, drop every ``str.isspace()``
    character, one id per character (<unk> for the rest), <eos> at the end; decoding joins the
    characters and turns , ? ! : ; back into their full-width forms, as ``ChineseTokenizer.decode``."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocabulary = {token: index for index, token in enumerate(chinese.vocabulary)}
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="<unk>"))
    tokenizer.normalizer = normalizers.NFKC()
    spaces = "".join(f"\\x{{{ord(c):x}}}" for c in _SPACES)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(f"[{spaces}]+"), behavior="removed"),
        pre_tokenizers.Split(Regex("(?m:.)"), behavior="isolated"),  # (?m): "." matches any one
    ])
    tokenizer.decoder = decoders.Sequence(
        [decoders.Fuse()] + [decoders.Replace(chr(half), full) for half, full in FULL_WIDTH.items()])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, add_bos_token=False, add_eos_token=True,
        # the special tokens' names are ordinary characters in a Chinese text ("<unk>" is five)
        split_special_tokens=True,
        model_max_length=MAX_TARGET_TOKENS, clean_up_tokenization_spaces=False, **_SPECIALS)


# ---------------------------------------------------------------------------------------------
# The folder
# ---------------------------------------------------------------------------------------------

MODEL_CARD = """\
---
license: cc-by-sa-4.0
language: [en, zh]
pipeline_tag: translation
library_name: transformers
---
# Inside the Transformer: English → Chinese ({parameters:,} parameters)

The checkpoint of *Inside the Transformer*, exported by `python -m model.adapters.export_hf`:
a {n_enc} + {n_dec} layer post-norm encoder–decoder Transformer (d_model {d_model}, {heads} heads,
d_ff {d_ff}, ReLU, sinusoidal positions, output tied to the Chinese embedding), written from scratch
and trained on a 2-core CPU. The weights are the project's own; in this folder they are a
`MarianMTModel` with the hidden dimensions permuted into Marian's position-table order (the same
function: same tokens, same probabilities, same attention).

```python
from transformers import AutoTokenizer, MarianMTModel

model = MarianMTModel.from_pretrained(DIR)
english = AutoTokenizer.from_pretrained(DIR)                       # source: BPE pieces
chinese = AutoTokenizer.from_pretrained(DIR, subfolder="target")   # target: one id per character
ids = model.generate(**english("The cat sits on the mat.", return_tensors="pt"))
print(chinese.decode(ids[0], skip_special_tokens=True))
```

Source and target vocabularies are separate ({src_vocab:,} English pieces, {tgt_vocab:,} Chinese
characters), so English ids are read with the first tokenizer and Chinese ids with the second.
`AutoTokenizer.from_pretrained(DIR, trust_remote_code=True)` gives both in one tokenizer (the code
is `tokenization_inside_transformer.py`, beside this file): text is English, `text_target=` is
Chinese and ids decode as Chinese, as with a Marian tokenizer.
Greedy decoding (the default here) gives the project's own greedy translation; `<pad>` and `<bos>`
are never generated (`suppress_tokens`).

Licence: CC BY-SA 4.0 (part of the training data is CC BY-SA 4.0; see the project's README for
the data credits).
"""


def _pair_tokenizer_entry(folder: Path) -> None:
    """tokenizer_config.json names the plain English tokenizer (what AutoTokenizer loads by
    default) and, for ``trust_remote_code=True``, the English-in, Chinese-out one beside it."""
    from model.adapters import tokenization_inside_transformer as pair

    shutil.copyfile(pair.__file__, folder / Path(pair.__file__).name)
    path = folder / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"  # the name transformers 4 knows too
    config["auto_map"] = {"AutoTokenizer": [
        None, f"{pair.__name__.rsplit('.', 1)[-1]}.{pair.TranslationTokenizer.__name__}"]}
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def export(translator: Translator, folder: Path) -> Path:
    """Write ``translator``'s model and tokenizers to ``folder`` as a Hugging Face Marian folder."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    hf_model = to_marian(translator)
    hf_model.save_pretrained(folder)
    source_tokenizer(translator.english).save_pretrained(folder)
    target_tokenizer(translator.chinese).save_pretrained(folder / TARGET_FOLDER)
    _pair_tokenizer_entry(folder)
    config = translator.config
    (folder / "README.md").write_text(MODEL_CARD.format(
        parameters=sum(p.numel() for p in translator.model.parameters()),
        n_enc=config.n_encoder_layers, n_dec=config.n_decoder_layers, d_model=config.d_model,
        heads=config.n_heads, d_ff=config.d_ff, src_vocab=config.src_vocab_size,
        tgt_vocab=config.tgt_vocab_size), encoding="utf-8")
    return folder


def target_vocabulary(path: Path) -> list[str]:
    """The Chinese vocabulary, by id, of a target tokenizer.json ``target_tokenizer`` wrote."""
    vocab = json.loads(Path(path).read_text(encoding="utf-8"))["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.get)
    if [vocab[token] for token in tokens] != list(range(len(tokens))):
        raise ValueError(f"{path}: the vocabulary's ids are not 0…{len(tokens) - 1}")
    return tokens


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m model.adapters.export_hf", description=__doc__.split(
        "\n\n")[0])
    p.add_argument("folder", type=Path, help="where to write the Hugging Face folder")
    p.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT,
                   help="our checkpoint folder to export (default model/checkpoints)")
    args = p.parse_args(argv)
    logging.basicConfig(level="INFO", format="%(message)s")
    try:
        import transformers  # noqa: F401
    except ImportError:
        p.exit(2, 'error: the export needs transformers: pip install -e ".[hf]" (or the dev lock)\n')
    try:
        translator = Translator.load(args.checkpoint)
    except CheckpointError as error:
        p.exit(2, f"error: {error}\n")
    export(translator, args.folder)
    log.info("wrote %s (MarianMTModel.from_pretrained, AutoTokenizer.from_pretrained)", args.folder)


if __name__ == "__main__":
    main()
