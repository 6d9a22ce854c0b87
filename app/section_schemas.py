"""Request bodies and query parameters of the section endpoints. Every field has a limit."""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.schemas import MAX_TEXT_CHARS, Strict, TranslateRequest

MAX_REFERENCE_CHARS = 200
MAX_KV_STEPS = 128
CHINESE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
WORD = re.compile(r"^[A-Za-z][A-Za-z'\-]*$")


class QueryModel(BaseModel):
    """Query-string parameters arrive as text, so numbers are parsed (not strict), but unknown
    parameters and infinities are still refused."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _english(text: str) -> str:
    """The same rule as the translate endpoints (delegated so both always agree)."""
    return TranslateRequest.english_text(text)


class EmbeddingsRequest(TranslateRequest):
    positions: int = Field(48, ge=8, le=128, description="rows of the positional table shown")


class ScoreRequest(Strict):
    """A sentence pair to score with teacher forcing (one backward pass, no update)."""

    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS,
                      examples=["The cat sits on the mat."],
                      description=f"English source, 1–{MAX_TEXT_CHARS} characters")
    reference: str = Field(min_length=1, max_length=MAX_REFERENCE_CHARS,
                           examples=["猫坐在垫子上。"],
                           description=f"Chinese reference, 1–{MAX_REFERENCE_CHARS} characters, "
                                       "with at least one Chinese character")

    @field_validator("text")
    @classmethod
    def english_text(cls, text: str) -> str:
        return _english(text)

    @field_validator("reference")
    @classmethod
    def chinese_reference(cls, reference: str) -> str:
        reference = unicodedata.normalize("NFC", reference).strip()
        if not CHINESE.search(reference):
            raise ValueError("reference must contain Chinese characters: it is the translation "
                             "the model is scored against")
        return reference


class KVCacheQuery(QueryModel):
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS,
                      description=f"English source, 1–{MAX_TEXT_CHARS} characters")
    steps: int = Field(32, ge=1, le=MAX_KV_STEPS,
                       description=f"tokens to generate in each run, 1–{MAX_KV_STEPS}")

    @field_validator("text")
    @classmethod
    def english_text(cls, text: str) -> str:
        return _english(text)


class CoreferenceQuery(QueryModel):
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS,
                      examples=["The woman said that she was tired."],
                      description="English sentence with a pronoun and the noun it refers to")
    pronoun: str = Field(min_length=1, max_length=20, examples=["she"])
    referent: str = Field(min_length=1, max_length=30, examples=["woman"])
    distractor: str = Field("", max_length=30, description="optional: another noun to compare")

    @field_validator("text")
    @classmethod
    def english_text(cls, text: str) -> str:
        return _english(text)

    @field_validator("pronoun", "referent", "distractor")
    @classmethod
    def one_word(cls, word: str) -> str:
        word = word.strip()
        if word and not WORD.match(word):
            raise ValueError("must be one English word (letters only)")
        return word


class ScaleQuery(QueryModel):
    """A Transformer's sizes; the answer counts every weight matrix."""

    architecture: Literal["decoder_only", "encoder_decoder"] = "decoder_only"
    vocab: int = Field(50257, ge=1, le=2_000_000, description="(source) vocabulary size")
    target_vocab: int | None = Field(None, ge=1, le=2_000_000,
                                     description="target vocabulary (encoder-decoder only)")
    d_model: int = Field(12288, ge=1, le=65536)
    layers: int = Field(96, ge=1, le=1024, description="layers (per stack for encoder-decoder)")
    heads: int = Field(96, ge=1, le=1024, description="attention heads; must divide d_model")
    d_ff: int = Field(49152, ge=1, le=1_048_576)
    context: int = Field(2048, ge=1, le=10_000_000, description="context length (tokens)")
    experts: int = Field(1, ge=1, le=1024, description="FFN experts per layer (1 = dense)")
    active_experts: int = Field(1, ge=1, le=1024, description="experts each token uses")
    biases: bool = True
    tied_output: bool = True
