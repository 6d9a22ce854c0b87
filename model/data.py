"""Training data: read the English–Chinese pairs, clean them, and split them once and for all.

Sources (see README): Tatoeba sentence pairs, HSK graded sentences and, optionally, CC-CEDICT
word pairs. The Chinese side is normalised to Simplified script with OpenCC. The held-out test and
dev splits are chosen by distinct English sentence, so the same English never appears both in
training and in evaluation.
"""

from __future__ import annotations

import csv
import gzip
import random
import re
from dataclasses import dataclass
from pathlib import Path

TATOEBA_FILE = "tatoeba-cmn-eng.tsv"
HSK_FILE = "hsk-sentences-en-zh.tsv"
CEDICT_FILE = "cc-cedict-2023-11-07.u8.gz"


@dataclass(frozen=True)
class Pair:
    english: str
    chinese: str
    source: str  # "tatoeba", "hsk" or "cedict"


@dataclass
class Splits:
    train: list[Pair]
    dev: list[Pair]
    test: list[Pair]
    test_hsk: list[Pair]


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _to_simplified():
    import opencc

    converter = opencc.OpenCC("t2s")
    return converter.convert


def read_tatoeba(path: Path) -> list[Pair]:
    pairs = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            columns = line.rstrip("\n").split("\t")
            if len(columns) >= 2:
                pairs.append(Pair(_clean(columns[0]), _clean(columns[1]), "tatoeba"))
    return pairs


def read_hsk(path: Path) -> list[Pair]:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [
            Pair(_clean(row["english"]), _clean(row["chinese_simplified"]), "hsk") for row in rows
        ]


_GLOSS_SKIP = re.compile(
    r"^(variant of|old variant|surname|CL:|see |abbr\.|used in|\(|Japanese variant|erhua)", re.I
)


def read_cedict(path: Path, max_words: int = 3) -> list[Pair]:
    """English gloss → Simplified headword, for short, plain glosses only."""
    pairs = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("#"):
                continue
            match = re.match(r"^(\S+) (\S+) \[[^\]]*\] /(.*)/\s*$", line)
            if not match:
                continue
            simplified, glosses = match.group(2), match.group(3).split("/")
            if not re.fullmatch(r"[\u4e00-\u9fff]{1,4}", simplified):
                continue
            for gloss in glosses[:2]:
                gloss = re.sub(r"\([^)]*\)", "", gloss).strip(" ;,")
                if not gloss or _GLOSS_SKIP.match(gloss):
                    continue
                if len(gloss.split()) <= max_words and re.fullmatch(r"[A-Za-z' -]+", gloss):
                    pairs.append(Pair(gloss, simplified, "cedict"))
    return pairs


def load_pairs(data_dir: Path, use_dictionary: bool = False) -> dict[str, list[Pair]]:
    """All sources, Traditional→Simplified normalised, de-duplicated within each source."""
    to_simplified = _to_simplified()
    sources = {
        "tatoeba": read_tatoeba(data_dir / TATOEBA_FILE),
        "hsk": read_hsk(data_dir / HSK_FILE),
    }
    if use_dictionary:
        sources["cedict"] = read_cedict(data_dir / CEDICT_FILE)
    cleaned = {}
    for name, pairs in sources.items():
        seen: set[tuple[str, str]] = set()
        kept = []
        for pair in pairs:
            chinese = to_simplified(pair.chinese)
            key = (pair.english, chinese)
            if pair.english and chinese and key not in seen:
                seen.add(key)
                kept.append(Pair(pair.english, chinese, name))
        cleaned[name] = kept
    return cleaned


def _english_key(text: str) -> str:
    return re.sub(r"[^a-z0-9' ]", "", text.lower()).strip()


def split_pairs(
    sources: dict[str, list[Pair]],
    seed: int = 13,
    n_test: int = 1000,
    n_dev: int = 500,
    n_test_hsk: int = 300,
) -> Splits:
    """Hold out test and dev sets by distinct English sentence.

    ``test`` and ``dev`` come from Tatoeba (the usual benchmark for this language pair);
    ``test_hsk`` is a second, harder test set of longer graded sentences. Every pair whose
    English matches a held-out sentence (after lower-casing and dropping punctuation) leaves
    the training set, whatever source it came from.
    """
    rng = random.Random(seed)
    tatoeba_keys = sorted({_english_key(p.english) for p in sources["tatoeba"]})
    rng.shuffle(tatoeba_keys)
    test_keys = set(tatoeba_keys[:n_test])
    dev_keys = set(tatoeba_keys[n_test : n_test + n_dev])
    hsk_keys = sorted({_english_key(p.english) for p in sources["hsk"]} - test_keys - dev_keys)
    rng.shuffle(hsk_keys)
    hsk_test_keys = set(hsk_keys[:n_test_hsk])
    held_out = test_keys | dev_keys | hsk_test_keys

    def pick(keys: set[str], source: str) -> list[Pair]:
        return [p for p in sources[source] if _english_key(p.english) in keys]

    train = [
        p for pairs in sources.values() for p in pairs if _english_key(p.english) not in held_out
    ]
    return Splits(
        train=train,
        dev=pick(dev_keys, "tatoeba"),
        test=pick(test_keys, "tatoeba"),
        test_hsk=pick(hsk_test_keys, "hsk"),
    )


def write_tsv(pairs: list[Pair], path: Path) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for pair in pairs:
            handle.write(f"{pair.english}\t{pair.chinese}\n")


def read_tsv(path: Path) -> list[Pair]:
    pairs = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            english, chinese = line.rstrip("\n").split("\t")
            pairs.append(Pair(english, chinese, path.stem))
    return pairs
