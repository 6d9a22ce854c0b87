"""Training data: read the English–Chinese pairs, clean them, and split them once and for all.

Sources (see docs/training.md): Tatoeba sentence pairs, HSK graded sentences, 3AM image captions,
TICO-19 health texts, NTREX-128 news, UN texts and, optionally, Bible verses and CC-CEDICT word
pairs. The pairs a transform adds are made in ``transforms.py``. The Chinese side is normalised
to Simplified script with OpenCC. Every domain keeps a held-out test split, chosen by distinct
English sentence, so the same English never appears both in training and in evaluation.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

TATOEBA_FILE = "tatoeba-cmn-eng.tsv"
HSK_FILE = "hsk-sentences-en-zh.tsv"
CEDICT_FILE = "cc-cedict-2023-11-07.u8.gz"
# English<TAB>Chinese files, one pair a line, no header
PLAIN_FILES = {
    "captions": "3am-captions-en-zh.tsv",
    "tico": "tico19-en-zh.tsv",
    "ntrex": "ntrex128-en-zh.tsv",
}
# added 2026-12-01 (English<TAB>Chinese<TAB>attribution); read when present, so a data folder of
# the earlier kind still loads. The Bible is archaic on both sides: only read when asked for.
NEW_FILES = {
    "tatoeba_extra": "tatoeba-extra-cmn-eng.tsv",
    "un": "un-devset-en-zh.tsv",
}
BIBLE_FILE = "bible-kjv-cuvs-en-zh.tsv"
# held-out sentences per domain: (test, dev). Tatoeba's and HSK's come first and are drawn exactly
# as before the wider domains were added, so their test sets stay comparable across models.
HELD_OUT = {"captions": (500, 200), "tico": (300, 100), "ntrex": (300, 100)}
# the domains added later draw their held-out sentences after the ones above (so those stay
# exactly as they were) and only from English no other source has, so an earlier model that
# trained on the other sources has seen none of them either.
HELD_OUT_NEW = {"tatoeba_extra": (300, 100), "un": (300, 100)}
# read only when asked for; they keep no split of their own and never change another's
OPT_IN = {"bible", "cedict"}


@dataclass(frozen=True)
class Pair:
    english: str
    chinese: str
    source: str  # "tatoeba", "hsk", "captions", "tico", "ntrex" or "cedict"


@dataclass
class Splits:
    train: list[Pair]
    dev: list[Pair]  # Tatoeba
    test: list[Pair]  # Tatoeba
    test_hsk: list[Pair]
    # the wider domains, keyed by source name
    domain_test: dict[str, list[Pair]] = field(default_factory=dict)
    domain_dev: dict[str, list[Pair]] = field(default_factory=dict)
    # the final test split (every source's pairs, drawn last): reported once, when a model ships
    final_test: list[Pair] = field(default_factory=list)

    def test_sets(self) -> dict[str, list[Pair]]:
        """Every held-out test split by name, as ``evaluate`` reports them."""
        sets = {"tatoeba_test": self.test, "hsk_test": self.test_hsk}
        sets.update({f"{name}_test": pairs for name, pairs in self.domain_test.items()})
        return sets

    def dev_mix(self) -> list[Pair]:
        """The dev set training scores every epoch on: Tatoeba plus every wider domain's dev."""
        return self.dev + [p for pairs in self.domain_dev.values() for p in pairs]


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


def read_plain(path: Path, source: str) -> list[Pair]:
    pairs = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            columns = line.rstrip("\n").split("\t")
            if len(columns) in (2, 3):
                pairs.append(Pair(_clean(columns[0]), _clean(columns[1]), source))
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


def source_names(wide: bool = True, new: bool = True, bible: bool = False,
                 dictionary: bool = False) -> list[str]:
    """The sources a run of the old flags read (``wide=False``: Tatoeba and HSK only, the first
    shipped model's data; ``new=False``: without the files added on 2026-12-01)."""
    names = ["tatoeba", "hsk"]
    if wide:
        names += list(PLAIN_FILES) + (list(NEW_FILES) if new else [])
    return names + ["bible"] * bible + ["cedict"] * dictionary


def source_file(name: str) -> str:
    """The file in the data folder that source ``name`` is read from."""
    files = {"tatoeba": TATOEBA_FILE, "hsk": HSK_FILE, **PLAIN_FILES, **NEW_FILES,
             "bible": BIBLE_FILE, "cedict": CEDICT_FILE}
    if name not in files:
        raise ValueError(f"unknown source {name!r}: the sources are {', '.join(files)}")
    return files[name]


def read_sources(data_dir: Path, names: list[str]) -> dict[str, list[Pair]]:
    """The named sources, Traditional→Simplified normalised, de-duplicated within each source.

    A file added on 2026-12-01 (``NEW_FILES``) that the folder lacks is skipped, so a data folder
    of the earlier kind still loads."""
    to_simplified = _to_simplified()
    sources = {}
    for name in names:
        path = data_dir / source_file(name)
        if name in NEW_FILES and not path.exists():
            continue
        sources[name] = (read_tatoeba(path) if name == "tatoeba" else read_hsk(path) if name == "hsk"
                         else read_cedict(path) if name == "cedict" else read_plain(path, name))
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


def load_pairs(
    data_dir: Path, use_dictionary: bool = False, wide: bool = True, bible: bool = False,
    new: bool = True,
) -> dict[str, list[Pair]]:
    """The sources of :func:`source_names`, as :func:`read_sources` reads them."""
    return read_sources(data_dir, source_names(wide, new, bible, use_dictionary))


def file_sha256(path: Path) -> str:
    """The file's sha256, read in blocks (what a checkpoint records of each data file it read)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _english_key(text: str) -> str:
    return re.sub(r"[^a-z0-9' ]", "", text.lower()).strip()


def split_seed(settings: dict) -> int | None:
    """The seed that drew a training run's held-out splits, from its history.json settings:
    ``split_seed``; runs from before ``--split-seed`` drew them with ``seed``."""
    seed = settings.get("split_seed", settings.get("seed"))
    return None if seed is None else int(seed)


def split_pairs(
    sources: dict[str, list[Pair]],
    seed: int = 13,
    n_test: int = 1000,
    n_dev: int = 500,
    n_test_hsk: int = 300,
    n_final: int = 0,
    final_seed: int = 0,
) -> Splits:
    """Hold out test and dev sets by distinct English sentence.

    ``test`` and ``dev`` come from Tatoeba (the usual benchmark for this language pair);
    ``test_hsk`` is a second, harder test set of longer graded sentences; every wider domain
    present in ``sources`` keeps its own test and dev split (``HELD_OUT``). Every pair whose
    English matches a held-out sentence (after lower-casing and dropping punctuation) leaves
    the training set, whatever source it came from. ``n_final`` more English sentences of any
    source (not opt-in) are drawn last, by their own ``final_seed``, as the final test split: the
    splits above stay exactly as they were without it.
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

    domain_keys: dict[str, tuple[set[str], set[str]]] = {}
    for name, (n_domain_test, n_domain_dev) in (HELD_OUT | HELD_OUT_NEW).items():
        if name not in sources:
            continue
        keys = {_english_key(p.english) for p in sources[name]} - held_out
        if name in HELD_OUT_NEW:  # opt-in sources (Bible, dictionary) must not move a split
            keys -= {_english_key(p.english) for other, pairs in sources.items()
                     if other != name and other not in OPT_IN for p in pairs}
        keys = sorted(keys)
        rng.shuffle(keys)
        # a small domain (as in tests) still keeps most of its sentences for training
        n_domain_test = min(n_domain_test, max(1, len(keys) // 4))
        n_domain_dev = min(n_domain_dev, max(1, len(keys) // 8))
        domain_test = set(keys[:n_domain_test])
        domain_dev = set(keys[n_domain_test : n_domain_test + n_domain_dev])
        domain_keys[name] = (domain_test, domain_dev)
        held_out |= domain_test | domain_dev

    final_keys: set[str] = set()
    if n_final:
        pool = sorted({_english_key(p.english) for name, pairs in sources.items()
                       if name not in OPT_IN for p in pairs} - held_out - {""})
        final_keys = set(random.Random(final_seed).sample(pool, min(n_final, len(pool) // 10)))
        held_out |= final_keys
    train = [
        p for pairs in sources.values() for p in pairs if _english_key(p.english) not in held_out
    ]
    return Splits(
        train=train,
        dev=pick(dev_keys, "tatoeba"),
        test=pick(test_keys, "tatoeba"),
        test_hsk=pick(hsk_test_keys, "hsk"),
        domain_test={name: pick(keys[0], name) for name, keys in domain_keys.items()},
        domain_dev={name: pick(keys[1], name) for name, keys in domain_keys.items()},
        final_test=[p for name, pairs in sources.items() if name not in OPT_IN for p in pairs
                    if _english_key(p.english) in final_keys],
    )


_NAME_GLOSS = re.compile(
    r"^([A-Z][a-z]{2,}) \((?:name|person name|given name|surname|first name|male name|female name)\)$"
)
# the wider list: a proper noun's first gloss, alone or with a note that it names a person or a place
_PROPER_GLOSS = re.compile(r"^([A-Z][a-z]{2,})(?: \(([^)]*)\)|, ((?:the )?(?:capital|city|town|province|state"
                           r"|county|country|river|island|port)\b.*))?$")
_PLACE_NOTE = re.compile(r"^(?:(?:the )?(?:city|town|county|province|state|capital|country|place name|river"
                         r"|island|port)\b"
                         r"|(?:[A-Z][a-z]+ )?(?:city|town|county|state|province)$"
                         r"|(?:English|French|German|Italian|Spanish|US|American) (?:county|town|city))")
# -isms, peoples and languages, weekdays and months are capitalised in English but not names
_NOT_A_NAME = re.compile(r"(?:ism|ist)$|^(?:(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day|January|February"
                         r"|March|April|May|June|July|August|September|October|November|December)$")
_NOT_A_NAME_ZH = re.compile(r"(?:教|人|语|文|主义|家|派|节|星期.|月|币)$")
_PERSON_NOTE = re.compile(r"^(?:name|person|person name|given name|surname|first name|male name"
                          r"|female name|English name|Western name)$")


def _cedict_entries(path: Path, max_chars: int):
    """(simplified headword, pinyin, glosses) of each CC-CEDICT line whose simplified headword is
    2 to ``max_chars`` Chinese characters."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            match = re.match(r"^(\S+) (\S+) \[([^\]]*)\] /(.*)/\s*$", line)
            if match and re.fullmatch(rf"[\u4e00-\u9fff]{{2,{max_chars}}}", match.group(2)):
                yield match.group(2), match.group(3), match.group(4).split("/")


def read_names(path: Path, wide: bool = False) -> dict[str, str]:
    """English name → its usual Chinese transliteration, from CC-CEDICT's name entries
    (汤姆 /Tom (name)/, 伊丽莎白 /Elizabeth (person name)/): the first headword of each name.

    ``wide`` also takes proper nouns (capitalised pinyin) whose first gloss is one word alone
    (/Boston/) or with a note naming a person or a place (/Lyon (city in France)/, /London,
    capital of United Kingdom/), about 3.4× as many; it leaves out constellations, brands,
    languages, peoples, religions, weekdays and Japanese surnames, whose Chinese is not a
    transliteration of the English."""
    names: dict[str, str] = {}
    for headword, pinyin, glosses in _cedict_entries(path, 5):
        for gloss in glosses:
            name = _NAME_GLOSS.match(gloss)
            if name:
                names.setdefault(name.group(1), headword)
        if wide and pinyin[:1].isupper():
            proper = _PROPER_GLOSS.match(glosses[0])
            note = proper and (proper.group(2) or proper.group(3))
            if (proper and (note is None or _PERSON_NOTE.match(note) or _PLACE_NOTE.match(note))
                    and not _NOT_A_NAME.search(proper.group(1))
                    and not _NOT_A_NAME_ZH.search(headword)):
                names.setdefault(proper.group(1), headword)
    return names


_ACRONYM_IN_GLOSS = re.compile(r"^(.*?)\s*\(([A-Z]{2,5})\)$")  # /artificial intelligence (AI)/
_SPELLED_OUT_SKIP = {"of", "and", "the", "for", "in", "on", "to", "a", "an", "&"}


def _spells_out(expansion: str, acronym: str) -> bool:
    """Whether ``expansion`` is the acronym spelled out ("World Health Organization" / WHO), small
    words skipped, at most one word before it ("Chinese People's Liberation Army" / PLA) — unlike
    a gloss's domain tag ("san'ao decoction (TCM)" is a term of Chinese medicine, not what TCM
    stands for) or a gloss that only mentions it ("Jacques Rogge, president of International
    Olympic Committee (IOC)" is a person)."""
    words = [w for w in re.findall(r"[A-Za-z]+(?:'[a-z]+)?", expansion)
             if w.lower() not in _SPELLED_OUT_SKIP]
    return "," not in expansion and len(acronym) <= len(words) <= len(acronym) + 1 and "".join(
        w[0] for w in words[-len(acronym):]).upper() == acronym


def read_acronyms(path: Path) -> dict[str, str]:
    """English acronym → the Chinese term it stands for, from CC-CEDICT entries whose gloss spells
    the acronym out and nothing more: 人工智能 /artificial intelligence (AI)/, 个人电脑 /personal
    computer/PC/, 世界卫生组织 /World Health Organization (WHO)/ (the first such headword of each
    acronym; headwords of Chinese characters only). Refused: glosses with a tag in brackets
    ("(Internet slang) punning reference to …", "(baseball) plate appearance (PA)") and headwords
    that stand for several acronyms (国大: INC, MIC and NUS)."""
    terms: dict[str, str] = {}
    for headword, _, glosses in _cedict_entries(path, 10):
        for gloss in glosses:
            inline = _ACRONYM_IN_GLOSS.match(gloss)
            if inline and "(" not in inline.group(1) and _spells_out(inline.group(1), inline.group(2)):
                terms.setdefault(inline.group(2), headword)
            elif re.fullmatch(r"[A-Z]{2,5}", gloss) and any(
                    "(" not in other and _spells_out(other, gloss) for other in glosses if other != gloss):
                terms.setdefault(gloss, headword)
    uses = Counter(terms.values())
    return {acronym: term for acronym, term in terms.items() if uses[term] == 1}
