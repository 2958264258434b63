"""The run queue's tables on PostgreSQL: pgqueuer's schema (installed and upgraded with the app's own migrations)
and a run's job, written in the caller's transaction so a run and its job commit together — a run is never
queued without a job, nor a job left for a run that was rolled back. The workers that read the queue are
``runs/worker.py``; SQLite has no queue (runs execute in the process that started them).

pgqueuer, not Alembic, owns these tables: its ``upgrade`` converges them onto what the installed pgqueuer
version declares, so upgrading the library never needs a migration of ours."""

from __future__ import annotations

import logging

import asyncpg
from pgqueuer import AsyncpgDriver, Queries
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from veracity.db.engine import asyncpg_dsn, is_postgresql

logger = logging.getLogger(__name__)

RUN_ENTRYPOINT = "veracity.run"
"""The queue's one kind of job: execute the run whose ID is the payload."""


__all__ = ["RUN_ENTRYPOINT", "asyncpg_dsn", "enqueue_run", "install_schema", "is_postgresql"]


async def install_schema(url: str) -> None:
    """Create pgqueuer's tables on first use, then bring them to the installed version (both idempotent; under
    pgqueuer's advisory lock, so processes migrating at once install it once)."""
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        queries = Queries(AsyncpgDriver(connection))
        async with queries.schema_lock():
            if not await queries.schema_is_installed():
                await queries.install()
                logger.info("run queue: pgqueuer schema installed")
        await queries.upgrade()
    finally:
        await connection.close()


async def enqueue_run(*, session: AsyncSession, run_id: str) -> None:
    """Queue ``run_id`` for a worker, in the session's transaction (committed, or rolled back, with the run).
    pgqueuer's trigger notifies listening workers when it commits."""
    await session.execute(text("SELECT 1"))  # the transaction is open on the driver connection before we share it
    raw = await (await session.connection()).get_raw_connection()
    connection = raw.driver_connection
    if not isinstance(connection, asyncpg.Connection):
        raise TypeError("the run queue needs PostgreSQL through asyncpg")
    await Queries(AsyncpgDriver(connection)).enqueue(RUN_ENTRYPOINT, run_id.encode())
