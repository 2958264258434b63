"""Fan-out efficiency of retrieval (`make bench`): 8 subtasks × 4 pages, each page answering after 200 ms on the
fixture site over real HTTP, opened through the real fetcher and fetch cache.

Measured in one process, in one run: the parallel retrieval (the compiled graph's ``Send`` fan-out sharing one
coordinator, from the first branch starting to the merge), the same eight branches run one after another, and
each branch's own time in that sequential run (the longest is the floor any parallel schedule can reach). Every
measurement starts from an empty cache, so each page is a real fetch.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from fixture_site import FixtureSite
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.migrate import upgrade
from veracity.domain import Subtask
from veracity.events import Event
from veracity.fetch.cache import CachedFetcher
from veracity.fetch.http import HttpFetcher
from veracity.fetch.types import FetchPolicy
from veracity.graph.builder import build_graph
from veracity.graph.context import Context, RetrievalCoordinator
from veracity.graph.nodes.retrieve import retrieve
from veracity.ports import SearchHit
from veracity.settings import LimitSettings
from veracity.specs.models import Budgets, SectionSpec, Spec
from veracity.text import sha256_hex

SUBTASKS, PAGES, LATENCY_MS = 8, 4, 200


@dataclass
class FanoutResult:
    parallel_ms: float
    sequential_ms: float
    branch_ms: list[float]
    pages: int

    @property
    def longest_ms(self) -> float:
        return max(self.branch_ms)


class PlannedSearch:
    """Web-search stand-in: the n-th search finds articles 4(n-1)+1 … 4n of the fixture site, so every branch
    has four pages of its own."""

    name = "web"

    def __init__(self, site: FixtureSite) -> None:
        self.site = site
        self.calls = 0

    async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]:
        self.calls += 1
        n = self.calls
        urls = [self.site.url(f"/articles/{(n - 1) * PAGES + j + 1}") for j in range(PAGES)]
        return [
            SearchHit(doc_id=u, title="", text="", start=0, end=0, score=1.0, url=u, key=sha256_hex(u), fetch=True)
            for u in urls
        ]


def bench_spec() -> Spec:
    sections = [
        SectionSpec(id=f"part_{i}", title=f"Part {i}", description="a part", query_hint="{question} st" + str(i))
        for i in range(1, SUBTASKS + 1)
    ]
    return Spec(
        id="fanout_bench",
        title="Fan-out bench",
        description="eight parts",
        done_means="eight parts",
        sections=sections,
        budgets=Budgets(max_subtasks=SUBTASKS, queries_per_subtask=1, max_pages=SUBTASKS * PAGES),
    )


async def _context(site: FixtureSite, db_dir: Path, tag: str, marks: dict[str, float]) -> tuple[Context, Any]:
    url = f"sqlite+aiosqlite:///{db_dir / (tag + '.db')}"
    await asyncio.to_thread(upgrade, url)
    engine = make_engine(url)

    async def emit(event: Event) -> None:
        marks.setdefault(event.name, time.perf_counter())

    pages = CachedFetcher(
        fetcher=HttpFetcher(FetchPolicy(allow_loopback=True, timeout_seconds=10)),
        sessionmaker=make_sessionmaker(engine),
        ttl=timedelta(hours=1),
        revalidate_within=timedelta(0),
    )
    spec = bench_spec()
    ctx = Context(
        spec=spec,
        search=PlannedSearch(site),
        emit=emit,
        limits=LimitSettings(),
        coordinator=RetrievalCoordinator(max_pages=spec.budgets.max_pages, io_concurrency=SUBTASKS),
        fetcher=pages,
        pages_per_query=PAGES,
    )
    return ctx, engine


def _task(i: int) -> dict[str, Any]:
    sub = Subtask(id=f"st{i}", question=f"coffee st{i}", queries=[f"coffee st{i}"], target_sections=[f"part_{i}"])
    return {"run_id": "bench", "corpus": "web", "question": sub.question, "subtask": sub}


async def _branch(ctx: Context, i: int) -> float:
    started = time.perf_counter()
    result = await retrieve(_task(i), Runtime(context=ctx))  # type: ignore[arg-type]
    assert result["branch_stats"][0].pages == PAGES, result["branch_stats"]
    return (time.perf_counter() - started) * 1000


async def measure() -> FanoutResult:
    site = FixtureSite(latency_ms=LATENCY_MS, article_count=SUBTASKS * PAGES)
    with tempfile.TemporaryDirectory() as tmp, site:
        db_dir = Path(tmp)
        marks: dict[str, float] = {}
        # Warm-up: imports, the first connection, the extractor's first page.
        ctx, engine = await _context(site, db_dir, "warm", marks)
        if ctx.fetcher is not None:
            await ctx.fetcher.open(site.url("/articles/1?warm=1"))
        await engine.dispose()

        # Parallel: the real graph's Send fan-out, timed from the first branch starting to the merge.
        marks.clear()
        ctx, engine = await _context(site, db_dir, "parallel", marks)
        state = await build_graph().ainvoke({"run_id": "bench", "question": "coffee", "corpus": "web"}, context=ctx)
        parallel = (marks["retrieve_merge_complete"] - marks["retrieve_map_progress"]) * 1000
        pages = sum(s.pages for s in state["branch_stats"])
        await engine.dispose()

        # The same eight branches one after another; each one's time alone is a branch time.
        ctx, engine = await _context(site, db_dir, "sequential", marks)
        branch_ms = [await _branch(ctx, i) for i in range(1, SUBTASKS + 1)]
        await engine.dispose()
        return FanoutResult(parallel_ms=parallel, sequential_ms=sum(branch_ms), branch_ms=branch_ms, pages=pages)
