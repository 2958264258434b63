"""Warm-up: what a run loads on first use, loaded when a process that executes runs starts, each step's cost in
the log ("warmed search over corpus wiki in 2.31 s").

Without it the first run after start paid for all of it (issue 18 measured 10.3 s; here 3.7 to 5.7 s against
about 1 s for a later run): the corpus's in-memory index (10,000 passages and their vectors read, BM25 postings
built: about 2 s), the language identifier's model (0.7 s, on the event loop), the gazetteer (0.8 s), the screen's,
the relevance check's and the judge's fitted models and the templates' compiled phrase lists — and every page
waited behind the parts that ran on the event loop.

The steps rehearse a run on one made-up question — search each template's corpus, rank the hits, score their
sentences, judge a claim against them, screen the question under each template's policy, name its language — with
the service's own parts, so what is warmed is what a run calls, not a list of caches that can drift from it.

Readiness waits for it: the composition root warms before the server listens (the web lifespan has not finished
starting until ``open_runtime`` has entered), so ``/healthz`` answers once the process is warm, as it already
waits for the default corpus's vectors. The wait is bounded: each step is a fixed piece of work (a file read, a
table built, one corpus's index, which ``memory_index_max_chunks`` bounds), and a step that fails is logged and
skipped — the run loads that part on first use, as before — never a reason not to start.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

from veracity.guards.judge import LearnedJudge
from veracity.guards.language import detect
from veracity.guards.router import screen
from veracity.guards.screen_model import process_screen
from veracity.ports import SearchHit, Source
from veracity.runs.context import judgement_reader, relevance_reader
from veracity.runs.service import RunService
from veracity.semantic.relevance import Candidate, RelevanceScorer

logger = logging.getLogger(__name__)

QUESTION = "How did coffee production in Brazil change after 1900?"
"""The rehearsal's question: content words the corpora hold, and a country, so the gazetteer is read."""


@dataclass(frozen=True)
class Warmed:
    """One step: what it warmed, how long it took, and why it failed (None when it did not)."""

    what: str
    seconds: float
    error: str | None = None


async def warm_up(service: RunService) -> list[Warmed]:
    """Rehearse a run's CPU work once with ``service``'s parts (off the event loop), logging each step's cost."""
    started = time.perf_counter()
    hits: list[SearchHit] = []

    async def search(corpus: str) -> None:
        found = await service.search.search(query=QUESTION, corpus=corpus, k=service.settings.limits.search_k)
        if not hits:  # the first corpus that answers gives the later steps their passages
            hits.extend(found)

    steps: list[tuple[str, Callable[[], Awaitable[object]]]] = []
    model = service.semantics.model
    if model is not None:
        steps.append(("the semantic model", lambda: asyncio.to_thread(model.encode, [QUESTION])))
    steps += [(f"search over corpus {corpus}", partial(search, corpus)) for corpus in _corpora(service)]
    ranker = service.ranker
    if ranker is not None:
        steps.append(("the ranker", lambda: asyncio.to_thread(ranker.rank, QUESTION, hits)))
    steps += [
        ("the relevance model", lambda: asyncio.to_thread(_relevance, service, hits)),
        ("the grounding judge", lambda: asyncio.to_thread(_judge, service, hits)),
        ("the screen", lambda: asyncio.to_thread(_screen, service)),
        ("the language identifier", lambda: asyncio.to_thread(detect, QUESTION)),
    ]
    done = [await _step(what, step) for what, step in steps]
    logger.info("warm-up done in %.2f s (%d steps)", time.perf_counter() - started, len(done))
    return done


async def _step(what: str, step: Callable[[], Awaitable[object]]) -> Warmed:
    started = time.perf_counter()
    try:
        await step()
    except Exception as exc:  # a part that cannot warm loads at its first use instead, as before
        seconds = time.perf_counter() - started
        logger.warning("warming %s failed after %.2f s (it loads at first use): %s", what, seconds, exc, exc_info=True)
        return Warmed(what, seconds, str(exc) or type(exc).__name__)
    seconds = time.perf_counter() - started
    logger.info("warmed %s in %.2f s", what, seconds)
    return Warmed(what, seconds)


def _corpora(service: RunService) -> list[str]:
    """The default corpus, then each template's own local corpus."""
    named = [service.settings.corpus.default]
    named += [s.default_source.corpus for s in service.registry.all() if s.default_source.kind == "local"]
    return list(dict.fromkeys(named))


def _relevance(service: RunService, hits: list[SearchHit]) -> None:
    candidates = [Candidate(text=h.text[:300], title=h.title, position=i) for i, h in enumerate(hits[:3])]
    scorer = RelevanceScorer(
        service.semantics.model,
        relevance_reader(service.semantics, service.settings),
        judgement_reader(service.semantics, service.settings),
    )
    scores = scorer.score(QUESTION, candidates)
    # The question-level judgement reads with the cross-encoder: its session is made here, not in the first run.
    scorer.answered(QUESTION, [(p, c.text, c.title) for p, c in zip(scores, candidates, strict=True)], 0.3)


def _judge(service: RunService, hits: list[SearchHit]) -> None:
    judge = service.providers().judge
    if isinstance(judge, LearnedJudge):  # a model judge is a remote call: nothing of it to warm here
        sources = [Source(id=f"s{i}", text=h.text) for i, h in enumerate(hits[:2])]
        judge.judge_sync("Brazil grew more coffee after 1900 than before.", sources)


def _screen(service: RunService) -> None:
    screener = process_screen(service.semantics.model, service.settings.semantic.screen_reader)
    for spec in service.registry.all():  # each template's phrase lists are compiled once, at first screen
        screen(QUESTION, spec.policy, screener)
