"""A worker: takes queued runs off pgqueuer's queue (``db/jobs.py``) and executes them through the run service —
in ``veracity worker``, or embedded in ``veracity serve`` (``VERACITY_WORKER__EMBEDDED``).

The queue hands out jobs; the run's fence decides who executes. A job's handler claims its run with one
conditional UPDATE (``runs_repo.claim_run``): only an unclaimed run, or one whose executor stopped renewing its
lease, can be claimed, so a job picked twice — pgqueuer re-picks a job whose heartbeat went stale — executes its
run at most once. A run whose job comes back after it had started (its executor died mid-run) is taken over by the
resumer (``runs/resume.py``) and resumed from its checkpoint, as a sweep would.

Stopping (SIGTERM, or the server shutting down) stops taking jobs at once, lets this worker's runs finish for
``VERACITY_WORKER__SHUTDOWN_SECONDS``, then cancels the rest, each recorded as interrupted."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime, timedelta

import asyncpg
from pgqueuer import AsyncpgDriver, Job, Queries, QueueManager
from pgqueuer.errors import FailingListenerError

from veracity import messages
from veracity.db import jobs, runs_repo
from veracity.errors import VeracityError
from veracity.runs.service import RunService

logger = logging.getLogger(__name__)

POLL_SECONDS = 5.0
"""How often an idle worker looks at the queue besides being woken by pgqueuer's NOTIFY."""
RETRY_SECONDS = 2.0
"""Pause before reconnecting after the queue's connection failed."""


class Worker:
    def __init__(self, service: RunService) -> None:
        self.service = service
        self.settings = service.settings
        self._runs: set[asyncio.Task[None]] = set()
        """The runs this worker started and that have not ended."""
        self.taken = 0
        """Runs this worker claimed and executed (or ended as interrupted)."""

    async def run(self, stop: asyncio.Event) -> None:
        """Take and execute queued runs until ``stop`` is set, then stop within the shutdown bound. A lost
        connection (the database restarting) is logged and reopened."""
        while not stop.is_set():
            try:
                await self._consume(stop)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, FailingListenerError) as exc:
                logger.warning("worker: the run queue failed (%s); reconnecting in %.0f s", exc, RETRY_SECONDS)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), RETRY_SECONDS)
        await self._finish_runs()

    async def _consume(self, stop: asyncio.Event) -> None:
        connection = await asyncpg.connect(jobs.asyncpg_dsn(self.settings.database.url))
        try:
            manager = QueueManager(Queries(AsyncpgDriver(connection)))
            manager.entrypoint(jobs.RUN_ENTRYPOINT, accepts_context=False)(self.take)
            watcher = asyncio.create_task(self._stop_on(stop, manager), name="worker-stop")
            try:
                lease = timedelta(seconds=self.settings.limits.run_lease_seconds)
                await manager.run(
                    dequeue_timeout=timedelta(seconds=POLL_SECONDS),
                    batch_size=1,  # one job per pick: the jobs spread over the workers
                    max_concurrent_tasks=self.settings.worker.concurrency,
                    shutdown_on_listener_failure=True,
                    heartbeat_timeout=lease,  # a job is picked again once its worker is as silent as a lapsed lease
                )
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
        finally:
            await connection.close(timeout=5)

    async def _stop_on(self, stop: asyncio.Event, manager: QueueManager) -> None:
        """On ``stop``: no more jobs, and this worker's runs finish (bounded) so the manager's handlers return."""
        await stop.wait()
        manager.shutdown.set()
        await self._finish_runs()

    async def _finish_runs(self) -> None:
        if not self._runs:
            return
        _, pending = await asyncio.wait(list(self._runs), timeout=self.settings.worker.shutdown_seconds)
        for task in pending:
            task.cancel()  # RunService.execute records the run as interrupted before the task ends
        if pending:
            await asyncio.wait(pending, timeout=10)

    async def take(self, job: Job) -> None:
        """pgqueuer's handler for one job: claim its run, execute it, return when it has ended."""
        run_id = (job.payload or b"").decode()
        task = await self.claim(run_id)
        if task is not None:
            await asyncio.wait([task])  # the run's own edge records how it ended; nothing to raise here

    async def claim(self, run_id: str) -> asyncio.Task[None] | None:
        """Claim ``run_id`` for this worker and start executing it; None when it is not to be executed here (it
        ended, another executor holds it, or it had started elsewhere and was ended as interrupted)."""
        service = self.service
        stale_before = datetime.now(UTC) - timedelta(seconds=self.settings.limits.run_lease_seconds)
        async with service.sessionmaker() as session:
            started_elsewhere = bool(await runs_repo.events_after(session=session, run_id=run_id, limit=1))
        if started_elsewhere:
            # Its job came back because its executor died mid-run: resume it here from its checkpoint (or end it
            # saying why it cannot be), exactly as a sweep would — only if it is still stale.
            if await service.resumer.take_over(run_id, stale_before):
                self.taken += 1
            return None
        async with runs_repo.run_transaction(service.sessionmaker, self.settings.limits.run_lease_seconds) as session:
            generation = await runs_repo.claim_run(
                session=session, run_id=run_id, owner=service.owner, stale_before=stale_before
            )
            run = await runs_repo.get_run(session=session, run_id=run_id) if generation is not None else None
        if generation is None or run is None:
            logger.info("run %s: not claimed (it ended, or another executor holds it)", run_id)
            return None
        service.journal.hold(runs_repo.Fence(run_id=run_id, owner=service.owner, generation=generation))
        self.taken += 1
        try:
            spec = service.registry.get(run.template_id)
        except VeracityError as exc:  # the template is gone from this worker's registry
            await service.journal.fail(run_id, messages.RUN_FAILED.format(reason=exc.message))
            return None
        logger.info("run %s: claimed by %s (generation %d)", run_id, service.owner, generation)
        task = service.launch(run_id, spec, run.question, run.corpus, time.perf_counter())
        self._runs.add(task)
        task.add_done_callback(self._runs.discard)
        return task
