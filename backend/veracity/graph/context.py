"""Dependencies of the nodes, passed as the graph's runtime context so tests can hand in fakes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from veracity.events import Event
from veracity.guards.screen_model import LearnedScreen, learned_screen
from veracity.ports import (
    Composer,
    GroundingJudge,
    HitRanker,
    PageSource,
    Planner,
    Reviewer,
    SearchProvider,
    Thread,
)
from veracity.semantic.model import SemanticModel
from veracity.semantic.nli import ContradictionModel
from veracity.semantic.relevance import RelevanceScorer
from veracity.settings import LimitSettings
from veracity.specs.models import Spec

T = TypeVar("T")
Emit = Callable[[Event], Awaitable[None]]
"""Persist one event of the run (then its readers see it)."""
Audit = Callable[[str, int, dict[str, Any]], Awaitable[None]]
"""Record one audit-trail entry: (stage, attempt, payload)."""


async def _no_audit(_stage: str, _attempt: int, _payload: dict[str, Any]) -> None:
    return None


@dataclass
class RetrievalCoordinator:
    """Shared by all retrieve branches of one run: a global page budget and the set of pages opened (under an
    ``asyncio.Lock``), and a semaphore bounding IO in flight. Eight branches never open the same page twice nor
    open more than ``max_pages`` between them; a branch asking for a page another branch is already fetching
    waits for that fetch and shares its result."""

    max_pages: int
    io_concurrency: int = 8
    _opened: dict[str, asyncio.Future[Any]] = field(default_factory=dict)
    _order: dict[str, int] = field(default_factory=dict)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _io: asyncio.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        self._io = asyncio.Semaphore(self.io_concurrency)

    async def read(self, key: str) -> tuple[int, bool] | None:
        """A local passage for this branch: its opening order and whether this branch opened it first, or None
        when it is new and the page budget is spent. A passage another branch opened is read here too (shared,
        as a web page is), so what a branch reads never depends on which branch got there first."""
        async with self._lock:
            if key in self._opened:
                return self._order[key], False
            if len(self._opened) >= self.max_pages:
                return None
            self._reserve(key).set_result(None)
            return self._order[key], True

    def _reserve(self, key: str) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._opened[key] = future
        self._order[key] = len(self._order) + 1
        return future

    async def open_once(self, key: str, load: Callable[[], Awaitable[T]]) -> tuple[T, int, bool] | None:
        """Run ``load`` for ``key`` at most once per run, under the IO semaphore. Returns (result, the page's
        opening order, whether this caller loaded it), or None when the page budget is spent. ``load`` must
        report failures in its result, not raise: a raised error is re-raised to every waiting branch."""
        async with self._lock:
            future = self._opened.get(key)
            first = future is None
            if future is None:
                if len(self._opened) >= self.max_pages:
                    return None
                future = self._reserve(key)
        if first:
            try:
                async with self._io:
                    future.set_result(await load())
            except BaseException as exc:
                future.set_exception(exc)
                future.exception()  # marks it retrieved: the raising branch reports it
                raise
        return await asyncio.shield(future), self._order[key], first

    @property
    def opened(self) -> int:
        return len(self._opened)


@dataclass
class Context:
    spec: Spec
    search: SearchProvider
    emit: Emit
    limits: LimitSettings
    coordinator: RetrievalCoordinator
    composer: Composer = field(default_factory=lambda: _default_composer())
    reviewer: Reviewer | None = None
    """A model reviewer; the rule-based one always runs, this one only on drafts that passed every check."""
    judge: GroundingJudge = field(default_factory=lambda: _default_judge())
    audit: Audit = _no_audit
    fetcher: PageSource | None = None
    """Opens web results (the fetch cache around the HTTP fetcher); None for runs over a local corpus."""
    ranker: HitRanker | None = None
    """Reorders each query's hits before they are opened; None keeps the provider's order."""
    pages_per_query: int = 4
    """Best-ranked web results opened per query."""
    planner: Planner | None = None
    """A model planner; None (or a planner that fails) means the heuristic plan."""
    semantic: SemanticModel | None = None
    """The process's semantic model; None = the lexical path (hybrid retrieval, relevance and section
    assignment all fall back to words, and the run says so)."""
    reader: ContradictionModel | None = None
    """The cross-encoder that reads each branch's best candidates with the question (``semantic.nli``); None = the
    sentence model alone decides relevance."""
    judge_reader: ContradictionModel | None = None
    """The cross-encoder the question-level judgement reads the pool's best sentences with; None = relevances and
    words alone."""
    screen_reader: ContradictionModel | None = None
    """The cross-encoder the screen's learned layer reads each message with; None = the screen fitted without the
    reading (the sentence model and cues)."""
    max_candidates: int = 48
    """Most candidate sentences one retrieve branch scores for relevance (each costs an embedding)."""
    thread: Thread | None = None
    """The run this one follows up (its question, sections and quoted passages); None for a first question."""

    def about(self, question: str) -> str:
        """The question as relevance and section fit judge it (a follow-up's carries the question it follows)."""
        return self.thread.about(question) if self.thread is not None else question

    @property
    def relevance(self) -> RelevanceScorer:
        return RelevanceScorer(self.semantic, self.reader, self.judge_reader)

    @property
    def screener(self) -> LearnedScreen:
        """The screen's learned layer for this process's semantic model (lexical without it), reading with
        ``screen_reader`` when there is one."""
        return learned_screen(self.semantic, self.screen_reader)


def _default_composer() -> Composer:
    from veracity.compose.extractive import ExtractiveComposer

    return ExtractiveComposer()


def _default_judge() -> GroundingJudge:
    from veracity.guards.judge import make_judge

    return make_judge()
