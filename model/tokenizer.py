"""Tokenizers: English sub-word pieces (BPE) and Chinese characters.

Both sides share the special tokens and their ids: <pad>=0, <bos>=1, <eos>=2, <unk>=3.
English is lower-cased, split on whitespace, punctuation and digits, then cut into BPE pieces learned
from the training data (a piece that continues a word starts with ``##``). Chinese needs no word
segmentation here: every character is one token, as in 猫 坐 在 垫 子 上.
"""

from __future__ import annotations

import heapq
import json
import unicodedata
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

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


def learn_merges(words: Counter[str], vocab_size: int,
                 min_frequency: int = 2) -> tuple[list[str], list[tuple[str, str]]]:
    """BPE on word counts: (vocabulary, merges in the order learned).

    A word starts as its characters, every one after the first marked ``##`` (a piece that
    continues a word). The most frequent adjacent pair is merged, again and again, until the
    vocabulary has ``vocab_size`` pieces or no pair is seen ``min_frequency`` times; among pairs of
    equal count the one that sorts first is merged, so the result depends on the counts alone."""
    spellings = sorted(words)
    symbols = [[w[0], *(CONTINUATION + c for c in w[1:])] for w in spellings]
    counts = [words[w] for w in spellings]
    vocab = SPECIAL_TOKENS + sorted({s for word in symbols for s in word} - set(SPECIAL_TOKENS))
    known = set(vocab)
    pairs: Counter[tuple[str, str]] = Counter()
    where: dict[tuple[str, str], set[int]] = {}
    for index, word in enumerate(symbols):
        for pair in zip(word, word[1:], strict=False):
            pairs[pair] += counts[index]
            where.setdefault(pair, set()).add(index)
    heap = [(-count, pair) for pair, count in pairs.items()]
    heapq.heapify(heap)
    merges = []
    while len(vocab) < vocab_size and heap:
        count, pair = heapq.heappop(heap)
        if pairs.get(pair, 0) != -count:
            continue  # an entry from before the pair's count changed
        if -count < min_frequency:
            break
        first, second = pair
        joined = first + second.removeprefix(CONTINUATION)
        merges.append(pair)
        if joined not in known:
            known.add(joined)
            vocab.append(joined)
        changed = set()
        for index in sorted(where.pop(pair)):
            word, n = symbols[index], counts[index]
            for old in zip(word, word[1:], strict=False):
                pairs[old] -= n
                changed.add(old)
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
                    merged.append(joined)
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            symbols[index] = merged
            for new in zip(merged, merged[1:], strict=False):
                pairs[new] += n
                where.setdefault(new, set()).add(index)
                changed.add(new)
        del pairs[pair]
        for other in sorted(changed - {pair}):
            if pairs[other] > 0:
                heapq.heappush(heap, (-pairs[other], other))
    return vocab, merges


def _with_special_tokens(tokenizer: Tokenizer) -> Tokenizer:
    """``tokenizer`` with <pad> <bos> <eos> <unk> registered as its special tokens, at the ids they
    have in its vocabulary (0–3), as the library's own trainer registers them and as a Hugging Face
    tokenizer does: the same text gives the same ids in both (a file saved before this keeps them
    only in its vocabulary; loading it registers them)."""
    tokenizer.add_special_tokens(SPECIAL_TOKENS)
    return tokenizer


class EnglishTokenizer:
    """BPE over lower-cased words, via the ``tokenizers`` library."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer

    @classmethod
    def train(cls, sentences: Iterable[str], vocab_size: int = 8000,
              min_frequency: int = 2) -> EnglishTokenizer:
        """Learn BPE pieces from ``sentences`` (:func:`learn_merges`): the same sentences always
        give the same pieces. The ``tokenizers`` library's own trainer breaks ties between pairs
        of equal count by ids it hands out in hash order, so two runs on the same data learned
        different rare pieces (``##bz`` in one, ``##kb`` in the other)."""
        tokenizer = cls._tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix=CONTINUATION))
        words: Counter[str] = Counter()
        for sentence in sentences:
            text = tokenizer.normalizer.normalize_str(sentence)
            words.update(word for word, _ in tokenizer.pre_tokenizer.pre_tokenize_str(text))
        vocab, merges = learn_merges(words, vocab_size, min_frequency)
        return cls(_with_special_tokens(cls._tokenizer(models.BPE(
            vocab={piece: i for i, piece in enumerate(vocab)}, merges=merges, unk_token="<unk>",
            continuing_subword_prefix=CONTINUATION))))

    @staticmethod
    def _tokenizer(model: models.BPE) -> Tokenizer:
        """Our normalizer (NFKC, lower case), pre-tokenizer and decoder around a BPE model."""
        tokenizer = Tokenizer(model)
        tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
        tokenizer.pre_tokenizer = _PRE_TOKENIZER
        tokenizer.decoder = decoders.WordPiece(prefix=CONTINUATION)
        return tokenizer

    @classmethod
    def load(cls, path: Path) -> EnglishTokenizer:
        return cls(_with_special_tokens(Tokenizer.from_file(str(path))))

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
