"""Live viewing through the process's feed (runs/feed.py), on SQLite and the real PostgreSQL: one reader per run
however many viewers, every event to every viewer once and in order, idle viewers cost no query, a finished run's
viewers end at once, and a viewer in another ``veracity serve`` process follows a run over SSE far faster than the
safety-net poll (PostgreSQL LISTEN/NOTIFY), also after its listener connection was cut."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from httpx_sse import aconnect_sse
from sqlalchemy import event as sa_event
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from conftest import PG_ADMIN_DSN, SMALL_CORPUS, load_docs, make_settings, sqlite_url
from veracity import messages
from veracity.db import runs_repo
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.listener import asyncpg_dsn
from veracity.db.migrate import upgrade
from veracity.db.models import ResearchRun
from veracity.errors import NotFound
from veracity.events import RunStarted
from veracity.runs.service import RunService
from veracity.web.sse import json_message, json_stream

VERACITY = str(Path(sys.executable).parent / "veracity")
QUESTION = "Which countries grow most of the world's coffee?"


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database with the small corpus: a SQLite file, or a fresh PostgreSQL database."""
    url = sqlite_url(tmp_path / "feed.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")
    upgrade(url)
    asyncio.run(load_docs(url, "small", SMALL_CORPUS))
    return url


@pytest.fixture
async def service_on(any_db: str) -> AsyncIterator[tuple[RunService, AsyncEngine]]:
    """A run service (with its own feed) whose safety-net poll is 30 s: anything seen sooner came by a wake-up."""
    engine = make_engine(any_db)
    service = RunService.from_settings(make_settings(any_db, feed_poll_seconds=30), make_sessionmaker(engine))
    try:
        yield service, engine
    finally:
        await service.shutdown(5)
        await engine.dispose()


def count_statements(engine: AsyncEngine) -> list[str]:
    """Every SQL statement the engine sends from now on, appended as it goes."""
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    sa_event.listen(engine.sync_engine, "before_cursor_execute", record)
    return statements


async def held_run(service: RunService, run_id: str) -> None:
    """A running run this service holds (its events written by hand through the journal)."""
    async with service.sessionmaker() as session, session.begin():
        run = await runs_repo.create_run(
            session=session,
            run_id=run_id,
            template_id="answer",
            question="q",
            corpus="small",
            budgets={},
            owner=service.owner,
        )
        service.journal.hold(runs_repo.Fence(run_id=run_id, owner=service.owner, generation=run.lease_generation))
        await session.execute(update(ResearchRun).where(ResearchRun.id == run_id).values(status="running"))


async def stored(sessionmaker: async_sessionmaker[AsyncSession], run_id: str) -> list[tuple[int, str]]:
    async with sessionmaker() as session:
        return [(e.seq, e.name) for e in await runs_repo.events_after(session=session, run_id=run_id)]


async def until(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


async def test_two_hundred_viewers_of_one_run_get_every_event_once_in_order(
    service_on: tuple[RunService, AsyncEngine],
) -> None:
    service, _ = service_on
    run_id = await service.start(question=QUESTION, template="answer", corpus="small")

    async def view(after: int = 0) -> list[tuple[int, str]]:
        return [(e.seq, e.name) async for e in service.tail(run_id, after)]

    early = [asyncio.create_task(view()) for _ in range(150)]
    await asyncio.sleep(0.05)  # some join mid-run, a few from a cursor
    late = [asyncio.create_task(view(after)) for after in [0] * 47 + [1, 2, 3]]
    seen = await asyncio.wait_for(asyncio.gather(*early, *late), 25)  # far inside the 30 s safety net

    events = await stored(service.sessionmaker, run_id)
    assert events[-1][1] == "complete" and [seq for seq, _ in events] == list(range(1, len(events) + 1))
    assert seen[:197] == [events] * 197
    assert seen[197:] == [events[1:], events[2:], events[3:]]
    assert service.feed.viewing() == {}  # the run's state is dropped with its last viewer


async def test_fifty_json_streams_of_one_run_send_each_event_encoded_once(
    service_on: tuple[RunService, AsyncEngine],
) -> None:
    # Regression (bench/scale.py): every SSE viewer re-encoded every event, over a third of a web process's CPU per
    # message with 500 viewers; the feed hands them all one event object, so one encoding serves them all.
    service, _ = service_on
    run_id = await service.start(question=QUESTION, template="answer", corpus="small")

    async def stream() -> list[bytes]:
        return [message async for message in json_stream(service.tail(run_id))]

    streams = await asyncio.wait_for(asyncio.gather(*(stream() for _ in range(50))), 25)
    async with service.sessionmaker() as session:
        events = await runs_repo.events_after(session=session, run_id=run_id)
    assert events[-1].name == "complete"
    assert streams[0] == [json_message(e).encode() for e in events]  # the wire is unchanged
    for i, message in enumerate(streams[0]):
        assert all(s[i] is message for s in streams[1:])  # one object: encoded once, sent fifty times


async def test_idle_viewers_make_no_queries_and_each_event_costs_the_same_queries_for_1_or_100_viewers(
    service_on: tuple[RunService, AsyncEngine],
) -> None:
    service, engine = service_on
    statements = count_statements(engine)
    counts = {}
    for viewers in (1, 100):
        run_id = f"{viewers:032x}"
        await held_run(service, run_id)
        for _ in range(2):
            await service.emit(run_id, RunStarted(template="answer", corpus="small"))
        seen: list[list[int]] = [[] for _ in range(viewers)]

        async def view(into: list[int], run_id: str = run_id) -> None:
            async for e in service.tail(run_id):
                into.append(e.seq)

        tasks = [asyncio.create_task(view(into)) for into in seen]
        await until(lambda seen=seen: all(len(s) == 2 for s in seen))
        if service.feed.listener is not None:  # its (first) connection makes every reader read once more
            await asyncio.wait_for(service.feed.listener.connected.wait(), 10)
            await asyncio.sleep(0.2)
        statements.clear()
        await asyncio.sleep(1.0)
        assert statements == [], f"{viewers} idle viewer(s) queried"
        for n in range(3, 8):
            await service.emit(run_id, RunStarted(template="answer", corpus="small"))
            await until(lambda seen=seen, n=n: all(len(s) == n for s in seen))
        await asyncio.sleep(0.2)  # a late notification from PostgreSQL would be counted here
        counts[viewers] = len(statements)
        assert await service.journal.fail(run_id, "done with it")
        await asyncio.wait_for(asyncio.gather(*tasks), 5)
        assert seen == [list(range(1, 9))] * viewers
    # hold, max(seq), insert (PostgreSQL: and bound_idle's set_config before them, pg_notify after)
    emit_statements = 5 * (5 if "postgresql" in str(engine.url) else 3)
    assert counts[1] == counts[100] == emit_statements + 5  # one read per event, whatever the viewers


async def test_viewers_of_a_finished_run_end_at_once_from_one_read(service_on: tuple[RunService, AsyncEngine]) -> None:
    service, engine = service_on
    run_id = await service.start(question=QUESTION, template="answer", corpus="small")
    await service.wait(run_id)
    events = await stored(service.sessionmaker, run_id)
    statements = count_statements(engine)

    async def view() -> list[tuple[int, str]]:
        return [(e.seq, e.name) async for e in service.tail(run_id)]

    started = time.monotonic()
    seen = await asyncio.wait_for(asyncio.gather(*(view() for _ in range(100))), 5)
    assert time.monotonic() - started < 2
    assert seen == [events] * 100
    assert len(statements) == 3  # the run's newest seq, its status and its events: once for all hundred


async def test_a_viewer_from_before_what_the_feed_holds_reads_that_part_once(
    service_on: tuple[RunService, AsyncEngine],
) -> None:
    service, _ = service_on
    run_id = "b" * 32
    await held_run(service, run_id)
    for _ in range(5):
        await service.emit(run_id, RunStarted(template="answer", corpus="small"))
    first: list[int] = []
    second: list[int] = []

    async def view(into: list[int], after: int) -> None:
        async for e in service.tail(run_id, after):
            into.append(e.seq)

    a = asyncio.create_task(view(first, 3))  # the feed holds the run from seq 3 on
    await until(lambda: first == [4, 5])
    b = asyncio.create_task(view(second, 0))
    await until(lambda: second == [1, 2, 3, 4, 5])
    assert await service.journal.fail(run_id, "the end")
    await asyncio.wait_for(asyncio.gather(a, b), 5)
    assert (first, second) == ([4, 5, 6], [1, 2, 3, 4, 5, 6])


async def test_following_a_run_that_does_not_exist_is_not_found(service_on: tuple[RunService, AsyncEngine]) -> None:
    service, _ = service_on
    with pytest.raises(NotFound) as caught:
        async for _ in service.tail("0" * 32):
            pass
    assert str(caught.value) == messages.RUN_UNKNOWN.format(run_id="0" * 32)
    assert service.feed.viewing() == {}


# ---- across processes (PostgreSQL) ------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def pg_db(pg_url: str) -> str:
    upgrade(pg_url)
    asyncio.run(load_docs(pg_url, "small", SMALL_CORPUS))
    return pg_url


@pytest.fixture
def process_b(pg_db: str, tmp_path: Path) -> Iterator[str]:
    """A second process: ``veracity serve`` on the same PostgreSQL database, its safety-net poll 30 s."""
    port = _free_port()
    env = {
        **os.environ,
        "VERACITY_DATABASE__URL": pg_db,
        "VERACITY_CORPUS__AUTOLOAD_WIKI": "false",
        "VERACITY_SEMANTIC__ENABLED": "false",
        "VERACITY_LIMITS__FEED_POLL_SECONDS": "30",
    }
    log = (tmp_path / "b.log").open("wb")
    proc = subprocess.Popen(
        [VERACITY, "serve", "--host", "127.0.0.1", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "b.log").read_text()
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "veracity serve did not start"
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        log.close()


async def _follow_over_sse(base: str, run_id: str) -> list[tuple[int, str, datetime]]:
    """Every SSE message of the run from process B: (id, event, when it arrived)."""
    got: list[tuple[int, str, datetime]] = []
    async with httpx.AsyncClient(base_url=base, timeout=40) as client:
        async with aconnect_sse(client, "GET", f"/v1/research/{run_id}/events") as source:
            async for sse in source.aiter_sse():
                got.append((int(sse.id), sse.event, datetime.now(UTC)))
    return got


@pytest.mark.postgres
async def test_a_viewer_in_another_serve_process_follows_a_run_through_listen_notify(
    pg_db: str, process_b: str
) -> None:
    engine = make_engine(pg_db)
    sessionmaker = make_sessionmaker(engine)
    a = RunService.from_settings(make_settings(pg_db, feed_poll_seconds=30, event_delay_ms=40), sessionmaker)
    try:
        run_id = await a.start(question=QUESTION, template="answer", corpus="small")
        started = time.monotonic()
        got = await asyncio.wait_for(_follow_over_sse(process_b, run_id), 25)
        took = time.monotonic() - started
        events = await stored(sessionmaker, run_id)
        assert [(seq, name) for seq, name, _ in got] == events and events[-1][1] == "complete"
        async with sessionmaker() as session:
            at = {e.seq: e.created_at for e in await runs_repo.events_after(session=session, run_id=run_id)}
        lags = [(arrived - at[seq]).total_seconds() for seq, _, arrived in got[3:]]  # the first may be replayed
        assert len(lags) > 10 and max(lags) < 1.0, f"lags {lags}"  # far inside the 30 s safety net
        assert took < 15
    finally:
        await a.shutdown(5)
        await engine.dispose()


@pytest.mark.postgres
async def test_a_cut_listener_reconnects_and_its_viewers_miss_nothing(pg_db: str) -> None:
    engines = [make_engine(pg_db), make_engine(pg_db)]
    writer, viewer = (
        RunService.from_settings(make_settings(pg_db, feed_poll_seconds=30), make_sessionmaker(e)) for e in engines
    )
    try:
        run_id = "c" * 32
        await held_run(writer, run_id)
        seen: list[int] = []

        async def view() -> None:
            async for e in viewer.tail(run_id):
                seen.append(e.seq)

        task = asyncio.create_task(view())
        listener = viewer.feed.listener
        assert listener is not None
        await asyncio.wait_for(listener.connected.wait(), 10)
        await writer.emit(run_id, RunStarted(template="answer", corpus="small"))
        await until(lambda: seen == [1], 5)  # from another process's feed: only the notification wakes it

        admin = await asyncpg.connect(PG_ADMIN_DSN)
        try:  # cut every other connection to the test database: the viewer's listener among them
            database = asyncpg_dsn(pg_db).rsplit("/", 1)[1]
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                database,
            )
        finally:
            await admin.close()
        await until(lambda: not listener.connected.is_set(), 5)
        await writer.emit(run_id, RunStarted(template="answer", corpus="small"))  # maybe while it is away
        await until(lambda: listener.connects >= 2, 10)
        await until(lambda: seen == [1, 2], 5)  # the reconnect's wake-up reads what was missed
        await writer.emit(run_id, RunStarted(template="answer", corpus="small"))
        await until(lambda: seen == [1, 2, 3], 5)
        assert await writer.journal.fail(run_id, "the end")
        await asyncio.wait_for(task, 5)
        assert seen == [1, 2, 3, 4]
    finally:
        for s in (writer, viewer):
            await s.shutdown(5)
        for e in engines:
            await e.dispose()


async def test_a_made_up_cursor_of_the_first_viewer_does_not_hold_back_the_others(
    service_on: tuple[RunService, AsyncEngine],
) -> None:
    """The first viewer of a run in a process names a Last-Event-ID far past the run's end: the feed's reader still
    starts from what is stored, so a browser that opens the run next gets every event through ``complete``."""
    service, _ = service_on
    run_id = await service.start(question=QUESTION, template="answer", corpus="small")
    bogus = asyncio.create_task(_collect(service, run_id, 10**6))
    await asyncio.sleep(0.05)
    seen = await asyncio.wait_for(_collect(service, run_id, 0), 25)  # far inside the 30 s safety net
    events = await stored(service.sessionmaker, run_id)
    assert seen == events and events[-1][1] == "complete"
    bogus.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await bogus


async def _collect(service: RunService, run_id: str, after: int) -> list[tuple[int, str]]:
    return [(e.seq, e.name) async for e in service.tail(run_id, after)]
