"""Transient database errors, and retrying a whole transaction through them.

A transient error is one the same transaction may get past if it is simply tried again a moment later: SQLite's
write lock held by another connection past the busy timeout, a PostgreSQL connection refused, dropped or
killed, a server starting up or shutting down, too many connections, a deadlock or serialization failure.
Anything else (a missing table, a constraint, a read-only file, bad SQL) fails the same way every time and is
raised at once.

What actually arrives, measured on this stack (SQLAlchemy 2 with aiosqlite and asyncpg):

- SQLite locked: ``sqlalchemy.exc.OperationalError`` whose ``orig`` is ``sqlite3.OperationalError('database is
  locked')`` (``sqlite_errorname`` ``SQLITE_BUSY``).
- PostgreSQL port closed: a bare ``ConnectionRefusedError`` (an ``OSError``): SQLAlchemy wraps only the driver's
  own errors, and asyncpg's connect raises the socket's.
- PostgreSQL backend killed: ``sqlalchemy.exc.InterfaceError`` with ``connection_invalidated`` set (its cause is
  asyncpg's ``InterfaceError('connection is closed')``).
- PostgreSQL server errors: asyncpg exceptions carry a ``sqlstate``, as do SQLAlchemy's adapted ones.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import random
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from sqlalchemy import exc as sa_exc

logger = logging.getLogger(__name__)

T = TypeVar("T")

ATTEMPTS = 4
"""Tries in all, the first included: with the delays below a write gives up after about a second of retrying."""
BASE_DELAY = 0.05
"""Seconds before the first retry; doubled each time, with jitter."""
MAX_DELAY = 1.0
"""No single wait is longer than this."""

# Connection exceptions (class 08), the server shutting down or starting (57P01-03), too many connections, and the
# two ways a transaction is rolled back for another's sake (serialization failure, deadlock), a lock wait
# that hit lock_timeout, and a transaction the server ended for idling past its bound (``runs_repo.bound_idle``,
# set by ``runs_repo.run_transaction``).
_TRANSIENT_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300", "40001", "40P01", "55P03", "25P03"})
_NETWORK_ERRNOS = frozenset(
    {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ETIMEDOUT,
        errno.EPIPE,
    }
)
_SQLITE_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")
_SQLITE_BUSY_TEXT = ("database is locked", "database table is locked", "database is busy")


def causes(exc: BaseException) -> Iterator[BaseException]:
    """The exception, the driver error SQLAlchemy wrapped (``orig``) and what each was raised from."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo += [getattr(current, "orig", None), current.__cause__]


def _one_is_transient(exc: BaseException) -> bool:
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, (sa_exc.DisconnectionError, sa_exc.TimeoutError)):  # a dropped connection; the pool is full
        return True
    if isinstance(exc, sqlite3.OperationalError):
        name = getattr(exc, "sqlite_errorname", "")
        return name.startswith(_SQLITE_BUSY) or any(text in str(exc).lower() for text in _SQLITE_BUSY_TEXT)
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str) and (sqlstate.startswith("08") or sqlstate in _TRANSIENT_SQLSTATES):
        return True
    if isinstance(exc, (ConnectionError, TimeoutError)):  # TimeoutError: asyncpg's connect timeout
        return True
    return isinstance(exc, OSError) and exc.errno in _NETWORK_ERRNOS


def is_transient(exc: BaseException) -> bool:
    """Whether trying the same transaction again a moment later may succeed (see the module's docstring)."""
    return any(_one_is_transient(cause) for cause in causes(exc))


def first_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of the driver's own message (SQLAlchemy appends the statement and its parameters below it)."""
    driver = getattr(exc, "orig", None)
    text = str(driver if isinstance(driver, BaseException) else exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__


def backoff(attempt: int, *, base_delay: float, max_delay: float) -> float:
    """The wait after failed attempt ``attempt`` (1-based): exponential, capped, with "equal jitter" (half fixed,
    half random) so processes that failed together do not retry together."""
    ceiling = min(max_delay, base_delay * 2.0 ** (attempt - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


async def retry_transient(
    fn: Callable[[], Awaitable[T]],
    *,
    attempts: int = ATTEMPTS,
    base_delay: float = BASE_DELAY,
    max_delay: float = MAX_DELAY,
    what: str = "database write",
) -> T:
    """``await fn()``, tried again after a short wait while it fails transiently, up to ``attempts`` tries in all;
    the last error is raised as it was, as is any error that is not transient.

    ``fn`` must be a whole transaction: it opens its session, begins, writes and commits (``async with
    sessionmaker() as session, session.begin(): ...``), so a retry starts from nothing. A retry after a commit
    whose acknowledgement was lost repeats the write; ``fn`` should be safe to repeat or the caller accept that.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    attempt = 1
    while True:
        try:
            return await fn()
        except Exception as exc:
            if attempt >= attempts or not is_transient(exc):
                raise
            delay = backoff(attempt, base_delay=base_delay, max_delay=max_delay)
            # The first line of the driver's message only: the statement and its parameters stay out of the log
            # until the write gives up, when the caller logs the whole exception once.
            logger.warning(
                "%s failed transiently (try %d of %d), retrying in %.2f s: %s: %s",
                what,
                attempt,
                attempts,
                delay,
                type(exc).__name__,
                first_line(exc),
            )
            await asyncio.sleep(delay)
            attempt += 1
