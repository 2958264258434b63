"""The composition root: one place that assembles a Veracity process — the database (migrated), the bundled corpora,
the research graph, the templates, the semantic model, the model set and the run service — for the web server, the
CLI, the evals and the benchmarks alike, and takes it down again in the right order. A caller takes the parts it
needs from here (the web hands each request only those), not from the run service. The process's one feed
(``runs/feed.py``: one reader per followed run, one PostgreSQL listener) is built here and shared by every service.

    async with open_runtime(settings) as runtime:
        run_id = await runtime.service.start(question=..., template="answer")

``serve=True`` adds what a long-running server does and a command does not: the default Wikipedia corpus and its
vectors when the settings ask for them, the warm-up of what runs load on first use (``runs/warmup.py``: before the
server listens, so the first run is as fast as any other), runs whose process died taken over (resumed,
``runs/resume.py``), and the lease upkeep with its sweeps. On PostgreSQL it also sends the service's runs to the
queue (``runs/queue.py``) and, unless ``VERACITY_WORKER__EMBEDDED=false``, runs a worker on it here;
``worker=True`` (``veracity worker``) always runs one. A queue-only web process (``VERACITY_WORKER__EMBEDDED=false``)
executes no run, so it takes none over either (the workers resume them) and warms nothing of them. On SQLite there
is no queue: the service executes runs where they start, as a command's does everywhere, and the process's writers
(the engine's sessions and the checkpointer) queue for the file's write lock at one gate, requests before runs
(``db/write_gate.py``).
The graph's checkpointer (``db/checkpoints.py``) lives as long as the runtime. The service is built on first use, so
a command that never starts a run (``ingest``, ``search``) never builds the model clients.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from langgraph.graph.state import CompiledStateGraph
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from veracity.corpus.bundled import ensure_bundled_corpora
from veracity.corpus.wiki import ensure_wiki_corpus
from veracity.db.checkpoints import open_checkpointer
from veracity.db.engine import is_postgresql, make_engine, make_sessionmaker, startup_lock
from veracity.db.migrate import upgrade
from veracity.db.write_gate import write_gate
from veracity.graph.builder import build_graph
from veracity.graph.serde import state_serializer
from veracity.runs.feed import RunFeed
from veracity.runs.model_set import ModelSet, build_models
from veracity.runs.providers import Providers
from veracity.runs.queue import run_queue
from veracity.runs.service import RunService
from veracity.runs.warmup import warm_up
from veracity.runs.worker import Worker
from veracity.semantic.model import Semantics, process_semantics
from veracity.semantic.vectors import ensure_vectors
from veracity.settings import Settings
from veracity.specs.registry import SpecRegistry

logger = logging.getLogger(__name__)


@dataclass
class Runtime:
    """One process's assembled parts. ``service`` is the run service every caller shares (built on first use);
    ``service_for`` builds another over the same parts with its own template registry."""

    settings: Settings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    graph: CompiledStateGraph[Any, Any, Any, Any]
    feed: RunFeed
    models: ModelSet | None = None
    _service: RunService | None = field(default=None, repr=False)
    _extra: list[RunService] = field(default_factory=list, repr=False)
    worker: Worker | None = None
    """The worker this process runs on the queue (PostgreSQL: ``veracity worker``, or embedded in the server)."""
    _worker_task: asyncio.Task[None] | None = field(default=None, repr=False)
    _worker_stop: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @property
    def service(self) -> RunService:
        if self._service is None:
            self._service = RunService.from_settings(
                self.settings,
                self.sessionmaker,
                self._models(),
                registry=self.registry,
                graph=self.graph,
                feed=self.feed,
            )
        return self._service

    @cached_property
    def registry(self) -> SpecRegistry:
        """The bundled templates, the ones ``service`` runs (loaded on first use)."""
        return SpecRegistry.load()

    @property
    def semantics(self) -> Semantics:
        """The process's semantic model (or why there is none): the one its services run with."""
        return process_semantics(self.settings.semantic.enabled)

    def providers(self) -> Providers:
        """A run's providers as ``service`` hands them to each run: the model set's models, the offline composer
        and judge for roles without one."""
        return self._models().providers()

    def _models(self) -> ModelSet:
        if self.models is None:
            self.models = build_models(self.settings)
        return self.models

    def service_for(self, *, registry: SpecRegistry) -> RunService:
        """Another service over the same parts — database, graph, search, ranker, web, semantic model, model
        providers — with its own template registry (an eval case's template, changed for that case)."""
        base = self.service
        service = RunService(
            sessionmaker=self.sessionmaker,
            registry=registry,
            settings=self.settings,
            graph=self.graph,
            search=base.search,
            feed=self.feed,
            providers=base.providers,
            redraft_graph=base.redraft_graph,
            web=base.web,
            ranker=base.ranker,
            semantics=base.semantics,
        )
        self._extra.append(service)
        return service

    def start_worker(self) -> Worker:
        """Take runs off the queue in this process until ``close``."""
        self.worker = Worker(self.service)
        self._worker_task = asyncio.create_task(self.worker.run(self._worker_stop), name="run-worker")
        return self.worker

    async def wait_worker(self) -> None:
        """Until the worker has stopped (``close``, or a signal the caller turned into ``close``)."""
        if self._worker_task is not None:
            await asyncio.shield(self._worker_task)

    async def close(self, timeout: float = 30.0) -> None:
        """Stop the worker (no new runs; its runs finish within its shutdown bound), let the services' runs finish
        (up to ``timeout``; the rest are cancelled and recorded as interrupted) and stop their upkeep, then end the
        feed (its readers, its listener), then close the model clients, then dispose of the engine — each step even
        when an earlier one fails."""
        try:
            try:
                if self._worker_task is not None:
                    self._worker_stop.set()
                    if timeout == 0:
                        self._worker_task.cancel()
                    await asyncio.wait([self._worker_task])
                for service in [*self._extra, *([self._service] if self._service is not None else [])]:
                    await service.shutdown(timeout)
            finally:
                await self.feed.close()
        finally:
            try:
                if self.models is not None:
                    await self.models.aclose()
            finally:
                await self.engine.dispose()


@asynccontextmanager
async def open_runtime(
    settings: Settings,
    *,
    migrate: bool = True,
    serve: bool = False,
    worker: bool = False,
    models: ModelSet | None = None,
) -> AsyncIterator[Runtime]:
    """The assembled process for ``settings`` (``models``: a model set to use instead of the settings' own, closed
    with the runtime; ``worker``: a worker process, which implies ``serve``). Leaving normally lets running runs
    finish; leaving on an error or a cancellation (Ctrl-C) cancels them at once, each recorded as interrupted."""
    serve = serve or worker
    runtime: Runtime | None = None
    clean = False
    checkpoints = AsyncExitStack()
    engine: AsyncEngine | None = None
    try:
        engine = make_engine(settings.database.url, echo=settings.database.echo)
        gate = write_gate(engine)  # SQLite: this process's writers queue for the file's lock, requests first
        sessionmaker = make_sessionmaker(engine)
        async with startup_lock(settings.database.url):
            if migrate:
                await asyncio.to_thread(upgrade, settings.database.url)
            # The graph's checkpoints, in the run's database: another process can resume a run whose process died.
            saver = await checkpoints.enter_async_context(
                open_checkpointer(
                    settings.database.url,
                    serde=state_serializer(),
                    gate=gate,
                    idle_seconds=settings.limits.run_lease_seconds,
                )
            )
            runtime = Runtime(
                settings, engine, sessionmaker, build_graph(saver), RunFeed(sessionmaker, settings), models
            )
            if serve and settings.corpus.autoload_wiki:
                report = await ensure_wiki_corpus(
                    sessionmaker=runtime.sessionmaker, chunk_chars=settings.corpus.chunk_chars
                )
                if report is not None:
                    logger.info("default corpus loaded: %s", report.as_dict())
            await ensure_bundled_corpora(sessionmaker=runtime.sessionmaker, chunk_chars=settings.corpus.chunk_chars)
            model = runtime.semantics.model if serve else None
            if settings.corpus.autoload_wiki and model is not None:
                # Before serving, not at the first search (the default corpus's vectors ship with the package; a
                # passage whose text changed is embedded here).
                await ensure_vectors(sessionmaker=runtime.sessionmaker, model=model, corpus="wiki")
        if serve:
            service = runtime.service
            service.queue = run_queue(settings)
            # A queue-only web process (PostgreSQL, VERACITY_WORKER__EMBEDDED=false) executes no run, so it takes
            # none over either: a run whose worker died is resumed by a worker (its sweep, or its job picked again).
            executes = service.queue is None or worker or settings.worker.embedded
            if executes:
                # Before listening and before taking any run over: the first run is as fast as any later one.
                await warm_up(service)
                taken = await service.recover_interrupted()
                if taken:
                    logger.warning("took over %d run(s) whose process died", len(taken))
                service.start_upkeep()  # renew this process's runs; sweep for runs whose process died (resume them)
            if is_postgresql(settings.database.url) and (worker or settings.worker.embedded):
                runtime.start_worker()
        yield runtime
        clean = True
    finally:
        try:
            if runtime is not None:
                await runtime.close(timeout=30.0 if clean else 0.0)
            else:  # it failed before the runtime was whole (a migration, the checkpointer)
                if models is not None:
                    await models.aclose()
                if engine is not None:
                    await engine.dispose()
        finally:
            await checkpoints.aclose()  # after the runs that write checkpoints have ended
