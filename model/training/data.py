"""Training data: read the English–Chinese pairs, clean them, and split them once and for all.

Sources (see README): Tatoeba sentence pairs, HSK graded sentences, 3AM image captions, TICO-19
health texts, NTREX-128 news and, optionally, CC-CEDICT word pairs. The Chinese side is normalised
to Simplified script with OpenCC. Every domain keeps a held-out test split, chosen by distinct
English sentence, so the same English never appears both in training and in evaluation.
"""

from __future__ import annotations

import csv
import gzip
import random
import re
import string
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


def load_pairs(
    data_dir: Path, use_dictionary: bool = False, wide: bool = True, bible: bool = False,
    new: bool = True,
) -> dict[str, list[Pair]]:
    """All sources, Traditional→Simplified normalised, de-duplicated within each source.

    ``wide=False`` reads only Tatoeba and HSK, the data of the first shipped model; ``new=False``
    leaves out the files added on 2026-12-01; ``bible`` adds the KJV × CUV verses.
    """
    to_simplified = _to_simplified()
    sources = {
        "tatoeba": read_tatoeba(data_dir / TATOEBA_FILE),
        "hsk": read_hsk(data_dir / HSK_FILE),
    }
    if wide:
        for name, filename in PLAIN_FILES.items():
            sources[name] = read_plain(data_dir / filename, name)
        for name, filename in NEW_FILES.items():
            if new and (data_dir / filename).exists():
                sources[name] = read_plain(data_dir / filename, name)
    if bible:
        sources["bible"] = read_plain(data_dir / BIBLE_FILE, "bible")
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
) -> Splits:
    """Hold out test and dev sets by distinct English sentence.

    ``test`` and ``dev`` come from Tatoeba (the usual benchmark for this language pair);
    ``test_hsk`` is a second, harder test set of longer graded sentences; every wider domain
    present in ``sources`` keeps its own test and dev split (``HELD_OUT``). Every pair whose
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
    )


# the everyday sources: what a learner types is most like them
EVERYDAY = ("tatoeba", "tatoeba_extra", "hsk")
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def rare_word_pairs(pairs: list[Pair], max_pairs: int, copies: int = 1,
                    sources: tuple[str, ...] = EVERYDAY) -> list[Pair]:
    """``copies`` more copies of each pair of ``sources`` whose English has a word that at most
    ``max_pairs`` distinct pairs of those sources contain: the long tail of everyday words
    ("programming" is in 7 of ~60,000, "code" in 9) seen more often, since a word met a handful
    of times in an epoch is barely learnt. Counted over distinct pairs, so upsampling a source
    does not make its words common; every occurrence of a rare pair gets its copies."""
    def words(pair: Pair) -> set[str]:
        return set(_WORD.findall(pair.english.lower()))

    counts: dict[str, int] = {}
    for pair in {p for p in pairs if p.source in sources}:
        for word in words(pair):
            counts[word] = counts.get(word, 0) + 1
    return [pair for pair in pairs
            if pair.source in sources and any(counts[w] <= max_pairs for w in words(pair))
            for _ in range(copies)]


# a whole number: not part of a longer one or of a decimal (1.5, 3,000), but it may end a sentence
_NUMBER = re.compile(r"(?<![\d.,])(?<!\d[.,])\d+(?!\d|[.,]\d)")


def vary_numbers(pairs: list[Pair], seed: int = 13, copies: int = 1, any_length: bool = False) -> list[Pair]:
    """``copies`` extra copies of every pair whose numbers appear, digit for digit, on both sides,
    with each such number replaced by another of the same length (``any_length``: of 1 to 5
    digits, half the time the same length), so the model learns to copy digits rather than to
    remember the few numbers its sentences happen to contain, and to copy all of a long one."""
    rng = random.Random(seed)
    varied = []
    for pair in pairs:
        numbers = set(_NUMBER.findall(pair.english))
        if not numbers or any(n not in set(_NUMBER.findall(pair.chinese)) for n in numbers):
            continue
        for _ in range(copies):
            mapping = {}
            for number in sorted(numbers):
                length = len(number)
                if any_length and rng.random() < 0.5:
                    length = rng.randint(1, 5)
                low = 10 ** (length - 1) if length > 1 else 0
                mapping[number] = str(rng.randint(low, 10 ** length - 1))

            def swap(match: re.Match, mapping: dict[str, str] = mapping) -> str:
                return mapping.get(match.group(), match.group())

            english, chinese = _NUMBER.sub(swap, pair.english), _NUMBER.sub(swap, pair.chinese)
            varied.append(Pair(english, chinese, pair.source))
    return varied


# a run of Latin letters and digits, hyphens inside ("AI", "COVID-19", "iPhone"), standing alone:
# not part of a longer run of letters or digits on either side
_WORDISH = "A-Za-z0-9\u00c0-\u024f"  # letters with accents too: no word begins inside "Médoune"
_LATIN = re.compile(rf"(?<![{_WORDISH}])[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*(?![{_WORDISH}])")


def _latin_like(word: str, rng: random.Random, short: float = 0.0) -> str:
    """A random word of ``word``'s shape: each letter another letter of the same case, each digit
    another digit, hyphens kept; a word of capitals alone may also get 2 to 5 of them.

    With ``short`` > 0, that share of the words of capitals becomes a short acronym instead
    (:func:`_short_acronym`)."""
    if short and word.isalpha() and word.isupper() and rng.random() < short:
        return _short_acronym(rng)
    if word.isalpha() and word.isupper() and rng.random() < 0.5:
        word = "A" * rng.randint(2, 5)
    letters = string.ascii_uppercase, string.ascii_lowercase
    return "".join(
        rng.choice(letters[0]) if ch.isupper() else rng.choice(letters[1]) if ch.islower()
        else rng.choice(string.digits) if ch.isdigit() else ch
        for ch in word
    )


def _short_acronym(rng: random.Random) -> str:
    """Two or three random capitals, half of them beginning with A or I.

    The English tokenizer lowercases, so an acronym reaches the model as pieces of lowercase
    words: "AI" is "a" + "##i", the same first piece as the article "a". Short acronyms that begin
    with a letter that is itself an English word (A, I) are the ones the model most easily reads
    as that word and drops ("I love AI." → 我爱一个。); they are rare in the data (AI is in 15
    pairs of 200,000), so the swaps give them a larger share."""
    first = rng.choice("AI") if rng.random() < 0.5 else rng.choice(string.ascii_uppercase)
    return first + "".join(rng.choice(string.ascii_uppercase) for _ in range(rng.randint(1, 2)))


def vary_latin(pairs: list[Pair], seed: int = 13, copies: int = 1,
               short: float = 0.0) -> list[Pair]:
    """``copies`` extra copies of every pair whose Chinese keeps a word of the English letter for
    letter ("AI", "COVID-19", "Tatoeba"; two characters or more), each such word replaced on both
    sides by a random one of its shape, so the model learns to copy any Latin word it has not
    seen — and to stop after it — instead of the few its data repeats (COVID-19 alone is in ~260
    pairs, AI in 15). ``short``: the share of words of capitals swapped for a short acronym
    (:func:`_short_acronym`); 0 draws exactly as before it existed."""
    rng = random.Random(seed)
    varied = []
    for pair in pairs:
        kept = set(_LATIN.findall(pair.chinese))
        words = sorted(w for w in set(_LATIN.findall(pair.english)) if len(w) > 1 and w in kept)
        if not words:
            continue
        pattern = re.compile(rf"(?<![{_WORDISH}])(?:" + "|".join(
            map(re.escape, sorted(words, key=len, reverse=True))) + rf")(?![{_WORDISH}])")
        for _ in range(copies):
            mapping = {word: _latin_like(word, rng, short) for word in words}

            def swap(match: re.Match, mapping: dict[str, str] = mapping) -> str:
                return mapping[match.group()]

            varied.append(Pair(pattern.sub(swap, pair.english), pattern.sub(swap, pair.chinese),
                               pair.source))
    return varied


STOPS_EN = ".!?"
STOPS_ZH = "。！？.!?"


def drop_final_stops(pairs: list[Pair], share: float, seed: int = 13) -> list[Pair]:
    """A copy of a random ``share`` of the pairs that end in a full stop, question mark or
    exclamation mark on both sides, those final marks removed on both sides.

    Nearly every English sentence in the data ends with one (all of Tatoeba's, HSK's and the
    captions'), but learners often type without one ("I love AI"): a model that has only seen
    sentences end in a mark has not learnt where to stop without one and may repeat the last
    word (我爱AIAI). Marks inside the sentence stay."""
    rng = random.Random(seed)
    stripped = []
    for pair in pairs:
        english, chinese = pair.english.rstrip(STOPS_EN), pair.chinese.rstrip(STOPS_ZH)
        if (english != pair.english and chinese != pair.chinese and english and chinese
                and rng.random() < share):
            stripped.append(Pair(english.rstrip(), chinese.rstrip(), pair.source))
    return stripped


_ENGLISH_END = (".", "!", "?", '"', "'", ")")
_CHINESE_END = ("。", "！", "？", "”", "’", "）", ".", "!", "?")


def concatenate_pairs(
    pairs: list[Pair], count: int, seed: int = 13, words: tuple[int, int] = (12, 50)
) -> list[Pair]:
    """Up to ``count`` long pairs, each a few random pairs of one source joined end to end.

    Most training sentences are short, so a model trained on them alone has hardly seen a
    50-word input and loses its place in one: it stutters (国国国国) or stops early. Joining
    pairs teaches it long inputs with exact references. Each joined pair takes pairs from one
    source until its English has a random length in ``words``; a part without a final
    punctuation mark gets one (". " / "。"), so the parts stay separate sentences on both sides.
    A draw whose first pair is already long enough is dropped: it would only repeat that pair.
    """
    rng = random.Random(seed)
    by_source: dict[str, list[Pair]] = {}
    for pair in pairs:
        by_source.setdefault(pair.source, []).append(pair)
    sources = sorted(by_source)
    weights = [len(by_source[name]) for name in sources]
    joined = []
    for _ in range(count):
        source = rng.choices(sources, weights)[0]
        target_words = rng.randint(*words)
        english, chinese, length = [], [], 0
        while length < target_words:
            part = rng.choice(by_source[source])
            english.append(part.english if part.english.endswith(_ENGLISH_END) else part.english + ".")
            chinese.append(part.chinese if part.chinese.endswith(_CHINESE_END) else part.chinese + "。")
            length += len(part.english.split())
        if len(english) > 1:
            joined.append(Pair(" ".join(english), "".join(chinese), source))
    return joined


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


def vary_names(
    pairs: list[Pair], names: dict[str, str], copies: int = 1, seed: int = 13, limit: int = 20000
) -> list[Pair]:
    """Up to ``limit`` extra pairs (``copies`` per pair) in which a person's name found on both
    sides (English "Tom", Chinese 汤姆) is replaced by another name and its transliteration, so
    the model learns to spell names it has not seen instead of guessing a frequent one."""
    rng = random.Random(seed)
    choices = sorted(names)
    varied = []
    for pair in [p for p in pairs for _ in range(copies)]:
        found = [w for w in set(re.findall(r"\b[A-Z][a-z]+\b", pair.english))
                 if w in names and names[w] in pair.chinese]
        if not found or len(choices) < 2 * len(found):
            continue
        mapping = {}
        for word in sorted(found):  # each name to a different one, all swapped in one pass
            other = rng.choice(choices)
            while other in found or other in mapping.values():
                other = rng.choice(choices)
            mapping[word] = other
        english = re.sub(rf"\b(?:{'|'.join(mapping)})\b", lambda m, swap=mapping: swap[m.group()],
                         pair.english)
        zh = {names[word]: names[other] for word, other in mapping.items()}
        chinese = re.sub("|".join(sorted(map(re.escape, zh), key=len, reverse=True)),
                         lambda m, swap=zh: swap[m.group()], pair.chinese)
        varied.append(Pair(english, chinese, pair.source))
    rng.shuffle(varied)
    return varied[:limit]


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


def vary_acronyms(
    pairs: list[Pair], names: dict[str, str], copies: int = 1, seed: int = 13, limit: int = 8000,
    terms: dict[str, str] | None = None, term_share: float = 0.0,
) -> list[Pair]:
    """Up to ``limit`` extra pairs (``copies`` per pair) in which one person's name found on both
    sides (Tom / 汤姆) becomes a short acronym: "I love Tom." / 我爱汤姆。 → "I love AI." /
    我爱AI。, the acronym kept as it is on both sides — or, for a ``term_share`` (0–1) of them,
    one of ``terms`` (:func:`read_acronyms`) with the Chinese term it stands for: "I love AI." /
    我爱人工智能。

    The acronyms in the data sit in long technical sentences (COVID-19, CNN in the news), so the
    model has not seen one where a learner types it — "I love AI." came out as 我爱一个。, "AI"
    read as the article "a" (:func:`_short_acronym`). A random acronym is never one whose
    lowercase is a word of the data in any spelling ("IT", "AN", "AM", "TOM"): the tokenizer
    lowercases, and "I love IT." must not teach the model to copy the pronoun "it". ``term_share``
    0 draws exactly as before it existed.

    A term is refused when its lowercase is written in small letters somewhere in the data —
    "it" is, so "IT" is refused; "AI" is not, as the data writes it only as "AI" or as the name
    "Ai" — or when it has a character the data's Chinese never has (the vocabulary a continued run
    extends would grow for one word). Terms are drawn in proportion to 1 + the number of times
    the data's Chinese writes them, so the acronyms the data itself talks about (AI 人工智能, EU
    欧盟, SARS) come up more often than the hundreds it never mentions."""
    rng = random.Random(seed)
    words = {w.lower() for p in pairs for w in re.findall(r"[A-Za-z]+", p.english)}
    characters = set().union(*(p.chinese for p in pairs)) if terms else set()
    ordinary = {w for p in pairs for w in re.findall(r"[A-Za-z]+", p.english) if w.islower()}
    known = sorted(a for a, term in (terms or {}).items()
                   if a.lower() not in ordinary and set(term) <= characters)
    chinese_text = "\n".join(p.chinese for p in pairs) if known else ""
    weights = [1 + chinese_text.count(terms[a]) for a in known]
    varied = []
    for pair in [p for p in pairs for _ in range(copies)]:
        found = sorted(w for w in set(re.findall(r"\b[A-Z][a-z]+\b", pair.english))
                       if w in names and names[w] in pair.chinese)
        if not found:
            continue
        word = rng.choice(found)
        if known and term_share and rng.random() < term_share:
            acronym = rng.choices(known, weights)[0]
            chinese = terms[acronym]
        else:
            acronym = _short_acronym(rng)
            while acronym.lower() in words:
                acronym = _short_acronym(rng)
            chinese = acronym
        english = re.sub(rf"\b{word}\b", acronym, pair.english)
        varied.append(Pair(english, pair.chinese.replace(names[word], chinese), pair.source))
    rng.shuffle(varied)
    return varied[:limit]


# an English title before a name, its Chinese after it (Dr. Patel → 帕特尔博士)
TITLES = (("Mr.", "先生"), ("Mrs.", "太太"), ("Ms.", "女士"), ("Dr.", "博士"), ("Dr.", "医生"),
          ("Professor", "教授"))
_HE = re.compile(r"\b(?:he|him|his|himself)\b", re.I)
_SHE = re.compile(r"\b(?:she|her|hers|herself)\b", re.I)


def _titles_for(english: str) -> tuple[tuple[str, str], ...]:
    """The titles that agree with the sentence's pronouns (no "Mrs." for a "he")."""
    he, she = bool(_HE.search(english)), bool(_SHE.search(english))
    return tuple(t for t in TITLES if not (he and t[0] in ("Mrs.", "Ms.")) and not (she and t[0] == "Mr."))


_TITLED = re.compile(r"\b(?:Mr|Mrs|Ms|Miss|Dr|Prof|Professor|Doctor|Sir|Madam)\b")
_TITLED_ZH = re.compile("先生|太太|女士|小姐|博士|医生|教授|夫人")


def vary_titles(
    pairs: list[Pair], names: dict[str, str], copies: int = 1, seed: int = 13, limit: int = 20000
) -> list[Pair]:
    """Up to ``limit`` extra pairs (``copies`` per pair) in which one person's name found on both
    sides (Tom / 汤姆) becomes another name with a title: "Dr. Elizabeth" / 伊丽莎白博士.

    Titles are rare in the data ("Dr." is in 9 pairs of all of them), so the model has not
    learnt that the English title comes first and the Chinese one after the name; it reads
    "Dr. Patel" as a place (博士顿). Pairs that already have a title on either side are left
    alone, so no name gets two."""
    rng = random.Random(seed)
    choices = sorted(names)
    varied = []
    for pair in [p for p in pairs for _ in range(copies)]:
        if _TITLED.search(pair.english) or _TITLED_ZH.search(pair.chinese):
            continue
        found = sorted(w for w in set(re.findall(r"\b[A-Z][a-z]+\b", pair.english))
                       if w in names and names[w] in pair.chinese)
        if not found:
            continue
        found = [w for w in found if not re.search(rf"\b[A-Z][a-z]+ {w}\b", pair.english)]
        if not found:  # a surname after a given name ("Karen Smith"): no title in between
            continue
        word = rng.choice(found)
        other = rng.choice(choices)
        while other in found:
            other = rng.choice(choices)
        title, title_zh = rng.choice(_titles_for(pair.english))
        english = re.sub(rf"\b{word}\b", f"{title} {other}", pair.english)
        chinese = pair.chinese.replace(names[word], names[other] + title_zh)
        varied.append(Pair(english, chinese, pair.source))
    rng.shuffle(varied)
    return varied[:limit]
