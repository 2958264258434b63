"""Many viewers of one run (`make bench`): a run followed by N viewers in this process through the runtime's feed
— split over two feeds with their own engines and PostgreSQL listeners when the database is PostgreSQL, as two web
processes would be — against the same run with no viewers.

Figures: events lost (a viewer's events against the stored ones: any missing, repeated or out of order counts),
lag from an event being stored to each viewer receiving it (p50, p99, max), the run's wall time with the viewers
over its time without, and the statements the database received while N viewers watched a silent run for a while
(idle viewers should cost none)."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event as sa_event

from veracity.db import runs_repo
from veracity.db.engine import is_sqlite, make_engine, make_sessionmaker
from veracity.runs.feed import RunFeed
from veracity.runs.runtime import Runtime

VIEWERS = 500
REPEATS = 3
IDLE_SECONDS = 6.0  # longer than the safety-net poll: its reads show, once per run and feed


@dataclass
class Figures:
    viewers: int
    feeds: int
    events: int
    lost: int
    lag_p50_ms: float
    lag_p99_ms: float
    lag_max_ms: float
    run_ratio: float
    alone_ms: float
    watched_ms: float
    idle_statements: int


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _watch(feed: RunFeed, run_id: str, got: list[tuple[int, datetime]]) -> None:
    async for event in feed.follow(run_id):
        got.append((event.seq, datetime.now(UTC)))


async def measure(
    runtime: Runtime, question: str, template: str, viewers: int = VIEWERS, corpus: str | None = None
) -> Figures:
    service = runtime.service
    engine = None
    feeds = [runtime.feed]
    if not is_sqlite(runtime.settings.database.url):  # a second "process": its own pool, feed and listener
        engine = make_engine(runtime.settings.database.url)
        feeds.append(RunFeed(make_sessionmaker(engine), runtime.settings))
    try:
        await service.wait(await service.start(question=question, template=template, corpus=corpus))  # warm-up
        alone, watched, lags = [], [], []
        lost = events = 0
        for _ in range(REPEATS):
            started = time.perf_counter()
            await service.wait(await service.start(question=question, template=template, corpus=corpus))
            alone.append(time.perf_counter() - started)

            started = time.perf_counter()
            run_id = await service.start(question=question, template=template, corpus=corpus)
            got: list[list[tuple[int, datetime]]] = [[] for _ in range(viewers)]
            tasks = [asyncio.create_task(_watch(feeds[i % len(feeds)], run_id, into)) for i, into in enumerate(got)]
            await service.wait(run_id)
            watched.append(time.perf_counter() - started)
            await asyncio.wait_for(asyncio.gather(*tasks), 60)
            async with runtime.sessionmaker() as session:
                rows = await runs_repo.events_after(session=session, run_id=run_id)
            stored = {e.seq: e.created_at if e.created_at.tzinfo else e.created_at.replace(tzinfo=UTC) for e in rows}
            events = len(stored)
            for seen in got:
                lost += sum(1 for a, b in zip([s for s, _ in seen], sorted(stored), strict=False) if a != b)
                lost += abs(len(seen) - len(stored))
                lags += [(at - stored[seq]).total_seconds() * 1000 for seq, at in seen if seq in stored]
        idle = await _idle_statements(runtime, feeds, viewers)
    finally:
        if engine is not None:
            await feeds[1].close()
            await engine.dispose()
    return Figures(
        viewers=viewers,
        feeds=len(feeds),
        events=events,
        lost=lost,
        lag_p50_ms=_percentile(lags, 0.5),
        lag_p99_ms=_percentile(lags, 0.99),
        lag_max_ms=max(lags),
        run_ratio=statistics.median(watched) / statistics.median(alone),
        alone_ms=statistics.median(alone) * 1000,
        watched_ms=statistics.median(watched) * 1000,
        idle_statements=idle,
    )


async def _idle_statements(runtime: Runtime, feeds: list[RunFeed], viewers: int) -> int:
    """Statements sent while ``viewers`` follow a run that says nothing for IDLE_SECONDS (after they caught up)."""
    run_id = f"bench-idle-{time.time_ns()}"[:32]
    async with runtime.sessionmaker() as session, session.begin():
        await runs_repo.create_run(
            session=session, run_id=run_id, template_id="answer", question="idle", corpus="wiki", budgets={}
        )
    tasks = [asyncio.create_task(_drain(feeds[i % len(feeds)], run_id)) for i in range(viewers)]
    await asyncio.sleep(0.5)  # each feed's first read
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    sa_event.listen(runtime.engine.sync_engine, "before_cursor_execute", record)
    try:
        await asyncio.sleep(IDLE_SECONDS)
    finally:
        sa_event.remove(runtime.engine.sync_engine, "before_cursor_execute", record)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        async with runtime.sessionmaker() as session, session.begin():
            await runs_repo.set_run_status(session=session, run_id=run_id, status="failed", error="bench idle run")
    return len(statements)


async def _drain(feed: RunFeed, run_id: str) -> None:
    async for _ in feed.follow(run_id):
        pass


def report(f: Figures, template: str) -> str:
    where = (
        "over 2 feeds with their own engines and listeners (sharing this process's event loop with the run)"
        if f.feeds == 2
        else "in the run's own process"
    )
    verdict = "met" if f.lost == 0 and f.lag_p99_ms <= 250 and f.run_ratio <= 1.1 else "NOT met"
    return "\n".join(
        [
            f"\nviewers: {f.viewers} viewers of one {template} run {where}, {REPEATS} runs ({f.events} events each)",
            f"  events lost          {f.lost}",
            f"  lag p50 / p99 / max  {f.lag_p50_ms:.1f} / {f.lag_p99_ms:.1f} / {f.lag_max_ms:.1f} ms",
            f"  run time             {f.watched_ms:.0f} ms watched vs {f.alone_ms:.0f} ms alone = {f.run_ratio:.2f}x",
            f"  idle viewers         {f.idle_statements} statements on the runtime's engine in {IDLE_SECONDS:.0f} s "
            f"(target: lost 0, p99 <= 250 ms, <= 1.1x, no per-viewer queries: {verdict})",
        ]
    )
