"""Transient database errors: which errors are retried, how long the waits are, and two real ones — SQLite's write
lock held by another connection, and a PostgreSQL port nobody listens on."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError, ProgrammingError
from sqlalchemy.ext.asyncio import create_async_engine

from veracity.db import transient
from veracity.db.transient import backoff, is_transient, retry_transient


def _locked() -> OperationalError:
    return OperationalError(
        "INSERT INTO run_events ...", {"payload": "x"}, sqlite3.OperationalError("database is locked")
    )


class _Flaky:
    """Fails with ``errors`` in turn, then returns ``"done"``; counts its calls."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


class _SqlState(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"server said {sqlstate}")
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    "exc",
    [
        _locked(),
        OperationalError("UPDATE ...", {}, sqlite3.OperationalError("database table is locked")),
        InterfaceError("SELECT 1", {}, Exception("connection is closed"), connection_invalidated=True),
        ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 1)"),
        ConnectionResetError(),
        TimeoutError(),
        _SqlState("08006"),  # connection failure
        _SqlState("57P03"),  # cannot connect now (starting up)
        _SqlState("53300"),  # too many connections
        _SqlState("40P01"),  # deadlock detected
        ProgrammingError("SELECT 1", {}, _SqlState("40001")),  # serialization failure, wrapped
    ],
    ids=lambda e: type(e).__name__,
)
def test_lock_and_connection_errors_are_transient(exc: BaseException) -> None:
    assert is_transient(exc)


@pytest.mark.parametrize(
    "exc",
    [
        OperationalError("SELECT * FROM nope", {}, sqlite3.OperationalError("no such table: nope")),
        OperationalError("INSERT ...", {}, sqlite3.OperationalError("attempt to write a readonly database")),
        IntegrityError("INSERT ...", {}, sqlite3.IntegrityError("UNIQUE constraint failed: run_events.seq")),
        InterfaceError("INSERT ...", {}, sqlite3.InterfaceError("Error binding parameter 1")),
        _SqlState("23505"),  # unique violation
        _SqlState("57014"),  # statement timeout: the statement itself is slow, trying again will not help
        PermissionError(13, "Permission denied"),
        ValueError("not a database error"),
    ],
    ids=lambda e: f"{type(e).__name__}-{e}"[:40],
)
def test_errors_that_would_fail_again_are_not_transient(exc: BaseException) -> None:
    assert not is_transient(exc)


def test_an_error_raised_from_a_transient_one_is_transient() -> None:
    try:
        try:
            raise _locked()
        except OperationalError as inner:
            raise RuntimeError("the event could not be stored") from inner
    except RuntimeError as outer:
        assert is_transient(outer)


async def test_retry_transient_tries_again_until_the_write_succeeds() -> None:
    flaky = _Flaky(_locked(), ConnectionResetError())
    assert await retry_transient(flaky, attempts=3, base_delay=0.001, max_delay=0.01) == "done"
    assert flaky.calls == 3


async def test_retry_transient_raises_the_last_error_when_the_attempts_run_out() -> None:
    last = ConnectionRefusedError(111, "refused, third time")
    flaky = _Flaky(_locked(), _locked(), last)
    with pytest.raises(ConnectionRefusedError) as raised:
        await retry_transient(flaky, attempts=3, base_delay=0.001, max_delay=0.01)
    assert raised.value is last and flaky.calls == 3


async def test_retry_transient_raises_a_lasting_error_at_once() -> None:
    flaky = _Flaky(IntegrityError("INSERT ...", {}, sqlite3.IntegrityError("UNIQUE constraint failed")))
    with pytest.raises(IntegrityError):
        await retry_transient(flaky, attempts=5, base_delay=0.001, max_delay=0.01)
    assert flaky.calls == 1


async def test_retry_waits_grow_exponentially_with_jitter_and_stay_under_the_cap(monkeypatch) -> None:
    waits: list[float] = []

    async def record(delay: float) -> None:
        waits.append(delay)

    monkeypatch.setattr(transient.asyncio, "sleep", record)
    flaky = _Flaky(*[_locked() for _ in range(5)])
    assert await retry_transient(flaky, attempts=6, base_delay=0.1, max_delay=0.5) == "done"
    ceilings = [0.1, 0.2, 0.4, 0.5, 0.5]
    assert len(waits) == 5
    assert all(ceiling / 2 <= wait <= ceiling for wait, ceiling in zip(waits, ceilings, strict=True))
    spread = {round(backoff(3, base_delay=0.1, max_delay=0.5), 6) for _ in range(20)}
    assert len(spread) > 1  # jittered: processes that failed together do not retry in step


async def test_retry_logs_no_sql_and_no_parameters_while_retrying(caplog) -> None:
    flaky = _Flaky(_locked())
    await retry_transient(flaky, attempts=2, base_delay=0.001, max_delay=0.01)
    logged = caplog.text
    assert "database is locked" in logged and "try 1 of 2" in logged
    assert "INSERT INTO" not in logged and "payload" not in logged


def _hold_write_lock(path: Path, seconds: float, held: threading.Event) -> None:
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        held.set()
        threading.Event().wait(seconds)
        other.execute("COMMIT")
    finally:
        other.close()


async def test_a_write_blocked_by_another_connections_lock_succeeds_when_retried(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    setup = sqlite3.connect(path)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE notes (body TEXT)")
    setup.commit()
    setup.close()
    # A busy timeout far shorter than the lock, so the first tries fail with "database is locked" as a 40 s lock
    # fails against the app's 30 s timeout.
    engine = create_async_engine(f"sqlite+aiosqlite:///{path}", connect_args={"timeout": 0.05})
    held = threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(path, 0.5, held))
    holder.start()
    tries = 0
    try:
        assert held.wait(5)

        async def write() -> None:
            nonlocal tries
            tries += 1
            async with engine.begin() as conn:
                await conn.execute(text("INSERT INTO notes (body) VALUES ('kept')"))

        await retry_transient(write, attempts=8, base_delay=0.1, max_delay=0.4)
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT body FROM notes"))).scalars().all() == ["kept"]
        assert tries > 1  # it did fail first, while the lock was held
    finally:
        holder.join()
        await engine.dispose()


async def test_a_postgresql_port_nobody_listens_on_fails_as_transient() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    engine = create_async_engine(f"postgresql+asyncpg://postgres@127.0.0.1:{port}/test")
    calls = 0

    async def write() -> None:
        nonlocal calls
        calls += 1
        async with engine.begin() as conn:
            await conn.execute(text("SELECT 1"))

    try:
        with pytest.raises(Exception) as raised:
            await retry_transient(write, attempts=2, base_delay=0.001, max_delay=0.01)
        assert is_transient(raised.value) and calls == 2
    finally:
        await engine.dispose()


async def test_a_killed_postgresql_connection_fails_as_transient(pg_url: str) -> None:
    import asyncpg

    engine = create_async_engine(pg_url)
    try:
        async with engine.connect() as conn:
            pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
            admin = await asyncpg.connect(pg_url.replace("postgresql+asyncpg://", "postgresql://"))
            try:
                await admin.execute("SELECT pg_terminate_backend($1)", pid)
            finally:
                await admin.close()
            await asyncio.sleep(0.1)
            with pytest.raises(Exception) as raised:
                await conn.execute(text("SELECT 1"))
        assert is_transient(raised.value)
    finally:
        await engine.dispose()


async def _first_statement_failing_with(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, message: str
) -> tuple[BaseException, bool]:
    """Runs ``SELECT 1`` on an engine from ``make_engine`` whose checked-out asyncpg connection raises
    ``InternalClientError(message)`` when it prepares; returns the error the caller saw and whether the next
    checkout (with the driver healed) is a different, working connection."""
    import asyncpg

    from veracity.db.engine import make_engine

    engine = make_engine(pg_url)
    try:
        async with engine.connect() as conn:
            broken = (await conn.get_raw_connection()).driver_connection
            assert isinstance(broken, asyncpg.Connection)
            prepare = asyncpg.Connection.prepare

            async def failing(self: asyncpg.Connection, *args: Any, **kwargs: Any) -> Any:
                if self is broken:
                    raise asyncpg.exceptions.InternalClientError(message)
                return await prepare(self, *args, **kwargs)

            monkeypatch.setattr(asyncpg.Connection, "prepare", failing)
            with pytest.raises(Exception) as raised:
                await conn.execute(text("SELECT 1"))
        monkeypatch.setattr(asyncpg.Connection, "prepare", prepare)
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT 1"))).scalar_one() == 1
            replaced = (await conn.get_raw_connection()).driver_connection is not broken
        return raised.value, replaced
    finally:
        await engine.dispose()


async def test_a_stuck_asyncpg_protocol_is_a_disconnect_so_it_is_transient_and_leaves_the_pool(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """asyncpg's ``InternalClientError`` "cannot switch to state 15; another operation (2) is in progress" arrives
    when the server ends a session while the client sits between the server's error and the socket's close (seen in
    CI after an idle-in-transaction timeout). The window is too narrow to hit on purpose, so the driver connection
    is made to raise exactly that error; the engine (``make_engine``) must count it as a disconnect: the error is
    transient and the broken connection is not handed out again."""
    error, replaced = await _first_statement_failing_with(
        pg_url, monkeypatch, "cannot switch to state 15; another operation (2) is in progress"
    )
    assert "another operation" in str(error)
    assert is_transient(error)
    assert getattr(error, "connection_invalidated", False)
    assert replaced  # the next checkout is a fresh connection that works


async def test_other_asyncpg_client_errors_are_not_counted_as_disconnects(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    error, replaced = await _first_statement_failing_with(
        pg_url, monkeypatch, "something else went wrong in the client"
    )
    assert "something else" in str(error)
    assert not is_transient(error)
    assert not getattr(error, "connection_invalidated", False)
    assert not replaced  # the connection stays in the pool and is handed out again
