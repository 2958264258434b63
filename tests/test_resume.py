"""Resume, not just fail (issue 16, item 3), on SQLite and on the real PostgreSQL: ``veracity ask`` is killed with
SIGKILL mid-run and another process's sweep takes the run over and resumes it from its last checkpoint — it
completes with gapless, duplicate-free event numbers, one ``run_started``, one ``complete``, one artifact, and the
steps that had completed before the kill do not run (or announce themselves) again. A run that keeps dying is failed
after the bounded number of resumes, and one whose checkpoint cannot be read is failed, each with the true reason.
The state round-trips through the checkpoint serializer as the models it holds."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
import typing
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import TypeAdapter
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from conftest import SMALL_CORPUS, load_docs, make_settings, sqlite_url
from veracity import messages
from veracity.db import runs_repo
from veracity.db.checkpoints import sqlite_path
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.migrate import upgrade
from veracity.db.models import ResearchRun
from veracity.domain import Claim, Evidence
from veracity.events import RunStarted
from veracity.graph.builder import build_graph
from veracity.graph.serde import state_models, state_serializer
from veracity.graph.state import RunState
from veracity.runs.model_set import ModelSet
from veracity.runs.resume import thread_config
from veracity.runs.runtime import Runtime, open_runtime
from veracity.runs.service import RunService

VERACITY = str(Path(sys.executable).parent / "veracity")
LEASE = 2.0


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database (the checkpointer's tables included) with the small corpus."""
    url = sqlite_url(tmp_path / "resume.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")
    upgrade(url)
    asyncio.run(load_docs(url, "small", SMALL_CORPUS))
    return url


async def _runtime(url: str) -> AsyncIterator[Runtime]:
    async with open_runtime(make_settings(url, run_lease_seconds=LEASE), migrate=False, models=ModelSet()) as rt:
        yield rt


async def _events(sessionmaker: async_sessionmaker[AsyncSession], run_id: str) -> list[tuple[int, str]]:
    async with sessionmaker() as session:
        return [(e.seq, e.name) for e in await runs_repo.events_after(session=session, run_id=run_id)]


async def _latest(url: str) -> tuple[str | None, list[tuple[int, str]]]:
    engine = make_engine(url)
    try:
        sessionmaker = make_sessionmaker(engine)
        async with sessionmaker() as session:
            recent = await runs_repo.recent_runs(session=session, limit=1)
        if not recent:
            return None, []
        return recent[0].id, await _events(sessionmaker, recent[0].id)
    finally:
        await engine.dispose()


def _ask_killed_after(url: str, event: str) -> tuple[str, list[tuple[int, str]]]:
    """``veracity ask`` in a subprocess (events 400 ms apart: the run lasts several seconds), killed with SIGKILL
    as soon as ``event`` is stored; the run and its events then."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env |= {
        "VERACITY_DATABASE__URL": url,
        "VERACITY_CORPUS__AUTOLOAD_WIKI": "false",
        "VERACITY_LIMITS__EVENT_DELAY_MS": "400",
        "VERACITY_LIMITS__RUN_LEASE_SECONDS": str(LEASE),
    }
    args = [VERACITY, "ask", "coffee market", "--corpus", "small", "--template", "market_brief", "--progress", "none"]
    proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            run_id, events = asyncio.run(_latest(url))
            if any(name == event for _, name in events):
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=10)
                assert run_id is not None
                return run_id, asyncio.run(_latest(url))[1]
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "veracity ask ended"
            time.sleep(0.05)
        raise AssertionError(f"no {event} event within 90 s")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def _take_over(runtime: Runtime, run_id: str) -> None:
    """Sweep until the dead process's lease lapses and this process takes the run over."""
    for _ in range(60):
        if await runtime.service.recover_interrupted() == [run_id]:
            return
        await asyncio.sleep(0.2)
    raise AssertionError("the run was never taken over")


def test_a_run_killed_mid_run_is_resumed_by_another_process_from_its_last_completed_step(any_db: str) -> None:
    run_id, before = _ask_killed_after(any_db, "retrieve_merge_complete")
    names_before = [n for _, n in before]
    assert "complete" not in names_before and "planner_complete" in names_before

    async def resume() -> tuple[ResearchRun, ResearchRun, int, list[tuple[int, str]], str, bool]:
        async for runtime in _runtime(any_db):
            await _take_over(runtime, run_id)
            async with runtime.sessionmaker() as session:  # claimed here, before it runs on
                claimed = await runs_repo.get_run(session=session, run_id=run_id)
            await runtime.service.wait(run_id)
            async with runtime.sessionmaker() as session:
                ended = await runs_repo.get_run(session=session, run_id=run_id)
                versions = len(await runs_repo.artifact_versions(session=session, run_id=run_id))
            assert claimed is not None and ended is not None and runtime.graph.checkpointer is not None
            saved = await runtime.graph.checkpointer.aget_tuple(thread_config(run_id))
            return (
                claimed,
                ended,
                versions,
                await _events(runtime.sessionmaker, run_id),
                runtime.service.owner,
                saved is None,
            )
        raise AssertionError("unreachable")

    claimed, ended, versions, after, owner, forgotten = asyncio.run(resume())
    assert (claimed.owner, claimed.lease_generation, claimed.resumes) == (owner, 2, 1)  # the new process's claim
    assert (ended.status, ended.outcome, ended.error, ended.resumes) == ("done", "shipped", None, 1)
    assert versions == 1
    names = [n for _, n in after]
    assert [s for s, _ in after] == list(range(1, len(after) + 1))  # gapless, no seq twice
    assert after[: len(before)] == before  # nothing stored before the kill was rewritten
    assert names.count("run_started") == names.count("complete") == 1 and names[-1] == "complete"
    # The steps that completed before the kill did not run again: only the one in flight (retrieve_merge) may.
    for done in ("route_decided", "planner_complete", "retrieve_map_started"):
        assert names.count(done) == 1, done
    assert names.count("retrieve_map_progress") == names_before.count("retrieve_map_progress")
    assert "error" not in names
    assert forgotten  # an ended run's checkpoints are deleted


async def _stale_run(url: str, run_id: str, *, resumes: int = 0, started: bool = False) -> None:
    """A run row left running by a process that died a minute ago (as ``veracity ask`` leaves it)."""
    engine = make_engine(url)
    try:
        async with make_sessionmaker(engine)() as session, session.begin():
            await runs_repo.create_run(
                session=session,
                run_id=run_id,
                template_id="market_brief",
                question="coffee market",
                corpus="small",
                budgets={},
                owner="gone:1:dead",
            )
            if started:
                event = RunStarted(run_id=run_id, template="market_brief", question="coffee market", corpus="small")
                await runs_repo.append_event(session=session, run_id=run_id, name=event.name, payload=event.payload())
            await session.execute(
                update(ResearchRun)
                .where(ResearchRun.id == run_id)
                .values(status="running", resumes=resumes, updated_at=datetime.now(UTC) - timedelta(minutes=1))
            )
    finally:
        await engine.dispose()


async def _ended(runtime: Runtime, run_id: str) -> tuple[ResearchRun, list[tuple[int, str]]]:
    await runtime.service.wait(run_id)
    async with runtime.sessionmaker() as session:
        run = await runs_repo.get_run(session=session, run_id=run_id)
    assert run is not None
    return run, await _events(runtime.sessionmaker, run_id)


async def test_a_run_that_keeps_dying_is_failed_after_the_bounded_resumes_with_the_true_reason(any_db: str) -> None:
    await _stale_run(any_db, "a" * 32, resumes=2, started=True)  # resumed twice (the default bound) and died again
    async for runtime in _runtime(any_db):
        assert await runtime.service.recover_interrupted() == ["a" * 32]
        assert await runtime.service.recover_interrupted() == []  # ended once
        run, events = await _ended(runtime, "a" * 32)
    assert [n for _, n in events] == ["run_started", "error"]
    reason = messages.RESUMES_SPENT.format(resumes=2)
    assert (run.status, run.error, run.owner) == ("failed", messages.RUN_NOT_RESUMED.format(reason=reason), None)
    assert run.error == (
        "The process executing this run stopped and the run could not be resumed: it had been resumed 2 time(s) "
        "already, the most allowed, and stopped again."
    )


async def test_a_run_without_a_checkpoint_starts_again_and_is_announced_once(any_db: str) -> None:
    await _stale_run(any_db, "b" * 32, started=True)  # died after run_started, before its first step completed
    async for runtime in _runtime(any_db):
        assert await runtime.service.recover_interrupted() == ["b" * 32]
        run, events = await _ended(runtime, "b" * 32)
    names = [n for _, n in events]
    assert [s for s, _ in events] == list(range(1, len(events) + 1))
    assert names.count("run_started") == 1 and names[-1] == "complete" and names[1] == "route_decided"
    assert (run.status, run.outcome, run.resumes) == ("done", "shipped", 1)


async def _break_checkpoints(url: str, run_id: str) -> None:
    """SQLite: a checkpoint of the run that is not msgpack; PostgreSQL: the checkpointer's tables gone."""
    if url.startswith("sqlite"):
        with sqlite3.connect(sqlite_path(url)) as conn:
            conn.execute(
                "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint, metadata) "
                "VALUES (?, '', '1f0', 'msgpack', ?, ?)",
                (run_id, b"\xc1\xc1 not msgpack", b"{}"),
            )
        return
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.execute("DROP TABLE checkpoints, checkpoint_blobs, checkpoint_writes, checkpoint_migrations")
    finally:
        await conn.close()


async def test_a_run_whose_checkpoint_cannot_be_read_is_failed_with_the_true_reason(any_db: str) -> None:
    await _stale_run(any_db, "c" * 32, started=True)
    await _break_checkpoints(any_db, "c" * 32)
    async for runtime in _runtime(any_db):
        assert await runtime.service.recover_interrupted() == ["c" * 32]
        run, events = await _ended(runtime, "c" * 32)
    assert [n for _, n in events] == ["run_started", "error"]
    prefix = (
        "The process executing this run stopped and the run could not be resumed: its checkpoint could not be read ("
    )
    assert run.status == "failed" and run.error is not None and run.error.startswith(prefix), run.error
    assert "SELECT" not in run.error  # the driver's reason, never the statement
    if not any_db.startswith("sqlite"):
        assert 'relation "checkpoint' in run.error and "does not exist" in run.error


class _KeepingSaver(InMemorySaver):
    """Keeps a run's checkpoints after it ends, to look at them."""

    async def adelete_thread(self, thread_id: str) -> None:
        return None


async def test_the_state_round_trips_through_the_checkpoint_serializer_as_its_own_models(small_db_url: str) -> None:
    """Every checkpoint of a real run, read back through the serializer the runtime uses, holds the state's own
    models (a model the serializer did not know would come back as a dict), and only those types are rebuilt."""
    assert {Evidence, Claim} <= state_models()
    saver = _KeepingSaver(serde=state_serializer())
    graph = build_graph(saver)
    engine = make_engine(small_db_url)
    try:
        service = RunService.from_settings(make_settings(small_db_url), make_sessionmaker(engine), graph=graph)
        run_id = await service.start(question="coffee market", template="market_brief", corpus="small")
        await service.wait(run_id)
        await service.shutdown()
    finally:
        await engine.dispose()
    fields = typing.get_type_hints(RunState, include_extras=True)  # (a TypedDict of typing's, not pydantic's)
    history = [state async for state in graph.aget_state_history(thread_config(run_id))]
    assert len(history) > 5
    final: dict[str, Any] = history[0].values
    assert final["decision"] == "ship" and isinstance(final["draft"][0].claims[0], Claim)
    for state in history:
        for key, value in state.values.items():
            TypeAdapter(fields[key]).validate_python(value, strict=True)  # a dict where a model belongs fails here


async def test_the_checkpointers_postgresql_connections_end_a_transaction_idle_past_the_lease(pg_url: str) -> None:
    # A process frozen mid-write holds no checkpoint row past the lease, as runs_repo.bound_idle does for runs.
    from veracity.db.checkpoints import open_checkpointer

    async with open_checkpointer(
        pg_url + "?options=-c%20statement_timeout%3D60000", serde=None, idle_seconds=2.5
    ) as saver:
        async with saver.conn.connection() as conn:  # type: ignore[attr-defined]
            idle = await (await conn.execute("SHOW idle_in_transaction_session_timeout")).fetchone()
            statement = await (await conn.execute("SHOW statement_timeout")).fetchone()
    assert idle is not None and idle["idle_in_transaction_session_timeout"] == "2500ms"
    assert statement is not None and statement["statement_timeout"] == "1min"  # the URL's own options are kept
