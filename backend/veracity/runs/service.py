"""Starting and executing runs. A run is an asyncio task owned by the service, not by any request:
closing the browser tab never stops or loses it. Every event is persisted before anyone sees it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from langgraph.graph.state import CompiledStateGraph
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity import messages
from veracity.compose.extractive import ExtractiveComposer
from veracity.db import corpus_repo, runs_repo
from veracity.db.models import RunEvent
from veracity.domain import WEB_SOURCE, Report
from veracity.errors import BadInput, NotFound
from veracity.graph.builder import build_graph, build_redraft_graph
from veracity.graph.context import Context, RetrievalCoordinator
from veracity.guards import gate
from veracity.guards.judge import make_judge
from veracity.models.usage import UsageMeter, current_listener, current_meter
from veracity.ports import Composer, GroundingJudge, HitRanker, Planner, Reviewer, SearchProvider
from veracity.runs.events import TERMINAL_EVENTS
from veracity.runs.floor import floor_report, routed_report
from veracity.runs.notifier import RunNotifier
from veracity.runs.report import render_markdown, shipped_report
from veracity.search.providers import WebRetrieval, hit_ranker, local_search, web_retrieval
from veracity.semantic.model import Semantics, process_semantics
from veracity.settings import Settings
from veracity.specs.models import Spec
from veracity.specs.registry import SpecRegistry

if TYPE_CHECKING:
    from veracity.runs.model_set import ModelSet

logger = logging.getLogger(__name__)

RUN_ID_LEN = 32


@dataclass
class Providers:
    """Who drafts, who judges and who reviews one run. Offline by default: extractive composer, lexical judge,
    the rule-based reviewer alone."""

    composer: Composer = field(default_factory=ExtractiveComposer)
    judge: GroundingJudge = field(default_factory=make_judge)
    reviewer: Reviewer | None = None
    planner: Planner | None = None


class RunService:
    def __init__(
        self,
        *,
        sessionmaker: async_sessionmaker[AsyncSession],
        registry: SpecRegistry,
        settings: Settings,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        search: SearchProvider,
        notifier: RunNotifier | None = None,
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
        self.notifier = notifier or RunNotifier()
        self.providers = providers or Providers
        self.redraft_graph = redraft_graph or build_redraft_graph()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._upkeep: asyncio.Task[None] | None = None
        """Renews the leases of this process's runs (and sweeps for dead ones) while any process runs here."""

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        models: ModelSet | None = None,
        *,
        registry: SpecRegistry | None = None,
        graph: CompiledStateGraph[Any, Any, Any, Any] | None = None,
    ) -> RunService:
        """The service a process runs (the server, the CLI): the bundled templates, the research graph, the
        process's semantic model, local search through the in-memory index (hybrid with the model), the open web,
        the settings' ranker, and ``models``' providers (the offline ones without)."""
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
        )

    # ---- validation -------------------------------------------------------------------------------
    async def validate(self, *, question: str, template: str, corpus: str | None) -> tuple[str, Spec, str]:
        question = (question or "").strip()
        if not question:
            raise BadInput(messages.QUESTION_EMPTY)
        limit = self.settings.limits.max_question_chars
        if len(question) > limit:
            raise BadInput(messages.QUESTION_TOO_LONG.format(length=len(question), limit=limit))
        spec = self.registry.get(template)
        default = WEB_SOURCE if spec.default_source.kind == "web" else spec.default_source.corpus
        corpus = (corpus or "").strip() or default or self.settings.corpus.default
        if corpus == WEB_SOURCE:
            if self.web is None:
                raise BadInput(messages.WEB_UNAVAILABLE)
            return question, spec, corpus
        async with self.sessionmaker() as session:
            if not await corpus_repo.corpus_exists(session=session, corpus=corpus):
                # Only the error path pays for listing the corpora.
                known = ", ".join(sorted(await corpus_repo.corpus_counts(session=session))) or "none"
                raise BadInput(messages.CORPUS_UNKNOWN.format(corpus=corpus, known=known))
        return question, spec, corpus

    # ---- lifecycle --------------------------------------------------------------------------------
    async def start(
        self, *, question: str, template: str, corpus: str | None = None, providers: Providers | None = None
    ) -> str:
        """Validate, persist the run, and start executing it in the background. Returns the run ID."""
        started = time.perf_counter()
        question, spec, corpus = await self.validate(question=question, template=template, corpus=corpus)
        run_id = uuid.uuid4().hex
        async with self.sessionmaker() as session, session.begin():
            await runs_repo.create_run(
                session=session,
                run_id=run_id,
                template_id=spec.id,
                question=question,
                corpus=corpus,
                budgets=spec.budgets.model_dump(),
            )
        task = asyncio.create_task(
            self.execute(run_id, spec, question, corpus, started, providers), name=f"run-{run_id}"
        )
        self._tasks[run_id] = task
        self.start_upkeep(until_idle=True)
        task.add_done_callback(lambda _t: self._tasks.pop(run_id, None))
        return run_id

    async def wait(self, run_id: str) -> None:
        task = self._tasks.get(run_id)
        if task is not None:
            await asyncio.shield(task)

    async def shutdown(self, timeout: float = 30.0) -> None:
        """Let running runs finish (bounded; what is still running then is cancelled and marked interrupted), then
        stop renewing leases."""
        if self._tasks:
            await asyncio.wait(list(self._tasks.values()), timeout=timeout)
        await self.stop_upkeep()

    async def recover_interrupted(self) -> list[str]:
        """Runs left pending/running by a process that died get an ``error`` event and status failed.

        A run is another process's, alive, while its lease is fresh: every process renews the runs it executes
        every third of ``run_lease_seconds`` (``keep_leases``, which every ``start`` starts). Only runs not
        renewed for a whole lease are taken as interrupted, so starting a second process on the same database
        never fails the first's runs."""
        cutoff = datetime.now(UTC) - timedelta(seconds=self.settings.limits.run_lease_seconds)
        async with self.sessionmaker() as session:
            unfinished = await runs_repo.unfinished_runs(session=session, stale_before=cutoff)
            stale = [r.id for r in unfinished if r.id not in self._tasks]
        for run_id in stale:
            await self._fail(run_id, messages.RUN_INTERRUPTED)
        return stale

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
        """Renew this process's runs every third of a lease; sweep for dead ones every lease; until cancelled,
        or, with ``until_idle``, until this process has no run left."""
        lease = self.settings.limits.run_lease_seconds
        beats = 0
        while True:
            await asyncio.sleep(lease / 3)
            if until_idle and not self._tasks:
                return
            beats += 1
            try:
                async with self.sessionmaker() as session, session.begin():
                    await runs_repo.renew_lease(session=session, run_ids=list(self._tasks))
                if beats % 3 == 0:
                    swept = await self.recover_interrupted()
                    if swept:
                        logger.warning("marked %d interrupted run(s) as failed: %s", len(swept), ", ".join(swept))
            except SQLAlchemyError as exc:  # the database is away for a moment: try again next beat
                logger.warning("run lease upkeep failed: %s", exc)

    # ---- events -----------------------------------------------------------------------------------
    async def emit(self, run_id: str, name: str, payload: dict[str, Any]) -> None:
        """Persist one event, then wake its readers. The run's lease is not touched here: ``keep_leases`` renews
        it (every run is begun by ``start``, which starts that upkeep), so the hot path pays one INSERT only."""
        lock = self._locks.setdefault(run_id, asyncio.Lock())
        async with lock:
            async with self.sessionmaker() as session, session.begin():
                await runs_repo.append_event(session=session, run_id=run_id, name=name, payload=payload)
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

    # ---- execution --------------------------------------------------------------------------------
    async def audit(self, run_id: str, stage: str, attempt: int, payload: dict[str, Any]) -> None:
        async with self.sessionmaker() as session, session.begin():
            await runs_repo.append_audit(session=session, run_id=run_id, stage=stage, attempt=attempt, payload=payload)

    async def execute(
        self,
        run_id: str,
        spec: Spec,
        question: str,
        corpus: str,
        started: float,
        providers: Providers | None = None,
    ) -> None:
        emit_started = time.perf_counter()
        providers = providers or self.providers()
        try:
            await self.emit(
                run_id,
                "run_started",
                {
                    "run_id": run_id,
                    "template": spec.id,
                    "question": question,
                    "corpus": corpus,
                    "sections": [s.id for s in spec.sections],
                    "budgets": spec.budgets.model_dump(),
                    "composer": providers.composer.name,
                },
            )
            first_event_ms = (time.perf_counter() - started) * 1000
            async with self.sessionmaker() as session, session.begin():
                await runs_repo.set_run_status(session=session, run_id=run_id, status="running")

            async def emit(name: str, payload: dict[str, Any]) -> None:
                await self.emit(run_id, name, payload)

            async def audit(stage: str, attempt: int, payload: dict[str, Any]) -> None:
                await self.audit(run_id, stage, attempt, payload)

            web = self.web if corpus == WEB_SOURCE else None
            budgets = spec.budgets
            meter = UsageMeter(
                max_calls=budgets.model_calls,
                max_prompt_tokens=budgets.prompt_tokens,
                max_completion_tokens=budgets.completion_tokens,
                max_seconds=budgets.wall_seconds,
            )
            current_meter.set(meter)  # this task's context: every model call of the run is counted

            async def on_call(row: dict[str, Any]) -> None:
                await self.emit(run_id, "model_call", row)

            current_listener.set(on_call)
            context = Context(
                spec=spec,
                search=web.search if web else self.search,
                fetcher=web.pages if web else None,
                ranker=self.ranker,
                pages_per_query=self.settings.search.pages_per_query,
                emit=emit,
                limits=self.settings.limits,
                coordinator=RetrievalCoordinator(
                    max_pages=spec.budgets.max_pages, io_concurrency=self.settings.fetch.concurrency
                ),
                composer=providers.composer,
                reviewer=providers.reviewer,
                planner=providers.planner,
                judge=providers.judge,
                audit=audit,
                semantic=self.semantics.model,
                max_candidates=self.settings.semantic.max_candidates,
            )
            state = await self.graph.ainvoke(
                {"run_id": run_id, "question": question, "corpus": corpus},
                context=context,  # type: ignore[call-overload]  # langgraph's overloads do not admit a context type
            )
            await self._gate_and_store(
                run_id, spec, question, corpus, state, context, started, emit_started, first_event_ms
            )
        except asyncio.CancelledError:
            await asyncio.shield(self._fail(run_id, messages.RUN_INTERRUPTED))
            raise
        except Exception as exc:  # the run's edge: any failure becomes a stored `error` event, never a lost run
            logger.exception("run %s failed", run_id)
            await self._fail(run_id, messages.RUN_FAILED.format(reason=f"{type(exc).__name__}: {exc}"))

    async def _gate_and_store(
        self,
        run_id: str,
        spec: Spec,
        question: str,
        corpus: str,
        state: dict[str, Any],
        context: Context,
        started: float,
        emit_started: float,
        first_event_ms: float,
    ) -> None:
        """Outside the graph: the floor replaces anything not shippable, then the pre-persistence gate. A gate
        rejection of a draft re-enters at ``compose`` told what the gate found while the template's drafting
        attempts last (every draft counts against them), and falls to the floor after; a rejected floor is retried
        as the bare note; the third rejection ends the run with ``store_artifact_loop_abort``."""
        rejections = 0
        bare_floor = False
        while True:
            report = self._finish(run_id, spec, question, corpus, state, bare_floor=bare_floor)
            report.metrics = self._metrics(state, started, emit_started, first_event_ms)
            problems = gate.check(report, spec)
            attempt = state.get("attempt", 0)
            await self.audit(
                run_id,
                "gate",
                attempt,
                {
                    "outcome": report.outcome,
                    "passed": not problems,
                    "problems": [p.model_dump(exclude_none=True) for p in problems],
                },
            )
            if not problems:
                break
            rejections += 1
            logger.warning("run %s gate rejected the %s report (%d)", run_id, report.outcome, rejections)
            await self.emit(
                run_id,
                "gate_rejected",
                {"outcome": report.outcome, "rejection": rejections, "problems": [p.detail for p in problems]},
            )
            if rejections >= gate.MAX_REJECTIONS:
                await self.audit(run_id, "abort", attempt, {"reason": gate.LOOP_ABORT, "rejections": rejections})
                detail = messages.LOOP_ABORT_DETAIL.format(
                    rejections=rejections, problems="; ".join(p.detail for p in problems)
                )
                await self._fail(run_id, gate.LOOP_ABORT, detail=detail)
                return
            if report.outcome == "shipped" and gate.may_redraft(spec, attempt):
                state = await self.redraft_graph.ainvoke(
                    {**state, "violations": problems},
                    context=context,  # type: ignore[call-overload]
                )
            elif report.outcome == "shipped":
                # The template's drafting attempts are spent (every draft counts, the gate's included): the floor.
                state = {**state, "decision": "fail_safe", "decision_reason": gate.exhausted_reason(attempt, problems)}
            else:
                bare_floor = True
        await self.audit(
            run_id,
            "shipped" if report.outcome == "shipped" else "outcome",
            state.get("attempt", 0),
            {
                "outcome": report.outcome,
                "reason": report.outcome_reason,
                "claims": sum(len(s.claims) for s in report.sections),
                "needs_human_reason": report.needs_human_reason,
                "confidence": report.confidence,
            },
        )
        await self._store(run_id, report)

    def _finish(
        self, run_id: str, spec: Spec, question: str, corpus: str, state: dict[str, Any], *, bare_floor: bool = False
    ) -> Report:
        """Outside the graph: only a ``ship`` decision ships the draft; everything else gets its honest answer."""
        if state.get("route", "proceed") != "proceed":
            return routed_report(
                run_id=run_id,
                spec=spec,
                question=question,
                corpus=corpus,
                route=state["route"],
                reason=state.get("route_reason", ""),
                domain=state.get("route_domain"),
            )
        decision = state.get("decision")
        if decision == "ship" and not bare_floor:
            return shipped_report(
                run_id=run_id,
                spec=spec,
                question=question,
                corpus=corpus,
                draft=state["draft"],
                evidence=state.get("evidence", []),
                composed=state.get("composed"),
                language=state.get("language"),
                confidence=state.get("confidence"),
            )
        if decision == "crisis":
            return routed_report(
                run_id=run_id,
                spec=spec,
                question=question,
                corpus=corpus,
                route="crisis",
                reason=state.get("decision_reason", "the reviewer flagged a crisis"),
            )
        return floor_report(
            run_id=run_id,
            spec=spec,
            question=question,
            corpus=corpus,
            evidence=[] if bare_floor else state.get("evidence", []),
            reason=state.get("decision_reason", "not shippable")
            + (" (the evidence digest was withheld: the gate rejected it)" if bare_floor else ""),
            outcome="handoff" if decision == "handoff" and not bare_floor else "fallback",
            needs_human_reason=state.get("needs_human_reason"),
            language=state.get("language"),
        )

    async def _store(self, run_id: str, candidate: Report) -> None:
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
                await runs_repo.append_event(
                    session=session,
                    run_id=run_id,
                    name="complete",
                    payload={
                        "outcome": candidate.outcome,
                        "version": artifact.version,
                        "report": candidate.model_dump(mode="json"),
                        "metrics": candidate.metrics,
                    },
                )
        await self.notifier.notify(run_id)
        self._locks.pop(run_id, None)

    async def _fail(self, run_id: str, message: str, *, detail: str | None = None) -> None:
        """The run ends without an artifact: ``message`` is its error (a stable code or sentence), ``detail``
        what a reader needs to understand it."""
        lock = self._locks.setdefault(run_id, asyncio.Lock())
        payload = {"message": message, **({"detail": detail} if detail else {})}
        async with lock:
            async with self.sessionmaker() as session, session.begin():
                await runs_repo.set_run_status(session=session, run_id=run_id, status="failed", error=message)
                await runs_repo.append_event(session=session, run_id=run_id, name="error", payload=payload)
        await self.notifier.notify(run_id)
        self._locks.pop(run_id, None)

    @staticmethod
    def _metrics(state: dict[str, Any], started: float, emit_started: float, first_event_ms: float) -> dict[str, Any]:
        stats = state.get("branch_stats", [])
        draft = state.get("draft", [])
        return {
            "elapsed_ms": round((time.perf_counter() - started) * 1000, 1),
            "first_event_ms": round(first_event_ms, 1),
            "subtasks": len(state.get("subtasks", [])),
            "queries": sum(s.queries for s in stats),
            "pages": sum(s.pages for s in stats),
            "failed_branches": sum(1 for s in stats if s.status == "failed"),
            "evidences": len(state.get("evidence", [])),
            "claims": sum(len(s.claims) for s in draft),
            "attempts": state.get("attempt", 0),
            "confidence": state.get("confidence"),
            "model": meter.totals() if (meter := current_meter.get()) is not None else None,
        }
