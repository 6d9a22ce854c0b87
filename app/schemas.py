"""The request and response bodies more than one page uses. Every request field has a limit;
a page's own request schemas live in its module (``app/pages/<page>.py``).

Every string a client sends is NFC-normalised once, where it arrives (``Strict`` and
``QueryModel``), before any limit or rule reads it: "A" + U+0300 is "À" for every check and for the
model. A route that derives a second request from a validated one builds it with
``model_construct`` (no second validation of text already checked).

Non-English input: the model only knows English sub-words, so text without a single Latin letter
(A–Z, with or without accents; not Chinese, emoji or digits only) is rejected with a 422 that says
English is expected. Text that mixes English with other characters is translated; unknown pieces
become <unk>.

/openapi.json states every rule a JSON schema can express (patterns, and maxima taken from the
loaded model by ``model_schema()``); each operation's 422 description lists the rest.
"""

from __future__ import annotations

import copy
import re
import unicodedata
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from model.api import LIMITS, MAX_SEED, MIN_TEMPERATURE, STRATEGIES, DecodingOptions, InputError

if TYPE_CHECKING:
    from model.api import Translator

# The sentence box's limit (its maxlength and hint say the same number; nothing cuts a text to
# fit, a longer one is refused). Either limit can be the one a long sentence meets: 600
# characters of long words are under 128 pieces (124 measured), of short words and punctuation
# over it (149–228), since a digit or a punctuation mark is a piece of its own. The piece limit is
# checked after tokenizing (TOKENS_RULE), on the page before anything is sent (app/layout.py).
MAX_TEXT_CHARS = 600
MAX_FORCED = 128
MAX_LEN = 128  # the most Chinese tokens a request may ask for (the model allows more: a serving cap)
__all__ = ["MAX_SEED", "MIN_TEMPERATURE"]  # decoding's own limits (model/decoding.py), named here too
# A Latin letter, with or without accents: A–Z, Latin-1's letters, Latin Extended-A/B and
# Latin Extended Additional. NFC keeps a text that has one having one ("A" + U+0300 composes to
# "À", inside the class; tests/app/test_schemas_nfc.py checks every code point), so the schema's
# pattern, which a client applies to the text as sent, and the server's check, which reads the
# normalised text, agree.
LATIN_LETTER = re.compile(r"[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff]")
# The rule in the schema (a JSON-schema pattern matches anywhere in the string); the validator
# below enforces it with a message that says English is expected.
ENGLISH = {"pattern": LATIN_LETTER.pattern}


def nfc(data):
    """``data`` with every string in it (a field, or an item of a list field) NFC-normalised."""
    if isinstance(data, str):
        return unicodedata.normalize("NFC", data)
    if isinstance(data, list):
        return [nfc(item) for item in data]
    if isinstance(data, dict):
        return {key: nfc(value) for key, value in data.items()}
    return data


def english(text: str) -> str:
    """Normalised text that has a Latin letter, its runs of white space made one space."""
    if not LATIN_LETTER.search(text):
        raise ValueError("text must be English: the model reads English and writes Chinese")
    return " ".join(text.split())

# A field whose limit depends on the loaded model carries this mark; model_schema() replaces it by
# the checkpoint's own maximum (or, for Chinese tokens, its vocabulary) in /openapi.json.
MODEL_LIMIT = "x-model-limit"


def model_limit(name: str) -> dict:
    return {MODEL_LIMIT: name}


Strategy = Literal[STRATEGIES]  # model/decoding.py's list
MAX_TOKEN_CHARS = 8
TargetToken = Annotated[str, Field(min_length=1, max_length=MAX_TOKEN_CHARS,
                                   json_schema_extra=model_limit("chinese_token"))]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)  # false is not 0

    @model_validator(mode="before")
    @classmethod
    def whole_numbers(cls, data):
        """Strings NFC-normalised (the boundary: every check reads what the model will), and
        JSON Schema's ``integer`` includes 2.0, so an integer field takes a whole float too
        (strict mode alone would refuse it; it still refuses true, "2" and 2.5)."""
        if not isinstance(data, dict):
            return data
        integers = {name for name, field in cls.model_fields.items()
                    if field.annotation in (int, int | None)}
        return {key: int(value) if key in integers and type(value) is float and value.is_integer()
                else nfc(value) for key, value in data.items()}


def option(name: str, default, what: str | None = None, maximum: float | None = None,
           note: str | None = None):
    """A request field for decoding option ``name``, with the model's limits (``LIMITS``; a lower
    ``maximum`` where the server caps it) and a description naming the strategies that read it."""
    limit = LIMITS[name]
    bounds = limit.bounds() | ({"le": maximum} if maximum is not None else {})
    readers = [strategy for strategy in STRATEGIES if name in DecodingOptions.reads(strategy)]
    span = limit.span if maximum is None else f"{limit.minimum:g}–{maximum:g}"
    who = ("read by every strategy" if len(readers) == len(STRATEGIES)
           else f"read by {' and '.join(readers)} only")
    words = "; ".join(part for part in (what, who, span, note) if part)
    return Field(default, **bounds, description=words)


def decoding_contract() -> dict:
    """The strategies and their options as the pages read them (page data: common.js and the
    x-ray's what-ifs), with max_len's cap the server's."""
    contract = DecodingOptions.contract()
    contract["options"]["max_len"] |= {"max": MAX_LEN, "default": MAX_LEN}
    return contract


class TranslateRequest(Strict):
    """One sentence and how to decode it."""

    text: str = Field(
        min_length=1, max_length=MAX_TEXT_CHARS, json_schema_extra=ENGLISH,
        examples=["The cat sits on the mat."],
        description=f"English text, 1–{MAX_TEXT_CHARS} characters with at least one Latin letter, "
                    "and at most 128 tokens",
    )
    strategy: Strategy = "greedy"
    temperature: float = option("temperature", 1.0)
    top_k: int | None = option("top_k", None)
    top_p: float | None = option("top_p", None)
    beam_size: int = option("beam_size", 4)
    max_len: int = option("max_len", MAX_LEN, "most Chinese tokens to produce", maximum=MAX_LEN,
                          note="raised to forced_prefix's length when that is longer")
    seed: int | None = option("seed", None, "sampling seed")

    @field_validator("text")
    @classmethod
    def english_text(cls, text: str) -> str:
        return english(text)

    def decoding(self) -> DecodingOptions:
        """The request's decoding options (the model's own object, which checks them again)."""
        return DecodingOptions(strategy=self.strategy, temperature=self.temperature,
                               top_k=self.top_k, top_p=self.top_p, beam_size=self.beam_size,
                               max_len=self.max_len, seed=self.seed)

    def cache_key(self) -> tuple:
        """The same translation → the same key: the text, the decoding's own key (options its
        strategy ignores are dropped: ``DecodingOptions.cache_key``) and any forced prefix."""
        return (self.text, self.decoding().cache_key(), tuple(getattr(self, "forced_prefix", ())))


class QueryModel(BaseModel):
    """Query-string parameters arrive as text, so numbers are parsed (not strict), but unknown
    parameters and infinities are still refused."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def normalised(cls, data):
        """Every parameter NFC-normalised before any check (as ``Strict`` does for bodies)."""
        return nfc(data)


class TextQuery(QueryModel):
    """An English sentence in the query string (the same rule as the translate endpoints)."""

    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, json_schema_extra=ENGLISH,
                      description=f"English source, 1–{MAX_TEXT_CHARS} characters with at least "
                                  "one Latin letter")

    @field_validator("text")
    @classmethod
    def english_text(cls, text: str) -> str:
        return english(text)


class TraceRequest(TranslateRequest):
    forced_prefix: list[TargetToken] = Field(
        default_factory=list, max_length=MAX_FORCED,
        description="Chinese tokens the translation must start with (then decoding continues); "
                    "a prefix longer than max_len raises max_len to its length",
    )

    @model_validator(mode="after")
    def room_for_the_prefix(self) -> TraceRequest:
        """A forced prefix is produced whatever max_len says: max_len grows to hold it (both
        are at most 128), so every schema-valid pair of the two is served."""
        if len(self.forced_prefix) > self.max_len:
            self.max_len = len(self.forced_prefix)
        return self


class Candidate(BaseModel):
    token: str
    prob: float
    sample_prob: float | None = None
    id: int | None = None


class Step(BaseModel):
    token: str
    prob: float
    top: list[Candidate]
    position: int | None = None
    forced: bool = False
    entropy: float | None = None


class TranslateResponse(BaseModel):
    text: str
    translation: str
    source_tokens: list[str]
    target_tokens: list[str]
    finished: bool
    steps: list[Step]
    model_ms: float


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class ModelInfo(BaseModel):
    config: dict
    parameters: dict[str, int]
    training: dict
    evaluation: dict
    checkpoint: str


class ErrorItem(BaseModel):
    field: str
    message: str


class ErrorResponse(BaseModel):
    message: str
    errors: list[ErrorItem] = []


# The rules a JSON schema cannot state (they depend on the tokenizer, on another field or on the
# translation itself); each operation lists its own in its 422 description.
TOKENS_RULE = ("text must be at most 128 tokens once split into the model's English sub-words "
               f"(every digit and punctuation mark is a token of its own, so {MAX_TEXT_CHARS} "
               "characters of short words can be more than 128 tokens); the message says how many "
               "tokens to cut")


class NotFound(InputError):
    """A schema-valid index past the end of what the request's own sentence has (a decoding
    step, an attention row, a position, a layer of the stack asked for, a word of the text):
    the request is well formed, what it points at does not exist: 404 in the one error shape."""


def errors(*rules: str, missing: tuple[str, ...] = ()) -> dict:
    """Every answer a model route can give besides 200, so a client generated from /openapi.json
    knows them; the 422 names the rules its schema cannot state, the 404 (``missing``) the
    indexes whose bound is the sentence's own length."""
    described = "a field is out of its limits; the message names the field and the fix."
    if rules:
        described += " Besides the schema: " + "; ".join(rules) + "."
    found = {404: {"model": ErrorResponse, "description": (
        "the request is valid but points past the end of its own sentence: " + "; ".join(missing)
        + ". The message names the field and the largest value there is.")}} if missing else {}
    return {
        **found,
        422: {"model": ErrorResponse, "description": described},
        503: {"model": ErrorResponse, "description": (
            "the model is busy with other requests (Retry-After: seconds until there should be "
            "room) or could not answer within the time limit")},
    }


ERRORS = errors(TOKENS_RULE)  # a sentence to translate
TRACE_ERRORS = errors(TOKENS_RULE)  # a sentence with decoding options (TraceRequest)


def model_limits(translator: Translator) -> dict[str, int]:
    """The largest index each model-limited field may take with this checkpoint."""
    config = translator.config
    return {
        "decoder_layer": config.n_decoder_layers - 1,
        "layer": max(config.n_encoder_layers, config.n_decoder_layers) - 1,  # the 422 says which
        "head": config.n_heads - 1,
    }


MAX_SCHEMA_ENUM = 10_000  # a larger vocabulary is described in words, not listed, in /openapi.json
MAX_PATTERN_WORDS = 64  # tokens longer than one character a ChineseToken pattern spells out


def token_pattern(tokens: list[str]) -> str:
    """A regular expression matching exactly ``tokens``: one character class for the tokens of one
    character (our vocabulary), alternatives for the others (<eos>, <unk>)."""
    special = set("\\]^-[")
    single = "".join("\\" + t if t in special else t for t in tokens if len(t) == 1)
    words = [re.escape(t) for t in tokens if len(t) > 1]
    return "^(?:" + "|".join(([f"[{single}]"] if single else []) + words) + ")$"


def chinese_tokens(translator: Translator) -> list[str]:
    """What forced_prefix may hold: the target vocabulary, <eos> and <unk> (not <pad>, <bos>), as
    far as a token fits TargetToken (a SentencePiece vocabulary has longer pieces)."""
    specials = {"<pad>", "<bos>", "<eos>", "<unk>"}
    tokens = dict.fromkeys(t for t in translator.chinese.vocabulary
                           if t not in specials and 1 <= len(t) <= MAX_TOKEN_CHARS)
    return [*tokens, "<eos>", "<unk>"]


def model_schema(schema: dict, translator: Translator) -> dict:
    """The OpenAPI schema with the loaded model's limits where a field is marked ``model_limit``:
    index maxima from its config, and forced_prefix items as one ``ChineseToken`` pattern (a
    vocabulary of multi-character pieces: an enum, or past MAX_SCHEMA_ENUM a description)."""
    schema = copy.deepcopy(schema)
    maxima = model_limits(translator)

    def visit(node) -> None:
        if isinstance(node, dict):
            name = node.pop(MODEL_LIMIT, None)
            if name == "chinese_token":
                node.clear()
                node["$ref"] = "#/components/schemas/ChineseToken"
            elif name == "ablation_part":  # a part name with this model's layers and heads
                from model.api import ablation

                node["pattern"] = ablation.part_pattern(translator.config)
            elif name is not None:
                node["maximum"] = maxima[name]
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schema)
    tokens = chinese_tokens(translator)
    token_schema = {"type": "string", "title": "ChineseToken",
                    "description": "one token of the loaded model's target vocabulary (for our "
                                   "checkpoint one character), or <eos> / <unk>"}
    longer = [token for token in tokens if len(token) > 1]
    if len(longer) <= MAX_PATTERN_WORDS:
        # a character class says the same as an enum of 4,000 characters, and a client (or a
        # schema-driven test) does not try each of them: one pattern, not 4,000 values
        token_schema["pattern"] = token_pattern(tokens)
    elif len(tokens) <= MAX_SCHEMA_ENUM:
        token_schema["enum"] = tokens
    else:  # e.g. a Marian model's 65k SentencePiece pieces: a 1 MB schema helps no client
        token_schema.update(minLength=1, maxLength=MAX_TOKEN_CHARS)
        token_schema["description"] += (f"; the vocabulary has {len(tokens):,} tokens, too many to "
                                        "list here: a token outside it is answered with 422")
    schema.setdefault("components", {}).setdefault("schemas", {})["ChineseToken"] = token_schema
    return schema
