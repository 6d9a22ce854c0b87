"""/coreference — does any head link "she" to "the woman"? Measured head by head on the reader's
sentence, not claimed.

From the pronoun's row of every encoder self-attention head, read the weight that lands on the
referent's sub-word pieces, and rank the heads by it. A uniform head would give the referent
(its pieces ÷ sentence length); the ranking shows how far each real head is from that.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import Field, ValidationInfo, field_validator

from app.api import timed
from app.deps import EngineDep, LanguageDep, TranslatorDep, page_text
from app.layout import render_page
from app.model_facts import model_facts
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


def guess_words(text: str) -> dict[str, str] | None:
    """The learner's own sentence, read for a coreference question: its first pronoun, and the
    nouns before it as candidates (a word after a determiner, or a capitalised name), the first
    as the referent and the next as the distractor. None when the sentence has no pronoun. A
    guess from word order, not a parse: the page says so and lets the learner change it."""
    found = [(m.group(), m.start()) for m in re.finditer(r"[A-Za-z][A-Za-z'\-]*", text)]
    lowered = [word.lower() for word, _ in found]
    at = next((i for i, word in enumerate(lowered) if word in PRONOUNS and i > 0), None)
    if at is None:
        return None
    candidates: list[str] = []

    def add(word: str) -> None:
        if word.lower() not in {c.lower() for c in candidates}:
            candidates.append(word)

    for i in range(at):
        word, plain = found[i][0], lowered[i]
        if plain in NOT_NOUNS:
            continue
        if word[:1].isupper():  # a name (a capitalised first word that is no determiner too)
            add(word)
        elif i > 0 and lowered[i - 1] in DETERMINERS:  # "a new car": past the adjectives
            end = i
            while end + 1 < at and lowered[end] in ADJECTIVES:
                end += 1
            if lowered[end] not in NOT_NOUNS | ADJECTIVES:
                add(found[end][0])
    if not candidates:
        return None
    return {"pronoun": found[at][0], "referent": candidates[0],
            "distractor": candidates[1] if len(candidates) > 1 else ""}


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
        coref_guessed=guessed, coref_missing=not choice["pronoun"],
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
        "hovertemplate": "%{customdata}: %{y:.4f}<extra></extra>",
    }
    layout = base_layout(heading, 260, xaxis=category_axis(tickangle=-45),
                         yaxis={"range": [0, 1]})
    return {"data": [bar], "layout": layout}
