"""Tokenizers: English sub-word pieces (BPE) and Chinese characters.

Both sides share the special tokens and their ids: <pad>=0, <bos>=1, <eos>=2, <unk>=3.
English is lower-cased, split on whitespace, punctuation and digits, then cut into BPE pieces learned
from the training data (a piece that continues a word starts with ``##``). Chinese needs no word
segmentation here: every character is one token, as in 猫 坐 在 垫 子 上.
"""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from model.transformer import BOS_ID, EOS_ID, PAD_ID, UNK_ID

SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"]
MAX_SOURCE_TOKENS = 128  # the longest English input the model is trained on and reads
MAX_TARGET_TOKENS = 160  # the longest Chinese reference training keeps, and batch decoding writes
assert [SPECIAL_TOKENS.index(t) for t in SPECIAL_TOKENS] == [PAD_ID, BOS_ID, EOS_ID, UNK_ID]
CONTINUATION = "##"
# NFKC folds full-width punctuation to ASCII when tokenizing; written Chinese uses the full-width
# forms, so decoding turns these back.
# words and punctuation, and every digit its own piece, so a number maps digit by digit onto the
# Chinese side (which also writes one character per digit)
_PRE_TOKENIZER = pre_tokenizers.Sequence(
    [pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=True)]
)
FULL_WIDTH = str.maketrans({",": "，", "?": "？", "!": "！", ":": "：", ";": "；"})


class EnglishTokenizer:
    """BPE over lower-cased words, via the ``tokenizers`` library."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer

    @classmethod
    def train(cls, sentences: Iterable[str], vocab_size: int = 8000) -> EnglishTokenizer:
        tokenizer = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix=CONTINUATION))
        tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
        tokenizer.pre_tokenizer = _PRE_TOKENIZER
        tokenizer.decoder = decoders.WordPiece(prefix=CONTINUATION)
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=SPECIAL_TOKENS,
            continuing_subword_prefix=CONTINUATION,
            min_frequency=2,
            show_progress=False,
        )
        tokenizer.train_from_iterator(sentences, trainer)
        return cls(tokenizer)

    def split_digits(self) -> None:
        """From now on cut numbers into single digits, as newly trained tokenizers do."""
        self.tokenizer.pre_tokenizer = _PRE_TOKENIZER

    def add_piece(self, word: str) -> int:
        """Make ``word``, which the pieces now cut in two (AI → "a" + "##i", the article's piece),
        one piece of its own; returns its id, the next free one, so every old id keeps its meaning.

        The merge joining the two halves is added last, after every learned merge, so only a word
        whose halves would otherwise stay apart is read differently: "ai" changes, "aid", "aisle"
        and "aiko" (joined by earlier merges) do not.
        """
        pieces = self.tokenize(word)
        if len(pieces) != 2:
            raise ValueError(f"{word!r} is cut into {pieces}: only a word cut in two can be joined")
        joined = pieces[0] + pieces[1].removeprefix(CONTINUATION)
        state = json.loads(self.tokenizer.to_str())
        vocab = state["model"]["vocab"]
        if joined in vocab:
            raise ValueError(f"{joined!r} is already a piece")
        vocab[joined] = self.vocab_size
        state["model"]["merges"].append(pieces)
        self.tokenizer = Tokenizer.from_str(json.dumps(state))
        return vocab[joined]

    @classmethod
    def load(cls, path: Path) -> EnglishTokenizer:
        return cls(Tokenizer.from_file(str(path)))

    def save(self, path: Path) -> None:
        self.tokenizer.save(str(path))

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def tokenize(self, text: str) -> list[str]:
        return self.tokenizer.encode(text, add_special_tokens=False).tokens

    def encode(self, text: str, add_eos: bool = True) -> list[int]:
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return ids + [EOS_ID] if add_eos else ids

    def id_to_token(self, index: int) -> str:
        return self.tokenizer.id_to_token(index) or "<unk>"

    def decode(self, ids: Iterable[int]) -> str:
        return self.tokenizer.decode([i for i in ids if i >= len(SPECIAL_TOKENS)])


class ChineseTokenizer:
    """One character per token; characters never seen in training map to <unk>."""

    def __init__(self, vocabulary: list[str]):
        if vocabulary[: len(SPECIAL_TOKENS)] != SPECIAL_TOKENS:
            raise ValueError("the vocabulary must start with the special tokens")
        self.vocabulary = vocabulary
        self.index = {token: i for i, token in enumerate(vocabulary)}

    @staticmethod
    def characters(text: str) -> list[str]:
        text = unicodedata.normalize("NFKC", text)
        return [ch for ch in text if not ch.isspace()]

    @classmethod
    def train(cls, sentences: Iterable[str], min_count: int = 1) -> ChineseTokenizer:
        counts = Counter(ch for sentence in sentences for ch in cls.characters(sentence))
        kept = sorted((ch for ch, n in counts.items() if n >= min_count), key=lambda c: (-counts[c], c))
        return cls(SPECIAL_TOKENS + kept)

    @classmethod
    def load(cls, path: Path) -> ChineseTokenizer:
        return cls(json.loads(path.read_text(encoding="utf-8"))["vocabulary"])

    def save(self, path: Path) -> None:
        payload = {"type": "character", "vocabulary": self.vocabulary}
        path.write_text(json.dumps(payload, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    def tokenize(self, text: str) -> list[str]:
        return self.characters(text)

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        ids = [self.index.get(ch, UNK_ID) for ch in self.characters(text)]
        return ([BOS_ID] if add_bos else []) + ids + ([EOS_ID] if add_eos else [])

    def id_to_token(self, index: int) -> str:
        return self.vocabulary[index] if 0 <= index < len(self.vocabulary) else "<unk>"

    def decode(self, ids: Iterable[int]) -> str:
        out = []
        for i in ids:
            if i == EOS_ID:
                break
            if i >= len(SPECIAL_TOKENS):
                out.append(self.vocabulary[i])
        return "".join(out).translate(FULL_WIDTH)
