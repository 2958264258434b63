"""Starting and executing runs. A run is an asyncio task owned by the service, not by any request:
closing the browser tab never stops or loses it. The service validates and starts runs and drives the graph; the
jobs around that are their own modules: ``journal`` (every event persisted before anyone sees it, the audit trail,
the artifact or the error that ends a run), ``leases`` (which process owns a run; sweeping for dead ones) and
``finish`` (the floor, the gate and storing, outside the graph), ``context`` (what a run's graph executes with) and
``resume`` (taking over and resuming a run whose process died)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from langgraph.graph.state import CompiledStateGraph
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity import messages
from veracity.db import runs_repo
from veracity.db.failures import public_error
from veracity.db.models import ResearchRun, RunEvent
from veracity.db.write_gate import background_writes
from veracity.errors import Conflict, LeaseLost, NotFound, RunCancelled
from veracity.events import Event
from veracity.graph.builder import build_graph, build_redraft_graph
from veracity.graph.state import GraphOutput, RunInput
from veracity.ports import HitRanker, SearchProvider
from veracity.runs.context import run_context, run_started
from veracity.runs.feed import RunFeed
from veracity.runs.finish import gate_and_store
from veracity.runs.intake import validate_request
from veracity.runs.journal import Journal
from veracity.runs.leases import Leases
from veracity.runs.providers import Providers
from veracity.runs.queue import RunQueue
from veracity.runs.resume import Resumer, Resumption, checkpointer_of, thread_config
from veracity.runs.thread import load_thread
from veracity.search.providers import WebRetrieval, hit_ranker, local_search, web_retrieval
from veracity.semantic.model import Semantics, process_semantics
from veracity.settings import Settings
from veracity.specs.models import Spec
from veracity.specs.registry import SpecRegistry

if TYPE_CHECKING:
    from veracity.runs.model_set import ModelSet

logger = logging.getLogger(__name__)

RUN_ID_LEN = 32


class RunService:
    def __init__(
        self,
        *,
        sessionmaker: async_sessionmaker[AsyncSession],
        registry: SpecRegistry,
        settings: Settings,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        search: SearchProvider,
        feed: RunFeed | None = None,
        providers: Callable[[], Providers] | None = None,
        redraft_graph: CompiledStateGraph[Any, Any, Any, Any] | None = None,
        web: WebRetrieval | None = None,
        ranker: HitRanker | None = None,
        semantics: Semantics | None = None,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.registry = registry
        self.settings = settings
        self.graph = graph
        self.search = search
        self.web = web
        """Web search and page fetching for runs over the open web (corpus ``web``); None = local corpora only."""
        self.ranker = ranker
        self.semantics = semantics or Semantics(None, "no semantic model was given to this service")
        """The semantic model (or why there is none): relevance, section assignment and the relevance check."""
        self._owns_feed = feed is None
        self.feed = feed or RunFeed(sessionmaker, settings)
        """How viewers follow runs in this process (the runtime's one, shared by its services)."""
        self.providers = providers or Providers
        self.redraft_graph = redraft_graph or build_redraft_graph()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        """Who this service is when it claims a run (host, process, and a nonce per service)."""
        self.journal = Journal(sessionmaker, self.feed, settings)
        self.queue: RunQueue | None = None
        """Where ``start`` sends runs for a worker; None = execute them here (set by the composition root)."""
        self.resumer = Resumer(sessionmaker, settings, graph, self.journal, registry, self.owner, self._resume)
        """Takes over runs whose process died (this process's sweeps find them) and resumes them here."""
        self.leases = Leases(sessionmaker, settings, self._tasks, self.journal, self.resumer.take_over)
        self._slots = asyncio.Semaphore(settings.worker.concurrency)
        """Runs executing at once here. More would not finish sooner (they share two cores, the GIL and SQLite's
        one writer) but would slow every page; the rest wait, pending, in the order they came."""

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        models: ModelSet | None = None,
        *,
        registry: SpecRegistry | None = None,
        graph: CompiledStateGraph[Any, Any, Any, Any] | None = None,
        feed: RunFeed | None = None,
    ) -> RunService:
        """The service a process runs (the server, the CLI): the bundled templates, the research graph, the
        process's semantic model, local search through the in-memory index (hybrid with the model), the open web,
        the settings' ranker, ``models``' providers (the offline ones without) and the process's ``feed`` (one of
        its own without)."""
        semantics = process_semantics(settings.semantic.enabled)
        return cls(
            sessionmaker=sessionmaker,
            registry=registry if registry is not None else SpecRegistry.load(),
            settings=settings,
            graph=graph if graph is not None else build_graph(),
            search=local_search(settings, sessionmaker, semantics.model),
            semantics=semantics,
            web=web_retrieval(settings, sessionmaker),
            ranker=hit_ranker(settings),
            providers=models.providers if models is not None else None,
            feed=feed,
        )

    # ---- lifecycle --------------------------------------------------------------------------------
    async def start(
        self,
        *,
        question: str,
        template: str,
        corpus: str | None = None,
        providers: Providers | None = None,
        rerun_of: str | None = None,
        user_id: int | None = None,
        reader: runs_repo.Visibility | None = None,
        parent_id: str | None = None,
        refresh_of: str | None = None,
    ) -> str:
        """Validate and persist the run (``rerun_of``: the run it re-runs; ``user_id``: whose run it is; ``reader``:
        whose corpora it may search, None: all; ``parent_id``: the run it follows up; ``refresh_of``: the run whose
        next version it writes), then queue it for a worker (with ``queue``; not a run given its own ``providers``,
        which exist only here) or start executing it here in the background. Returns the run ID."""
        started = time.perf_counter()
        question, spec, corpus = await validate_request(
            question=question,
            template=template,
            corpus=corpus,
            settings=self.settings,
            registry=self.registry,
            web=self.web is not None,
            sessionmaker=self.sessionmaker,
            reader=reader,
        )
        run_id = uuid.uuid4().hex
        queue = self.queue if providers is None else None
        async with self.sessionmaker() as session, session.begin():
            run = await runs_repo.create_run(
                session=session,
                run_id=run_id,
                template_id=spec.id,
                question=question,
                corpus=corpus,
                budgets=spec.budgets.model_dump(),
                owner=None if queue else self.owner,  # a queued run is claimed by the worker that takes it
                rerun_of=rerun_of,
                user_id=user_id,
                parent_id=parent_id,
                refresh_of=refresh_of,
            )
            if queue:
                await queue.enqueue(session=session, run_id=run_id)
                return run_id
            self.journal.hold(runs_repo.Fence(run_id=run_id, owner=self.owner, generation=run.lease_generation))
        self.launch(run_id, spec, question, corpus, started, providers)
        return run_id

    def launch(
        self,
        run_id: str,
        spec: Spec,
        question: str,
        corpus: str,
        started: float,
        providers: Providers | None = None,
    ) -> asyncio.Task[None]:
        """Execute a run this service holds (its fence in the journal) as a task of its own, its lease renewed."""
        return self._track(run_id, self.execute(run_id, spec, question, corpus, started, providers))

    def _resume(self, run: ResearchRun, spec: Spec, resumption: Resumption) -> None:
        """Execute a run this process has just taken over (``runs/resume.py``)."""
        started = time.perf_counter()
        self._track(run.id, self.execute(run.id, spec, run.question, run.corpus, started, resumption=resumption))

    def _track(self, run_id: str, execution: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Execute a run as this service's task, its lease renewed while it lasts."""
        task = asyncio.create_task(execution, name=f"run-{run_id}")
        self._tasks[run_id] = task
        self.start_upkeep(until_idle=True)
        task.add_done_callback(lambda _t: self._tasks.pop(run_id, None))
        return task

    async def cancel(self, run_id: str) -> ResearchRun:
        """Ask a run to stop, whichever process executes it (``Journal.cancel``)."""
        return await self.journal.cancel(run_id)

    async def rerun(self, run_id: str, user_id: int | None = None, reader: runs_repo.Visibility | None = None) -> str:
        """A new run of ``run_id``'s question, template and corpus, linked to it (``user_id``'s, searching what
        ``reader`` may); its ID."""
        async with self.sessionmaker() as session:
            run = await runs_repo.get_run(session=session, run_id=run_id)
        if run is None:
            raise NotFound(messages.RUN_UNKNOWN.format(run_id=run_id))
        return await self._again(run, rerun_of=run_id, user_id=user_id, reader=reader)

    async def follow_up(
        self, run_id: str, question: str, user_id: int | None = None, reader: runs_repo.Visibility | None = None
    ) -> str:
        """A new run asking ``question`` after ``run_id`` (same template and corpus), linked to it as its parent:
        its planner reads the parent's question and sections, its retrieval may reuse the parent's quotes."""
        run = await self._finished(run_id)
        return await self._again(run, question=question, parent_id=run_id, user_id=user_id, reader=reader)

    async def refresh(self, run_id: str) -> str:
        """Run ``run_id``'s question, template and corpus again as they are now; when that run ends its report
        becomes ``run_id``'s next artifact version. The refresh is the run owner's (it searches what they may, and
        they see it), whoever asked for it. ``Conflict`` while another refresh of it is under way."""
        run = await self._finished(run_id)
        async with self.sessionmaker() as session:
            busy = await runs_repo.active_refresh(session=session, run_id=run_id)
        if busy is not None:
            raise Conflict(messages.REFRESH_UNDER_WAY.format(run_id=run_id, refresh=busy))
        owner = None if run.user_id is None else runs_repo.Visibility(user_id=run.user_id, every=False)
        return await self._again(run, refresh_of=run_id, user_id=run.user_id, reader=owner)

    async def _again(self, run: ResearchRun, question: str | None = None, **links: Any) -> str:
        """A new run of ``run``'s template and corpus (its question, unless another is given), with ``links``."""
        return await self.start(
            question=run.question if question is None else question,
            template=run.template_id,
            corpus=run.corpus,
            **links,
        )

    async def _finished(self, run_id: str) -> ResearchRun:
        """``run_id`` if it has finished with a report and is no refresh; ``NotFound`` / ``Conflict`` otherwise."""
        async with self.sessionmaker() as session:
            run = await runs_repo.get_run(session=session, run_id=run_id)
            artifact = None if run is None else await runs_repo.latest_artifact(session=session, run_id=run_id)
        if run is None:
            raise NotFound(messages.RUN_UNKNOWN.format(run_id=run_id))
        if run.refresh_of is not None:
            raise Conflict(messages.REFRESH_OF_REFRESH.format(run_id=run_id, target=run.refresh_of))
        if run.status in runs_repo.ACTIVE or artifact is None:
            raise Conflict(messages.RUN_NOT_FINISHED.format(run_id=run_id, status=run.status))
        return run

    async def wait(self, run_id: str) -> None:
        task = self._tasks.get(run_id)
        if task is not None:
            await asyncio.wait([task])  # however it ended (a cancel by the lease upkeep included): never raises

    async def shutdown(self, timeout: float = 30.0) -> None:
        """Let running runs finish (bounded; what is still running then is cancelled and marked interrupted), then
        stop renewing leases."""
        if self._tasks:
            _, pending = await asyncio.wait(list(self._tasks.values()), timeout=timeout)
            for task in pending:
                task.cancel()  # execute() records the run as interrupted before the task ends
            if pending:
                await asyncio.wait(pending, timeout=10)
        await self.stop_upkeep()
        if self._owns_feed:
            await self.feed.close()

    # ---- the journal and the leases (runs/journal.py, runs/leases.py) ------------------------------------
    async def emit(self, run_id: str, event: Event) -> None:
        await self.journal.emit(run_id, event)

    def tail(self, run_id: str, after_seq: int = 0) -> AsyncIterator[RunEvent]:
        """Follow a run: its stored events after ``after_seq``, then live ones, until its terminal event."""
        return self.feed.follow(run_id, after_seq)

    async def recover_interrupted(self) -> list[str]:
        return await self.leases.recover_interrupted()

    def start_upkeep(self, *, until_idle: bool = False) -> None:
        self.leases.start_upkeep(until_idle=until_idle)

    async def stop_upkeep(self) -> None:
        await self.leases.stop_upkeep()

    # ---- execution --------------------------------------------------------------------------------
    async def execute(
        self,
        run_id: str,
        spec: Spec,
        question: str,
        corpus: str,
        started: float,
        providers: Providers | None = None,
        *,
        resumption: Resumption | None = None,
    ) -> None:
        """Execute a run held here: from the beginning, or (``resumption``) taken over from a process that died.
        It waits, pending, for one of the service's ``worker.concurrency`` slots first; its lease is renewed and a
        cancel or shutdown ends it while it waits, as while it runs."""
        background_writes()  # a run's writes wait behind any request's (SQLite: db/write_gate.py)
        held = True
        try:
            async with self._slots:
                await self._drive(run_id, spec, question, corpus, started, providers, resumption)
        except asyncio.CancelledError:
            # Stopped here: by a user's cancel the lease upkeep found, or because this process is shutting down.
            asked = False
            with contextlib.suppress(Exception):  # the database may be why: then it ends as interrupted
                asked = await asyncio.shield(self.journal.cancel_requested(run_id))
            await asyncio.shield(
                self.journal.fail(run_id, messages.RUN_CANCELLED if asked else messages.RUN_INTERRUPTED)
            )
            raise
        except RunCancelled:  # a user asked it to stop; its next write found out
            await asyncio.shield(self.journal.fail(run_id, messages.RUN_CANCELLED))
        except LeaseLost as exc:  # another executor or a sweep has the run now: write nothing more of it
            held = False
            logger.warning("run %s stopped here: %s", run_id, exc)
        except Exception as exc:  # the run's edge: any failure becomes a stored `error` event, never a lost run
            logger.exception("run %s failed", run_id)
            reason = public_error(exc, where=f"run {run_id}", connection_is_database=True)
            await asyncio.shield(self.journal.fail(run_id, messages.RUN_FAILED.format(reason=reason)))
        finally:
            self.journal.release(run_id)  # the claim ends with the task, however it ended: nothing renews it now
            if held:  # ended here (or not resumable): its checkpoints are no longer needed
                await asyncio.shield(self.resumer.forget(run_id))

    async def _drive(
        self,
        run_id: str,
        spec: Spec,
        question: str,
        corpus: str,
        started: float,
        providers: Providers | None,
        resumption: Resumption | None,
    ) -> None:
        """The run itself: announced, marked running, its graph executed, then the floor, the gate and storing."""
        emit_started = time.perf_counter()
        providers = providers or self.providers()
        if resumption is None or not resumption.announced:  # a run taken over was announced by its first process
            await self.emit(run_id, run_started(run_id, spec, question, corpus, providers))
        first_event_ms = (time.perf_counter() - started) * 1000
        async with runs_repo.run_transaction(self.sessionmaker, self.settings.limits.run_lease_seconds) as session:
            await runs_repo.set_run_status(
                session=session, run_id=run_id, status="running", fence=self.journal.fence(run_id)
            )
        async with self.sessionmaker() as session:
            thread = await load_thread(session=session, run_id=run_id)
        context = run_context(
            thread=thread,
            run_id=run_id,
            spec=spec,
            corpus=corpus,
            providers=providers,
            journal=self.journal,
            settings=self.settings,
            search=self.search,
            web=self.web,
            ranker=self.ranker,
            semantics=self.semantics,
        )
        resumed = resumption is not None and resumption.from_checkpoint
        checkpointed = checkpointer_of(self.graph) is not None
        output = await self.graph.ainvoke(
            None if resumed else RunInput(run_id=run_id, question=question, corpus=corpus),
            config=thread_config(run_id),
            context=context,
            # Each super-step's checkpoint is saved before the next step starts: a completed node never runs again.
            durability="sync" if checkpointed else None,
        )
        await gate_and_store(
            self.journal,
            self.redraft_graph,
            run_id,
            spec,
            question,
            corpus,
            GraphOutput.model_validate(output),  # parsed once: the run's ending reads fields, not keys
            context,
            started,
            emit_started,
            first_event_ms,
        )
