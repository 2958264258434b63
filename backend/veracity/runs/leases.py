"""Leases: a run belongs to the executor that claimed it (owner + generation) while it renews its lease. Every
process renews its own runs every third of ``run_lease_seconds`` — a run whose claim was lost meanwhile is
cancelled here, its writes already refused by the journal's fence — and a long-lived one (a server) sweeps, every
lease, for runs whose executor stopped renewing: each is taken over and resumed, or ended saying why it cannot be
(``runs/resume.py``; once, however many sweeps race). A short-lived process (``veracity ask``, the evals) does not
sweep: a run it took over would hold up its exit, or be cut short by it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity.db import runs_repo
from veracity.db.failures import is_database_error
from veracity.db.transient import first_line, is_transient
from veracity.db.write_gate import background_writes
from veracity.runs.journal import Journal
from veracity.settings import Settings

logger = logging.getLogger(__name__)

TakeOver = Callable[[str, datetime], Awaitable[bool]]
"""Resume a stale run here, or end it saying why not (``Resumer.take_over``): True when it did either."""


class Leases:
    """``running``: this process's runs by id (the service's tasks); ``journal``: their claims; ``take_over``: what
    becomes of a stale run a sweep finds."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        settings: Settings,
        running: dict[str, asyncio.Task[None]],
        journal: Journal,
        take_over: TakeOver,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.settings = settings
        self._tasks = running
        self.journal = journal
        self.take_over = take_over
        self._upkeep: asyncio.Task[None] | None = None
        """Renews the leases of this process's runs (and sweeps for dead ones) while any process runs here."""

    @property
    def upkeep_running(self) -> bool:
        return self._upkeep is not None and not self._upkeep.done()

    async def recover_interrupted(self) -> list[str]:
        """Runs left pending/running by a process that died are taken over (resumed here, or ended saying why they
        cannot be); the ones this call took.

        A run is another process's, alive, while its lease is fresh: every process renews the runs it executes
        every third of ``run_lease_seconds`` (``keep_leases``, which every ``start`` starts). Only runs not
        renewed for a whole lease are taken as interrupted, so starting a second process on the same database
        never fails the first's runs."""
        cutoff = datetime.now(UTC) - timedelta(seconds=self.settings.limits.run_lease_seconds)
        async with self.sessionmaker() as session:
            unfinished = await runs_repo.unfinished_runs(session=session, stale_before=cutoff)
            stale = [r.id for r in unfinished if r.id not in self._tasks]
        return [r for r in stale if await self.take_over(r, cutoff)]

    def start_upkeep(self, *, until_idle: bool = False) -> None:
        """Start renewing this process's leases (and sweeping) unless already running. A server keeps it for its
        whole life; elsewhere (the CLI, evals) it starts with the first run and stops once no run is left."""
        if self._upkeep is None or self._upkeep.done():
            self._upkeep = asyncio.create_task(self.keep_leases(until_idle=until_idle), name="run-leases")

    async def stop_upkeep(self) -> None:
        if self._upkeep is not None:
            self._upkeep.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._upkeep
            self._upkeep = None

    async def keep_leases(self, *, until_idle: bool = False) -> None:
        """Renew this process's runs every third of a lease; sweep for dead ones every lease (not ``until_idle``:
        a short-lived process leaves them to a server); until cancelled, or, with ``until_idle``, until this
        process has no run left."""
        background_writes()  # renewals and sweeps wait behind any request's writes (SQLite: db/write_gate.py)
        lease = self.settings.limits.run_lease_seconds
        beats = 0
        while True:
            await asyncio.sleep(lease / 3)
            if until_idle and not self._tasks:
                return
            beats += 1
            try:
                async with runs_repo.run_transaction(self.sessionmaker, lease) as session:
                    lost = await runs_repo.renew_leases(session=session, fences=self.journal.fences())
                for run_id in lost:
                    if self.journal.ending(run_id) or not self.journal.holds(run_id):
                        # It ended here while the renewal waited for the write lock: finished, not lost (a claim
                        # lost while its ending is written is the run's own write's LeaseLost to report).
                        continue
                    # Swept while this process was not renewing (frozen, cut off): its writes are refused by the
                    # fence already; stop spending anything on it.
                    logger.warning("run %s: lease lost, this process stops executing it", run_id)
                    task = self._tasks.get(run_id)
                    if task is not None:
                        task.cancel()
                if not until_idle and beats % 3 == 0:
                    swept = await self.recover_interrupted()
                    if swept:
                        logger.warning("took over %d run(s) whose process died: %s", len(swept), ", ".join(swept))
            except Exception as exc:  # never let the upkeep die: it is what renews this process's runs and sweeps
                # The database away for a moment arrives as SQLAlchemy's errors, but also as the socket's own
                # (a refused connection is a bare ConnectionRefusedError from asyncpg's connect): try again next beat.
                if is_transient(exc) or is_database_error(exc):
                    logger.warning("run lease upkeep failed: %s", first_line(exc))
                else:
                    logger.exception("run lease upkeep failed")
