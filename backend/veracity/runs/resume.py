"""Resume, not just fail: a run whose executor died (its lease lapsed) is taken over by the process whose sweep finds
it and continued from its last checkpoint — the graph's state after its last completed super-step, saved in the
run's own database under ``thread_id = run_id`` (``db/checkpoints.py``). ``graph.ainvoke(None, config)`` re-runs
only what had not completed: a node that finished is not run again (its events are not emitted again, its model
calls not paid again), while the step that was in flight runs again from its start (in a fan-out, only the branches
whose writes were not saved). Events continue from the stored maximum, under the new owner's fence.

The take-over is one conditional update (``runs_repo.claim_stale``: still active, still stale, resumed fewer than
``max_resumes`` times; bumps the generation, counts the resume), so two sweeps resume a run once. A run with no
checkpoint yet (its process died before the first step completed) starts again from the beginning, without a
second ``run_started``. A run that cannot be resumed — resumed too often already, its checkpoint unreadable, its
template unknown here, or found by a process that keeps no checkpoints — ends with one ``error`` event saying so.
A run's checkpoints are deleted once it has ended."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity import messages
from veracity.db import runs_repo
from veracity.db.failures import bounded
from veracity.db.models import ResearchRun
from veracity.errors import BadInput
from veracity.runs.journal import Journal
from veracity.settings import Settings
from veracity.specs.models import Spec
from veracity.specs.registry import SpecRegistry

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Resumption:
    """How a taken-over run goes on."""

    from_checkpoint: bool
    """True: from its last checkpoint (the graph is invoked with no input); False: from the beginning."""
    announced: bool
    """Its ``run_started`` is stored already (not emitted again)."""


Launch = Callable[[ResearchRun, Spec, Resumption], None]
"""Starts executing a run this process has just claimed (the service's task, renewed by its upkeep)."""


def thread_config(run_id: str) -> RunnableConfig:
    """The graph's config for a run: its checkpoints are kept under the run's ID."""
    return {"configurable": {"thread_id": run_id}}


def checkpointer_of(graph: CompiledStateGraph[Any, Any, Any, Any]) -> BaseCheckpointSaver[Any] | None:
    saver = graph.checkpointer
    return saver if isinstance(saver, BaseCheckpointSaver) else None


def _reason(exc: BaseException) -> str:
    """An exception as one line a user may read (a driver's first line; never the statement after it)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return bounded(f"{type(exc).__name__}: {first}" if first else type(exc).__name__, 200)


class Resumer:
    """Takes over the stale runs a sweep finds (``take_over``) and deletes an ended run's checkpoints (``forget``).
    ``launch`` executes a run once this process has claimed it."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        settings: Settings,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        journal: Journal,
        registry: SpecRegistry,
        owner: str,
        launch: Launch,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.settings = settings
        self.checkpointer = checkpointer_of(graph)
        self.journal = journal
        self.registry = registry
        self.owner = owner
        self.launch = launch

    async def take_over(self, run_id: str, stale_before: datetime) -> bool:
        """A stale run another executor left: resume it here, or end it saying why it cannot be. True when this
        call did either; False when the run was no longer stale (renewed, ended, or taken by another sweep)."""
        async with self.sessionmaker() as session:
            run = await runs_repo.get_run(session=session, run_id=run_id)
        if run is None or run.status not in runs_repo.ACTIVE:
            return False
        limit = self.settings.limits.max_resumes
        if self.checkpointer is None:
            return await self._give_up(run_id, messages.RESUME_NO_CHECKPOINTS, stale_before)
        if run.resumes >= limit:
            spent = messages.RESUMES_SPENT.format(resumes=run.resumes) if limit else messages.RESUME_OFF
            return await self._give_up(run_id, spent, stale_before)
        async with runs_repo.run_transaction(self.sessionmaker, self.settings.limits.run_lease_seconds) as session:
            fence = await runs_repo.claim_stale(
                session=session, run_id=run_id, owner=self.owner, stale_before=stale_before, max_resumes=limit
            )
            if fence is None:
                return False
            announced = await runs_repo.has_event(session=session, run_id=run_id, name="run_started")
        self.journal.hold(fence)
        try:
            spec = self.registry.get(run.template_id)
        except BadInput:
            return await self._end(run_id, messages.RESUME_TEMPLATE_UNKNOWN.format(template=run.template_id))
        try:
            saved = await self.checkpointer.aget_tuple(thread_config(run_id))
        except Exception as exc:  # whatever stops the checkpoint being read is the reason the run cannot resume
            logger.warning("run %s: its checkpoint could not be read", run_id, exc_info=True)
            return await self._end(run_id, messages.RESUME_CHECKPOINT_UNREADABLE.format(error=_reason(exc)))
        logger.warning(
            "run %s: its executor stopped; resumed here (%s, resume %d of at most %d)",
            run_id,
            f"from step {saved.metadata.get('step')}" if saved is not None else "from the beginning",
            run.resumes + 1,
            limit,
        )
        self.launch(run, spec, Resumption(from_checkpoint=saved is not None, announced=announced))
        return True

    async def forget(self, run_id: str) -> None:
        """Delete the checkpoints of a run that has ended (kept while it is active: another process may resume it)."""
        if self.checkpointer is None:
            return
        async with self.sessionmaker() as session:
            run = await runs_repo.get_run(session=session, run_id=run_id)
        if run is not None and run.status in runs_repo.ACTIVE:
            return  # another executor holds it now
        try:
            await self.checkpointer.adelete_thread(run_id)
        except Exception:  # only space is lost; the run itself has ended
            logger.warning("run %s: its checkpoints could not be deleted", run_id, exc_info=True)

    async def _give_up(self, run_id: str, reason: str, stale_before: datetime) -> bool:
        """End a stale run that will not be resumed (conditional: once, however many sweeps race)."""
        message = messages.RUN_NOT_RESUMED.format(reason=reason)
        if not await self.journal.sweep(run_id, message, stale_before=stale_before):
            return False
        await self.forget(run_id)
        return True

    async def _end(self, run_id: str, reason: str) -> bool:
        """End a run this process has claimed but cannot resume."""
        await self.journal.fail(run_id, messages.RUN_NOT_RESUMED.format(reason=reason))
        await self.forget(run_id)
        return True
