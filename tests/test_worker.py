"""Workers fed by the run queue (pgqueuer, in the app's PostgreSQL database), with real processes on 127.0.0.1: a
``veracity serve`` with ``VERACITY_WORKER__EMBEDDED=false`` only queues, streams and reads runs; ``veracity worker``
processes claim and execute them, each run once; a run queued while no worker runs waits (it is not swept) until
one starts. Plus the claim itself (``runs_repo.claim_run``) on SQLite and PostgreSQL, and the refusal on SQLite."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx
import pytest
from httpx_sse import aconnect_sse

from conftest import SMALL_CORPUS, load_docs, make_settings, sqlite_url
from veracity import messages
from veracity.db import runs_repo
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.jobs import asyncpg_dsn
from veracity.db.migrate import upgrade
from veracity.db.transient import is_transient

VERACITY = str(Path(sys.executable).parent / "veracity")
REPO = Path(__file__).resolve().parents[1]
RUN = {"question": "coffee market", "template": "market_brief", "corpus": "small"}
BASE_ENV = {
    "VERACITY_CORPUS__AUTOLOAD_WIKI": "false",
    "VERACITY_SEMANTIC__ENABLED": "false",  # lexical runs: the processes start in a second
    "VERACITY_LIMITS__EVENT_DELAY_MS": "150",  # ~12 events: a run lasts about two seconds
    "VERACITY_LIMITS__RUN_LEASE_SECONDS": "3",  # a sweep every 3 s: a queued run must survive several
}


@pytest.fixture
def queue_db(pg_url: str) -> str:
    """A fresh PostgreSQL database, migrated (pgqueuer's tables included), with the small corpus."""
    upgrade(pg_url)
    asyncio.run(load_docs(pg_url, "small", SMALL_CORPUS))
    return pg_url


@dataclass
class Proc:
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, then wait for a clean exit (killed if it does not come). uvicorn re-raises the signal after
        its graceful shutdown, so a server that stopped cleanly reports -SIGTERM; 0 is returned for it too."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                pytest.fail(f"{self.proc.args} did not stop within {timeout} s:\n{self.log()}")
        graceful = self.proc.returncode == -signal.SIGTERM and "Finished server process" in self.log()
        return 0 if graceful else self.proc.returncode


@contextmanager
def launched(args: list[str], url: str, log_path: Path, **env: str) -> Iterator[Proc]:
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [VERACITY, *args],
            cwd=REPO,
            env={**os.environ, **BASE_ENV, "VERACITY_DATABASE__URL": url, **env},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    handle = Proc(proc, log_path)
    try:
        yield handle
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _until(check: Callable[[], object], what: str, proc: Proc | None = None, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not await _value(check()):
        if proc is not None and proc.proc.poll() is not None:
            pytest.fail(f"{proc.proc.args} exited with {proc.proc.returncode} waiting for {what}:\n{proc.log()}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}" + (f":\n{proc.log()}" if proc else ""))
        await asyncio.sleep(0.2)


async def _value(value: object) -> object:
    return await value if asyncio.iscoroutine(value) else value


@contextmanager
def web(url: str, tmp_path: Path, **env: str) -> Iterator[tuple[Proc, str]]:
    """``veracity serve`` that only queues, streams and reads runs."""
    port = _free_port()
    args = ["serve", "--host", "127.0.0.1", "--port", str(port)]
    with launched(args, url, tmp_path / "web.log", VERACITY_WORKER__EMBEDDED="false", **env) as proc:
        yield proc, f"http://127.0.0.1:{port}"


async def _healthy(base: str) -> bool:
    try:
        async with httpx.AsyncClient(timeout=2) as client:
            return (await client.get(f"{base}/healthz")).status_code == 200
    except httpx.TransportError:
        return False


@contextmanager
def worker(url: str, log_path: Path, **env: str) -> Iterator[Proc]:
    with launched(["worker"], url, log_path, **env) as proc:
        yield proc


async def _ready(proc: Proc) -> None:
    await _until(lambda: "is taking runs from the queue" in proc.log(), "the worker to start", proc)


async def _post_run(client: httpx.AsyncClient, base: str) -> str:
    """Start a run through the web process's API; its stream is closed at once (runs never depend on viewers)."""
    async with client.stream("POST", f"{base}/v1/research/stream", json=RUN) as response:
        assert response.status_code == 200
        return response.headers["x-run-id"]


async def _query(url: str, sql: str, *args: object) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        return list(await connection.fetch(sql, *args))
    finally:
        await connection.close()


async def _run_row(url: str, run_id: str) -> asyncpg.Record:
    (row,) = await _query(url, "SELECT status, owner, lease_generation FROM research_runs WHERE id = $1", run_id)
    return row


async def _events(url: str, run_id: str) -> list[tuple[int, str]]:
    rows = await _query(url, "SELECT seq, name FROM run_events WHERE run_id = $1 ORDER BY seq", run_id)
    return [(r["seq"], r["name"]) for r in rows]


async def _artifacts(url: str, run_id: str) -> int:
    (row,) = await _query(url, "SELECT count(*) AS n FROM artifact_versions WHERE run_id = $1", run_id)
    return int(row["n"])


def _claimed(proc: Proc) -> set[str]:
    """The runs a worker's log says it claimed."""
    return {line.split("run ", 1)[1].split(":", 1)[0] for line in proc.log().splitlines() if ": claimed by " in line}


def _assert_executed_once(events: list[tuple[int, str]]) -> None:
    names = [n for _, n in events]
    assert [s for s, _ in events] == list(range(1, len(events) + 1))  # gapless
    assert names.count("run_started") == 1 and names.count("complete") == 1 and names[-1] == "complete", names


# ---- processes --------------------------------------------------------------------------------------------


async def test_a_worker_executes_the_run_a_queue_only_web_process_streams(queue_db: str, tmp_path: Path) -> None:
    with web(queue_db, tmp_path) as (server, base), worker(queue_db, tmp_path / "w1.log") as w1:
        await _until(lambda: _healthy(base), "the web process", server)
        await _ready(w1)
        streamed: list[tuple[int, str]] = []
        owner_while_running: str | None = None
        async with (
            httpx.AsyncClient(timeout=httpx.Timeout(10, read=60)) as client,
            aconnect_sse(client, "POST", f"{base}/v1/research/stream", json=RUN) as source,
        ):
            run_id = source.response.headers["x-run-id"]
            async for sse in source.aiter_sse():
                streamed.append((int(sse.id), sse.event))
                if sse.event == "run_started":
                    owner_while_running = (await _run_row(queue_db, run_id))["owner"]
                if sse.event in ("complete", "error"):
                    break
        assert w1.stop() == 0  # SIGTERM with nothing running: a clean exit
        assert server.stop() == 0

    # The worker's process held the run, not the web's: owner is host:pid:nonce.
    assert owner_while_running is not None and owner_while_running.split(":")[1] == str(w1.proc.pid)
    assert _claimed(w1) == {run_id} and ": claimed by " not in server.log()
    stored = await _events(queue_db, run_id)
    _assert_executed_once(stored)
    assert streamed == stored  # the web process streamed every event, in order
    assert await _artifacts(queue_db, run_id) == 1
    row = await _run_row(queue_db, run_id)
    assert (row["status"], row["owner"], row["lease_generation"]) == ("done", None, 1)


async def test_two_workers_execute_every_run_exactly_once_and_share_them(queue_db: str, tmp_path: Path) -> None:
    two = {"VERACITY_WORKER__CONCURRENCY": "2"}  # at most two runs each at once: six cannot all go to one
    with (
        web(queue_db, tmp_path) as (server, base),
        worker(queue_db, tmp_path / "w1.log", **two) as w1,
        worker(queue_db, tmp_path / "w2.log", **two) as w2,
    ):
        await _until(lambda: _healthy(base), "the web process", server)
        await _ready(w1)
        await _ready(w2)
        async with httpx.AsyncClient(timeout=30) as client:
            runs = [await _post_run(client, base) for _ in range(6)]

        async def all_done() -> bool:
            rows = await _query(queue_db, "SELECT status FROM research_runs WHERE id = ANY($1::varchar[])", runs)
            return len(rows) == len(runs) and all(r["status"] in ("done", "failed") for r in rows)

        await _until(all_done, "six runs to end", timeout=120)
        assert w1.stop() == 0 and w2.stop() == 0 and server.stop() == 0

    for run_id in runs:
        _assert_executed_once(await _events(queue_db, run_id))
        assert await _artifacts(queue_db, run_id) == 1
    first, second = _claimed(w1), _claimed(w2)
    assert first and second and not first & second and first | second == set(runs)


async def test_a_run_queued_with_no_worker_waits_until_one_starts(queue_db: str, tmp_path: Path) -> None:
    with web(queue_db, tmp_path) as (server, base):
        await _until(lambda: _healthy(base), "the web process", server)
        async with httpx.AsyncClient(timeout=30) as client:
            run_id = await _post_run(client, base)
        await asyncio.sleep(7)  # two lease sweeps of the web process: a queued run has no lease to lapse
        row = await _run_row(queue_db, run_id)
        assert (row["status"], row["owner"]) == ("pending", None)
        assert await _events(queue_db, run_id) == []
        assert len(await _query(queue_db, "SELECT id FROM pgqueuer WHERE status = 'queued'")) == 1

        with worker(queue_db, tmp_path / "late.log") as late:
            started = lambda: _events(queue_db, run_id)  # noqa: E731
            await _until(started, "the late worker to start the queued run", late, timeout=90)
            assert late.stop() == 0  # SIGTERM mid-run: no new runs, this one finishes, then a clean exit
        assert server.stop() == 0
    _assert_executed_once(await _events(queue_db, run_id))
    assert _claimed(late) == {run_id}
    row = await _run_row(queue_db, run_id)
    assert (row["status"], row["owner"]) == ("done", None)


async def test_a_stopping_worker_past_its_shutdown_bound_records_its_run_as_interrupted(
    queue_db: str, tmp_path: Path
) -> None:
    with (
        web(queue_db, tmp_path) as (server, base),
        worker(
            queue_db, tmp_path / "w.log", VERACITY_WORKER__SHUTDOWN_SECONDS="0", VERACITY_LIMITS__EVENT_DELAY_MS="1000"
        ) as w,
    ):
        await _until(lambda: _healthy(base), "the web process", server)
        await _ready(w)
        async with httpx.AsyncClient(timeout=30) as client:
            run_id = await _post_run(client, base)
        await _until(lambda: _events(queue_db, run_id), "the worker to start the run", w)
        stopped = time.monotonic()
        assert w.stop(timeout=30) == 0
        assert time.monotonic() - stopped < 15  # bounded: the run (~12 s at this pace) was not waited for
        assert server.stop() == 0
    events = await _events(queue_db, run_id)
    assert [s for s, _ in events] == list(range(1, len(events) + 1))
    assert [n for _, n in events].count("error") == 1 and events[-1][1] == "error"
    row = await _run_row(queue_db, run_id)
    assert (row["status"], row["owner"]) == ("failed", None)
    (error,) = await _query(queue_db, "SELECT error FROM research_runs WHERE id = $1", run_id)
    assert error["error"] == messages.RUN_INTERRUPTED


async def test_serve_embeds_a_worker_on_postgresql_by_default(client_for, queue_db: str) -> None:
    # One process, nothing else started: the server queues the run and its own worker claims and executes it.
    client = await client_for(make_settings(queue_db))
    runtime_service = client.app.state.service
    async with aconnect_sse(client, "POST", "/v1/research/stream", json=RUN) as source:
        run_id = source.response.headers["x-run-id"]
        names = [sse.event async for sse in source.aiter_sse()]
    assert names[0] == "run_started" and names[-1] == "complete"
    _assert_executed_once(await _events(queue_db, run_id))
    assert runtime_service.queue is not None  # it went through the queue, not straight into a task

    async def job_gone() -> bool:  # pgqueuer logs and deletes a finished job a moment after its handler returns
        return await _query(queue_db, "SELECT id FROM pgqueuer") == []

    await _until(job_gone, "the run's job to be done and deleted", timeout=15)


def test_worker_refuses_sqlite(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "w.db")
    env = {**os.environ, "VERACITY_DATABASE__URL": url}
    done = subprocess.run([VERACITY, "worker"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == f"veracity: {messages.WORKER_NEEDS_POSTGRESQL}"
    assert not (tmp_path / "w.db").exists()  # refused before anything was opened


# ---- the claim --------------------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    url = sqlite_url(tmp_path / "claim.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")
    upgrade(url)
    return url


async def test_claim_takes_a_queued_run_once_and_only_a_stale_claim_again(any_db: str) -> None:
    engine = make_engine(any_db)
    sessions = make_sessionmaker(engine)
    try:
        async with sessions() as session, session.begin():
            await runs_repo.create_run(
                session=session, run_id="a" * 32, template_id="answer", question="q", corpus="small", budgets={}
            )

        async def claim(owner: str, stale_before: datetime) -> int | None:
            async with sessions() as session, session.begin():
                return await runs_repo.claim_run(
                    session=session, run_id="a" * 32, owner=owner, stale_before=stale_before
                )

        long_ago = datetime.now(UTC) - timedelta(hours=1)
        assert await claim("w1:1:a", long_ago) == 1
        assert await claim("w2:2:b", long_ago) is None  # w1's lease is fresh
        assert await claim("w2:2:b", datetime.now(UTC) + timedelta(seconds=1)) == 2  # w1's lease lapsed
        async with sessions() as session:
            run = await runs_repo.get_run(session=session, run_id="a" * 32)
            assert run is not None and (run.owner, run.lease_generation) == ("w2:2:b", 2)
        async with sessions() as session, session.begin():
            fence = runs_repo.Fence(run_id="a" * 32, owner="w2:2:b", generation=2)
            await runs_repo.set_run_status(session=session, run_id="a" * 32, status="done", fence=fence)
        assert await claim("w3:3:c", datetime.now(UTC) + timedelta(seconds=1)) is None  # an ended run stays ended
    finally:
        await engine.dispose()


async def test_a_queued_run_is_never_swept(any_db: str) -> None:
    engine = make_engine(any_db)
    sessions = make_sessionmaker(engine)
    try:
        async with sessions() as session, session.begin():
            await runs_repo.create_run(
                session=session, run_id="b" * 32, template_id="answer", question="q", corpus="small", budgets={}
            )
        later = datetime.now(UTC) + timedelta(hours=1)
        async with sessions() as session, session.begin():
            assert await runs_repo.unfinished_runs(session=session, stale_before=later) == []
            assert not await runs_repo.fail_stale(session=session, run_id="b" * 32, stale_before=later, error="x")
            assert [r.id for r in await runs_repo.unfinished_runs(session=session)] == ["b" * 32]
    finally:
        await engine.dispose()


@pytest.fixture
def migrated_pg(pg_url: str) -> str:
    upgrade(pg_url)
    return pg_url


async def test_an_executor_frozen_inside_its_write_does_not_keep_a_sweep_from_the_run(migrated_pg: str) -> None:
    """A process frozen (SIGSTOP, swapped out) between a fenced write's UPDATE and its commit holds the run's row
    lock; the server ends that transaction once it has been idle for the lease (``runs_repo.bound_idle``), so a
    sweep's take-over waits at most that long, and the frozen write, thawed, fails rather than landing. Without
    the bound the take-over waited for ever (seen in CI: a worker frozen past its lease was never taken over)."""
    engine = make_engine(migrated_pg)
    sessions = make_sessionmaker(engine)
    run_id = "f" * 32
    try:
        async with sessions() as session, session.begin():
            await runs_repo.create_run(
                session=session, run_id=run_id, template_id="answer", question="q", corpus="small", budgets={}
            )
            generation = await runs_repo.claim_run(
                session=session, run_id=run_id, owner="w1:1:a", stale_before=datetime.now(UTC)
            )
        assert generation == 1
        frozen = sessions()
        await frozen.begin()
        await runs_repo.bound_idle(session=frozen, seconds=1.0)
        await runs_repo.hold(session=frozen, fence=runs_repo.Fence(run_id=run_id, owner="w1:1:a", generation=1))
        # ... and the process stops here, its transaction open and the run's row locked.

        async def sweep() -> runs_repo.Fence | None:
            async with sessions() as session, session.begin():
                return await runs_repo.claim_stale(
                    session=session,
                    run_id=run_id,
                    owner="w2:2:b",
                    stale_before=datetime.now(UTC) + timedelta(seconds=1),
                    max_resumes=3,
                )

        taken = await asyncio.wait_for(sweep(), timeout=20)
        assert taken == runs_repo.Fence(run_id=run_id, owner="w2:2:b", generation=2)
        # thawed: its connection was closed. Which error says so depends on when the client notices: "connection is
        # closed", the server's idle-in-transaction termination, or (the socket not yet closed behind the server's
        # error, seen in CI under load) asyncpg's "another operation is in progress", which the engine counts as a
        # disconnect. Every one of them must be transient.
        with pytest.raises(Exception, match="closed|terminat|idle|another operation") as ended:
            await frozen.commit()
        assert is_transient(ended.value)  # so the journal's retry meets the new fence, not a failed run
        await frozen.close()
        async with sessions() as session:
            run = await runs_repo.get_run(session=session, run_id=run_id)
            assert run is not None and (run.owner, run.lease_generation, run.resumes) == ("w2:2:b", 2, 1)
    finally:
        await engine.dispose()
