"""``/healthz``'s report: green only while the database takes a write.

``status`` is ``"ok"`` with HTTP 200 when the test write (``db/health.probe_write``) went through and the counts
could be read; otherwise ``"unavailable"`` with HTTP 503 and ``failed`` naming what did not work
(``database_write``, ``database_read``), each with a reason an operator can act on — the driver's first line
("database is locked", "attempt to write a readonly database", a refused connection), never a statement or its
parameters; the whole exception is logged. The fields it always had (``status``, ``corpora``) keep their shape.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity import messages
from veracity.db import corpus_repo
from veracity.db.health import executors_seen, probe_write, queue_depth
from veracity.db.transient import first_line

logger = logging.getLogger(__name__)


def _reason(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, TimeoutError):
        return messages.DATABASE_NO_ANSWER.format(seconds=timeout)
    return first_line(exc)


async def _writable(sessionmaker: async_sessionmaker[AsyncSession], timeout: float) -> str | None:
    """None when a write went through; else why not."""

    async def probe() -> None:
        async with sessionmaker() as session:
            await probe_write(session=session, timeout=timeout)

    try:
        # The probe bounds its own lock waits; this bounds the rest (a connection that never opens).
        await asyncio.wait_for(probe(), timeout + 1.0)
    except Exception as exc:  # any failure is the report's content, not the handler's
        logger.warning("healthz: the database cannot be written to: %s", exc, exc_info=True)
        return messages.DATABASE_UNWRITABLE.format(reason=_reason(exc, timeout))
    return None


async def health_report(
    sessionmaker: async_sessionmaker[AsyncSession], timeout: float, lease_seconds: float = 30.0
) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of ``/healthz``."""
    failed: dict[str, str] = {}
    write_error = await _writable(sessionmaker, timeout)
    if write_error is not None:
        failed["database_write"] = write_error
    queue: dict[str, int] | None = None
    corpora: dict[str, int] | None = None
    workers: list[str] | None = None
    since = datetime.now(UTC) - timedelta(seconds=lease_seconds)

    async def read() -> tuple[dict[str, int], dict[str, int], list[str]]:
        async with sessionmaker() as session:
            return (
                await queue_depth(session=session),
                await corpus_repo.corpus_counts(session=session),
                await executors_seen(session=session, since=since),
            )

    try:
        queue, corpora, workers = await asyncio.wait_for(read(), timeout + 1.0)
    except Exception as exc:  # any failure is the report's content, not the handler's
        logger.warning("healthz: the database cannot be read: %s", exc, exc_info=True)
        failed["database_read"] = _reason(exc, timeout)
    body: dict[str, Any] = {
        "status": "unavailable" if failed else "ok",
        "database": {"writable": write_error is None, "error": write_error},
        "queue": queue,
        # The executors (workers, or servers running runs themselves) whose runs' leases were renewed within a
        # lease: those seen working now; an idle worker holds no run and is not listed.
        "workers": workers,
        "corpora": corpora,
    }
    if failed:
        body["failed"] = failed
    return (503 if failed else 200), body
