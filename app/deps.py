"""Typed dependencies: the translator and the engine live on ``app.state`` (set at start-up).

Each is ``async def``: it only reads the request, so it runs on the event loop; FastAPI runs a
plain ``def`` dependency in its thread pool, a thread hop per dependency per request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.engine import Engine
from app.i18n import COOKIE, Translate, choose_language
from app.settings import Settings
from model.api import Translator


async def get_translator(request: Request) -> Translator:
    return request.app.state.translator


async def get_engine(request: Request) -> Engine:
    return request.app.state.engine


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_language(request: Request) -> str:
    return choose_language(request.cookies.get(COOKIE), request.headers.get("accept-language"))


TranslatorDep = Annotated[Translator, Depends(get_translator)]
EngineDep = Annotated[Engine, Depends(get_engine)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
LanguageDep = Annotated[str, Depends(get_language)]


def page_text(page: str):
    """A dependency alias: ``t`` in the reader's language for ``page`` (common + its own strings)."""

    async def get(lang: LanguageDep) -> Translate:
        return Translate(lang, page)

    return Annotated[Translate, Depends(get)]
