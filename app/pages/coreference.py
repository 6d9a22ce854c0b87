"""/coreference — does any head link "she" to "the woman"? Measured head by head on the reader's
sentence, not claimed.

From the pronoun's row of every encoder self-attention head, read the weight that lands on the
referent's sub-word pieces, and rank the heads by it. A uniform head would give the referent
(its pieces ÷ sentence length); the ranking shows how far each real head is from that.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import Field, ValidationInfo, field_validator

from app.api import timed
from app.deps import EngineDep, LanguageDep, TranslatorDep, page_text
from app.layout import render_page
from app.model_facts import model_facts
from app.palette import PLOT_FONT_PX
from app.plots import ATTENTION_SCALE, BLUE, GREY, ORANGE, PURPLE, base_layout, category_axis, unique_labels
from app.schemas import (
    ENGLISH,
    MAX_TEXT_CHARS,
    TOKENS_RULE,
    NotFound,
    TextQuery,
    TranslateRequest,
    errors,
)

router = APIRouter()
PageText = page_text("coreference")
# One English word, surrounding whitespace allowed (the server strips it): the schema's patterns.
ONE_WORD = re.compile(r"^\s*[A-Za-z][A-Za-z'\-]*\s*$")
ONE_WORD_OR_NONE = re.compile(r"^\s*([A-Za-z][A-Za-z'\-]*)?\s*$")



CONTINUATION = "##"  # a later piece of a word (BPE); a SentencePiece piece starts a word with ▁
WORD_START = "▁"
SPECIALS = {"<pad>", "<bos>", "<eos>", "<unk>"}


class WordNotFound(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Example:
    text: str
    pronoun: str
    referent: str
    distractor: str  # another noun the pronoun could, but does not, refer to


EXAMPLES = [
    Example("The woman said that she was tired.", "she", "woman", ""),
    Example("The teacher praised the student because he worked hard.", "he", "student",
            "teacher"),
    Example("My sister bought a new car and she loves it.", "she", "sister", "car"),
    Example("The boy kicked the ball and he laughed.", "he", "boy", "ball"),
    Example("The girl wrote code until midnight because she loves programming.", "she", "girl",
            "code"),
]


PRONOUNS = ("she", "he", "they", "it", "her", "him", "them", "his", "its", "their", "hers",
            "herself", "himself", "themselves", "itself")
# words that introduce a noun, and words that are never the noun a pronoun refers to
DETERMINERS = {"the", "a", "an", "my", "your", "his", "her", "our", "their", "its", "this", "that",
               "these", "those", "every", "each", "some", "no"}
NOT_NOUNS = DETERMINERS | set(PRONOUNS) | {
    "i", "you", "we", "me", "us", "and", "or", "but", "because", "so", "that", "when", "while",
    "if", "to", "of", "in", "on", "at", "for", "with", "from", "by", "as", "is", "was", "are",
    "were", "be", "been", "said", "told", "very", "not", "do", "did", "does", "has", "have", "had",
    "will", "would", "can", "could", "who", "which", "what", "then", "there", "here"}


ADJECTIVES = {"new", "old", "big", "small", "little", "young", "good", "bad", "red", "blue", "green",
              "black", "white", "long", "short", "tall", "happy", "sad", "nice", "kind", "other",
              "first", "last", "same", "best", "great", "tired", "beautiful", "local"}


# -- reading the sentence: which pronoun, which nouns it could refer to ---------------------------
# Short word lists, not a parser: enough to say "she" cannot refer to "man", "it" not to
# "teacher", "they" not to "boy". A noun the lists do not know counts as a thing (no person).

FEMALE = {"she", "her", "hers", "herself"}
MALE = {"he", "him", "his", "himself"}
THING = {"it", "its", "itself"}
PLURAL = {"they", "them", "their", "theirs", "themselves"}
FEMALE_NOUNS = {"woman", "women", "girl", "sister", "mother", "grandmother", "aunt", "daughter",
                "wife", "queen", "actress", "lady", "niece", "princess", "waitress", "girlfriend",
                "mum", "mom", "grandma", "bride", "nun", "granddaughter"}
MALE_NOUNS = {"man", "men", "boy", "brother", "father", "grandfather", "uncle", "son", "husband",
              "king", "actor", "gentleman", "nephew", "prince", "boyfriend", "dad", "grandpa",
              "groom", "monk", "grandson"}
PERSON_NOUNS = FEMALE_NOUNS | MALE_NOUNS | {
    "teacher", "student", "doctor", "nurse", "friend", "cook", "chef", "waiter", "farmer",
    "worker", "engineer", "child", "children", "baby", "person", "people", "neighbour", "neighbor",
    "driver", "boss", "pilot", "lawyer", "artist", "writer", "singer", "player", "customer",
    "manager", "scientist", "police", "officer", "soldier", "guest", "visitor", "parent", "kid",
    "baker", "plumber", "dentist", "judge", "author", "clerk", "owner", "passenger", "tourist",
    "president", "teenager", "colleague", "classmate", "partner", "pupil", "guard", "leader",
    "policeman", "policewoman", "doctors", "teachers", "students", "friends", "farmers", "workers",
    "engineers", "boys", "girls", "parents", "kids", "guests", "visitors", "players"}
PLURAL_NOUNS = {"children", "people", "men", "women", "police", "mice", "feet", "teeth", "geese"}
NOT_PLURAL = {"bus", "glass", "class", "boss", "news", "grass", "dress", "address", "business",
              "kiss", "gas", "lens", "series", "this", "his", "its", "was", "is", "us", "yes"}
FEMALE_NAMES = {"anna", "lucy", "mary", "emma", "sarah", "lily", "alice", "jane", "linda", "amy",
                "kate", "susan", "helen", "lisa", "sophie", "wang", "li"}
MALE_NAMES = {"tom", "peter", "john", "jack", "david", "james", "paul", "mark", "mike", "sam",
              "ben", "bob", "max", "leo", "tim"}
# capitalised at the start of a sentence without being a name
STARTERS = {"yesterday", "today", "tomorrow", "tonight", "after", "before", "once", "last", "next",
            "since", "although", "though", "however", "also", "then", "now", "later", "finally",
            "suddenly", "sometimes", "often", "yes", "oh", "please", "maybe", "perhaps",
            "everyone", "everybody", "someone", "somebody", "nobody", "nothing", "something"}
TIME_WORDS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
              "january", "february", "march", "april", "june", "july", "august", "september",
              "october", "november", "december", "morning", "evening", "night", "week", "year",
              "day", "today", "time", "moment", "minute", "hour"}
PLACE_PREPOSITIONS = {"in", "on", "to", "at", "from", "near", "into", "across", "through", "visited"}


def pronoun_kind(word: str) -> str | None:
    """"female", "male", "thing", "plural" or None (not a third-person pronoun)."""
    word = word.lower()
    return ("female" if word in FEMALE else "male" if word in MALE else "thing" if word in THING
            else "plural" if word in PLURAL else None)


@dataclass(frozen=True)
class Candidate:
    word: str  # as written in the sentence
    kind: str  # "female" | "male" | "person" (either) | "thing" | "plural" | "people" | "name"
    agrees: bool  # whether the pronoun could refer to it (number and person/thing)


def noun_kind(word: str, is_name: bool, after_place_word: bool) -> str:
    plain = word.lower()
    if is_name:
        if after_place_word:
            return "thing"  # "to Shanghai": a place
        return "female" if plain in FEMALE_NAMES else "male" if plain in MALE_NAMES else "name"
    plural = plain in PLURAL_NOUNS or (plain.endswith("s") and len(plain) > 3
                                       and plain not in NOT_PLURAL and not plain.endswith("ss"))
    if plain in FEMALE_NOUNS and not plural:
        return "female"
    if plain in MALE_NOUNS and not plural:
        return "male"
    if plain in PERSON_NOUNS:
        return "people" if plural else "person"
    return "plural" if plural else "thing"


AGREES = {"female": {"female", "person", "name"}, "male": {"male", "person", "name"},
          "thing": {"thing"}, "plural": {"plural", "people"}}


def read_sentence(text: str, pronoun: str | None = None) -> dict:
    """The sentence's first third-person pronoun (not its first word, which has nothing before it),
    every noun before it (a word after a determiner, past adjectives, or a capitalised name) and
    whether the pronoun could refer to each: a guess from word order and short word lists, not a
    parse. ``pronoun``: read that word's first occurrence instead (None when it is no pronoun).
    ``{"pronoun": str | None, "candidates": [Candidate]}``."""
    found = [m.group() for m in re.finditer(r"[A-Za-z][A-Za-z'\-]*", text)]
    lowered = [word.lower() for word in found]
    wanted = (lambda word: word == pronoun.lower()) if pronoun else pronoun_kind
    at = next((i for i, word in enumerate(lowered) if wanted(word) and i > 0), None)
    if at is None or not pronoun_kind(lowered[at]):
        return {"pronoun": None, "candidates": []}
    kind = pronoun_kind(lowered[at])
    candidates: list[Candidate] = []

    def add(index: int, is_name: bool) -> None:
        word = found[index]
        if word.lower() in {c.word.lower() for c in candidates}:
            return
        noun = noun_kind(word, is_name, index > 0 and lowered[index - 1] in PLACE_PREPOSITIONS)
        candidates.append(Candidate(word, noun, noun in AGREES[kind]))

    for i in range(at):
        word, plain = found[i], lowered[i]
        if plain in NOT_NOUNS or plain in STARTERS or plain in TIME_WORDS:
            continue
        if i == 0:  # capitalised anyway: a name only if it reads as one
            if plain in PERSON_NOUNS:
                add(i, False)
            elif plain in FEMALE_NAMES | MALE_NAMES or not (
                    plain in ADJECTIVES or plain.endswith(("ly", "ing", "ed"))):
                add(i, True)
        elif word[:1].isupper():
            add(i, True)
        elif lowered[i - 1] in DETERMINERS:  # "a new car": past the adjectives
            end = i
            while end + 1 < at and lowered[end] in ADJECTIVES:
                end += 1
            if lowered[end] not in NOT_NOUNS | ADJECTIVES | TIME_WORDS:
                add(end, False)
    return {"pronoun": found[at], "candidates": candidates}


# -- the model's answer: which candidate its strongest head points the pronoun at ------------------

CALIBRATION_FILE = Path(__file__).resolve().parents[2] / "model" / "explain" / "coreference_calibration.json"
LABELLED_FILE = CALIBRATION_FILE.with_name("coreference_labelled.json")


def strongest_head(encoder_attention: list, tokens: list[str], pronoun: list[int],
                   positions: list[int]) -> dict:
    """The head whose pronoun row puts the most weight on ``positions`` (a word's pieces), that
    weight, and how many times the even spread (pieces ÷ tokens) it is."""
    best = {"layer": 0, "head": 0, "weight": -1.0}
    for layer, heads in enumerate(encoder_attention):
        for head, matrix in enumerate(heads):
            weight = sum(sum(matrix[q][k] for q in pronoun) / len(pronoun) for k in positions)
            if weight > best["weight"]:
                best = {"layer": layer, "head": head, "weight": weight}
    uniform = len(positions) / len(tokens)
    return {**best, "weight": round(best["weight"], 5), "ratio": round(best["weight"] / uniform, 4)}


def model_pick(encoder_attention: list, tokens: list[str], pronoun: list[int],
               candidates: list[tuple[str, list[int]]]) -> dict | None:
    """Among the nouns the pronoun could refer to (word, positions), the one a head singles out
    most (the highest multiple of the even spread); None without candidates."""
    scored = [{"word": word, "positions": positions,
               **strongest_head(encoder_attention, tokens, pronoun, positions)}
              for word, positions in candidates]
    return max(scored, key=lambda entry: entry["ratio"]) if scored else None


def sentence_finding(text: str, tokens: list[str], encoder_attention: list, tokenize,
                     pieces: str = "bpe", pronoun_word: str | None = None,
                     referent: str | None = None) -> dict:
    """What the page can say about ``text`` before any threshold: its pronoun, the nouns before it
    and whether each agrees, and the model's pick among the agreeing ones (``model_pick``)."""
    read = read_sentence(text, pronoun_word)
    if read["pronoun"] is None:
        return {"pronoun": None, "candidates": [], "pick": None}
    pronoun = locate(tokenize(read["pronoun"]), tokens, "pronoun", -1, pieces)
    if referent and referent.lower() not in {c.word.lower() for c in read["candidates"]}:
        # the learner's own choice, read by the same lists (it may be a noun they do not know)
        written = [m for m in re.finditer(rf"\b{re.escape(referent)}\b", text, re.IGNORECASE)]
        name = referent.lower() in FEMALE_NAMES | MALE_NAMES or any(
            m.start() > 0 and m.group()[:1].isupper() for m in written)
        kind = noun_kind(referent, name, False)
        read["candidates"].append(Candidate(referent, kind,
                                            kind in AGREES[pronoun_kind(read["pronoun"])]))
    located = []
    for candidate in read["candidates"]:
        try:
            positions = locate(tokenize(candidate.word), tokens, "referent", -1, pieces)
        except WordNotFound:
            continue
        if positions[0] < pronoun[0]:
            located.append((candidate, positions))
    pick = model_pick(encoder_attention, tokens, pronoun,
                      [(c.word, positions) for c, positions in located if c.agrees])
    return {"pronoun": read["pronoun"], "pronoun_kind": pronoun_kind(read["pronoun"]),
            "pronoun_positions": pronoun,
            "candidates": [{"word": c.word, "kind": c.kind, "agrees": c.agrees,
                            "positions": positions} for c, positions in located],
            "pick": pick}


def claims(finding: dict, threshold: float) -> str | None:
    """The word the page says the pronoun is linked to at ``threshold``, or None (no link)."""
    pick = finding["pick"]
    return pick["word"] if pick is not None and pick["ratio"] >= threshold else None


def score(findings: list[dict], labels: list[str | None], threshold: float) -> dict:
    """Precision of the links claimed at ``threshold`` (a link is right when it names the labelled
    antecedent), and how often the page says "no link": overall, on the sentences with an
    antecedent and on those without."""
    said = [claims(finding, threshold) for finding in findings]
    linked = [(word, label) for word, label in zip(said, labels, strict=True) if word is not None]
    right = sum(1 for word, label in linked if label is not None and word.lower() == label.lower())
    with_antecedent = [word for word, label in zip(said, labels, strict=True) if label is not None]
    without = [word for word, label in zip(said, labels, strict=True) if label is None]
    return {
        "threshold": threshold,
        "links": len(linked),
        "right": right,
        "precision": round(right / len(linked), 4) if linked else None,
        "no_link": round(said.count(None) / len(said), 4),
        "no_link_with_antecedent": round(with_antecedent.count(None) / len(with_antecedent), 4),
        "no_link_without_antecedent": round(without.count(None) / len(without), 4),
        "found_right": sum(1 for word, label in zip(said, labels, strict=True)
                           if label is not None and word is not None
                           and word.lower() == label.lower()),
    }


TARGET_PRECISION = 0.9  # the page may claim a link where 9 in 10 such claims were right


def calibrate(findings: list[dict], labels: list[str | None]) -> dict:
    """The smallest threshold (a multiple of the even spread) whose links reach
    TARGET_PRECISION on the labelled set, with every threshold tried."""
    ratios = sorted({f["pick"]["ratio"] for f in findings if f["pick"] is not None})
    tried = [score(findings, labels, ratio) for ratio in ratios]
    good = [entry for entry in tried if entry["precision"] is not None
            and entry["precision"] >= TARGET_PRECISION]
    chosen = good[0] if good else score(findings, labels, float("inf"))
    return {"chosen": chosen, "tried": tried}


def weights_fingerprint(folder: Path | None) -> str | None:
    """sha256 of a checkpoint's weights.safetensors (what the calibration was measured on)."""
    if folder is None or not (Path(folder) / "weights.safetensors").is_file():
        return None
    digest = hashlib.sha256()
    with (Path(folder) / "weights.safetensors").open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@lru_cache(maxsize=4)
def _fingerprint(folder: str) -> str | None:
    return weights_fingerprint(Path(folder))


def calibration_for(translator) -> dict | None:
    """The stored calibration when it was measured on this translator's weights, else None."""
    if not CALIBRATION_FILE.is_file():
        return None
    stored = json.loads(CALIBRATION_FILE.read_text(encoding="utf-8"))
    folder = getattr(translator, "path", None)
    if folder is None or _fingerprint(str(folder)) != stored.get("weights_sha256"):
        return None
    return stored



def guess_words(text: str) -> dict[str, str] | None:
    """The learner's own sentence, read for a coreference question (``read_sentence``): its first
    pronoun, as the referent the first noun before it that the pronoun could refer to (else the
    first noun: the verdict then says why it cannot be one), another as the distractor; the
    referent "" when no noun comes before the pronoun; None when the sentence has no pronoun. A
    guess from word order, not a parse: the page says so and lets the learner change it."""
    read = read_sentence(text)
    if read["pronoun"] is None:
        return None
    candidates = read["candidates"]
    referent = next((c for c in candidates if c.agrees), candidates[0] if candidates else None)
    distractor = next((c for c in candidates if c is not referent), None)
    return {"pronoun": read["pronoun"], "referent": referent.word if referent else "",
            "distractor": distractor.word if distractor else ""}


class CoreferenceQuery(TextQuery):
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, json_schema_extra=ENGLISH,
                      examples=["The woman said that she was tired."],
                      description="English sentence with a pronoun and the noun it refers to")
    pronoun: str = Field(min_length=1, max_length=20, examples=["she"],
                         json_schema_extra={"pattern": ONE_WORD.pattern},
                         description="a word of text (else 404): its first occurrence after the "
                                     "referent's; the referent's own when it is the same word (each "
                                     "head's weight of that word on itself)")
    referent: str = Field(min_length=1, max_length=30, examples=["woman"],
                          json_schema_extra={"pattern": ONE_WORD.pattern},
                          description="a word of text (else 404)")
    distractor: str = Field("", max_length=30, description="optional: another noun to compare, a "
                                                          "word of text (else 404)",
                            json_schema_extra={"pattern": ONE_WORD_OR_NONE.pattern})

    @field_validator("pronoun", "referent", "distractor")
    @classmethod
    def one_word(cls, word: str, info: ValidationInfo) -> str:
        if not (ONE_WORD_OR_NONE if info.field_name == "distractor" else ONE_WORD).search(word):
            raise ValueError("must be one English word (letters only)")
        return word.strip()


def verdict(finding: dict, referent_word: str, referent: list[int], pronoun: list[int],
            calibration: dict | None) -> dict:
    """What the page may say about the learner's pronoun and referent, and why: a link only when the
    word is a pronoun, the referent a noun before it that it could refer to, and the model's
    strongest head singles the referent out at least the calibrated threshold's multiple of the even
    spread, more than any other candidate. ``kind``: not_pronoun | not_before | disagrees |
    uncalibrated | link | other | below."""
    if finding["pronoun"] is None:
        return {"kind": "not_pronoun"}
    if referent[0] > pronoun[0]:
        return {"kind": "not_before"}
    own = next((c for c in finding["candidates"] if c["word"].lower() == referent_word.lower()), None)
    if own is not None and not own["agrees"]:
        return {"kind": "disagrees", "noun_kind": own["kind"], "pronoun_kind": finding["pronoun_kind"]}
    pick = finding["pick"]
    if calibration is None:
        return {"kind": "uncalibrated", "pick": pick and pick["word"], "ratio": pick and pick["ratio"]}
    figures = {"threshold": calibration["threshold"], "precision": calibration["precision"],
               "links": calibration["links"], "right": calibration["right"],
               "sentences": calibration["sentences"], "no_link": calibration["no_link"]}
    if pick is None:  # no candidate found, the referent not read as one
        return {"kind": "below", "ratio": 0.0, **figures}
    if pick["ratio"] < calibration["threshold"]:
        return {"kind": "below", "pick": pick["word"], "ratio": pick["ratio"], "layer": pick["layer"],
                "head": pick["head"], **figures}
    if pick["word"].lower() != referent_word.lower():
        return {"kind": "other", "pick": pick["word"], "ratio": pick["ratio"], "layer": pick["layer"],
                "head": pick["head"], **figures}
    return {"kind": "link", "pick": pick["word"], "ratio": pick["ratio"], "layer": pick["layer"],
            "head": pick["head"], **figures}


# -- routes ---------------------------------------------------------------------------------------


@router.get("/coreference", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep) -> HTMLResponse:
    """The sentence comes with its pronoun and referent, or they are guessed from the learner's
    own sentence (carried from another page); without a pronoun in it, the page says so and
    offers the examples — the learner's sentence stays in the box."""
    examples = [asdict(example) for example in EXAMPLES]
    query = request.query_params
    text = query.get("text", "")[:MAX_TEXT_CHARS]
    guessed = False
    if query.get("pronoun") and query.get("referent"):
        choice = {"text": text, "pronoun": query["pronoun"],
                  "referent": query["referent"], "distractor": query.get("distractor", "")}
    elif text and (words_guessed := guess_words(text)):
        choice, guessed = {"text": text, **words_guessed}, True
    elif text:
        choice = {"text": text, "pronoun": "", "referent": "", "distractor": ""}
    else:
        choice = examples[0]
    return render_page(
        request, "coreference", lang, coref_examples=examples,
        coref_text=choice["text"][:MAX_TEXT_CHARS], pronoun=choice["pronoun"][:20],
        referent=choice["referent"][:30], distractor=choice["distractor"][:30],
        coref_guessed=guessed and bool(choice["referent"]), coref_missing=not choice["pronoun"],
        coref_no_noun=bool(choice["pronoun"]) and not choice["referent"],
    )


@router.get("/api/coreference",
            responses=errors(TOKENS_RULE, missing=("referent, pronoun (and distractor when "
                                                   "given) must be words of text",)),
            tags=["model"])
def coreference_ranking(query: Annotated[CoreferenceQuery, Query()], engine: EngineDep,
                        translator: TranslatorDep, t: PageText, response: Response) -> dict:
    """Every encoder head ranked by the weight the pronoun's row puts on the referent."""
    trace, model_ms = engine.trace(TranslateRequest.model_construct(text=query.text))
    tokens = trace.source_tokens
    pieces = model_facts(translator)["source_pieces"]

    def find(field: str, after: int = -1) -> list[int]:
        word = getattr(query, field)
        try:
            return locate(translator.english.tokenize(word), tokens, field, after, pieces)
        except WordNotFound as error:
            raise NotFound(error.field, str(error)) from error

    referent = find("referent")
    pronoun = find("pronoun", referent[-1])
    distractor = find("distractor") if query.distractor else None
    attention = [layer["self_attention"] for layer in trace.encoder]
    result = rank_heads(attention, tokens, pronoun, referent, distractor, pieces)
    finding = sentence_finding(query.text, tokens, attention, translator.english.tokenize, pieces,
                               query.pronoun, query.referent)
    finding["verdict"] = verdict(finding, query.referent, referent, pronoun,
                                 calibration_for(translator))
    best = result["ranking"][0]
    highlight = {k: ORANGE for k in referent}
    highlight.update({k: GREY for k in pronoun})
    if distractor:
        highlight.update({k: PURPLE for k in distractor})
    # "Layer {n}" / "第 {n} 层": the number's place is the language's, not always the end
    layer_word, head_word = t("word.layer", n="{n}"), t("word.head", n="{n}")
    timed(response, model_ms)
    return {
        "text": trace.text,
        "tokens": tokens,
        "pronoun": pronoun,
        "referent": referent,
        "distractor": distractor or [],
        **result,
        "finding": finding,
        "figures": {
            "grid": head_grid(result["grid"], "", layer_word, head_word),
            "best": row_bars(
                best["row"], tokens, highlight,
                f"{t('word.layer', n=best['layer'] + 1)} · {t('word.head', n=best['head'] + 1)}"),
        },
    }


# -- measuring ------------------------------------------------------------------------------------


def continues(token: str, pieces: str = "bpe") -> bool:
    """Whether ``token`` carries on the word before it: a ``##`` piece of this project's BPE, or a
    SentencePiece piece (a Marian model's) without ▁ that is neither a special nor punctuation."""
    if pieces == "sentencepiece":
        return not (token.startswith(WORD_START) or token in SPECIALS
                    or all(not c.isalnum() for c in token))
    return token.startswith(CONTINUATION)


def words(tokens: list[str], pieces: str = "bpe") -> list[tuple[str, list[int]]]:
    """Sub-word pieces grouped into words: ``["wom", "##an"]`` (or SentencePiece's
    ``["▁wom", "an"]``) → ``("woman", [i, i+1])``; ``pieces`` is model_facts' ``source_pieces``."""
    grouped: list[tuple[str, list[int]]] = []
    for index, token in enumerate(tokens):
        if grouped and continues(token, pieces):
            word, positions = grouped[-1]
            grouped[-1] = (word + token.removeprefix(CONTINUATION), [*positions, index])
        elif token not in SPECIALS or token == "<unk>":
            grouped.append((token.removeprefix(WORD_START) if pieces == "sentencepiece" else token,
                            [index]))
    return [(word, positions) for word, positions in grouped if word]


def locate(pieces: list[str], tokens: list[str], field: str, after: int = -1,
           kind: str = "bpe") -> list[int]:
    """Positions of the word whose pieces are ``pieces`` (as the tokenizer splits it alone);
    the first occurrence after ``after`` if there is one, else the first. ``kind`` is how the
    tokenizer marks words (model_facts' ``source_pieces``)."""
    if not pieces:
        raise WordNotFound(field, f"{field} must be a word")
    n = len(pieces)
    starts = [i for i in range(len(tokens) - n + 1) if tokens[i : i + n] == pieces
              and (i + n == len(tokens) or not continues(tokens[i + n], kind))]
    if not starts:
        word = "".join(pieces).removeprefix(WORD_START)
        raise WordNotFound(field, f"{field} {word!r} is not a word of the sentence")
    later = [i for i in starts if i > after]
    start = later[0] if later else starts[0]
    return list(range(start, start + n))


def rank_heads(
    encoder_attention: list[list[list[list[float]]]],  # [layer][head][query][key]
    tokens: list[str],
    pronoun: list[int],
    referent: list[int],
    distractor: list[int] | None = None,
    pieces: str = "bpe",
) -> dict:
    """Every (layer, head): the pronoun row's weight on the referent, ranked from most to least."""
    grouped = words(tokens, pieces)
    length = len(tokens)
    heads = []
    grid = []
    for layer, layer_heads in enumerate(encoder_attention):
        grid_row = []
        for head, matrix in enumerate(layer_heads):
            row = [sum(matrix[q][k] for q in pronoun) / len(pronoun) for k in range(length)]
            weight = sum(row[k] for k in referent)
            per_word = sorted(
                ((sum(row[k] for k in positions), word, positions) for word, positions in grouped),
                key=lambda item: -item[0],
            )
            # 1 = the referent gets more weight than any other word of the sentence
            rank = 1 + sum(1 for w, _, positions in per_word
                           if w > weight and not set(positions) & set(referent))
            heads.append({
                "layer": layer,
                "head": head,
                "weight": round(weight, 5),
                "distractor_weight": round(sum(row[k] for k in distractor), 5)
                if distractor else None,
                "referent_rank": rank,
                "top_word": per_word[0][1],
                "top_weight": round(per_word[0][0], 5),
                "row": [round(v, 5) for v in row],
            })
            grid_row.append(round(weight, 5))
        grid.append(grid_row)
    ranking = sorted(heads, key=lambda h: -h["weight"])
    return {
        "ranking": ranking,
        "grid": grid,
        "uniform": round(len(referent) / length, 5),
        "words": len(grouped),
    }


# -- figures --------------------------------------------------------------------------------------


def head_grid(values: list[list[float]], heading: str, layer_label: str = "layer {n}",
              head_label: str = "head {n}", zmax: float | None = None) -> dict:
    """A layers × heads grid of one number per head (e.g. the weight on the referent); the labels
    are templates with the number's place, ``{n}``."""
    layers, heads = len(values), len(values[0]) if values else 0
    heatmap = {
        "type": "heatmap",
        "z": values,
        "x": [head_label.format(n=h + 1) for h in range(heads)],
        "y": [layer_label.format(n=n + 1) for n in range(layers)],
        "text": [[f"{v:.3f}" for v in row] for row in values],
        "texttemplate": "%{text}",
        "textfont": {"size": PLOT_FONT_PX},  # fixed: Plotly would shrink it to fit a phone's cells
        "colorscale": ATTENTION_SCALE,
        "zmin": 0, "zmax": zmax or max(max(row) for row in values) or 1,
        "hovertemplate": f"{layer_label.format(n='%{customdata[0]}')} · "
                         f"{head_label.format(n='%{customdata[1]}')}: %{{z:.4f}}<extra></extra>",
        "customdata": [[[layer + 1, head + 1] for head in range(heads)] for layer in range(layers)],
        "xgap": 2, "ygap": 2,
    }
    layout = base_layout(
        heading, 120 + 46 * layers,
        xaxis=category_axis(),
        yaxis=category_axis(reverse=True),
    )
    return {"data": [heatmap], "layout": layout}


def row_bars(weights: list[float], key_tokens: list[str], highlight: dict[int, str],
             heading: str) -> dict:
    """One query row of attention over the keys; highlighted keys get their own colour."""
    colours = [highlight.get(i, BLUE) for i in range(len(key_tokens))]
    bar = {
        "type": "bar", "x": unique_labels(key_tokens), "y": weights,
        "marker": {"color": colours}, "customdata": key_tokens,
        "text": [f"{w:.2f}" for w in weights], "textposition": "auto",
        "textfont": {"size": PLOT_FONT_PX},
        "hovertemplate": "%{customdata}: %{y:.4f}<extra></extra>",
    }
    layout = base_layout(heading, 260, xaxis=category_axis(tickangle=-45),
                         yaxis={"range": [0, 1]})
    return {"data": [bar], "layout": layout}
