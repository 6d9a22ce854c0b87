"""create_app(): load the translator once, start the engine, mount every page's router."""

from __future__ import annotations

import gc
import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from app import api, layout, middleware
from app.engine import WARM_UP_TEXT, Engine
from app.pages import (
    ablation,
    attention,
    coreference,
    decode,
    docs,
    embeddings,
    kv_cache,
    pipeline,
    scale,
    timeline,
    tokens,
    tour,
    training,
    xray,
)
from app.schemas import model_schema
from app.settings import Settings
from model.api import Translator, load_translator, set_threads

# Every page: app/pages/<page>.py, templates/<page>.html, static/js/<page>.js (the x-ray:
# static/js/xray/), app/locales/*/<page>.json.
PAGES = [pipeline, tokens, embeddings, attention, coreference, ablation, decode, kv_cache,
         training, timeline, scale, tour, xray, docs]
# plotly.js's cartesian bundle (bar, heatmap, scatter and the other x/y charts the pages draw):
# 1.5 MB against the full bundle's 4.8 MB: a first visit's page loaded in a median 1.27 s against
# 2.21 s on 2 cores (python -m bench.plotly_bundle; static/vendor/README.md)
PLOTLY_JS = layout.STATIC / "vendor" / "plotly-cartesian.min.js"
log = logging.getLogger("app")


def create_app(settings: Settings | None = None, translator: Translator | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        model = translator or load_translator(settings.model_source)
        if settings.torch_threads:
            set_threads(settings.torch_threads)
        app.state.translator = model
        app.state.engine = Engine(model, settings.cache_size, settings.cache_mb, settings.max_queue)
        # the KV-cache race: one race, as long as the page's default (its prior is a budget)
        app.state.engine.warm_up((kv_cache.race_runs, (model, WARM_UP_TEXT, kv_cache.DEFAULT_STEPS, 1)))
        # what is loaded now lives as long as the app: frozen, Python's cyclic garbage collector
        # no longer walks its ~240,000 objects in every full collection, which lands inside a
        # request now and then (bench/README.md: 1.3 s under load, then ~0 ms)
        gc.collect()
        gc.freeze()
        log.info("loaded %s", settings.model_source)
        yield
        gc.unfreeze()  # an app made and closed again (the tests make many): its cycles collectable

    app = FastAPI(
        title="Inside the Transformer",
        summary="A real English→Chinese Transformer, with every internal number exposed.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # the stock Swagger page loads its code from a CDN; /docs is our own page
        redoc_url=None,
    )
    app.state.settings = settings
    app.include_router(api.router)
    app.include_router(layout.router)
    for page in PAGES:
        app.include_router(page.router)

    @app.get("/vendor/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        """plotly.js from static/vendor (no CDN), cached for a day."""
        return FileResponse(PLOTLY_JS, media_type="text/javascript",
                            headers={"Cache-Control": "public, max-age=86400"})

    app.mount("/static", StaticFiles(directory=layout.STATIC), name="static")
    middleware.install(app, settings)
    app.openapi = lambda: openapi(app)
    return app


def openapi(app: FastAPI) -> dict:
    """/openapi.json with the loaded model's limits (layer and head maxima, the Chinese vocabulary
    forced_prefix draws from); before start-up, FastAPI's schema with the static limits."""
    translator = getattr(app.state, "translator", None)
    if translator is None:
        return FastAPI.openapi(app)
    if getattr(app.state, "openapi", None) is None:
        app.state.openapi = model_schema(FastAPI.openapi(app), translator)
    return app.state.openapi
