"""Faults with real processes on PostgreSQL (issue 16): a queue-only ``veracity serve`` and two ``veracity worker``
processes on 127.0.0.1.

- A worker killed with SIGKILL mid-run: the run is taken over by the other worker and completes — gapless,
  duplicate-free event numbers, one ``run_started``, one ``complete``, one artifact — and a viewer following it over
  SSE on the web process saw every stored event, in order.
- A worker frozen (SIGSTOP) past its lease: the other worker takes the run over; thawed (SIGCONT), the frozen one
  writes nothing more of it (its fence no longer holds) and the run completes once.
- A database outage of a few seconds between one worker and PostgreSQL (a TCP proxy in the test cuts every
  connection and refuses new ones for ~3 s): the run completes (resumed) or ends with a true, SQL-free reason from
  ``veracity.messages`` — within a bounded wait, never with two endings.

Every process is started here, bounded in time and killed on the way out."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from httpx_sse import aconnect_sse

from test_worker import (  # the process helpers of the queue's own tests
    RUN,
    Proc,
    _artifacts,
    _events,
    _free_port,
    _healthy,
    _query,
    _ready,
    _until,
    queue_db,  # noqa: F401  (the fixture)
    web,
    worker,
)
from veracity import messages

SLOW = {"VERACITY_LIMITS__EVENT_DELAY_MS": "400"}  # ~25 events 400 ms apart: a run lasts ~10 s
LEASE = {"VERACITY_LIMITS__RUN_LEASE_SECONDS": "2"}
ENDINGS = ("complete", "error")


async def _owner(url: str, run_id: str) -> str | None:
    (row,) = await _query(url, "SELECT owner FROM research_runs WHERE id = $1", run_id)
    return row["owner"]


async def _run(url: str, run_id: str) -> dict[str, object]:
    (row,) = await _query(
        url, "SELECT status, outcome, error, owner, lease_generation, resumes FROM research_runs WHERE id = $1", run_id
    )
    return dict(row)


def _pid_of(owner: str | None) -> int | None:
    return int(owner.split(":")[1]) if owner else None


class Viewer:
    """Follows a run over SSE on a web process from its start (``POST /v1/research/stream``), until its ending."""

    def __init__(self) -> None:
        self.events: list[tuple[int, str]] = []
        self.run_id: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task[None] | None = None

    async def _follow(self, base: str) -> None:
        async with (
            httpx.AsyncClient(timeout=httpx.Timeout(10, read=60)) as client,
            aconnect_sse(client, "POST", f"{base}/v1/research/stream", json=RUN) as source,
        ):
            self.run_id.set_result(source.response.headers["x-run-id"])
            async for sse in source.aiter_sse():
                self.events.append((int(sse.id), sse.event))
                if sse.event in ENDINGS:
                    return

    async def start(self, base: str) -> str:
        self.task = asyncio.create_task(self._follow(base))
        return await asyncio.wait_for(asyncio.shield(self.run_id), 30)

    async def finish(self, timeout: float = 60) -> list[tuple[int, str]]:
        assert self.task is not None
        await asyncio.wait_for(self.task, timeout)
        return self.events


async def _running_on(url: str, run_id: str, procs: list[Proc], after: str) -> Proc:
    """Wait until one of ``procs`` owns the run and ``after`` is stored; that process."""
    found: list[Proc] = []

    async def ready() -> bool:
        owner = _pid_of(await _owner(url, run_id))
        names = [n for _, n in await _events(url, run_id)]
        mine = [p for p in procs if p.proc.pid == owner]
        if mine and after in names and not any(n in ENDINGS for n in names):
            found[:] = mine
            return True
        return False

    await _until(ready, f"a worker to be executing the run past {after}", timeout=60)
    return found[0]


def _assert_once(events: list[tuple[int, str]]) -> None:
    """Gapless, duplicate-free event numbers, one start and one ending (complete)."""
    names = [n for _, n in events]
    assert [s for s, _ in events] == list(range(1, len(events) + 1)), events
    assert names.count("run_started") == 1, names
    assert names.count("complete") == 1 and names.count("error") == 0 and names[-1] == "complete", names


async def _owners_until_ended(url: str, run_id: str, timeout: float) -> list[str]:
    """Every distinct owner the run has (polled every 50 ms) until it ends."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = await _run(url, run_id)
        owner = row["owner"]
        if isinstance(owner, str) and (not seen or seen[-1] != owner):
            seen.append(owner)
        if row["status"] not in ("pending", "running"):
            return seen
        await asyncio.sleep(0.05)
    pytest.fail(f"run {run_id} did not end within {timeout} s (owners seen: {seen})")


def _resumed_in(procs: dict[str, Proc], run_id: str) -> list[str]:
    """The processes whose log says they resumed the run."""
    return [name for name, p in procs.items() if f"run {run_id}: its executor stopped; resumed here" in p.log()]


async def test_a_worker_killed_mid_run_is_resumed_by_the_other_worker_and_the_viewer_sees_every_event(
    queue_db: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    with (
        web(queue_db, tmp_path, **LEASE) as (server, base),
        worker(queue_db, tmp_path / "w1.log", **SLOW, **LEASE) as w1,
        worker(queue_db, tmp_path / "w2.log", **SLOW, **LEASE) as w2,
    ):
        await _until(lambda: _healthy(base), "the web process", server)
        await _ready(w1)
        await _ready(w2)
        viewer = Viewer()
        run_id = await viewer.start(base)
        victim = await _running_on(queue_db, run_id, [w1, w2], after="planner_complete")
        survivor = w2 if victim is w1 else w1
        before = await _events(queue_db, run_id)
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(timeout=10)
        killed = time.monotonic()
        owners = await _owners_until_ended(queue_db, run_id, timeout=90)
        resumed_after = time.monotonic() - killed
        streamed = await viewer.finish()
        assert survivor.stop() == 0 and server.stop() == 0

    stored = await _events(queue_db, run_id)
    _assert_once(stored)
    assert stored[: len(before)] == before  # nothing stored before the kill was rewritten
    assert streamed == stored  # the viewer on the web process saw every event, once, in order
    assert await _artifacts(queue_db, run_id) == 1
    row = await _run(queue_db, run_id)
    assert (row["status"], row["outcome"], row["error"], row["owner"], row["resumes"]) == (
        "done",
        "shipped",
        None,
        None,
        1,
    )
    # Who took it over: the other worker, never the queue-only web process (it executes no run).
    assert _resumed_in({"survivor": survivor, "web": server}, run_id) == ["survivor"]
    assert [_pid_of(o) for o in owners] == [victim.proc.pid, survivor.proc.pid], owners
    assert resumed_after < 60, resumed_after


async def test_a_worker_frozen_past_its_lease_writes_nothing_more_once_thawed(
    queue_db: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    with (
        web(queue_db, tmp_path, **LEASE) as (server, base),
        worker(queue_db, tmp_path / "w1.log", **SLOW, **LEASE) as w1,
        worker(queue_db, tmp_path / "w2.log", **SLOW, **LEASE) as w2,
    ):
        await _until(lambda: _healthy(base), "the web process", server)
        await _ready(w1)
        await _ready(w2)
        viewer = Viewer()
        run_id = await viewer.start(base)
        frozen = await _running_on(queue_db, run_id, [w1, w2], after="planner_complete")
        other = w2 if frozen is w1 else w1
        frozen.proc.send_signal(signal.SIGSTOP)
        try:

            async def taken_over() -> bool:
                return _pid_of(await _owner(queue_db, run_id)) == other.proc.pid

            await _until(taken_over, "the other worker to take the run over", other, timeout=60)
            seq_at_takeover = len(await _events(queue_db, run_id))
        finally:
            frozen.proc.send_signal(signal.SIGCONT)
        await _owners_until_ended(queue_db, run_id, timeout=90)
        streamed = await viewer.finish()
        await asyncio.sleep(2)  # the thawed worker's upkeep beats at least once more: it must write nothing
        after_end = await _events(queue_db, run_id)
        assert frozen.proc.poll() is None  # the thawed worker lives on (it lost one run, not its mind)
        assert frozen.stop() == 0 and other.stop() == 0 and server.stop() == 0

    _assert_once(after_end)
    assert streamed == after_end
    assert seq_at_takeover < len(after_end)
    assert await _artifacts(queue_db, run_id) == 1
    row = await _run(queue_db, run_id)
    assert (row["status"], row["outcome"], row["owner"], row["resumes"]) == ("done", "shipped", None, 1)
    assert _resumed_in({"other": other, "frozen": frozen, "web": server}, run_id) == ["other"]
    log = frozen.log()
    assert f"run {run_id}: lease lost" in log or f"run {run_id} stopped here" in log, log[-3000:]


# ---- a database outage between one worker and PostgreSQL ---------------------------------------------------


class Proxy:
    """A TCP proxy on 127.0.0.1 to PostgreSQL; ``outage(seconds)`` cuts every connection through it and refuses
    new ones (the port closed) for that long, then listens again on the same port."""

    def __init__(self, target_port: int = 5432) -> None:
        self.port = _free_port()
        self.target_port = target_port
        self.server: asyncio.Server | None = None
        self.pipes: set[asyncio.Task[None]] = set()
        self.writers: set[asyncio.StreamWriter] = set()
        self.connections = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, reuse_address=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self.writers |= {writer, up_writer}
        pipes = [asyncio.create_task(self._pipe(reader, up_writer)), asyncio.create_task(self._pipe(up_reader, writer))]
        self.pipes.update(pipes)
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pipes:
                task.cancel()
                self.pipes.discard(task)
            for w in (writer, up_writer):
                self.writers.discard(w)
                w.close()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()

    def _cut(self) -> None:
        for w in list(self.writers):
            transport = w.transport
            transport.abort()  # an RST, as a lost network or a killed server would look to the client
        self.writers.clear()

    async def outage(self, seconds: float) -> None:
        assert self.server is not None
        self.server.close()  # no new connections: the port refuses them
        self._cut()
        await asyncio.sleep(seconds)
        self._cut()  # anything that slipped in meanwhile
        await self.start()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        self._cut()
        for task in list(self.pipes):
            task.cancel()


@contextlib.asynccontextmanager
async def proxy() -> AsyncIterator[Proxy]:
    p = Proxy()
    await p.start()
    try:
        yield p
    finally:
        await p.close()


TRUE_REASONS = (
    messages.RUN_FAILED.format(reason=messages.DATABASE_FAILED),
    messages.RUN_INTERRUPTED,
)


async def test_a_database_outage_of_a_few_seconds_resumes_the_run_or_ends_it_with_the_true_reason(
    queue_db: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    async with proxy() as p:
        proxied = queue_db.replace("127.0.0.1:5432", f"127.0.0.1:{p.port}")
        assert proxied != queue_db
        with (
            web(queue_db, tmp_path, **LEASE) as (server, base),
            worker(proxied, tmp_path / "w.log", **SLOW, **LEASE) as w,
        ):
            await _until(lambda: _healthy(base), "the web process", server)
            await _ready(w)
            viewer = Viewer()
            run_id = await viewer.start(base)
            await _running_on(queue_db, run_id, [w], after="planner_complete")
            before = len(await _events(queue_db, run_id))
            await p.outage(3.0)
            await _owners_until_ended(queue_db, run_id, timeout=120)  # bounded: it never hangs
            streamed = await viewer.finish()
            await asyncio.sleep(2)  # nothing more is written after the ending
            stored = await _events(queue_db, run_id)
            assert w.proc.poll() is None, w.log()  # the worker outlived the outage
            # Off the event loop: the proxy runs on it, and the worker's shutdown goes through the proxy.
            assert await asyncio.to_thread(w.stop) == 0 and server.stop() == 0

    names = [n for _, n in stored]
    assert [s for s, _ in stored] == list(range(1, len(stored) + 1)), stored
    assert sum(names.count(e) for e in ENDINGS) == 1 and names[-1] in ENDINGS, names
    assert names.count("run_started") == 1
    assert streamed == stored
    assert len(stored) > before
    row = await _run(queue_db, run_id)
    if names[-1] == "complete":
        assert (row["status"], row["outcome"]) == ("done", "shipped")
        assert await _artifacts(queue_db, run_id) == 1
    else:
        assert row["status"] == "failed"
        error = str(row["error"])
        assert error in TRUE_REASONS or error.startswith(messages.RUN_NOT_RESUMED.split("{", 1)[0]), error
        assert "SELECT" not in error and "INSERT" not in error and "UPDATE" not in error
        assert await _artifacts(queue_db, run_id) == 0
    print(f"\noutage: the run ended with {names[-1]} ({row['status']}, resumes {row['resumes']}, error {row['error']})")
    print(f"outage: the worker's log mentions: {_summarise(w.log(), run_id)}")


def _summarise(log: str, run_id: str) -> str:
    keys = ("resumed here", "lease lost", "stopped here", "failed transiently", "run queue failed", "failed")
    return "; ".join(sorted({k for k in keys if any(k in line and run_id in line for line in log.splitlines())}))
