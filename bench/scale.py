"""`make bench-scale` (and the end of `make bench`): the scale-out figures of issue 16, with real processes on
127.0.0.1 and a PostgreSQL database of its own (created on the local server, migrated by ``veracity migrate``,
dropped at the end; skipped, saying so, when no PostgreSQL answers). Two ``veracity serve`` processes with
``VERACITY_WORKER__EMBEDDED=false`` take the requests; ``veracity worker`` processes execute the runs.

1. Viewers (bench/scale_viewers.py): N viewers of one run over the 2 web processes, the run executed by one
   worker — events lost, lag, the run's time against the same run with no viewer, and what idle viewers cost
   the database.
2. Throughput: R runs started at once through the 2 web processes' API (``POST /v1/research/stream``, half on
   each), executed by 2 workers at their default concurrency — all complete? wall time, runs per minute.
3. Takeover: a worker executing a run is killed with SIGKILL; the time until the other worker has taken the run
   over (claimed it) and until the run's next event is stored, over several trials, with a short lease
   (``VERACITY_LIMITS__RUN_LEASE_SECONDS``) — and what the default lease makes of it.

Everything is bounded in count and time; every process is killed (its process group) on the way out.
Benchmarks never gate CI; this one prints what it measured.

    python bench/scale.py [--viewers 1000] [--pairs 3] [--runs 100] [--trials 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

import scale_viewers
from scale_cluster import Cluster, Proc, postgres_reachable
from scale_viewers import Runs, percentile
from veracity.db.engine import make_engine
from veracity.runs.worker import POLL_SECONDS

QUESTION = "How large is the Nordic heat pump market and who are the main suppliers?"
TEMPLATE = CORPUS = "market_brief"  # the bundled sample corpus, loaded by `veracity migrate`
WATCH_DELAY_MS = 200
"""Pacing of the watched runs (``VERACITY_LIMITS__EVENT_DELAY_MS``): a few seconds each instead of ~0.2 s."""
TAKEOVER_DELAY_MS = 400
"""Pacing of the killed runs: long enough (~10 s) to kill one mid-way and see it resumed."""
TAKEOVER_LEASE_SECONDS = 2
WORKER_CONCURRENCY = 4  # VERACITY_WORKER__CONCURRENCY's default, which the throughput's workers run with
DEFAULT_LEASE_SECONDS = 30  # the setting's default, for the expectation printed beside the measurement
ENDED = ("done", "failed")


@dataclass
class Throughput:
    runs: int
    wall_s: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    malformed: int = 0
    """Runs whose events are not gapless with one run_started and one ending."""
    per_worker: list[int] = field(default_factory=list)
    most_running: int = 0
    warmed: list[int] = field(default_factory=list)
    """Warm-up runs each worker executed before the measured ones."""
    latency_s: list[float] = field(default_factory=list)
    """Each run's time from its POST being recorded to its ending."""
    execution_s: list[float] = field(default_factory=list)
    """Each run's time from its first to its last event."""


@dataclass
class Takeover:
    lease_seconds: int
    claimed_s: list[float] = field(default_factory=list)
    """SIGKILL → the other worker owns the run."""
    resumed_s: list[float] = field(default_factory=list)
    """SIGKILL → the run's next event stored by the other worker."""
    completed: int = 0
    malformed: int = 0


async def _post(client: httpx.AsyncClient, base: str) -> str:
    """Start a run through a web process's API; its stream is closed at once (runs never depend on viewers)."""
    body = {"question": QUESTION, "template": TEMPLATE, "corpus": CORPUS}
    async with client.stream("POST", f"{base}/v1/research/stream", json=body) as response:
        response.raise_for_status()
        return response.headers["x-run-id"]


def _claimed(proc: Proc) -> set[str]:
    return {line.split("run ", 1)[1].split(":", 1)[0] for line in proc.log().splitlines() if ": claimed by " in line}


async def _well_formed(cluster: Cluster, run_ids: list[str]) -> dict[str, bool]:
    """Per run: gapless seqs from 1, one ``run_started``, one ending and it last."""
    rows = await cluster.query(
        "SELECT run_id, count(*) AS n, max(seq) AS top, "
        "count(*) FILTER (WHERE name = 'run_started') AS started, "
        "count(*) FILTER (WHERE name IN ('complete', 'error')) AS endings, "
        "(array_agg(name ORDER BY seq DESC))[1] AS last "
        "FROM run_events WHERE run_id = ANY($1::varchar[]) GROUP BY run_id",
        run_ids,
    )
    good = {
        r["run_id"]: r["n"] == r["top"]
        and r["started"] == 1
        and r["endings"] == 1
        and r["last"] in ("complete", "error")
        for r in rows
    }
    return {run_id: good.get(run_id, False) for run_id in run_ids}


async def _post_all(webs: list[Proc], runs: int) -> list[str]:
    """``runs`` runs posted at once, alternating over the web processes."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(60), limits=httpx.Limits(max_connections=runs)) as client:
        return list(await asyncio.gather(*(_post(client, str(webs[i % len(webs)].base)) for i in range(runs))))


async def _all_ended(cluster: Cluster, run_ids: list[str], timeout: float) -> int:
    """Wait (bounded) until every run has ended; the most that were running at once meanwhile."""
    most = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = await cluster.query(
            "SELECT status, count(*) AS n FROM research_runs WHERE id = ANY($1::varchar[]) GROUP BY status", run_ids
        )
        counts = {r["status"]: int(r["n"]) for r in rows}
        most = max(most, counts.get("running", 0))
        if sum(counts.get(s, 0) for s in ENDED) == len(run_ids):
            break
        await asyncio.sleep(0.25)
    return most


async def throughput(cluster: Cluster, webs: list[Proc], workers: list[Proc], runs: int) -> Throughput:
    figures = Throughput(runs=runs)
    # A fresh worker's first run builds the corpus's in-memory index and warms its caches (~1.5 s once): a run at
    # each of a worker's slots first, as long-lived workers would have, so the figure is the steady state.
    warm = await _post_all(webs, WORKER_CONCURRENCY * len(workers))
    await _all_ended(cluster, warm, 300)
    figures.warmed = [len(_claimed(w) & set(warm)) for w in workers]
    started = time.time()
    run_ids = await _post_all(webs, runs)
    figures.most_running = await _all_ended(cluster, run_ids, 600)
    rows = await cluster.query(
        "SELECT r.id, r.status, r.outcome, r.created_at, min(e.created_at) AS first, max(e.created_at) AS last "
        "FROM research_runs r LEFT JOIN run_events e ON e.run_id = r.id WHERE r.id = ANY($1::varchar[]) "
        "GROUP BY r.id",
        run_ids,
    )
    for r in rows:
        figures.statuses[r["status"]] = figures.statuses.get(r["status"], 0) + 1
        outcome = r["outcome"] or "-"
        figures.outcomes[outcome] = figures.outcomes.get(outcome, 0) + 1
        if r["last"] is not None and r["status"] in ENDED:
            figures.latency_s.append((r["last"] - r["created_at"]).total_seconds())
            figures.execution_s.append((r["last"] - r["first"]).total_seconds())
    ends = [r["last"].timestamp() for r in rows if r["last"] is not None and r["status"] in ENDED]
    figures.wall_s = (max(ends) if ends else time.time()) - started
    figures.malformed = sum(1 for ok in (await _well_formed(cluster, run_ids)).values() if not ok)
    figures.per_worker = [len(_claimed(w) & set(run_ids)) for w in workers]
    return figures


async def _until_value(probe: Callable[[], Awaitable[Any]], what: str, timeout: float, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await probe()
        if value:
            return value
        await asyncio.sleep(every)
    raise TimeoutError(f"timed out waiting for {what}")


class Watched:
    """One run's row and events, read for the takeover trials."""

    def __init__(self, cluster: Cluster, run_id: str) -> None:
        self.cluster, self.run_id = cluster, run_id

    async def owner_pid(self) -> int | None:
        (row,) = await self.cluster.query("SELECT owner FROM research_runs WHERE id = $1", self.run_id)
        return int(row["owner"].split(":")[1]) if row["owner"] else None

    async def last_seq(self) -> int:
        (row,) = await self.cluster.query("SELECT max(seq) AS s FROM run_events WHERE run_id = $1", self.run_id)
        return int(row["s"] or 0)

    async def event_after(self, seq: int) -> float | None:
        """When the first event after ``seq`` was stored (its ``created_at``), if it has been."""
        rows = await self.cluster.query(
            "SELECT created_at FROM run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT 1", self.run_id, seq
        )
        return float(rows[0]["created_at"].timestamp()) if rows else None

    async def ending(self) -> str | None:
        (row,) = await self.cluster.query("SELECT status, outcome FROM research_runs WHERE id = $1", self.run_id)
        return f"{row['status']}/{row['outcome']}" if row["status"] in ENDED else None


async def _kill_one(cluster: Cluster, run: Watched, workers: list[Proc], figures: Takeover) -> Proc:
    """Kill the worker executing ``run`` once it is mid-way; record how soon the other one took it over and
    resumed it, and how it ended. The killed worker."""
    pids = {w.pid: w for w in workers}

    async def executing() -> Proc | None:
        pid = await run.owner_pid()
        return pids.get(pid) if pid is not None and await run.last_seq() >= 6 else None

    victim: Proc = await _until_value(executing, "a worker to be mid-way through the run", 60)
    survivor = workers[1 - workers.index(victim)]
    top = await run.last_seq()
    victim.kill()  # SIGKILL, to its process group
    killed = time.time()

    async def taken() -> bool:
        return await run.owner_pid() == survivor.pid

    await _until_value(taken, "the other worker to claim the run", 120)
    figures.claimed_s.append(time.time() - killed)
    resumed_at = await _until_value(lambda: run.event_after(top), "the run's next event", 60)
    figures.resumed_s.append(resumed_at - killed)
    figures.completed += await _until_value(run.ending, "the resumed run to end", 120, every=0.2) == "done/shipped"
    figures.malformed += not (await _well_formed(cluster, [run.run_id]))[run.run_id]
    return victim


async def takeover(cluster: Cluster, webs: list[Proc], trials: int) -> Takeover:
    env = {
        "VERACITY_LIMITS__EVENT_DELAY_MS": str(TAKEOVER_DELAY_MS),
        "VERACITY_LIMITS__RUN_LEASE_SECONDS": str(TAKEOVER_LEASE_SECONDS),
    }
    figures = Takeover(lease_seconds=TAKEOVER_LEASE_SECONDS)
    if not trials:
        return figures
    workers = [await cluster.worker("kill-a", **env), await cluster.worker("kill-b", **env)]
    async with httpx.AsyncClient(timeout=60) as client:
        for trial in range(trials):
            run = Watched(cluster, await _post(client, str(webs[trial % len(webs)].base)))
            victim = await _kill_one(cluster, run, workers, figures)
            await cluster.retire(victim)
            workers[workers.index(victim)] = await cluster.worker(f"kill-{trial}", **env)
    await cluster.retire(*workers)
    return figures


def report(t: Throughput, k: Takeover) -> list[str]:
    ok = t.statuses.get("done", 0)
    lines = (
        []
        if not t.runs
        else [
            f"throughput: {t.runs} market_brief runs posted at once through 2 web processes' API, 2 workers at the "
            f"default concurrency ({WORKER_CONCURRENCY} runs each at once), no pacing, after {sum(t.warmed)} warm-up "
            f"runs (per worker {t.warmed})",
            f"  ended                {ok} done, {t.runs - ok} not done {t.statuses} outcomes {t.outcomes}; "
            f"{t.malformed} with malformed events; per worker {t.per_worker}; at most {t.most_running} running at once",
            f"  wall time            {t.wall_s:.1f} s = {t.runs / t.wall_s * 60:.0f} runs/minute",
            f"  per run              posted → ended p50 {percentile(t.latency_s, 0.5):.1f} s, max "
            f"{max(t.latency_s, default=float('nan')):.1f} s; executing (first → last event) p50 "
            f"{percentile(t.execution_s, 0.5) * 1000:.0f} ms",
        ]
    )
    if k.claimed_s:
        lease = k.lease_seconds
        lines += [
            f"takeover: a worker executing a run killed (SIGKILL) mid-way, {len(k.claimed_s)} trials, "
            f"VERACITY_LIMITS__RUN_LEASE_SECONDS={lease}, runs paced at {TAKEOVER_DELAY_MS} ms per event",
            f"  claimed by the other worker  median {statistics.median(k.claimed_s):.2f} s, max "
            f"{max(k.claimed_s):.2f} s ({', '.join(f'{s:.2f}' for s in k.claimed_s)})",
            f"  its next event stored        median {statistics.median(k.resumed_s):.2f} s, max "
            f"{max(k.resumed_s):.2f} s",
            f"  completed after the takeover {k.completed}/{len(k.claimed_s)} (shipped), {k.malformed} malformed",
            f"  with the default lease ({DEFAULT_LEASE_SECONDS} s) expect ~{DEFAULT_LEASE_SECONDS}–"
            f"{DEFAULT_LEASE_SECONDS + POLL_SECONDS:.0f} s, at most ~{2 * DEFAULT_LEASE_SECONDS} s: the run must go a "
            f"lease unrenewed; then the survivor re-picks its job at its next queue poll (every {POLL_SECONDS:.0f} s) "
            f"or its sweep (every lease) finds it, whichever comes first",
        ]
    return lines


async def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--viewers", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=3, help="watched and alone runs of the viewers' part, each")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args(argv)
    if not await postgres_reachable():
        print("\nscale-out: skipped, no PostgreSQL at 127.0.0.1:5432 (it makes its own database there)")
        return 0
    began, load = time.monotonic(), os.getloadavg()[0]
    async with Cluster.open() as cluster:
        await cluster.migrate()
        webs = [await cluster.web("web1"), await cluster.web("web2")]
        engine = make_engine(cluster.url)
        try:
            runs = Runs(engine, TEMPLATE, CORPUS, QUESTION)
            worker = await cluster.worker("watch", VERACITY_LIMITS__EVENT_DELAY_MS=str(WATCH_DELAY_MS))
            watch = await scale_viewers.measure(cluster, runs, webs, worker, args.viewers, args.pairs, WATCH_DELAY_MS)
            await cluster.retire(worker)
        finally:
            await engine.dispose()
        throughput_figures = Throughput(runs=args.runs)
        if args.runs:
            workers = [await cluster.worker("runs-a"), await cluster.worker("runs-b")]
            throughput_figures = await throughput(cluster, webs, workers, args.runs)
            await cluster.retire(*workers)
        takeover_figures = await takeover(cluster, webs, args.trials)
    print(f"\nscale-out ({os.cpu_count()} cores, loopback, PostgreSQL; bench/scale.py)")
    for line in [*scale_viewers.report(watch), *report(throughput_figures, takeover_figures)]:
        print(line)
    print(
        f"  ({time.monotonic() - began:.0f} s in all; 1-minute load average {load:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} cores)"
    )
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a SIGTERM unwinds too: processes and database go
    sys.exit(asyncio.run(run()))
