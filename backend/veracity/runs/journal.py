"""A run's journal: events persisted before anyone sees them (then their readers woken), the audit trail, and
the two ways a run ends — its artifact stored with ``complete``, or ``error`` — each in one transaction. One
lock per run keeps its events in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity import messages
from veracity.db import runs_repo
from veracity.db.models import RunEvent
from veracity.domain import Report
from veracity.errors import NotFound
from veracity.events import TERMINAL_EVENTS, Complete, Event, RunFailed
from veracity.runs.notifier import RunNotifier
from veracity.runs.report import render_markdown
from veracity.settings import Settings


class Journal:
    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], notifier: RunNotifier, settings: Settings
    ) -> None:
        self.sessionmaker = sessionmaker
        self.notifier = notifier
        self.settings = settings
        self._locks: dict[str, asyncio.Lock] = {}

    async def emit(self, run_id: str, event: Event) -> None:
        """Persist one event, then wake its readers. The run's lease is not touched here: ``keep_leases`` renews
        it (every run is begun by ``start``, which starts that upkeep), so the hot path pays one INSERT only."""
        lock = self._locks.setdefault(run_id, asyncio.Lock())
        async with lock:
            async with self.sessionmaker() as session, session.begin():
                await runs_repo.append_event(session=session, run_id=run_id, name=event.name, payload=event.payload())
        await self.notifier.notify(run_id)
        if self.settings.limits.event_delay_ms:
            await asyncio.sleep(self.settings.limits.event_delay_ms / 1000)

    async def tail(self, run_id: str, after_seq: int = 0) -> AsyncIterator[RunEvent]:
        """Stored events after ``after_seq``, then live ones as they are persisted, until a terminal event."""
        last = after_seq
        while True:
            async with self.sessionmaker() as session:
                run = await runs_repo.get_run(session=session, run_id=run_id)
                if run is None:
                    raise NotFound(messages.RUN_UNKNOWN.format(run_id=run_id))
                batch = await runs_repo.events_after(session=session, run_id=run_id, after_seq=last)
                finished = run.status in ("done", "failed")
            for event in batch:
                last = event.seq
                yield event
                if event.name in TERMINAL_EVENTS:
                    return
            if finished and not batch:
                return
            if not batch:
                await self.notifier.wait(run_id, timeout=1.0)

    async def audit(self, run_id: str, stage: str, attempt: int, payload: dict[str, Any]) -> None:
        async with self.sessionmaker() as session, session.begin():
            await runs_repo.append_audit(session=session, run_id=run_id, stage=stage, attempt=attempt, payload=payload)

    async def store(self, run_id: str, candidate: Report) -> None:
        """The artifact, the run's status and `complete`, in one transaction."""
        lock = self._locks.setdefault(run_id, asyncio.Lock())
        async with lock:
            async with self.sessionmaker() as session, session.begin():
                artifact = await runs_repo.add_artifact_version(
                    session=session,
                    run_id=run_id,
                    report=candidate.model_dump(mode="json"),
                    markdown=render_markdown(candidate),
                )
                await runs_repo.set_run_status(
                    session=session,
                    run_id=run_id,
                    status="done",
                    outcome=candidate.outcome,
                    metrics=dict(candidate.metrics),
                )
                complete = Complete(
                    outcome=candidate.outcome,
                    version=artifact.version,
                    report=candidate.model_dump(mode="json"),
                    metrics=candidate.metrics,
                )
                await runs_repo.append_event(
                    session=session, run_id=run_id, name=complete.name, payload=complete.payload()
                )
        await self.notifier.notify(run_id)
        self._locks.pop(run_id, None)

    async def fail(self, run_id: str, message: str, *, detail: str | None = None) -> None:
        """The run ends without an artifact: ``message`` is its error (a stable code or sentence), ``detail``
        what a reader needs to understand it."""
        lock = self._locks.setdefault(run_id, asyncio.Lock())
        failed = RunFailed(message=message, detail=detail or None)
        async with lock:
            async with self.sessionmaker() as session, session.begin():
                await runs_repo.set_run_status(session=session, run_id=run_id, status="failed", error=message)
                await runs_repo.append_event(session=session, run_id=run_id, name=failed.name, payload=failed.payload())
        await self.notifier.notify(run_id)
        self._locks.pop(run_id, None)
