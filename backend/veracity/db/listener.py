"""One PostgreSQL ``LISTEN`` connection for a process: every notification on the channel is handed to
``on_message``, and ``on_connect`` runs each time the connection is (re)established — a notification sent while
there was no connection is lost, so whoever listens re-reads what it follows then. A dropped connection (the
server restarted, the backend was terminated, the network cut) is reopened with a doubling backoff; a silent one is
found by a periodic ``SELECT 1``.

Deliberately a raw asyncpg connection outside the engine's pool: it stays open for the process's lifetime and
must never be handed to a query."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import asyncpg
from sqlalchemy.engine import make_url

logger = logging.getLogger(__name__)


def asyncpg_dsn(url: str) -> str:
    """``postgresql+asyncpg://…`` (SQLAlchemy's form) → ``postgresql://…`` (asyncpg's)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class Listener:
    def __init__(
        self,
        url: str,
        channel: str,
        *,
        on_message: Callable[[str], None],
        on_connect: Callable[[], None],
        check_seconds: float = 15.0,
        backoff_max: float = 10.0,
    ) -> None:
        self.dsn = asyncpg_dsn(url)
        self.channel = channel
        self.on_message = on_message
        self.on_connect = on_connect
        self.check_seconds = check_seconds
        self.backoff_max = backoff_max
        self.connected = asyncio.Event()
        """Set while the LISTEN is in place."""
        self.connects = 0
        """How many times the LISTEN has been established (1 after the first connection)."""
        self._task: asyncio.Task[None] | None = None
        self.closed = False
        """Closed for good (the process is stopping): ``start`` does nothing more."""

    def start(self) -> None:
        if self._task is None and not self.closed:
            self._task = asyncio.create_task(self._run(), name=f"listen-{self.channel}")

    async def close(self) -> None:
        self.closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _deliver(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        self.on_message(payload)

    async def _run(self) -> None:
        delay = 0.1
        while True:
            try:
                conn = await asyncpg.connect(self.dsn, timeout=10)
            except Exception as exc:  # any failure to connect is retried: viewers must not fall back to polling
                logger.warning("listener on %s: cannot connect (%s); retrying in %.1f s", self.channel, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.backoff_max)
                continue
            try:
                await self._listen(conn)
                delay = 0.1  # it was up: the next reconnect starts quickly again
            except Exception as exc:  # the connection failed (or a callback did): reconnect, never die silently
                logger.warning("listener on %s: connection lost (%s); reconnecting", self.channel, exc)
            finally:
                self.connected.clear()
                if not conn.is_closed():
                    conn.terminate()
            await asyncio.sleep(delay)

    async def _listen(self, conn: asyncpg.Connection) -> None:
        """Listen until the connection ends (returns) or fails a check (raises)."""
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        await conn.add_listener(self.channel, self._deliver)
        self.connects += 1
        self.connected.set()
        logger.info("listening on %s (connection %d)", self.channel, self.connects)
        self.on_connect()
        while not lost.is_set():
            try:
                await asyncio.wait_for(lost.wait(), self.check_seconds)
            except TimeoutError:
                await conn.fetchval("SELECT 1", timeout=self.check_seconds)
        logger.warning("listener on %s: connection closed; reconnecting", self.channel)
