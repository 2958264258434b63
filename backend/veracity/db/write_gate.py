"""One writer at a time on a SQLite file, queued in this process rather than polling for the lock, requests first.

SQLite has one write lock per file. A writer that finds it taken waits in SQLite's busy handler, which sleeps and
tries again (after 1, 2, 5 … then 100 ms between tries), while a writer arriving later takes the lock the moment it
is free. With ten runs writing their events, audits and checkpoints, a submitted question's one INSERT lost that
race again and again: up to 2.2 s inside the submit (issue 18). Here this process's writers queue for the lock
in asyncio instead: a connection takes the gate just before its transaction's first write (where SQLite takes the
lock) and gives it back at commit or rollback (where SQLite gives it up), so they never meet in the busy handler.
Waiters are served in order, a request's writes before a run's (``background_writes`` marks a run's task and
what it starts): a submit waits for the write in progress, not for every run's queue.

It only orders writers; SQLite's lock still guards the file. A write that waits longer than
``GATE_TIMEOUT_SECONDS`` for the gate goes on without it (and a warning says so) — a gate never released would
otherwise stop every write of the process. Other processes on the file (``veracity ingest``, another server) still
meet this one in the busy handler, and find fewer gaps than before: this process's writers now follow each other
with none. Statements that write behind a ``WITH`` are not recognised and wait in the busy handler, as before.
PostgreSQL needs none of this: writers of different rows do not wait for each other.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import await_only

from veracity.db.engine import is_sqlite

logger = logging.getLogger(__name__)

GATE_TIMEOUT_SECONDS = 30.0
"""The engine's busy timeout: no write waited longer than this for SQLite's lock before the gate either."""
_HOLDS = "veracity_write_gate"
"""Key, in a connection's ``info``, of the gate it holds."""
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")

_background: ContextVar[bool] = ContextVar("veracity_background_writes", default=False)


def background_writes() -> None:
    """The calling task's writes (and those of the tasks it starts from now on) wait behind any request's."""
    _background.set(True)


class WriteGate:
    """A lock served in order, requests before background work."""

    def __init__(self) -> None:
        self._held = False
        self._waiting: tuple[deque[asyncio.Future[None]], deque[asyncio.Future[None]]] = (deque(), deque())
        """Requests' waiters, then background waiters."""

    @property
    def held(self) -> bool:
        return self._held

    @property
    def waiting(self) -> int:
        """Writers waiting for the gate."""
        return sum(len(queue) for queue in self._waiting)

    def try_acquire(self) -> bool:
        """Take the gate if it is free and nobody waits for it (no await: the common case costs nothing)."""
        if self._held or any(self._waiting):
            return False
        self._held = True
        return True

    async def acquire(self) -> bool:
        """Take the gate; False when ``GATE_TIMEOUT_SECONDS`` went by first (the caller goes on without it)."""
        if self.try_acquire():
            return True
        waiter = asyncio.get_running_loop().create_future()
        queue = self._waiting[1 if _background.get() else 0]
        queue.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), GATE_TIMEOUT_SECONDS)
        except (TimeoutError, asyncio.CancelledError) as exc:
            if waiter.done():  # handed over just as the wait ended: pass it on, nobody will use it here
                self.release()
            else:
                waiter.cancel()
                queue.remove(waiter)
            if isinstance(exc, asyncio.CancelledError):
                raise
            logger.warning("a write waited %.0f s for the write gate: it goes on without it", GATE_TIMEOUT_SECONDS)
            return False
        return True

    def release(self) -> None:
        """Hand the gate to the first request waiting, else the first background writer, else leave it free."""
        for queue in self._waiting:
            while queue:
                waiter = queue.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    return
        self._held = False

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[None]:
        """Hold the gate for the block (a writer outside the engine: the checkpointer)."""
        took = await self.acquire()
        try:
            yield
        finally:
            if took:
                self.release()


def write_gate(engine: AsyncEngine) -> WriteGate | None:
    """Queue ``engine``'s writers at a new gate (returned, to queue the checkpointer's there too); None on
    PostgreSQL. Must run on the event loop the engine is used from (SQLAlchemy's async bridge runs its events
    there, between the driver's awaits)."""
    if not is_sqlite(str(engine.url)):
        return None
    gate = WriteGate()

    @event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _before(conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any, _many: bool) -> None:
        if _HOLDS not in conn.info and statement.lstrip()[:7].upper().startswith(_WRITES):
            if gate.try_acquire() or await_only(gate.acquire()):
                conn.info[_HOLDS] = gate

    def _let_go(info: dict[str, Any]) -> None:
        held = info.pop(_HOLDS, None)
        if held is not None:
            held.release()

    def _ended(conn: Any) -> None:
        # At commit, as the COMMIT is sent: the next writer may wait a millisecond in the busy handler for it to
        # land. An invalidated connection (a task cancelled mid-statement) has let go already, at "invalidate".
        if not conn.invalidated:
            _let_go(conn.info)

    def _given_back(_dbapi: Any, record: Any) -> None:  # checked in, or closed
        _let_go(record.info)

    def _reset_or_invalidated(_dbapi: Any, record: Any, _why: Any) -> None:
        _let_go(record.info)

    event.listen(engine.sync_engine, "commit", _ended)
    event.listen(engine.sync_engine, "rollback", _ended)
    # A connection given back, reset, invalidated or closed without either lets go too.
    for name, listener in (
        ("reset", _reset_or_invalidated),
        ("invalidate", _reset_or_invalidated),
        ("checkin", _given_back),
        ("close", _given_back),
    ):
        event.listen(engine.sync_engine.pool, name, listener)
    return gate
