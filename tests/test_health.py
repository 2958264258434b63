"""/healthz is green only while the database takes a write: 200 when it does, 503 naming what failed when another
connection holds SQLite's write lock, a PostgreSQL table is locked or the database turned read-only — and never
the SQL of the test write; it reports the runs queued and running."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import asyncpg
from sqlalchemy import func, select, text

from veracity.db import runs_repo
from veracity.db.models import FetchCacheEntry
from veracity.settings import Settings

TIMEOUT = 0.3


def settings_for(url: str) -> Settings:
    return Settings(
        database={"url": url, "health_timeout_seconds": TIMEOUT},
        corpus={"autoload_wiki": False},
    )


def _sqlite_path(url: str) -> str:
    return url.removeprefix("sqlite+aiosqlite:///")


def _no_sql(body: dict[str, Any]) -> None:
    shown = str(body)
    for fragment in ("INSERT INTO", "fetch_cache", "healthz-probe", "url_hash", "PRAGMA", "[SQL", "parameters"):
        assert fragment not in shown, shown


async def test_healthz_is_ok_when_the_database_takes_a_write(client_for, small_db_url) -> None:
    client = await client_for(settings_for(small_db_url))
    response = await client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["corpora"]["small"] == 3
    assert body["database"] == {"writable": True, "error": None}
    assert body["queue"] == {"pending": 0, "running": 0}
    assert body["workers"] == [] and "failed" not in body  # nobody is executing a run
    async with client.app.state.sessionmaker() as session:
        # The test write was rolled back, and the pooled connection waits for locks as long as before.
        assert await session.scalar(select(func.count()).select_from(FetchCacheEntry)) == 0
        assert (await session.execute(text("PRAGMA busy_timeout"))).scalar_one() == 30000


async def test_healthz_counts_the_runs_queued_and_running(client_for, small_db_url) -> None:
    client = await client_for(settings_for(small_db_url))
    async with client.app.state.sessionmaker() as session, session.begin():
        for run_id, status in (("a" * 32, "pending"), ("b" * 32, "pending"), ("c" * 32, "running")):
            await runs_repo.create_run(
                session=session, run_id=run_id, template_id="answer", question="q", corpus="small", budgets={}
            )
            await runs_repo.set_run_status(session=session, run_id=run_id, status=status)
        await runs_repo.create_run(  # a run an executor holds, its lease fresh: that executor is seen
            session=session,
            run_id="d" * 32,
            template_id="answer",
            question="q",
            corpus="small",
            budgets={},
            owner="host-a:41:cafe",
        )
    body = (await client.get("/healthz")).json()
    assert body["queue"] == {"pending": 3, "running": 1} and body["workers"] == ["host-a:41:cafe"]


async def test_healthz_is_503_while_another_connection_holds_the_sqlite_write_lock(client_for, small_db_url) -> None:
    client = await client_for(settings_for(small_db_url))
    other = sqlite3.connect(_sqlite_path(small_db_url), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        response = await client.get("/healthz")
        waited = time.monotonic() - started
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["failed"] == {"database_write": "the database could not be written to: database is locked"}
    assert body["database"] == {"writable": False, "error": body["failed"]["database_write"]}
    # Reading still works while the lock is held: the counts are there, and the probe gave up on time.
    assert body["queue"] == {"pending": 0, "running": 0} and body["corpora"]["small"] == 3
    assert TIMEOUT <= waited < TIMEOUT + 2.0
    _no_sql(body)
    # The lock released, the same process is healthy again.
    assert (await client.get("/healthz")).status_code == 200


async def test_healthz_is_503_while_a_postgresql_table_is_locked(client_for, pg_url) -> None:
    client = await client_for(settings_for(pg_url))
    assert (await client.get("/healthz")).json()["status"] == "ok"
    other = await asyncpg.connect(pg_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        async with other.transaction():
            await other.execute("LOCK TABLE fetch_cache IN EXCLUSIVE MODE")
            response = await client.get("/healthz")
    finally:
        await other.close()
    assert response.status_code == 503
    assert response.json()["failed"] == {
        "database_write": "the database could not be written to: canceling statement due to lock timeout"
    }
    _no_sql(response.json())
    assert (await client.get("/healthz")).status_code == 200


async def test_healthz_is_503_when_the_postgresql_database_turns_read_only(client_for, pg_url) -> None:
    client = await client_for(settings_for(pg_url))
    name = pg_url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(pg_url.replace("postgresql+asyncpg://", "postgresql://").rsplit("/", 1)[0] + "/test")
    try:
        await admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        # New connections read the new default: drop the pooled ones (the pool's pre-ping reconnects).
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            name,
        )
        response = await client.get("/healthz")
    finally:
        await admin.close()
    assert response.status_code == 503
    body = response.json()
    assert body["failed"] == {
        "database_write": "the database could not be written to: cannot execute INSERT in a read-only transaction"
    }
    assert body["queue"] == {"pending": 0, "running": 0}  # reads still work
    _no_sql(body)
