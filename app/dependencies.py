"""Typed dependencies: the translator and the trace cache live on ``app.state`` (set at start-up)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.i18n import COOKIE, Translate, choose_language
from app.settings import Settings
from app.traces import TraceCache
from model.translator import Translator


def get_translator(request: Request) -> Translator:
    return request.app.state.translator


def get_traces(request: Request) -> TraceCache:
    return request.app.state.traces


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_language(request: Request) -> str:
    return choose_language(request.cookies.get(COOKIE), request.headers.get("accept-language"))


def get_translate(lang: Annotated[str, Depends(get_language)]) -> Translate:
    return Translate(lang)


TranslatorDep = Annotated[Translator, Depends(get_translator)]
TracesDep = Annotated[TraceCache, Depends(get_traces)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
LanguageDep = Annotated[str, Depends(get_language)]
TranslateDep = Annotated[Translate, Depends(get_translate)]
