"""Where a started run goes. With a queue (PostgreSQL), the web process only records the run and its job, in one
transaction, and a worker (``runs/worker.py``) claims and executes it — maybe another process, maybe the server's
own embedded worker. Without one (SQLite), the service executes the run in the process that started it."""

from __future__ import annotations

from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from veracity.db import jobs
from veracity.settings import Settings


class RunQueue(Protocol):
    async def enqueue(self, *, session: AsyncSession, run_id: str) -> None:
        """Queue ``run_id`` in the caller's transaction: the run and its job commit (or roll back) together."""
        ...


class PgRunQueue:
    """pgqueuer's queue in the app's own PostgreSQL database (``db/jobs.py``)."""

    async def enqueue(self, *, session: AsyncSession, run_id: str) -> None:
        await jobs.enqueue_run(session=session, run_id=run_id)


def run_queue(settings: Settings) -> RunQueue | None:
    """The queue for this database: pgqueuer's on PostgreSQL; none on SQLite, where runs execute where started."""
    return PgRunQueue() if jobs.is_postgresql(settings.database.url) else None
