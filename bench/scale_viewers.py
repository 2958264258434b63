"""Many viewers of one run over several web processes (bench/scale.py): the run executed by a ``veracity worker``
process, its viewers SSE streams (``GET /v1/research/{id}/events``) opened by client processes of their own
(bench/sse_viewers.py) and spread evenly over the ``veracity serve`` processes, against the same run with no viewer,
the two alternating.

The run is recorded first, pending and not yet queued (``runs_repo.create_run``, as ``POST /v1/research/stream``
records it); the viewers open their streams on it; then its job is queued (``jobs.enqueue_run``) and a worker takes
it, so every viewer follows it from its first event. A run alone is recorded and queued the same way. Its time is
from queueing to its ending's ``created_at``.

Figures: events lost (a viewer's seqs against the stored ones: any missing, repeated or out of order counts; a
stream that failed counts all its events), lag from an event's ``created_at`` (set by the worker before its commit)
to a viewer receiving it — same machine, same clock — the run's time watched over alone, the CPU time each
process spent during the runs, and the transactions PostgreSQL counted in the benchmark's database while N viewers
followed a run that said nothing, against none following it (``pg_stat_database``; pg_stat_statements is not
loaded on this server)."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from scale_cluster import Cluster, Proc, ViewerClient, cpu_seconds
from veracity.db import jobs, runs_repo
from veracity.db.engine import make_sessionmaker
from veracity.specs.registry import SpecRegistry

CLIENT_PROCESSES = 2
IDLE_SECONDS = 20.0
IDLE_PER_VIEWER = 0.05
"""Idle viewers cost "no per-viewer queries" while N of them add fewer than N/20 transactions in IDLE_SECONDS to what
one viewer per web process costs (each process's feed reads the run every safety-net period, whatever its viewers;
the workers' queue polls and the listeners' checks come on top); a read per viewer per 5 s period would add 4N.
PostgreSQL reports a backend's counts up to 10 s late, so a window holds a read or two more or less per process."""
STATS_SETTLE_SECONDS = 11.0
"""PostgreSQL backends report their transaction counts when they go idle at most once a second, else up to 10 s
later: a window is read only once what came before it has been reported."""


@dataclass
class Watch:
    """The viewers' figures over all watched runs, and each run's time."""

    viewers: int
    webs: int
    event_delay_ms: int
    events: int = 0
    lost: int = 0
    failed_streams: int = 0
    lags: list[float] = field(default_factory=list)
    alone_s: list[float] = field(default_factory=list)
    watched_s: list[float] = field(default_factory=list)
    cpu_alone: dict[str, list[float]] = field(default_factory=dict)
    cpu_watched: dict[str, list[float]] = field(default_factory=dict)
    idle: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Viewers following a silent run → (transactions, scans of the runs' tables) counted in IDLE_SECONDS."""

    @property
    def ratio(self) -> float:
        return median(self.watched_s) / median(self.alone_s)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


class Runs:
    """Records and queues runs in the benchmark's database with the app's own repository functions."""

    def __init__(self, engine: AsyncEngine, template: str, corpus: str, question: str) -> None:
        self.sessionmaker = make_sessionmaker(engine)
        self.template, self.corpus, self.question = template, corpus, question
        self.budgets = SpecRegistry.load().get(template).budgets.model_dump()

    async def record(self) -> str:
        run_id = uuid.uuid4().hex
        async with self.sessionmaker() as session, session.begin():
            await runs_repo.create_run(
                session=session,
                run_id=run_id,
                template_id=self.template,
                question=self.question,
                corpus=self.corpus,
                budgets=self.budgets,
            )
        return run_id

    async def queue(self, run_id: str) -> float:
        """Queue the recorded run for a worker; the time it was queued (``time.time()``)."""
        async with self.sessionmaker() as session, session.begin():
            await jobs.enqueue_run(session=session, run_id=run_id)
        return time.time()

    async def end_silent(self, run_id: str) -> None:
        async with self.sessionmaker() as session, session.begin():
            await runs_repo.set_run_status(session=session, run_id=run_id, status="failed", error="bench: idle run")


async def _ended(cluster: Cluster, run_id: str, timeout: float = 120.0) -> list[Any]:
    """The run's stored events once it has ended (polled every 50 ms, bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        (row,) = await cluster.query("SELECT status FROM research_runs WHERE id = $1", run_id)
        if row["status"] in ("done", "failed"):
            return await cluster.query(
                "SELECT seq, name, created_at FROM run_events WHERE run_id = $1 ORDER BY seq", run_id
            )
        await asyncio.sleep(0.05)
    raise TimeoutError(f"run {run_id} did not end within {timeout:.0f} s")


async def _open_viewers(cluster: Cluster, tag: str, run_id: str, viewers: int, webs: list[Proc]) -> list[ViewerClient]:
    bases = [w.base for w in webs if w.base is not None]
    shares = [
        viewers // CLIENT_PROCESSES + (1 if i < viewers % CLIENT_PROCESSES else 0) for i in range(CLIENT_PROCESSES)
    ]
    # Client i starts on web process i: two viewers are one per web process, a thousand are spread evenly.
    turned = [bases[i % len(bases) :] + bases[: i % len(bases)] for i in range(CLIENT_PROCESSES)]
    clients = [ViewerClient(cluster, f"{tag}-{i}", run_id, n, turned[i]) for i, n in enumerate(shares) if n]
    await asyncio.gather(*(c.start() for c in clients))
    return clients


def _cpu(procs: dict[str, int]) -> dict[str, float]:
    return {name: cpu_seconds(pid) for name, pid in procs.items()}


async def _one_run(
    cluster: Cluster, runs: Runs, webs: list[Proc], worker: Proc, viewers: int, tag: str, watch: Watch
) -> None:
    run_id = await runs.record()
    clients = await _open_viewers(cluster, tag, run_id, viewers, webs) if viewers else []
    failed_to_open = sum(c.opened[1] for c in clients)
    if clients:
        await asyncio.sleep(1.0)  # every stream's feed is following the run before it starts
    procs = {w.name: w.pid for w in [*webs, worker]} | {f"client{i}": c.pid() for i, c in enumerate(clients)}
    before = _cpu(procs)
    queued = await runs.queue(run_id)
    stored = await _ended(cluster, run_id)
    took = stored[-1]["created_at"].timestamp() - queued
    results = await asyncio.gather(*(c.finish() for c in clients))
    after = _cpu(procs)
    for i, result in enumerate(results):  # a client's own count: it exited before /proc could be read again
        after[f"client{i}"] = result["cpu_seconds"]
    cpu = watch.cpu_watched if viewers else watch.cpu_alone
    for name in procs:
        key = "client" if name.startswith("client") else "web" if name.startswith("web") else name
        cpu.setdefault(key, []).append(after[name] - before[name])
    (watch.watched_s if viewers else watch.alone_s).append(took)
    if not viewers:
        return
    at = {r["seq"]: r["created_at"].timestamp() for r in stored}
    order = [r["seq"] for r in stored]
    watch.events = len(order)
    watch.failed_streams += failed_to_open + sum(len(r["errors"]) for r in results)
    watch.lost += failed_to_open * len(order)
    for result in results:
        for seen in result["viewers"]:
            seqs = [seq for seq, _ in seen]
            watch.lost += sum(1 for a, b in zip(seqs, order, strict=False) if a != b) + abs(len(seqs) - len(order))
            watch.lags += [(t - at[seq]) * 1000 for seq, t in seen if seq in at]


async def _idle(cluster: Cluster, runs: Runs, webs: list[Proc], viewers: int) -> tuple[int, int]:
    """Transactions, and scans of the runs' tables, in IDLE_SECONDS while ``viewers`` follow a run that says
    nothing."""
    run_id = await runs.record()
    clients = await _open_viewers(cluster, f"idle{viewers}", run_id, viewers, webs)
    try:
        await asyncio.sleep(STATS_SETTLE_SECONDS)
        transactions, scans = await cluster.transactions(), await cluster.run_table_scans()
        await asyncio.sleep(IDLE_SECONDS)
        return await cluster.transactions() - transactions, await cluster.run_table_scans() - scans
    finally:
        await asyncio.gather(*(c.finish(stop=True) for c in clients))
        await runs.end_silent(run_id)


async def measure(
    cluster: Cluster, runs: Runs, webs: list[Proc], worker: Proc, viewers: int, pairs: int, event_delay_ms: int
) -> Watch:
    watch = Watch(viewers=viewers, webs=len(webs), event_delay_ms=event_delay_ms)
    scratch = Watch(viewers=0, webs=len(webs), event_delay_ms=event_delay_ms)
    if pairs:
        await _one_run(cluster, runs, webs, worker, 0, "warm", scratch)  # the worker's first run pays its imports
    for i in range(pairs):
        await _one_run(cluster, runs, webs, worker, 0, f"alone{i}", watch)
        await _one_run(cluster, runs, webs, worker, viewers, f"watched{i}", watch)
    for n in sorted({len(webs), viewers}):  # one viewer per web process: each feed reads; then all of them
        watch.idle[n] = await _idle(cluster, runs, webs, n)
    return watch


def report(w: Watch) -> list[str]:
    few, many = min(w.idle), max(w.idle)
    (few_x, few_s), (many_x, many_s) = w.idle[few], w.idle[many]
    per_viewer = (many_x - few_x) / max(many - few, 1)
    met = w.lost == 0 and percentile(w.lags, 0.99) <= 250 and w.ratio <= 1.1 and per_viewer < IDLE_PER_VIEWER
    verdict = "met" if met else "NOT met"

    def cpu(figures: dict[str, list[float]]) -> str:
        return ", ".join(f"{name} {median(v):.2f} s" for name, v in sorted(figures.items()))

    return [
        f"viewers: {w.viewers} SSE viewers of one market_brief run over {w.webs} `veracity serve` processes "
        f"(queue-only), the run executed by a `veracity worker` paced at {w.event_delay_ms} ms per event, "
        f"{len(w.watched_s)} watched and {len(w.alone_s)} alone runs alternating ({w.events} events each); "
        f"the viewers are {CLIENT_PROCESSES} client processes on the same {os.cpu_count()} cores",
        f"  events lost          {w.lost} ({w.failed_streams} streams failed)",
        f"  lag p50 / p99 / max  {percentile(w.lags, 0.5):.1f} / {percentile(w.lags, 0.99):.1f} / "
        f"{max(w.lags, default=float('nan')):.1f} ms ({len(w.lags)} deliveries)",
        f"  run time             {median(w.watched_s) * 1000:.0f} ms watched vs "
        f"{median(w.alone_s) * 1000:.0f} ms alone (medians) = {w.ratio:.2f}x "
        f"(watched {', '.join(f'{s:.2f}' for s in w.watched_s)} s; alone {', '.join(f'{s:.2f}' for s in w.alone_s)} s)",
        f"  CPU per watched run  {cpu(w.cpu_watched)} (per process, medians)",
        f"  CPU per run alone    {cpu(w.cpu_alone)}",
        f"  idle viewers         {many} viewers of a silent run: {many_x} transactions ({many_s} scans of the runs' "
        f"tables) in {IDLE_SECONDS:.0f} s; {few} viewers (one per web process): {few_x} ({few_s}) = "
        f"{per_viewer:+.3f} transactions per added viewer",
        f"  (target: lost 0, p99 <= 250 ms, <= 1.1x, no per-viewer queries: {verdict})",
    ]
