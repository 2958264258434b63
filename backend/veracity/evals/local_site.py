"""A real HTTP server on 127.0.0.1 for an ASGI app, in a background thread: the scripted OpenAI-compatible server
that `veracity eval` replays model answers through, and the fixture site of the tests and benchmarks. Real HTTP on
purpose: redirects, streamed bodies, timeouts and retries are protocol behaviour an in-process transport fakes away.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections import Counter
from collections.abc import Mapping
from types import TracebackType
from typing import Self
from urllib.parse import parse_qs

import httpx
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)


class LocalSite:
    """An ASGI app served from a background thread on a free port of 127.0.0.1; use as a (sync or async) context
    manager. A subclass sets ``self.app`` (wrapped in :class:`Instrument` to count requests and apply latency) and
    answers ``/healthz``."""

    def __init__(self, *, latency_ms: int = 0, latencies: Mapping[str, int] | None = None) -> None:
        self.latency_ms = latency_ms
        """Delay before every response, unless ``latencies`` or ``?latency_ms=`` says otherwise."""
        self.latencies: dict[str, int] = dict(latencies or {})
        """Per-path delay overrides in milliseconds; may be changed while the site runs."""
        self.hits: Counter[str] = Counter()
        self.conditional_hits: Counter[tuple[str, bool]] = Counter()
        self.not_modified: Counter[str] = Counter()
        self.stopping = threading.Event()
        self.base_url = ""
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app: ASGIApp | None = None

    def url(self, path: str = "/") -> str:
        """Absolute URL of ``path`` on the running site."""
        if not self.base_url:
            raise RuntimeError("the site is not running")
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def reset(self) -> None:
        """Clear the counters (the latencies stay)."""
        self.hits.clear()
        self.conditional_hits.clear()
        self.not_modified.clear()

    def delay_for(self, path: str, query: str) -> float:
        """Seconds to wait before answering ``path``: query parameter, then per-path override, then site-wide."""
        asked = parse_qs(query).get("latency_ms")
        if asked and asked[0].isdigit():
            return int(asked[0]) / 1000
        return self.latencies.get(path, self.latency_ms) / 1000

    async def pause(self, seconds: float) -> None:
        """Sleep ``seconds``, cut short when the site stops (so a slow page never holds up shutdown)."""
        deadline = time.monotonic() + seconds
        # Polled, not awaited: ``stopping`` is a threading.Event set from the thread that owns the site.
        while not self.stopping.is_set() and (left := deadline - time.monotonic()) > 0:  # noqa: ASYNC110
            await asyncio.sleep(min(left, 0.05))

    def start(self) -> Self:
        """Bind a free port on 127.0.0.1, serve from a daemon thread, return once the site answers."""
        if self._thread is not None:
            raise RuntimeError("the site is already running")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        if self.app is None:
            raise RuntimeError("the site has no app")
        config = uvicorn.Config(
            self.app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self.stopping.clear()
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="fixture-site", daemon=True
        )
        self._thread.start()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._wait_ready()
        logger.info("fixture site serving %s", self.base_url)
        return self

    def _wait_ready(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url("/healthz"), timeout=1.0, trust_env=False).status_code == 200:
                    self.reset()
                    return
            except httpx.TransportError:
                pass  # not listening yet
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"the site did not start within {timeout:.0f}s")

    def stop(self) -> None:
        """Ask uvicorn to exit, end the streaming pages, wait for the thread."""
        self.stopping.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None
        self.base_url = ""
        self.port = 0

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)


class Instrument:
    """ASGI middleware: counts requests and 304s per path and applies the configured latency."""

    def __init__(self, app: ASGIApp, site: LocalSite) -> None:
        self.app = app
        self.site = site

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        names = {name.lower() for name, _ in scope["headers"]}
        conditional = b"if-none-match" in names or b"if-modified-since" in names
        self.site.hits[path] += 1
        self.site.conditional_hits[(path, conditional)] += 1
        delay = self.site.delay_for(path, scope.get("query_string", b"").decode("latin-1"))
        if delay > 0:
            await self.site.pause(delay)

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 304:
                self.site.not_modified[path] += 1
            await send(message)

        await self.app(scope, receive, counting_send)
