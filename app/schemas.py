"""The request and response bodies more than one page uses. Every request field has a limit;
a page's own request schemas live in its module (``app/pages/<page>.py``).

Non-English input: the model only knows English sub-words, so text without a single Latin letter
(Chinese, emoji, digits only) is rejected with a 422 that says English is expected. Text that mixes
English with other characters is translated; unknown pieces become <unk>.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_TEXT_CHARS = 600  # room for 128 source tokens (a long sentence of ~90 words)
MAX_FORCED = 128
MAX_SEED = 2**31 - 1
# Below this, logits / temperature overflows float32 for confident steps (softmax turns to NaN);
# the pages' sliders start here too.
MIN_TEMPERATURE = 0.05
LATIN_LETTER = re.compile(r"[A-Za-z]")
# The rule in the schema (a JSON-schema pattern matches anywhere in the string); the validator
# below enforces it with a message that says English is expected.
ENGLISH = {"pattern": LATIN_LETTER.pattern}

Strategy = Literal["greedy", "sample", "beam"]
TargetToken = Annotated[str, Field(min_length=1, max_length=8)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)  # false is not 0


class TranslateRequest(Strict):
    """One sentence and how to decode it."""

    text: str = Field(
        min_length=1, max_length=MAX_TEXT_CHARS, json_schema_extra=ENGLISH,
        examples=["The cat sits on the mat."],
        description=f"English text, 1–{MAX_TEXT_CHARS} characters with at least one Latin letter, "
                    "and at most 128 tokens",
    )
    strategy: Strategy = "greedy"
    temperature: float = Field(1.0, ge=MIN_TEMPERATURE, le=5,
                               description=f"sampling only; {MIN_TEMPERATURE}–5")
    top_k: int | None = Field(None, ge=1, le=1000, description="sampling only; 1–1000")
    top_p: float | None = Field(None, gt=0, le=1, description="sampling only; (0, 1]")
    beam_size: int = Field(4, ge=1, le=8, description="beam search only; 1–8")
    max_len: int = Field(128, ge=1, le=128, description="most Chinese tokens to produce; 1–128")
    seed: int | None = Field(None, ge=0, le=MAX_SEED, description="sampling seed")

    @field_validator("text")
    @classmethod
    def english_text(cls, text: str) -> str:
        text = " ".join(unicodedata.normalize("NFC", text).split())
        if not text:
            raise ValueError("text must not be empty or only whitespace")
        if not LATIN_LETTER.search(text):
            raise ValueError("text must be English: the model reads English and writes Chinese")
        return text

    def cache_key(self) -> tuple:
        """The same translation → the same key: options a strategy ignores are dropped."""
        sample = self.strategy == "sample"
        return (
            self.text,
            self.strategy,
            self.temperature if sample else None,
            self.top_k if sample else None,
            self.top_p if sample else None,
            (self.seed or 0) if sample else None,
            self.beam_size if self.strategy == "beam" else None,
            self.max_len,
            tuple(getattr(self, "forced_prefix", ())),
        )


class QueryModel(BaseModel):
    """Query-string parameters arrive as text, so numbers are parsed (not strict), but unknown
    parameters and infinities are still refused."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class TextQuery(QueryModel):
    """An English sentence in the query string (the same rule as the translate endpoints)."""

    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, json_schema_extra=ENGLISH,
                      description=f"English source, 1–{MAX_TEXT_CHARS} characters with at least "
                                  "one Latin letter")

    @field_validator("text")
    @classmethod
    def english_text(cls, text: str) -> str:
        return TranslateRequest.english_text(text)


class TraceRequest(TranslateRequest):
    forced_prefix: list[TargetToken] = Field(
        default_factory=list, max_length=MAX_FORCED,
        description="Chinese tokens the translation must start with (then decoding continues)",
    )


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


# Every answer a model route can give besides 200, so a client generated from /openapi.json
# knows them. The 422 also covers rules a JSON schema cannot state.
ERRORS = {
    422: {"model": ErrorResponse, "description": (
        "a field is out of its limits; the message names the field and the fix. Besides the "
        "limits in the schema: the text must be at most 128 tokens, forced_prefix tokens must be "
        "in the model's Chinese vocabulary and no longer than max_len, and layer / head / query "
        "must be within the loaded model's sizes (GET /api/model)")},
    503: {"model": ErrorResponse, "description": (
        "the model is busy with other requests (Retry-After: seconds until there should be room) "
        "or could not answer within the time limit")},
}
