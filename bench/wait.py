"""`make bench-wait` (and part of `make bench`): no waiting in line (issue 18, item 7), measured on a real
``veracity serve`` over a copy of the SQLite database that holds the default corpus (``make corpus``).

1. Start-up: how long until ``/healthz`` answers, and the warm-up's steps as the server logged them.
2. The first run after start against the median of the next ``LATER`` runs, each from submit to its last event.
   They ask other questions: a question asked again would find its sentences' vectors cached.
3. Pages — ``GET /runs/{id}`` of the first (finished) run and ``GET /`` — idle, then while ``BURST`` runs
   submitted at once are in flight; and each of those submits' own response time.
4. The same burst as the first thing a second, freshly started server is asked (``GET /`` while it is in
   flight): what a process that warmed nothing made its first visitors wait for.
5. History: opening the first run's page with the few runs above stored, then with ``HISTORY`` runs — rows copied
   in SQL from the stored ones, a tenth of them runs of the same question as the page's run (the page lists the
   other runs of its question). Only the runs' rows are copied, not their events.

Targets printed beside the figures: pages p95 <= 300 ms while runs are in flight, the first run about as fast as
the others, opening a run's page at 10,000 runs <= 1.5x its time at 10. The machine's load average is printed at
both ends: the figures compete with whatever else runs on it. Every wait is bounded; the server is killed (its
process group) on the way out. Benchmarks never gate CI.

    python bench/wait.py [DATABASE.db]   (default: the configured SQLite database)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy.engine import make_url

from scale_cluster import CODE, Proc
from scale_viewers import percentile
from veracity.settings import get_settings

FIRST = "What is the history of coffee production and trade?"
LATER = (
    "How did the electric car market develop?",
    "What drives the global steel industry?",
    "What is the outlook for nuclear power?",
    "How do tides form?",
    "Who invented the telephone?",
)
BURST = 10
BURST_QUESTIONS = (
    "What causes inflation?",
    "How do vaccines work?",
    "What was the Roman Empire?",
    "How does photosynthesis work?",
    "What is quantum computing?",
    "Why did the Soviet Union collapse?",
    "How are glaciers formed?",
    "What is the history of tea?",
    "How do volcanoes erupt?",
    "What is the Silk Road?",
)
SAMPLES = 60
"""Requests per idle page figure (and per history figure)."""
HISTORY = 10_000
SAME_QUESTION_SHARE = 0.1
PAGE_TARGET_MS = 300.0
HISTORY_TARGET = 1.5
TIMEOUT = 180.0
"""Seconds any one wait may take (a run, the server's start, the burst)."""
ENV = {
    "VERACITY_CORPUS__AUTOLOAD_WIKI": "false",  # the copy holds the corpus and its vectors already
    "VERACITY_LOG_LEVEL": "INFO",
    # One single-user client submits the burst: lift the per-user limits.
    "VERACITY_LIMITS__RUNS_PER_MINUTE": "100000",
    "VERACITY_LIMITS__CONCURRENT_RUNS": "10000",
}


@dataclass
class Figures:
    ready_s: float = 0.0
    warmed: list[str] = field(default_factory=list)
    first_ms: float = 0.0
    later_ms: list[float] = field(default_factory=list)
    idle: dict[str, list[float]] = field(default_factory=dict)
    busy: dict[str, list[float]] = field(default_factory=dict)
    submits_ms: list[float] = field(default_factory=list)
    burst_s: float = 0.0
    cold: Figures | None = None
    """The burst as the first thing a fresh server was asked."""
    history: dict[int, list[float]] = field(default_factory=dict)
    """Stored runs → the first run's page times (ms)."""
    load: list[float] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch(database: Path, scratch: Path) -> tuple[Proc, str]:
    port = _free_port()
    log_path = scratch / "serve.log"
    path = os.pathsep.join(p for p in (CODE, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, **ENV, "PYTHONPATH": path, "VERACITY_DATABASE__URL": f"sqlite+aiosqlite:///{database}"}
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "veracity.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=scratch,  # no .env or ./data of the checkout is read
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed as one
        )
    return Proc("serve", proc, log_path), f"http://127.0.0.1:{port}"


async def _ready(client: httpx.AsyncClient, proc: Proc) -> None:
    deadline = time.monotonic() + TIMEOUT
    while True:
        if not proc.alive():
            raise RuntimeError(f"veracity serve exited with {proc.proc.returncode}:\n{proc.log()[-3000:]}")
        with contextlib.suppress(httpx.TransportError):
            if (await client.get("/healthz")).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise TimeoutError("veracity serve did not answer /healthz")
        await asyncio.sleep(0.1)


async def _submit(client: httpx.AsyncClient, question: str) -> tuple[str, float]:
    """The home page's form, posted as a browser does (with the CSRF field): (run id, the response's time)."""
    started = time.perf_counter()
    form = {"question": question, "template": "answer", "csrf_token": client.cookies.get("veracity_csrf", "")}
    response = await client.post("/runs", data=form)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 303:
        raise RuntimeError(f"submitting {question!r} answered {response.status_code}: {response.text[:300]}")
    return response.headers["location"].rsplit("/", 1)[1], elapsed


async def _ended(client: httpx.AsyncClient, run_id: str) -> None:
    """Until the run's last event (its stream replays what is stored, then follows it live)."""
    async with client.stream("GET", f"/v1/research/{run_id}/events", timeout=TIMEOUT) as response:
        async for line in response.aiter_lines():
            if line.startswith("event:") and line.split(":", 1)[1].strip() in ("complete", "error"):
                return


async def _timed(client: httpx.AsyncClient, path: str) -> float:
    started = time.perf_counter()
    response = await client.get(path)
    response.raise_for_status()
    return (time.perf_counter() - started) * 1000


async def _run(client: httpx.AsyncClient, question: str) -> tuple[str, float]:
    started = time.perf_counter()
    run_id, _ = await _submit(client, question)
    await asyncio.wait_for(_ended(client, run_id), TIMEOUT)
    return run_id, (time.perf_counter() - started) * 1000


async def _pages(client: httpx.AsyncClient, paths: dict[str, str], samples: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(samples):
        for name, path in paths.items():
            times[name].append(await _timed(client, path))
    return times


async def _burst(client: httpx.AsyncClient, paths: dict[str, str], figures: Figures) -> None:
    """``BURST`` runs submitted at once; the pages are opened one after another until every run has ended."""
    figures.busy = {name: [] for name in paths}
    started = time.perf_counter()
    submitting = asyncio.gather(*(_submit(client, q) for q in BURST_QUESTIONS[:BURST]))
    ending: asyncio.Future[list[None]] | None = None
    try:
        while ending is None or not ending.done():
            if ending is None and submitting.done():
                submitted = await submitting
                figures.submits_ms = [ms for _, ms in submitted]
                ending = asyncio.gather(*(_ended(client, run_id) for run_id, _ in submitted))
            for name, path in paths.items():
                figures.busy[name].append(await _timed(client, path))
            await asyncio.sleep(0.05)
            if time.perf_counter() - started > TIMEOUT:
                raise TimeoutError(f"{BURST} runs did not end within {TIMEOUT:.0f} s")
        await ending
    finally:
        submitting.cancel()
        if ending is not None:
            ending.cancel()
    figures.burst_s = time.perf_counter() - started


def _grow(database: Path, run_id: str, total: int) -> int:
    """Copy stored run rows until ``total`` runs are stored: ``SAME_QUESTION_SHARE`` of them copies of ``run_id``
    (its question and template), the rest copies of the other runs. Every column is copied but the ID, so any
    column the schema has (a question's key) is filled as the app fills it. Returns the runs now stored."""
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as db, db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(research_runs)") if row[1] != "id"]
        names = ", ".join(columns)
        others = [r[0] for r in db.execute("SELECT id FROM research_runs WHERE id != ?", (run_id,))]
        stored = 1 + len(others)
        same = int(total * SAME_QUESTION_SHARE)
        plan = [(run_id, same)] + [(o, (total - stored - same) // max(len(others), 1)) for o in others]
        for source, copies in plan:
            db.execute(
                f"WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < ?) "
                f"INSERT INTO research_runs (id, {names}) "
                f"SELECT printf('%08x', k) || substr(id, 9), {names} FROM research_runs, n WHERE id = ?",
                (copies, source),
            )
        return int(db.execute("SELECT count(*) FROM research_runs").fetchone()[0])


def _stored(database: Path) -> int:
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as db:
        return int(db.execute("SELECT count(*) FROM research_runs").fetchone()[0])


@contextlib.asynccontextmanager
async def _server(database: Path, scratch: Path, figures: Figures) -> AsyncIterator[httpx.AsyncClient]:
    """A fresh ``veracity serve`` on a copy of ``database``, once it answers ``/healthz``; a client of it holding
    the CSRF cookie the form needs. Stopped (its process group) on the way out."""
    copy = scratch / "wait.db"
    shutil.copy(database, copy)  # the benchmark's runs never show up in the user's recent runs
    launched = time.perf_counter()
    proc, base = _launch(copy, scratch)
    try:
        async with httpx.AsyncClient(base_url=base, timeout=httpx.Timeout(TIMEOUT)) as client:
            await _ready(client, proc)
            figures.ready_s = time.perf_counter() - launched
            figures.warmed = re.findall(r"(?:warmed .+ in [\d.]+ s|warm-up done in [\d.]+ s)", proc.log())
            await client.get("/")
            yield client
    finally:
        await proc.stop(timeout=15)


async def measure(database: Path) -> Figures:
    figures = Figures(load=[os.getloadavg()[0]])
    with tempfile.TemporaryDirectory(prefix="veracity-wait-") as scratch:
        async with _server(database, Path(scratch), figures) as client:
            first, figures.first_ms = await _run(client, FIRST)
            for question in LATER:
                figures.later_ms.append((await _run(client, question))[1])
            paths = {"GET /runs/{id}": f"/runs/{first}", "GET /": "/"}
            figures.idle = await _pages(client, paths, SAMPLES)
            await _burst(client, paths, figures)
            copy = Path(scratch) / "wait.db"
            figures.history[_stored(copy)] = (await _pages(client, {"page": f"/runs/{first}"}, SAMPLES))["page"]
            grown = await asyncio.to_thread(_grow, copy, first, HISTORY)
            figures.history[grown] = (await _pages(client, {"page": f"/runs/{first}"}, SAMPLES))["page"]
    with tempfile.TemporaryDirectory(prefix="veracity-wait-") as scratch:
        figures.cold = Figures()
        async with _server(database, Path(scratch), figures.cold) as client:
            await _burst(client, {"GET /": "/"}, figures.cold)
    figures.load.append(os.getloadavg()[0])
    return figures


def report(f: Figures) -> str:
    later = statistics.median(f.later_ms)
    ratio = f.first_ms / later
    lines = [
        f"\nno waiting in line (bench/wait.py: veracity serve on a copy of the SQLite database; load average "
        f"{f.load[0]:.1f} at the start, {f.load[-1]:.1f} at the end, {os.cpu_count()} cores)",
        f"  start-up: /healthz answered {f.ready_s:.1f} s after launch; " + "; ".join(f.warmed),
        f"  first run after start {f.first_ms:8.0f} ms",
        f"  later runs, median    {later:8.0f} ms  ({len(f.later_ms)} runs: "
        f"{min(f.later_ms):.0f}-{max(f.later_ms):.0f} ms)",
        f"  first / median        {ratio:8.2f}x    (target about 1x: "
        f"{'met' if f.first_ms <= max(f.later_ms) else 'NOT met'}, within the later runs' range)",
        f"  pages, ms             {'idle p50 / p95':>16}   {f'{BURST} runs in flight p50 / p95 / max':>34}",
    ]
    for name in f.idle:
        idle, busy = f.idle[name], f.busy[name]
        p95 = percentile(busy, 0.95)
        lines.append(
            f"  {name:<20} {statistics.median(idle):8.0f} / {percentile(idle, 0.95):4.0f}   "
            f"{statistics.median(busy):18.0f} / {p95:4.0f} / {max(busy):4.0f}  "
            f"(n={len(busy)}; p95 <= {PAGE_TARGET_MS:.0f} ms: {'met' if p95 <= PAGE_TARGET_MS else 'NOT met'})"
        )
    lines.append(
        f"  {BURST} submits at once      each answered in p50 {statistics.median(f.submits_ms):.0f} ms, "
        f"max {max(f.submits_ms):.0f} ms; all {BURST} runs ended {f.burst_s:.1f} s after the first submit"
    )
    if f.cold is not None:
        home = f.cold.busy["GET /"]
        lines.append(
            f"  the same, as a fresh server's first requests: submits p50 {statistics.median(f.cold.submits_ms):.0f} "
            f"ms, max {max(f.cold.submits_ms):.0f} ms; GET / p50 / p95 / max {statistics.median(home):.0f} / "
            f"{percentile(home, 0.95):.0f} / {max(home):.0f} ms (n={len(home)}); all ended after {f.cold.burst_s:.1f} s"
        )
    (few, small), (many, large) = sorted(f.history.items())
    growth = percentile(large, 0.95) / percentile(small, 0.95)
    lines.append(
        f"  run page at {few} vs {many:,} stored runs: p50 {statistics.median(small):.0f} vs "
        f"{statistics.median(large):.0f} ms, p95 {percentile(small, 0.95):.0f} vs {percentile(large, 0.95):.0f} ms = "
        f"{growth:.2f}x  (target p95 <= {HISTORY_TARGET}x: {'met' if growth <= HISTORY_TARGET else 'NOT met'})"
    )
    return "\n".join(lines)


async def run(database: Path | None = None) -> None:
    """Measure and print (the configured SQLite database unless ``database``; skipped on PostgreSQL)."""
    if database is None:
        url = get_settings().database.url
        if not url.startswith("sqlite") or not make_url(url).database:
            print("\nno waiting in line: skipped (it measures `veracity serve` on a SQLite database)")
            return
        database = Path(str(make_url(url).database))
    print(report(await measure(database)))


if __name__ == "__main__":
    asyncio.run(run(Path(sys.argv[1]) if len(sys.argv) > 1 else None))
