"""The research graph's checkpoints, kept in the run's own database so that another process can resume a run whose
executor died: LangGraph's ``AsyncSqliteSaver`` on the SQLite file (its own aiosqlite connection, with the same
busy timeout as the engine's), ``AsyncPostgresSaver`` on PostgreSQL (psycopg 3, a small pool whose connections are
checked before use, so a database that blipped costs a reconnect, not the run). Their tables are the library's own
(``checkpoints`` and ``writes`` on SQLite; ``checkpoint_*`` on PostgreSQL), created by ``setup_checkpoints`` when
``veracity migrate`` runs (``db/migrate.upgrade``), not by Alembic: the library versions them itself.

The serializer is the caller's (the graph knows which types its state holds); this module knows only where the
checkpoints live."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, closing
from typing import Any

import aiosqlite
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool
from sqlalchemy.engine import make_url

from veracity.db.engine import is_sqlite
from veracity.db.write_gate import WriteGate

BUSY_TIMEOUT_SECONDS = 30
"""How long a checkpoint write waits for SQLite's write lock (the engine's sessions hold it briefly)."""


def sqlite_path(url: str) -> str:
    """The SQLite file of a SQLAlchemy URL (``:memory:`` for an in-memory database)."""
    database = make_url(url).database
    return database if database else ":memory:"


def postgres_conninfo(url: str) -> str:
    """libpq connection info for psycopg from a SQLAlchemy URL (``postgresql+asyncpg://user:pw@host:port/db``).
    asyncpg's ``ssl`` query parameter is libpq's ``sslmode``; other query parameters pass through."""
    parsed = make_url(url)
    params: dict[str, str | int] = {}
    for key, value in parsed.query.items():
        text = value if isinstance(value, str) else value[-1]
        params["sslmode" if key == "ssl" else key] = text
    if parsed.host:
        params["host"] = parsed.host
    if parsed.port:
        params["port"] = parsed.port
    if parsed.username:
        params["user"] = parsed.username
    if parsed.password:
        params["password"] = parsed.password
    if parsed.database:
        params["dbname"] = parsed.database
    return make_conninfo("", **params)


def setup_checkpoints(url: str) -> None:
    """Create (or bring up to date) the checkpointer's tables in the database at ``url``. Idempotent; synchronous
    like the Alembic history it follows."""
    if is_sqlite(url):
        conn = sqlite3.connect(sqlite_path(url), timeout=BUSY_TIMEOUT_SECONDS, check_same_thread=False)
        with closing(conn), conn:  # committed, then closed
            SqliteSaver(conn).setup()
        return
    with PostgresSaver.from_conn_string(postgres_conninfo(url)) as saver:
        saver.setup()


class GatedSqliteSaver(AsyncSqliteSaver):
    """``AsyncSqliteSaver`` whose writes queue at the process's write gate with the engine's (``db/write_gate.py``)
    instead of meeting them in SQLite's busy handler."""

    def __init__(self, conn: aiosqlite.Connection, *, serde: SerializerProtocol, gate: WriteGate) -> None:
        super().__init__(conn, serde=serde)
        self.gate = gate

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        async with self.gate.writing():
            return await super().aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        async with self.gate.writing():
            await super().aput_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        async with self.gate.writing():
            await super().adelete_thread(thread_id)


@asynccontextmanager
async def open_checkpointer(
    url: str, *, serde: SerializerProtocol, gate: WriteGate | None = None, idle_seconds: float | None = None
) -> AsyncIterator[BaseCheckpointSaver[str]]:
    """The checkpointer of the database at ``url``, open for the ``async with`` block (its connection or pool is
    closed after). Its tables must exist (``setup_checkpoints``). ``gate``: the engine's write gate (SQLite), which
    its writes then queue at too. ``idle_seconds`` (PostgreSQL): the server ends a transaction of its connections
    idle that long — a process frozen mid-write holds no lock past it (as ``runs_repo.bound_idle`` does for the
    run's rows; the saver's connections are autocommit and never wait inside a transaction)."""
    if is_sqlite(url):
        conn = await aiosqlite.connect(sqlite_path(url), timeout=BUSY_TIMEOUT_SECONDS)
        try:
            await conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_SECONDS * 1000}")
            yield GatedSqliteSaver(conn, serde=serde, gate=gate) if gate else AsyncSqliteSaver(conn, serde=serde)
        finally:
            await conn.close()
        return
    conninfo = postgres_conninfo(url)
    if idle_seconds is not None:
        timeout = max(1, round(idle_seconds * 1000))
        given = conninfo_to_dict(conninfo).get("options")  # the URL's own options are kept
        bound = f"-c idle_in_transaction_session_timeout={timeout}"
        conninfo = make_conninfo(conninfo, options=f"{given} {bound}" if given else bound)
    pool: AsyncConnectionPool[AsyncConnection[DictRow]] = AsyncConnectionPool(
        conninfo,
        min_size=1,
        max_size=4,
        open=False,
        check=AsyncConnectionPool.check_connection,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    )
    await pool.open()
    try:
        yield AsyncPostgresSaver(pool, serde=serde)
    finally:
        await pool.close()
