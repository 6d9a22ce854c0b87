"""Start the web server: ``python -m app`` or ``inside-transformer serve`` (same flags).

Flags override ``ITT_*`` environment variables (ITT_HOST, ITT_PORT, ITT_CHECKPOINT, ITT_WORKERS),
which override the defaults in app/settings.py.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

import uvicorn

from app.settings import Settings
from model.translator import CheckpointError, Translator


def parser(prog: str, with_command: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Serve Inside the Transformer.")
    if with_command:
        p.add_argument("command", choices=["serve"], help="what to do (only 'serve' for now)")
    p.add_argument("--host", help="address to listen on (default 127.0.0.1, env ITT_HOST)")
    p.add_argument("--port", type=int, help="port (default 8000, env ITT_PORT)")
    p.add_argument("--checkpoint", type=Path,
                   help="checkpoint folder (default model/checkpoints, env ITT_CHECKPOINT)")
    p.add_argument("--workers", type=int, help="worker processes (default 1, env ITT_WORKERS)")
    return p


def serve(argv: list[str] | None = None, prog: str = "python -m app",
          with_command: bool = False) -> None:
    p = parser(prog, with_command)
    args = p.parse_args(argv)
    overrides = {k: v for k, v in vars(args).items() if v is not None and k != "command"}
    settings = Settings(**overrides)
    logging.basicConfig(level=settings.log_level.upper(), format="%(levelname)s %(name)s %(message)s")
    try:
        translator = Translator.load(settings.checkpoint)
    except CheckpointError as error:
        p.exit(2, f"error: {error}\n")
    # uvicorn's own access log only when ours (one JSON line per request) is switched off
    common = dict(host=settings.host, port=settings.port, log_level=settings.log_level,
                  proxy_headers=False, server_header=False, access_log=not settings.access_log)
    if settings.workers == 1:
        from app.main import create_app

        uvicorn.run(create_app(settings, translator), **common)
        return
    # Several processes: each worker builds its own app (and loads the model) from the environment.
    for name, value in settings.model_dump().items():
        os.environ[f"ITT_{name.upper()}"] = str(value)
    del translator
    uvicorn.run("app.main:create_app", factory=True, workers=settings.workers, **common)


def main(argv: list[str] | None = None) -> None:
    """Console script ``inside-transformer serve [--host ...]``."""
    serve(argv, prog="inside-transformer", with_command=True)
