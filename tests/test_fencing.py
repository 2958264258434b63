"""Fenced run ownership, on SQLite and on the real PostgreSQL: an executor frozen past its lease writes nothing more
of its run once a sweep has ended it; sweeps that race end a stale run once, with one ``error`` event; a lost claim
refuses every kind of write (event, audit, artifact, status). The services here keep no checkpoints, so a stale run
they find is ended (``NOT_RESUMED``), not resumed; resuming is ``tests/test_resume.py``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from conftest import SMALL_CORPUS, load_docs, make_settings, sqlite_url
from veracity import messages
from veracity.db import runs_repo
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.migrate import upgrade
from veracity.db.models import ResearchRun
from veracity.errors import LeaseLost
from veracity.events import RunStarted
from veracity.runs.service import RunService

VERACITY = str(Path(sys.executable).parent / "veracity")
NOT_RESUMED = messages.RUN_NOT_RESUMED.format(reason=messages.RESUME_NO_CHECKPOINTS)
"""How a sweep by a process without checkpoints ends a stale run."""


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database with the small corpus: a SQLite file, or a fresh PostgreSQL database."""
    url = sqlite_url(tmp_path / "fence.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")
    upgrade(url)
    asyncio.run(load_docs(url, "small", SMALL_CORPUS))
    return url


async def _sessions(url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = make_engine(url)
    try:
        yield make_sessionmaker(engine)
    finally:
        await engine.dispose()


async def _stale_run(sessionmaker: async_sessionmaker[AsyncSession], run_id: str, owner: str = "gone:1:x") -> None:
    async with sessionmaker() as session, session.begin():
        await runs_repo.create_run(
            session=session, run_id=run_id, template_id="answer", question="q", corpus="small", budgets={}, owner=owner
        )
        await session.execute(
            update(ResearchRun)
            .where(ResearchRun.id == run_id)
            .values(status="running", updated_at=datetime.now(UTC) - timedelta(minutes=5))
        )


async def _events(sessionmaker: async_sessionmaker[AsyncSession], run_id: str) -> list[tuple[int, str]]:
    async with sessionmaker() as session:
        return [(e.seq, e.name) for e in await runs_repo.events_after(session=session, run_id=run_id)]


async def test_sweeps_that_race_end_a_stale_run_once_with_one_error_event(any_db: str) -> None:
    engines = [make_engine(any_db), make_engine(any_db)]
    makers = [make_sessionmaker(e) for e in engines]
    services = [RunService.from_settings(make_settings(any_db, run_lease_seconds=2), m) for m in makers]
    try:
        runs = [f"{i:032x}" for i in range(12)]
        for run_id in runs:
            await _stale_run(makers[0], run_id)
        for _ in range(3):  # the later rounds find nothing left to sweep
            first, second = await asyncio.gather(*(s.recover_interrupted() for s in services))
            assert not set(first) & set(second)
        for run_id in runs:
            assert await _events(makers[0], run_id) == [(1, "error")]
            async with makers[0]() as session:
                run = await runs_repo.get_run(session=session, run_id=run_id)
            assert run is not None and (run.status, run.owner, run.lease_generation) == ("failed", None, 2)
            assert run.error == NOT_RESUMED
    finally:
        for e in engines:
            await e.dispose()


async def test_a_lost_claim_refuses_every_write_and_a_late_failure_writes_nothing(any_db: str) -> None:
    engine = make_engine(any_db)
    sessionmaker = make_sessionmaker(engine)
    service = RunService.from_settings(make_settings(any_db, run_lease_seconds=2), sessionmaker)
    try:
        run_id = "f" * 32
        await _stale_run(sessionmaker, run_id, owner=service.owner)
        service.journal.hold(runs_repo.Fence(run_id=run_id, owner=service.owner, generation=1))
        async with sessionmaker() as session, session.begin():  # the claim holds: the write goes in
            await runs_repo.hold(session=session, fence=service.journal.fence(run_id))
        cutoff = datetime.now(UTC) - timedelta(minutes=1)
        async with sessionmaker() as session, session.begin():  # renewed just now: not stale, not swept
            await session.execute(
                update(ResearchRun).where(ResearchRun.id == run_id).values(updated_at=cutoff - timedelta(minutes=1))
            )
        assert await service.journal.sweep(run_id, messages.RUN_INTERRUPTED, stale_before=cutoff)
        assert not await service.journal.sweep(run_id, messages.RUN_INTERRUPTED, stale_before=cutoff)

        with pytest.raises(LeaseLost):
            await service.journal.emit(run_id, RunStarted(template="answer", corpus="small"))
        with pytest.raises(LeaseLost):
            await service.journal.audit(run_id, "route", 0, {"route": "proceed"})
        assert not await service.journal.fail(run_id, "too late")
        assert await _events(sessionmaker, run_id) == [(1, "error")]
        async with sessionmaker() as session:
            run = await runs_repo.get_run(session=session, run_id=run_id)
            assert run is not None and run.status == "failed" and run.error == messages.RUN_INTERRUPTED
            assert await runs_repo.audit_trail(session=session, run_id=run_id) == []
    finally:
        await engine.dispose()


def _wait_for(predicate: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_a_writer_frozen_past_its_lease_writes_nothing_more_once_swept(any_db: str) -> None:
    """``veracity ask`` is frozen (SIGSTOP) mid-run for longer than its lease; another process sweeps the run (one
    ``error`` event); the frozen process is woken (SIGCONT) and every write it then tries is refused: no event
    after the ``error``, no artifact, the run stays failed with the sweep's reason."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env |= {
        "VERACITY_DATABASE__URL": any_db,
        "VERACITY_CORPUS__AUTOLOAD_WIKI": "false",
        "VERACITY_LIMITS__EVENT_DELAY_MS": "400",  # ~11 events: the run lasts several seconds
        "VERACITY_LIMITS__RUN_LEASE_SECONDS": "2",
    }
    args = [VERACITY, "ask", "coffee market", "--corpus", "small", "--template", "market_brief", "--progress", "none"]
    proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    async def run_state() -> tuple[str | None, list[tuple[int, str]]]:
        async for sessionmaker in _sessions(any_db):
            async with sessionmaker() as session:
                recent = await runs_repo.recent_runs(session=session, limit=1)
            if not recent:
                return None, []
            return recent[0].id, await _events(sessionmaker, recent[0].id)
        raise AssertionError("unreachable")

    try:
        _wait_for(lambda: len(asyncio.run(run_state())[1]) >= 3, timeout=90)
        proc.send_signal(signal.SIGSTOP)
        run_id, before = asyncio.run(run_state())
        assert run_id is not None and before[-1][1] != "complete"

        async def sweep() -> list[str]:
            async for sessionmaker in _sessions(any_db):
                other = RunService.from_settings(make_settings(any_db, run_lease_seconds=2), sessionmaker)
                for _ in range(40):  # the frozen process's lease lapses after 2 s
                    swept = await other.recover_interrupted()
                    if swept:
                        return swept
                    await asyncio.sleep(0.25)
            return []

        assert asyncio.run(sweep()) == [run_id]
        proc.send_signal(signal.SIGCONT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()

    _, after = asyncio.run(run_state())
    names = [n for _, n in after]
    assert [s for s, _ in after] == list(range(1, len(after) + 1))  # gapless, no duplicate seq
    assert names.count("error") == 1 and names[-1] == "error" and "complete" not in names
    assert len(after) == len(before) + 1  # the sweep's error and nothing from the woken writer

    async def stored() -> tuple[str, str | None, object]:
        async for sessionmaker in _sessions(any_db):
            async with sessionmaker() as session:
                run = await runs_repo.get_run(session=session, run_id=run_id)
                artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
            assert run is not None
            return run.status, run.error, artifact
        raise AssertionError("unreachable")

    assert asyncio.run(stored()) == ("failed", NOT_RESUMED, None)
    assert proc.returncode != 0  # the woken CLI reports the run as failed, not a report
