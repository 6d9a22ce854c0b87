"""Start the web server: ``python -m app`` or ``inside-transformer serve`` (same flags).

Flags override ``ITT_*`` environment variables (ITT_HOST, ITT_PORT, ITT_CHECKPOINT, ITT_MODEL,
ITT_WORKERS), which override the defaults in app/settings.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import uvicorn
from uvicorn.protocols.http.flow_control import service_unavailable
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from app import memory
from app.security import HEADERS
from app.settings import Settings

# 16 KB: the sentence box's 600 characters, each a percent-encoded Chinese character (5,400
# bytes), and every other setting a page carries fit with room to spare; nginx's default line
# buffer is 8 KB. A head is the request line and every header together.
MAX_URL_BYTES = 16 * 1024
MAX_HEAD_BYTES = 64 * 1024
URL_TOO_LONG = (414, "url", f"the address is longer than {MAX_URL_BYTES} bytes; send long input "
                            "in a POST body")
HEAD_TOO_LARGE = (431, "headers", f"the request line and headers are longer than "
                                  f"{MAX_HEAD_BYTES} bytes")
DRAIN_BYTES = 16 * 1024 * 1024  # what a refused client may still send before it is cut off


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's HTTP protocol, closing a connection whose request line and headers have not
    arrived ``header_timeout_s`` after it opened (or after the request began). uvicorn itself
    waits forever, so a slow client could hold a connection open indefinitely. (Bodies that
    arrive too slowly get 408 from app/middleware.py's ``BodySizeLimit``.)"""

    # a spawned worker (--workers N) gets the value from the environment the supervisor set
    header_timeout_s = float(os.environ.get("ITT_HEADER_TIMEOUT_S", "10"))

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._refused = False  # an error was answered: the rest is read and dropped, then closed
        self._too_large: tuple[int, str, str] | None = None
        self._new_head()
        self._start_header_timer()

    # A request's line and headers are bounded (uvicorn reads them whole into memory, however
    # long): a request line over MAX_URL_BYTES gets 414, a head over MAX_HEAD_BYTES 431. The
    # bytes are counted as they arrive, before the parser sees them.

    def _new_head(self) -> None:
        self._head_bytes, self._line_bytes, self._line_done, self._tail = 0, 0, False, b""
        self._head_done = False

    def data_received(self, data: bytes) -> None:
        if self._refused:
            self._head_bytes += len(data)
            if self._head_bytes > DRAIN_BYTES:
                self.transport.close()
            return
        if not self._head_done:
            seen = self._tail + data
            end = seen.find(b"\r\n\r\n")
            head = data if end < 0 else data[:max(0, end + 4 - len(self._tail))]
            self._tail = seen[-3:]
            if not self._line_done:
                newline = head.find(b"\n")
                self._line_bytes += len(head) if newline < 0 else newline
                self._line_done = newline >= 0
            self._head_bytes += len(head)
            if self._line_bytes > MAX_URL_BYTES or self._head_bytes > MAX_HEAD_BYTES:
                self._too_large = URL_TOO_LONG if self._line_bytes > MAX_URL_BYTES \
                    else HEAD_TOO_LARGE
                return self.send_400_response("")
        super().data_received(data)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._new_head()  # a keep-alive connection's next request

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_timer is None:
            self._start_header_timer()

    def _start_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def on_headers_complete(self) -> None:
        self._head_done = True
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().connection_lost(exc)

    # The answers uvicorn writes itself, before the app and its middleware see the request,
    # carry the security headers and a JSON body like every other error.

    def send_400_response(self, msg: str) -> None:
        """A request that is not HTTP (uvicorn's parser gave up): 400, then close; a URL or head
        over its limit: 414 or 431."""
        status, field, message = self._too_large or (400, None, "the request is not valid HTTP")
        body = json.dumps({"message": f"{field}: {message}" if field else message,
                           "errors": [{"field": field, "message": message}] if field else []})
        body = body.encode()
        head = [STATUS_LINE[status]]
        headers = [*self.server_state.default_headers, *HEADERS,
                   (b"content-type", b"application/json"),
                   (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
        for name, value in headers:
            head += [name, b": ", value, b"\r\n"]
        self.transport.write(b"".join([*head, b"\r\n", body]))
        # Half-close: the client reads the answer and the end of it, while what it still sends is
        # read and dropped (closing with unread data would reset the connection, and the client
        # might never read the answer) until it closes, DRAIN_BYTES or header_timeout_s.
        self._refused, self._head_bytes = True, 0
        if self.transport.can_write_eof():
            self.transport.write_eof()
        else:
            self.transport.close()
        self._start_header_timer()

    def _start_asgi_task(self, cycle, app) -> None:
        if getattr(self, "_draining", False):  # a request on an idle connection after SIGTERM
            cycle.keep_alive = False
            app = stopping
        super()._start_asgi_task(cycle, too_many_connections if app is service_unavailable else app)

    # Graceful shutdown (SIGTERM). uvicorn closes every idle keep-alive connection at once, so a
    # client (or nginx) that sends its next request on one at that moment gets a reset instead of
    # an answer. Here an idle connection stays open while other requests are still being
    # answered: a request arriving on it is refused at once (503, Retry-After, Connection: close,
    # never read), and it is closed when nothing is being answered any more. A connection whose
    # request is being answered gets `Connection: close` on its answer, as in uvicorn.

    def shutdown(self) -> None:
        if self.cycle is None or self.cycle.response_complete:
            self._draining = True
            self._drain_until = time.monotonic() + DRAIN_LIMIT_S
            self._close_when_idle()
        else:
            self.cycle.keep_alive = False

    def _close_when_idle(self) -> None:
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # it is answering a refusal; the answer closes it
        answering = any(c.cycle is not None and not c.cycle.response_complete
                        for c in self.server_state.connections if c is not self)
        if answering and time.monotonic() < self._drain_until:
            self.loop.call_later(DRAIN_POLL_S, self._close_when_idle)
        else:
            self.transport.close()


# How long an idle connection stays open after SIGTERM at most (while requests are answered),
# and how often it looks whether they are.
DRAIN_LIMIT_S = 60.0
DRAIN_POLL_S = 0.05


async def stopping(scope, receive, send) -> None:
    """A request that arrives on an idle keep-alive connection after SIGTERM: 503, come back in
    a second (another replica, or this one restarted, answers), and the connection closes."""
    body = json.dumps({"message": "the server is stopping; try again in 1 s",
                       "errors": []}).encode()
    await send({"type": "http.response.start", "status": 503, "headers": [
        *HEADERS, (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()), (b"retry-after", b"1"),
        (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def too_many_connections(scope, receive, send) -> None:
    """Beyond ``ITT_MAX_CONNECTIONS`` open connections (uvicorn's limit_concurrency): 503."""
    body = json.dumps({"message": "the server has too many open connections; try again in 1 s",
                       "errors": []}).encode()
    await send({"type": "http.response.start", "status": 503, "headers": [
        *HEADERS, (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()), (b"retry-after", b"1"),
        (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


SUPERVISOR_ENV = "ITT_SUPERVISOR_PID"  # set for --workers N: the process the workers belong to
PARENT_POLL_S = 0.25


def worker_app():
    """The app of one worker process (``--workers N``): built from the environment the
    supervisor set, and shut down when the supervisor is gone (see ``follow_supervisor``)."""
    from app.main import create_app
    from app.settings import Settings

    settings = Settings()
    memory.limit_arenas()
    supervisor = int(os.environ.get(SUPERVISOR_ENV, "0"))
    if supervisor:
        follow_supervisor(supervisor, grace_s=settings.request_timeout_s + 10)
    return create_app(settings)


def follow_supervisor(supervisor: int, grace_s: float) -> None:
    """Exit when the supervisor dies. A worker killed with its supervisor (``kill -9``) would
    otherwise keep serving the port with nothing to restart or stop it, and a process manager
    that restarts the supervisor would find the port taken. A thread polls the parent pid (it
    changes when the parent dies: the worker is handed to init); then the worker stops like on
    SIGTERM (requests in flight finish), and exits at once if that takes longer than ``grace_s``."""

    def watch() -> None:
        while os.getppid() == supervisor:
            time.sleep(PARENT_POLL_S)
        logging.getLogger("app").warning("the supervisor (pid %d) is gone: stopping this worker",
                                         supervisor)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s)
        os._exit(1)

    threading.Thread(target=watch, name="follow-supervisor", daemon=True).start()


def parser(prog: str, with_command: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Serve Inside the Transformer.")
    if with_command:
        p.add_argument("command", choices=["serve"], help="what to do (only 'serve' for now)")
    p.add_argument("--host", help="address to listen on (default 127.0.0.1, env ITT_HOST)")
    p.add_argument("--port", type=int, help="port (default 8000, env ITT_PORT)")
    p.add_argument("--checkpoint", type=Path,
                   help="checkpoint folder (default model/checkpoints, env ITT_CHECKPOINT)")
    p.add_argument("--model", help="serve this model instead: a local Hugging Face Marian folder "
                   "(e.g. opus-mt-en-zh), a checkpoint folder, or a hub id (env ITT_MODEL)")
    p.add_argument("--workers", type=int, help="worker processes (default 0: one per usable "
                   "CPU core, at most 4; env ITT_WORKERS)")
    return p


def check_checkpoint(path: Path | str) -> str | None:
    """Load the model once; the error message if it cannot be served, else None."""
    from model.api import CheckpointError, load_translator

    try:
        load_translator(path)
    except CheckpointError as error:
        return str(error)
    return None


def serve(argv: list[str] | None = None, prog: str = "python -m app",
          with_command: bool = False) -> None:
    p = parser(prog, with_command)
    args = p.parse_args(argv)
    overrides = {k: v for k, v in vars(args).items() if v is not None and k != "command"}
    settings = Settings(**overrides)
    logging.basicConfig(level=settings.log_level.upper(), format="%(levelname)s %(name)s %(message)s")
    HeaderTimeoutProtocol.header_timeout_s = settings.header_timeout_s
    memory.limit_arenas()
    # uvicorn's own access log only when ours (one JSON line per request) is switched off
    common = dict(host=settings.host, port=settings.port, log_level=settings.log_level,
                  proxy_headers=False, server_header=False, access_log=not settings.access_log,
                  http=HeaderTimeoutProtocol, limit_concurrency=settings.max_connections)
    workers = settings.worker_count
    if workers == 1:
        from app.main import create_app
        from model.api import CheckpointError, load_translator

        try:
            translator = load_translator(settings.model_source)
        except CheckpointError as error:
            p.exit(2, f"error: {error}\n")
        logging.getLogger("app").info("serving with 1 worker process")
        uvicorn.run(create_app(settings, translator), **common)
        return
    # Several processes: each worker builds its own app (and loads the model) from the environment.
    # The supervisor checks the checkpoint in a child process, so it never holds torch or the
    # weights itself (~270 MB that no request would use).
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        error = pool.apply(check_checkpoint, (settings.model_source,))
    if error:
        p.exit(2, f"error: {error}\n")
    for name, value in settings.model_dump().items():
        if value is not None:
            os.environ[f"ITT_{name.upper()}"] = str(value)
    os.environ["ITT_WORKERS"] = str(workers)
    os.environ[SUPERVISOR_ENV] = str(os.getpid())
    logging.getLogger("app").info("serving with %d worker processes", workers)
    uvicorn.run("app.cli:worker_app", factory=True, workers=workers, **common)


def main(argv: list[str] | None = None) -> None:
    """Console script ``inside-transformer serve [--host ...]``."""
    serve(argv, prog="inside-transformer", with_command=True)
