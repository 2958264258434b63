"""A run's journal: events persisted before anyone sees them (then their readers woken: in this process through
the feed, in others by a ``pg_notify`` in the event's own transaction on PostgreSQL), the audit trail, and the two
ways a run ends — its artifact stored with ``complete``, or ``error`` — each in one transaction. One lock per run
keeps its events in order. Viewers follow a run through ``runs/feed.py``.

Every write of a run this process executes is fenced (``runs_repo.hold`` in the same transaction): once the claim
is lost — a sweep failed the run while this process was frozen, or another worker took it over — the write is
refused with ``LeaseLost`` and nothing of it is stored. A sweep ends another executor's stale run with a
conditional update, so the run gets at most one ``error`` event however many sweeps race. Each write is one
transaction retried briefly on a transient database error, checking first that an earlier try did not land.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity import messages
from veracity.db import runs_repo
from veracity.db.models import ResearchRun
from veracity.db.transient import retry_transient
from veracity.domain import Report
from veracity.errors import Conflict, LeaseLost, NotFound
from veracity.events import Complete, Event, RunFailed
from veracity.runs.feed import RunFeed
from veracity.runs.report import render_markdown
from veracity.settings import Settings

logger = logging.getLogger(__name__)
T = TypeVar("T")


class Journal:
    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], feed: RunFeed, settings: Settings) -> None:
        self.sessionmaker = sessionmaker
        self.feed = feed
        self.settings = settings
        self._locks: dict[str, asyncio.Lock] = {}
        self._fences: dict[str, runs_repo.Fence] = {}
        self._ending: set[str] = set()

    def hold(self, fence: runs_repo.Fence) -> None:
        """From now on every write of ``fence.run_id`` from here checks this claim."""
        self._fences[fence.run_id] = fence

    def fence(self, run_id: str) -> runs_repo.Fence:
        fence = self._fences.get(run_id)
        if fence is None:
            raise LeaseLost(f"run {run_id} is not held here")
        return fence

    def fences(self) -> list[runs_repo.Fence]:
        return list(self._fences.values())

    def release(self, run_id: str) -> None:
        """This process writes nothing more of the run (its ending is written, or its claim was lost)."""
        self._locks.pop(run_id, None)
        self._fences.pop(run_id, None)
        self._ending.discard(run_id)

    def holds(self, run_id: str) -> bool:
        """Whether this process still holds the run's claim (not yet released: its ending is not written)."""
        return run_id in self._fences

    def ending(self, run_id: str) -> bool:
        """Whether the run's ending (artifact or failure) is being written here now."""
        return run_id in self._ending

    async def _write(
        self,
        what: str,
        write: Callable[[AsyncSession], Awaitable[T]],
        landed: Callable[[AsyncSession], Awaitable[bool]],
    ) -> T | None:
        """``write`` in one transaction, retried briefly on a transient database error. A retry first asks
        ``landed`` whether the previous try's commit went through (only its acknowledgement was lost): then it
        writes nothing and returns None, so nothing is stored twice."""
        tries = 0

        async def once() -> T | None:
            nonlocal tries
            tries += 1
            async with runs_repo.run_transaction(self.sessionmaker, self.settings.limits.run_lease_seconds) as session:
                if tries > 1 and await landed(session):
                    return None
                return await write(session)

        return await retry_transient(once, what=what)

    async def emit(self, run_id: str, event: Event) -> None:
        """Persist one event (fenced: ``LeaseLost`` when this process no longer holds the run), then wake its
        readers. The fence's UPDATE renews the lease as well; ``keep_leases`` renews it between events."""
        payload = event.payload()

        async def write(session: AsyncSession) -> int:
            await runs_repo.hold(session=session, fence=self.fence(run_id))
            return (await runs_repo.append_event(session=session, run_id=run_id, name=event.name, payload=payload)).seq

        async def landed(session: AsyncSession) -> bool:
            return await runs_repo.last_event_is(session=session, run_id=run_id, name=event.name, payload=payload)

        async with self._locks.setdefault(run_id, asyncio.Lock()):
            seq = await self._write(f"run {run_id} event {event.name}", write, landed)
        self.feed.wake(run_id, seq)
        if self.settings.limits.event_delay_ms:
            await asyncio.sleep(self.settings.limits.event_delay_ms / 1000)

    async def audit(self, run_id: str, stage: str, attempt: int, payload: dict[str, Any]) -> None:
        async def write(session: AsyncSession) -> None:
            await runs_repo.hold(session=session, fence=self.fence(run_id))
            await runs_repo.append_audit(session=session, run_id=run_id, stage=stage, attempt=attempt, payload=payload)

        async def landed(session: AsyncSession) -> bool:
            return await runs_repo.last_audit_is(
                session=session, run_id=run_id, stage=stage, attempt=attempt, payload=payload
            )

        await self._write(f"run {run_id} audit {stage}", write, landed)

    async def store(self, run_id: str, candidate: Report) -> None:
        """The artifact, the run's status and `complete`, in one fenced transaction."""
        self._ending.add(run_id)
        report = candidate.model_dump(mode="json")  # once: the artifact and the `complete` event carry the same
        markdown = render_markdown(candidate)

        async def write(session: AsyncSession) -> int:
            fence = self.fence(run_id)
            await runs_repo.hold(session=session, fence=fence)
            artifact = await runs_repo.add_artifact_version(
                session=session, run_id=run_id, report=report, markdown=markdown
            )
            target = await runs_repo.refresh_target(session=session, run_id=run_id)
            if target is not None:  # a refresh: its report is also the refreshed run's next version
                refreshed = candidate.model_copy(update={"run_id": target})
                refreshed.metrics = {**candidate.metrics, "refreshed_by": run_id}
                await runs_repo.add_artifact_version(
                    session=session,
                    run_id=target,
                    report=refreshed.model_dump(mode="json"),
                    markdown=render_markdown(refreshed),
                )
            await runs_repo.set_run_status(
                session=session,
                run_id=run_id,
                status="done",
                outcome=candidate.outcome,
                metrics=dict(candidate.metrics),
                fence=fence,
            )
            complete = Complete(
                outcome=candidate.outcome, version=artifact.version, report=report, metrics=candidate.metrics
            )
            return (
                await runs_repo.append_event(
                    session=session, run_id=run_id, name=complete.name, payload=complete.payload()
                )
            ).seq

        async with self._locks.setdefault(run_id, asyncio.Lock()):
            seq = await self._write(
                f"run {run_id} artifact", write, lambda session: self._ended(session, run_id, "done")
            )
        self.feed.wake(run_id, seq)
        self.release(run_id)

    async def fail(self, run_id: str, message: str, *, detail: str | None = None) -> bool:
        """A run this process executes ends without an artifact: ``message`` is its error (a stable code or
        sentence), ``detail`` what a reader needs to understand it. Fenced: when the claim was lost (a sweep
        already ended the run) nothing is written and False is returned."""
        self._ending.add(run_id)
        failed = RunFailed(message=message, detail=detail or None)

        async def write(session: AsyncSession) -> int:
            await runs_repo.set_run_status(
                session=session, run_id=run_id, status="failed", error=message, fence=self.fence(run_id)
            )
            return (
                await runs_repo.append_event(session=session, run_id=run_id, name=failed.name, payload=failed.payload())
            ).seq

        try:
            async with self._locks.setdefault(run_id, asyncio.Lock()):
                seq = await self._write(
                    f"run {run_id} failure", write, lambda session: self._ended(session, run_id, "failed")
                )
        except LeaseLost:
            logger.warning("run %s: not failed from here, this process no longer holds it", run_id)
            return False
        finally:
            self.release(run_id)
        self.feed.wake(run_id, seq)
        return True

    async def cancel(self, run_id: str) -> ResearchRun:
        """A user asks the run to stop (any process may take the request: it is a flag on the run's row). A run no
        executor holds yet ends here, with its ``error`` event; a held one is ended by its executor, which reads
        the flag at its next write or lease renewal. ``Conflict`` when the run has already finished."""
        cancelled = RunFailed(message=messages.RUN_CANCELLED)
        async with runs_repo.run_transaction(self.sessionmaker, self.settings.limits.run_lease_seconds) as session:
            run = await runs_repo.request_cancel(session=session, run_id=run_id)
            if run is None:
                raise NotFound(messages.RUN_UNKNOWN.format(run_id=run_id))
            if run.status not in runs_repo.ACTIVE:
                raise Conflict(messages.RUN_ALREADY_FINISHED.format(run_id=run_id, status=run.outcome or run.status))
            if run.owner is None and await runs_repo.end_unclaimed(
                session=session, run_id=run_id, error=messages.RUN_CANCELLED
            ):
                await runs_repo.append_event(
                    session=session, run_id=run_id, name=cancelled.name, payload=cancelled.payload()
                )
        self.feed.wake(run_id)
        return run

    async def cancel_requested(self, run_id: str) -> bool:
        async with self.sessionmaker() as session:
            run = await runs_repo.get_run(session=session, run_id=run_id)
        return run is not None and run.cancel_requested

    async def _ended(self, session: AsyncSession, run_id: str, status: str) -> bool:
        run = await runs_repo.get_run(session=session, run_id=run_id)
        return run is not None and run.status == status and run.owner is None

    async def sweep(self, run_id: str, message: str, *, stale_before: datetime) -> bool:
        """End another executor's run that stopped renewing its lease: status failed and one ``error`` event in
        one transaction, only if the run is still active and still stale (two sweeps racing end it once)."""
        async with runs_repo.run_transaction(self.sessionmaker, self.settings.limits.run_lease_seconds) as session:
            reason = await runs_repo.fail_stale(
                session=session,
                run_id=run_id,
                stale_before=stale_before,
                error=message,
                cancelled=messages.RUN_CANCELLED,  # a user's cancel its dead executor never got to
            )
            if reason is None:
                return False
            failed = RunFailed(message=reason)
            stored = await runs_repo.append_event(
                session=session, run_id=run_id, name=failed.name, payload=failed.payload()
            )
        self.feed.wake(run_id, stored.seq)
        return True
