"""Hugging Face Marian models (Helsinki-NLP ``opus-mt-*``) through the same views as our checkpoint.

A Marian model is the architecture model/transformer.py writes out: token embedding × √d_model +
sinusoidal positions, post-norm encoder and decoder layers (self-attention, masked self-attention,
cross-attention, FFN, Add & Norm after each), a tied output projection. So the adapter does not
wrap ``MarianMTModel``: it copies its weights into our ``Transformer`` (with Marian's SiLU
activation and its [sin…, cos…] position table), and every trace, decoding strategy, KV cache,
score and attribution then runs through the same code as for our own model — recording Q, K, V and
every score as it goes. The tests check the copy against the Hugging Face model itself (attention,
logits, greedy tokens) on a tiny random Marian model.

Token ids. Our code fixes <pad>=0, <bos>=1, <eos>=2, <unk>=3. Marian has </s>=0, <unk>=1 and
<pad>=V-1, which is also the token the decoder starts from. The adapter renumbers each vocabulary:

    ours   0 <pad>  a padding row (a copy of Marian's <pad>; only ever masked out)
           1 <bos>  Marian's <pad>: the decoder-start vector Marian feeds first
           2 <eos>  Marian's </s>
           3 <unk>  Marian's <unk>
           k ≥ 4    Marian's id k - 2 (every other piece, in Marian's order)

so one extra row (V+1 in all). Source padding never hides Marian's </s> (which is our 2), and
decoding forbids exactly what Marian forbids: <pad> (Marian's ``bad_words_ids``), here our 0 and 1.

A folder written by model/adapters/export_hf.py (our checkpoint as a Marian model) already has our
ids and its own decoder-start token, so it maps one to one; its tokenizers are read with our own
classes and its hidden dimensions are put back in our interleaved order (``from_export``), so it
serves exactly the model it was exported from.
"""

from __future__ import annotations

import json
import logging
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from model.adapters.export_hf import MARKER, TARGET_FOLDER, from_marian_order, target_vocabulary
from model.tokenizer import ChineseTokenizer, EnglishTokenizer
from model.transformer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    Transformer,
    TransformerConfig,
    count_parameters,
)
from model.translator import CheckpointError, Translator

log = logging.getLogger(__name__)

MARIAN_FILES = ("config.json", "source.spm", "target.spm", "vocab.json")
EXPORT_FILES = ("config.json", "model.safetensors", "tokenizer.json", f"{TARGET_FOLDER}/tokenizer.json")
SPECIAL_NAMES = {PAD_ID: "<pad>", BOS_ID: "<bos>", EOS_ID: "<eos>", UNK_ID: "<unk>"}
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
INSTALL_HINT = 'install the optional packages with `pip install -e ".[hf]"` (or the dev lock)'
# Language names for the header; a code not listed here is shown as it is.
LANGUAGES = {
    "en": ("English", "英文"), "eng": ("English", "英文"),
    "zh": ("Chinese", "中文"), "zho": ("Chinese", "中文"), "cmn": ("Chinese", "中文"),
    "de": ("German", "德语"), "deu": ("German", "德语"), "fr": ("French", "法语"),
    "fra": ("French", "法语"), "es": ("Spanish", "西班牙语"), "spa": ("Spanish", "西班牙语"),
    "ja": ("Japanese", "日语"), "jap": ("Japanese", "日语"), "jpn": ("Japanese", "日语"),
    "ru": ("Russian", "俄语"), "rus": ("Russian", "俄语"), "it": ("Italian", "意大利语"),
    "pt": ("Portuguese", "葡萄牙语"), "nl": ("Dutch", "荷兰语"), "ko": ("Korean", "韩语"),
    "ar": ("Arabic", "阿拉伯语"), "mul": ("many languages", "多种语言"),
}


def _config(path: Path) -> dict:
    try:
        return json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def is_export(path: Path) -> bool:
    """A Marian folder that model/adapters/export_hf.py wrote from one of our checkpoints."""
    return isinstance(_config(path).get(MARKER), dict)


def is_marian_folder(path: Path) -> bool:
    """A local Hugging Face folder whose config.json names a Marian model."""
    data = _config(path)
    return data.get("model_type") == "marian" or "MarianMTModel" in data.get("architectures", [])


# ---------------------------------------------------------------------------------------------
# Vocabulary: Marian ids ↔ ours
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VocabularyMap:
    """One side's renumbering (see the module docstring). ``to_marian[ours]`` is Marian's id."""

    to_marian: list[int]
    marian_pad: int
    marian_eos: int
    marian_unk: int

    @classmethod
    def build(cls, size: int, pad: int, eos: int, unk: int, start: int | None = None) -> VocabularyMap:
        """``start``: the decoder-start id when it is a token of its own (not Marian's <pad>)."""
        start = pad if start is None else start
        if len({pad, eos, unk}) != 3 or start in (eos, unk):
            raise CheckpointError("the Marian model's <pad>, </s> and <unk> ids must differ")
        rest = [i for i in range(size) if i not in (pad, start, eos, unk)]
        order = {PAD_ID: pad, BOS_ID: start, EOS_ID: eos, UNK_ID: unk}
        return cls([order[i] for i in range(len(order))] + rest, pad, eos, unk)

    def __len__(self) -> int:
        return len(self.to_marian)

    def to_ours(self) -> list[int]:
        """Marian id → ours (Marian's <pad>, when it also starts the decoder → our <bos>)."""
        ours = [0] * len(set(self.to_marian))
        for index, marian in enumerate(self.to_marian):
            ours[marian] = index  # a repeated <pad>: the later index, our <bos>, wins
        return ours

    def rows(self, weight: torch.Tensor) -> torch.Tensor:
        """Marian's rows (…, V, …) along dim 0 → ours (V+1 rows)."""
        return weight[torch.tensor(self.to_marian)].clone()


class _Side:
    """What both sides share: our id ↔ Marian id ↔ piece, and the pieces of a text."""

    def __init__(self, spm, pieces: dict[str, int], mapping: VocabularyMap):
        self.spm = spm
        self.pieces = pieces  # piece → Marian id
        self.mapping = mapping
        self.ours = mapping.to_ours()
        marian_piece = {i: p for p, i in pieces.items()}
        self.vocabulary = [
            SPECIAL_NAMES.get(index, marian_piece.get(marian, "<unk>"))
            for index, marian in enumerate(mapping.to_marian)
        ]
        self.index = {token: i for i, token in enumerate(self.vocabulary)}

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    def id_to_token(self, index: int) -> str:
        return self.vocabulary[index] if 0 <= index < len(self.vocabulary) else "<unk>"

    def marian_id(self, index: int) -> int:
        """The id this token has in the Marian model's own vocabulary."""
        return self.mapping.to_marian[index]

    def _pieces(self, text: str) -> list[str]:
        return self.spm.encode(text, out_type=str)

    def _ids(self, pieces: list[str]) -> list[int]:
        unk = self.pieces.get("<unk>", self.mapping.marian_unk)
        return [self.ours[self.pieces.get(piece, unk)] for piece in pieces]

    def decode(self, ids) -> str:
        pieces = []
        for i in ids:
            if i == EOS_ID:
                break
            if i > UNK_ID:
                pieces.append(self.vocabulary[i])
        return self.spm.decode_pieces(pieces).replace("\u2581", " ").strip()


class MarianSourceTokenizer(_Side):
    """The source side behind EnglishTokenizer's methods: SentencePiece pieces, Marian's ids
    (renumbered), </s> at the end. A leading language token such as ``>>cmn_Hans<<`` (which
    multilingual Marian models read) stays one token, as in MarianTokenizer."""

    def __init__(self, tokenizer, mapping: VocabularyMap):
        super().__init__(tokenizer.spm_source, tokenizer.encoder, mapping)
        self.tokenizer = tokenizer

    def tokenize(self, text: str) -> list[str]:
        code, rest = self.tokenizer.remove_language_code(text)
        return code + self._pieces(rest)

    def encode(self, text: str, add_eos: bool = True) -> list[int]:
        ids = self._ids(self.tokenize(text))
        return ids + [EOS_ID] if add_eos else ids


class MarianTargetTokenizer(_Side):
    """The target side behind ChineseTokenizer's methods: a token is a SentencePiece piece."""

    def __init__(self, tokenizer, mapping: VocabularyMap):
        encoder = tokenizer.target_encoder if tokenizer.separate_vocabs else tokenizer.encoder
        super().__init__(tokenizer.spm_target, encoder, mapping)

    def characters(self, text: str) -> list[str]:
        """The pieces of ``text``, one per id of ``encode(text)`` (the score view pairs them)."""
        return self._pieces(text)

    def tokenize(self, text: str) -> list[str]:
        return self._pieces(text)

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        ids = self._ids(self._pieces(text))
        return ([BOS_ID] if add_bos else []) + ids + ([EOS_ID] if add_eos else [])


# ---------------------------------------------------------------------------------------------
# The model: Marian's weights in our Transformer
# ---------------------------------------------------------------------------------------------


def transformer_config(hf_config, src_size: int, tgt_size: int, tied: bool) -> TransformerConfig:
    """Our config for a ``MarianConfig`` (vocabularies with the one extra padding row)."""
    if hf_config.encoder_attention_heads != hf_config.decoder_attention_heads:
        raise CheckpointError("encoder and decoder must have as many attention heads")
    if hf_config.encoder_ffn_dim != hf_config.decoder_ffn_dim:
        raise CheckpointError("encoder and decoder FFNs must have the same width")
    return TransformerConfig(
        src_vocab_size=src_size,
        tgt_vocab_size=tgt_size,
        d_model=hf_config.d_model,
        n_heads=hf_config.encoder_attention_heads,
        n_encoder_layers=hf_config.encoder_layers,
        n_decoder_layers=hf_config.decoder_layers,
        d_ff=hf_config.encoder_ffn_dim,
        dropout=0.0,  # evaluation only
        max_positions=hf_config.max_position_embeddings,
        tie_output=tied,
        activation=hf_config.activation_function,
        position_layout="halves",
        scale_embedding=bool(hf_config.scale_embedding),
    )


def _copy_attention(ours, theirs) -> None:
    for mine, name in ((ours.w_q, "q_proj"), (ours.w_k, "k_proj"), (ours.w_v, "v_proj"),
                       (ours.w_o, "out_proj")):
        _copy_linear(mine, getattr(theirs, name))


def _copy_linear(ours, theirs) -> None:
    ours.weight.copy_(theirs.weight)
    ours.bias.copy_(theirs.bias)


@torch.no_grad()
def convert(hf_model, source: VocabularyMap, target: VocabularyMap) -> Transformer:
    """Our ``Transformer`` holding ``hf_model``'s weights (a ``MarianMTModel``), rows renumbered."""
    hf = hf_model.model
    enc_embed, dec_embed = hf.encoder.embed_tokens.weight, hf.decoder.embed_tokens.weight
    tied = hf_model.lm_head.weight.data_ptr() == dec_embed.data_ptr()
    shared = enc_embed.data_ptr() == dec_embed.data_ptr() and source == target
    model = Transformer(transformer_config(hf_model.config, len(source), len(target), tied)).eval()
    model.tgt_embedding.tokens.weight.copy_(target.rows(dec_embed))
    if shared:  # one matrix for source, target and output, as in Marian
        model.src_embedding.tokens.weight = model.tgt_embedding.tokens.weight
    else:
        model.src_embedding.tokens.weight.copy_(source.rows(enc_embed))
    if not tied:
        model.output.weight.copy_(target.rows(hf_model.lm_head.weight))
    model.output.bias.copy_(target.rows(hf_model.final_logits_bias[0]))
    for mine, theirs in zip(model.encoder_layers, hf.encoder.layers, strict=True):
        _copy_attention(mine.self_attention, theirs.self_attn)
        _copy_linear(mine.add_norm1.norm, theirs.self_attn_layer_norm)
        _copy_linear(mine.ffn.linear1, theirs.fc1)
        _copy_linear(mine.ffn.linear2, theirs.fc2)
        _copy_linear(mine.add_norm2.norm, theirs.final_layer_norm)
    for mine, theirs in zip(model.decoder_layers, hf.decoder.layers, strict=True):
        _copy_attention(mine.self_attention, theirs.self_attn)
        _copy_linear(mine.add_norm1.norm, theirs.self_attn_layer_norm)
        _copy_attention(mine.cross_attention, theirs.encoder_attn)
        _copy_linear(mine.add_norm2.norm, theirs.encoder_attn_layer_norm)
        _copy_linear(mine.ffn.linear1, theirs.fc1)
        _copy_linear(mine.ffn.linear2, theirs.fc2)
        _copy_linear(mine.add_norm3.norm, theirs.final_layer_norm)
    return model


def hf_parameter_counts(hf_model) -> dict[str, int]:
    """Parameters per component, counted on the Hugging Face model's own tensors (each tensor
    once: Marian shares one embedding matrix between source, target and output)."""
    hf = hf_model.model

    def size(module) -> int:
        return sum(p.numel() for p in module.parameters())

    embed_src, embed_tgt = hf.encoder.embed_tokens.weight, hf.decoder.embed_tokens.weight
    tied = hf_model.lm_head.weight.data_ptr() == embed_tgt.data_ptr()
    return {
        "source_embedding": embed_src.numel(),
        "target_embedding": embed_tgt.numel(),
        "encoder": size(hf.encoder.layers),
        "decoder": size(hf.decoder.layers),
        # final_logits_bias is a fixed buffer in Marian, not a trained parameter
        "output_projection": 0 if tied else hf_model.lm_head.weight.numel(),
        # each tensor once; not the fixed sinusoid tables, which Hugging Face stores as weights
        "total": sum(p.numel() for name, p in hf_model.named_parameters()
                     if "embed_positions" not in name),
    }


def _cached(hub_id: str) -> bool:
    """Whether the Hugging Face cache on this machine already holds the model's config."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(hub_id, "config.json"), str)


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub (``HF_ENDPOINT``) accepts a connection within ``timeout`` s."""
    import socket
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    parts = urlsplit(constants.ENDPOINT)
    try:
        with socket.create_connection(
            (parts.hostname or "huggingface.co", parts.port or 443), timeout=timeout
        ):
            return True
    except OSError:
        return False


def language_of(code: str | None) -> dict:
    """{"code", "en", "zh"} names for a language code such as ``en``, ``zho`` or ``cmn_Hans``."""
    code = (code or "").strip()
    names = LANGUAGES.get(code.split("_")[0].lower())
    en, zh = names if names else (code or "?", code or "?")
    return {"code": code, "en": en, "zh": zh}


def _languages(name: str, tokenizer) -> tuple[str | None, str | None]:
    """Source and target codes: from the tokenizer's config, else from a name like opus-mt-en-zh."""
    source, target = tokenizer.source_lang, tokenizer.target_lang
    match = re.search(r"opus-mt(?:-tc-[a-z]+)?-([a-z]{2,3}(?:_[A-Za-z]+)?)-([a-z]{2,3}(?:_[A-Za-z]+)?)"
                      r"(?:$|[^a-zA-Z])", name)
    if match:
        source, target = source or match.group(1), target or match.group(2)
    return source, target


class MarianTranslator(Translator):
    """A Marian model in our Transformer: every Translator method and view works unchanged."""

    def __init__(self, model: Transformer, english: MarianSourceTokenizer,
                 chinese: MarianTargetTokenizer, counts: dict[str, int], info: dict,
                 path: Path | None = None):
        super().__init__(model, english, chinese, path=path)
        self.counts = counts
        self.info = info

    @property
    def about(self) -> dict:
        return self.info

    def parameter_counts(self) -> dict[str, int]:
        return dict(self.counts)

    def source_token_embeddings(self, source_ids: list[int]) -> torch.Tensor:
        embedding = self.model.src_embedding
        return embedding.tokens(torch.tensor(source_ids)) * embedding.scale

    @classmethod
    def load(cls, path: Path | str, local_files_only: bool | None = None) -> MarianTranslator:
        """A local Hugging Face folder, or a hub id (downloaded into the Hugging Face cache when
        this machine can reach the hub)."""
        try:
            from transformers import MarianMTModel, MarianTokenizer
            from transformers.utils import logging as hf_logging
        except ImportError as error:
            raise CheckpointError(f"Marian models need transformers and sentencepiece: "
                                  f"{INSTALL_HINT}") from error
        hf_logging.disable_progress_bar()
        source = str(path)
        folder = Path(source).expanduser()
        if folder.is_dir() and is_export(folder):
            return cls.load_export(folder)
        if folder.is_dir():
            missing = [name for name in MARIAN_FILES if not (folder / name).is_file()]
            weights = [n for n in ("model.safetensors", "pytorch_model.bin")
                       if (folder / n).is_file()]
            if missing or not weights:
                missing += [] if weights else ["model.safetensors"]
                raise CheckpointError(
                    f"{folder} is not a complete Hugging Face Marian folder (missing "
                    f"{', '.join(missing)}); download one with `huggingface-cli download "
                    f"Helsinki-NLP/opus-mt-en-zh --local-dir {folder}`")
            kwargs = {"local_files_only": True}
            name = folder.resolve().name
        else:
            if local_files_only is None:
                offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
                # the Hugging Face cache first; the hub only when it answers (its client would
                # otherwise retry for ~30 s before failing)
                local_files_only = offline or _cached(source) or not _hub_reachable()
            kwargs = {"local_files_only": local_files_only}
            name = source
        hub_id = source if HUB_ID.match(source) else "Helsinki-NLP/opus-mt-en-zh"
        try:
            with warnings.catch_warnings():  # "Recommended: pip install sacremoses" (not needed)
                warnings.simplefilter("ignore")
                hf_model = MarianMTModel.from_pretrained(source, dtype=torch.float32, **kwargs)
                tokenizer = MarianTokenizer.from_pretrained(source, **kwargs)
            hf_model.eval()
        except Exception as error:  # any failure: one line that says what to do, no traceback
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            where = ("it is not in this machine's Hugging Face cache and the hub cannot be reached"
                     if kwargs["local_files_only"] and not folder.is_dir() else first[:200])
            raise CheckpointError(
                f"could not load the Marian model {source!r} ({where}); on a machine with "
                f"internet run `huggingface-cli download {hub_id} --local-dir DIR`, copy DIR here "
                "and pass --model DIR") from error
        return cls.from_hf(hf_model, tokenizer, name=name,
                           path=folder if folder.is_dir() else None)

    @classmethod
    def load_export(cls, folder: Path) -> MarianTranslator:
        """A folder written by model/adapters/export_hf.py: the Marian model it holds, read with
        our own tokenizers and ids, its hidden dimensions back in the order it was trained in."""
        from transformers import MarianMTModel

        missing = [name for name in EXPORT_FILES if not (folder / name).is_file()]
        if missing:
            raise CheckpointError(
                f"{folder} is not a complete export (missing {', '.join(missing)}); write it "
                f"again with `python -m model.adapters.export_hf {folder}`")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                hf_model = MarianMTModel.from_pretrained(folder, dtype=torch.float32,
                                                         local_files_only=True).eval()
            english = EnglishTokenizer.load(folder / "tokenizer.json")
            chinese = ChineseTokenizer(target_vocabulary(folder / TARGET_FOLDER / "tokenizer.json"))
        except (OSError, ValueError, KeyError) as error:
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise CheckpointError(f"could not load the export in {folder} ({first[:200]}); write it "
                                  f"again with `python -m model.adapters.export_hf {folder}`") from error
        config = hf_model.config
        ours = (PAD_ID, BOS_ID, EOS_ID, UNK_ID)
        if (config.pad_token_id, config.decoder_start_token_id, config.eos_token_id) != ours[:3]:
            raise CheckpointError(f"{folder}: an export keeps our ids <pad>=0, <bos>=1, <eos>=2")
        source = VocabularyMap.build(config.vocab_size, PAD_ID, EOS_ID, UNK_ID, start=BOS_ID)
        target = VocabularyMap.build(config.decoder_vocab_size, PAD_ID, EOS_ID, UNK_ID, start=BOS_ID)
        model = convert(hf_model, source, target)  # one to one: our ids are its ids
        if getattr(config, MARKER)["position_layout"] == "interleaved":
            model = from_marian_order(model, dropout=config.dropout)
        info = {
            "kind": "marian",
            "name": folder.resolve().name,
            "source": language_of("en"),
            "target": language_of("zh"),
            "language_tokens": [],
            "vocab_size": config.decoder_vocab_size,
        }
        return cls(model, english, chinese, count_parameters(model), info, path=folder)

    @classmethod
    def from_hf(cls, hf_model, tokenizer, name: str = "marian",
                path: Path | None = None) -> MarianTranslator:
        """Convert a loaded ``MarianMTModel`` + ``MarianTokenizer`` (the Hugging Face model can be
        dropped afterwards: the translator keeps its own copy of the weights)."""
        config = hf_model.config
        pad = config.pad_token_id
        eos = config.eos_token_id
        if config.decoder_start_token_id not in (None, pad):
            raise CheckpointError("the adapter expects Marian's decoder to start from <pad>")
        unk_source = tokenizer.encoder[str(tokenizer.unk_token)]
        source = VocabularyMap.build(config.vocab_size, pad, eos, unk_source)
        if config.share_encoder_decoder_embeddings:
            target = source
        else:
            unk_target = tokenizer.target_encoder[str(tokenizer.unk_token)]
            target = VocabularyMap.build(config.decoder_vocab_size, pad, eos, unk_target)
        model = convert(hf_model, source, target)
        source_code, target_code = _languages(name, tokenizer)
        info = {
            "kind": "marian",
            "name": name,
            "source": language_of(source_code),
            "target": language_of(target_code),
            "language_tokens": [c for c in tokenizer.supported_language_codes][:64],
            "vocab_size": config.vocab_size,
        }
        return cls(model, MarianSourceTokenizer(tokenizer, source),
                   MarianTargetTokenizer(tokenizer, target), hf_parameter_counts(hf_model),
                   info, path=path)
