"""Engine and session factory. SQLite gets WAL, a busy timeout and foreign keys on every connection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy import event
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

STARTUP_LOCK_KEY = 0x5645524143495459
"""The PostgreSQL advisory lock processes take while they migrate and load the bundled data ('VERACITY')."""


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def is_postgresql(url: str) -> bool:
    return make_url(url).get_backend_name() == "postgresql"


def asyncpg_dsn(url: str) -> str:
    """The SQLAlchemy URL (``postgresql+asyncpg://``) as asyncpg's own DSN, for connections outside the pool."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@asynccontextmanager
async def startup_lock(url: str) -> AsyncIterator[None]:
    """Processes starting at once on one PostgreSQL database (web and workers) migrate and load the bundled
    corpora one after another — the later ones find the work done — rather than side by side, where two insert the
    same documents and one fails. Held on a connection of its own, so it is released even if this process dies.
    On SQLite, nothing: one machine, whose write lock already serializes the writers."""
    if not is_postgresql(url):
        yield
        return
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await connection.execute("SELECT pg_advisory_lock($1)", STARTUP_LOCK_KEY)
        yield
    finally:
        await connection.close(timeout=5)  # ends the session: the lock goes with it


def make_engine(url: str, *, echo: bool = False) -> AsyncEngine:
    kwargs: dict[str, Any] = {"echo": echo}
    if is_sqlite(url):
        database = make_url(url).database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        kwargs["connect_args"] = {"timeout": 30}
    else:
        kwargs.update(pool_size=10, max_overflow=10, pool_pre_ping=True)
    engine = create_async_engine(url, **kwargs)
    if not is_sqlite(url):
        event.listen(engine.sync_engine, "handle_error", _protocol_confusion_is_a_disconnect)
    else:

        @event.listens_for(engine.sync_engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

    return engine


def _protocol_confusion_is_a_disconnect(context: ExceptionContext) -> None:
    """asyncpg's "cannot switch to state N; another operation (M) is in progress" (``InternalClientError``) means
    the connection's protocol is stuck mid-exchange: seen when the server ends a session (``runs_repo.bound_idle``'s
    idle-in-transaction timeout, a terminated backend) while the client is between the server's error and the
    socket's close. The connection can never be used again, but SQLAlchemy does not count it as a disconnect, so it
    went back to the pool and the error was not transient. Counted as one, the connection is invalidated (dropped
    from the pool) and the error carries ``connection_invalidated``, so ``db.transient`` retries the transaction on
    a fresh connection (seen in CI: a thawed fenced write failed this way instead of as "connection is closed")."""
    for cause in (context.original_exception, context.original_exception.__cause__):
        if isinstance(cause, asyncpg.exceptions.InternalClientError) and "another operation" in str(cause):
            context.is_disconnect = True
            return


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)
