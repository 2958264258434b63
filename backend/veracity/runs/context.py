"""What one run's graph executes with: its :class:`Context` (the template, search, fetching, ranking, the model
providers, and how its events and audit entries are written — through the journal, fenced), and the usage meter
that counts and bounds its model calls. Built afresh for every execution of a run: when a run is resumed in another
process, this process's search, models and journal serve it. And how a run announces itself (``run_started``)."""

from __future__ import annotations

from typing import Any

from veracity.domain import WEB_SOURCE
from veracity.events import Event, ModelCall, RunStarted
from veracity.graph.context import Context, RetrievalCoordinator
from veracity.models.usage import UsageMeter, current_listener, current_meter
from veracity.ports import HitRanker, SearchProvider, Thread
from veracity.runs.journal import Journal
from veracity.runs.providers import Providers
from veracity.search.providers import WebRetrieval
from veracity.semantic.model import Semantics
from veracity.semantic.nli import ContradictionModel, reading_model
from veracity.settings import Settings
from veracity.specs.models import Spec


def run_context(
    *,
    run_id: str,
    spec: Spec,
    corpus: str,
    providers: Providers,
    journal: Journal,
    settings: Settings,
    search: SearchProvider,
    web: WebRetrieval | None,
    ranker: HitRanker | None,
    semantics: Semantics,
    thread: Thread | None = None,
) -> Context:
    """The run's context; also sets the calling task's usage meter and model-call listener (context variables:
    every model call the run's graph makes from this task is counted against the template's budgets and streamed
    as a ``model_call`` event)."""

    async def emit(event: Event) -> None:
        await journal.emit(run_id, event)

    async def audit(stage: str, attempt: int, payload: dict[str, Any]) -> None:
        await journal.audit(run_id, stage, attempt, payload)

    async def on_call(row: dict[str, Any]) -> None:
        await journal.emit(run_id, ModelCall.model_validate(row))

    budgets = spec.budgets
    current_meter.set(
        UsageMeter(
            max_calls=budgets.model_calls,
            max_prompt_tokens=budgets.prompt_tokens,
            max_completion_tokens=budgets.completion_tokens,
            max_seconds=budgets.wall_seconds,
        )
    )
    current_listener.set(on_call)
    over_web = web if corpus == WEB_SOURCE else None
    return Context(
        spec=spec,
        search=over_web.search if over_web else search,
        fetcher=over_web.pages if over_web else None,
        ranker=ranker,
        pages_per_query=settings.search.pages_per_query,
        emit=emit,
        limits=settings.limits,
        coordinator=RetrievalCoordinator(max_pages=budgets.max_pages, io_concurrency=settings.fetch.concurrency),
        composer=providers.composer,
        reviewer=providers.reviewer,
        planner=providers.planner,
        judge=providers.judge,
        audit=audit,
        semantic=semantics.model,
        reader=relevance_reader(semantics, settings),
        judge_reader=judgement_reader(semantics, settings),
        screen_reader=screen_reader(semantics, settings),
        max_candidates=settings.semantic.max_candidates,
        thread=thread,
    )


def relevance_reader(semantics: Semantics, settings: Settings) -> ContradictionModel | None:
    """The cross-encoder relevance reads candidates with (the judge's contradiction reader, one session per process),
    when the sentence model is loaded and ``semantic.reader`` allows it."""
    return _reading(semantics, settings.semantic.reader)


def judgement_reader(semantics: Semantics, settings: Settings) -> ContradictionModel | None:
    """The cross-encoder the question-level judgement reads the pool's best sentences with (the same one session),
    when the sentence model is loaded and ``semantic.read_judgement`` allows it."""
    return _reading(semantics, settings.semantic.read_judgement)


def screen_reader(semantics: Semantics, settings: Settings) -> ContradictionModel | None:
    """The cross-encoder the screen reads each message with (the same one session), when the sentence model is
    loaded and ``semantic.screen_reader`` allows it."""
    return _reading(semantics, settings.semantic.screen_reader)


def _reading(semantics: Semantics, allowed: bool) -> ContradictionModel | None:
    return reading_model(allowed) if semantics.model is not None else None


def run_started(run_id: str, spec: Spec, question: str, corpus: str, providers: Providers) -> RunStarted:
    """A run's first event: what it researches, with which template, sections, budgets and composer."""
    return RunStarted(
        run_id=run_id,
        template=spec.id,
        question=question,
        corpus=corpus,
        sections=[s.id for s in spec.sections],
        budgets=spec.budgets.model_dump(),
        composer=providers.composer.name,
    )
