"""Data transforms: extra training pairs made from the training pairs, named in a recipe.

Each transform is a function of the pairs (and a seed) that returns the pairs it adds; the
training pairs of a stage are its sources' pairs plus what every transform the recipe names added,
in the order of ``TRANSFORMS`` (each sees the pairs the ones before it added). None looks for a
particular sentence or word: each changes every pair of a kind (names, numbers, Latin words,
final stops) in the same way, so what it teaches helps every sentence of that kind.

A recipe's ``[transforms]`` table (model/training/recipes/*.toml) names them with their settings::

    numbers = { copies = 3, any_length = true }
    names = { copies = 4, wide = true, limit = 30000 }
"""

from __future__ import annotations

import inspect
import random
import re
import string
from pathlib import Path

from model.training.data import CEDICT_FILE, Pair, read_acronyms, read_names

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
        if not found or len(choices) <= len(found):  # a surname after a given name ("Karen
            continue  # Smith"): no title in between; or no other name to put in
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


# -- the recipe's names for them -------------------------------------------------------------
# Each takes the pairs so far, the stage's seed and the data folder (for CC-CEDICT's names), and
# the settings the recipe gives it; it returns the pairs it adds.


def rare_words(pairs: list[Pair], seed: int, data: Path, max_pairs: int, copies: int = 1) -> list[Pair]:
    """Everyday pairs with a word found in at most ``max_pairs`` of them, ``copies`` more times."""
    return rare_word_pairs(pairs, max_pairs, copies)


def names(pairs: list[Pair], seed: int, data: Path, copies: int = 1, wide: bool = False,
          limit: int = 20000) -> list[Pair]:
    """A person's (``wide``: or a place's) name on both sides swapped for another (CC-CEDICT)."""
    return vary_names(pairs, read_names(data / CEDICT_FILE, wide=wide), copies, seed, limit)


def titles(pairs: list[Pair], seed: int, data: Path, copies: int = 1, limit: int = 10000) -> list[Pair]:
    """A name swapped for another with a title: "Dr. Elizabeth" / 伊丽莎白博士."""
    return vary_titles(pairs, read_names(data / CEDICT_FILE), copies, seed, limit)


def latin(pairs: list[Pair], seed: int, data: Path, copies: int = 1, short: float = 0.0) -> list[Pair]:
    """A Latin word kept in the Chinese (AI, COVID-19) swapped for a random one of its shape."""
    return vary_latin(pairs, seed, copies, short)


def acronyms(pairs: list[Pair], seed: int, data: Path, copies: int = 1, limit: int = 8000,
             term_share: float = 0.0) -> list[Pair]:
    """A name swapped for a short acronym kept on both sides (a ``term_share`` for a CC-CEDICT
    acronym and the Chinese term it stands for)."""
    terms = read_acronyms(data / CEDICT_FILE) if term_share else None
    return vary_acronyms(pairs, read_names(data / CEDICT_FILE), copies, seed, limit, terms, term_share)


def drop_stops(pairs: list[Pair], seed: int, data: Path, share: float) -> list[Pair]:
    """A ``share`` of the pairs once more without their final . ! ? / 。！？."""
    return drop_final_stops(pairs, share, seed)


def numbers(pairs: list[Pair], seed: int, data: Path, copies: int = 1,
            any_length: bool = False) -> list[Pair]:
    """Pairs whose numbers stand on both sides, with other numbers."""
    return vary_numbers(pairs, seed, copies, any_length)


def concat(pairs: list[Pair], seed: int, data: Path, count: int) -> list[Pair]:
    """``count`` long pairs, each a few pairs of one source joined end to end."""
    return concatenate_pairs(pairs, count, seed)


# the order they run in, whatever order a recipe lists them
TRANSFORMS = {f.__name__: f for f in (rare_words, names, titles, latin, acronyms, drop_stops,
                                      numbers, concat)}
USES_CEDICT = {"names", "titles", "acronyms"}
SHARES = {"share", "short", "term_share"}  # settings that are a share of 0 to 1


def check_transforms(settings: dict[str, dict]) -> None:
    """Raise ``ValueError`` saying what to fix when a transform or a setting is unknown or out of
    range (before any data is read)."""
    for name, options in settings.items():
        if name not in TRANSFORMS:
            raise ValueError(f"unknown transform {name!r}: the transforms are {', '.join(TRANSFORMS)}")
        if not isinstance(options, dict):
            raise ValueError(f"transform {name!r} takes a table of settings, e.g. {name} = {{}}")
        try:
            inspect.signature(TRANSFORMS[name]).bind([], 0, Path(), **options)
        except TypeError as error:
            raise ValueError(f"transform {name!r}: {error} (see model/training/transforms.py)") from None
        for key, value in options.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if value < 0 or (key in SHARES and value > 1):
                limits = "between 0 and 1" if key in SHARES else "0 or more"
                raise ValueError(f"transform {name!r}: {key} takes a number {limits}, not {value}")


def apply_transforms(pairs: list[Pair], settings: dict[str, dict], seed: int,
                     data: Path) -> tuple[list[Pair], dict[str, int]]:
    """The pairs with every named transform's pairs added, and how many each added."""
    added = {}
    for name, transform in TRANSFORMS.items():
        if name in settings:
            extra = transform(pairs, seed, data, **settings[name])
            added[name] = len(extra)
            pairs = pairs + extra
    return pairs, added
