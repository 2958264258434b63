"""The processes and the database of bench/scale.py: a fresh PostgreSQL database on 127.0.0.1 (created beside
``test``, migrated by a real ``veracity migrate``, dropped at the end), ``veracity serve`` processes with
``VERACITY_WORKER__EMBEDDED=false`` and ``veracity worker`` processes on it, and the SSE viewer client processes
(bench/sse_viewers.py).

Every process is started in a session of its own (its own process group) and ends in ``Cluster.close`` —
SIGTERM, a bounded wait, then SIGKILL to the whole group — however the benchmark ends. The processes run the
``veracity`` package this benchmark imported (its directory first on their ``PYTHONPATH``), so what is measured
is the code beside the benchmark, whatever the console script on the PATH points at."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

import veracity

ADMIN_DSN = os.environ.get("VERACITY_BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
"""Where the benchmark creates (and drops) its database: the local server, as the tests use it."""
CODE = str(Path(veracity.__file__).resolve().parent.parent)
"""The directory holding the ``veracity`` package this benchmark runs."""
VIEWERS_CLIENT = str(Path(__file__).with_name("sse_viewers.py"))
BASE_ENV = {
    "VERACITY_CORPUS__AUTOLOAD_WIKI": "false",
    "VERACITY_SEMANTIC__ENABLED": "false",  # lexical runs: processes start in a second, runs stay CPU-light
    "VERACITY_LOG_LEVEL": "INFO",
    # One (single-user) client stands for a thousand viewers and a hundred runs: lift the per-user limits.
    "VERACITY_LIMITS__STREAMS_PER_USER": "100000",
    "VERACITY_LIMITS__RUNS_PER_MINUTE": "100000",
    "VERACITY_LIMITS__CONCURRENT_RUNS": "10000",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (Linux ``/proc``), in seconds; NaN once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Proc:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    base: str | None = None
    """``http://127.0.0.1:PORT`` for a web process."""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL to the process's whole group (``kill -9``: no cleanup of any kind)."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    async def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, a bounded wait for a clean exit, then SIGKILL."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(self.proc.wait, timeout)
        self.kill()


class Cluster:
    """The benchmark's database and processes; ``async with Cluster.open() as cluster`` drops and ends them all."""

    def __init__(self, url: str, database: str, scratch: Path) -> None:
        self.url = url
        self.database = database
        self.scratch = scratch
        self.procs: list[Proc] = []
        self.clients: list[ViewerClient] = []

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls) -> AsyncIterator[Cluster]:
        database = f"veracity_bench_{uuid.uuid4().hex[:12]}"
        await admin(f'CREATE DATABASE "{database}"')
        base = ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
        with tempfile.TemporaryDirectory(prefix="veracity-scale-") as scratch:
            cluster = cls(f"{base}/{database}", database, Path(scratch))
            try:
                yield cluster
            finally:
                try:
                    await cluster.close()
                finally:
                    await admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.clients), return_exceptions=True)
        await asyncio.gather(*(p.stop(timeout=15) for p in self.procs), return_exceptions=True)
        for p in self.procs:
            p.kill()

    # ---- processes ---------------------------------------------------------------------------------------
    def _env(self, env: dict[str, str]) -> dict[str, str]:
        path = os.pathsep.join(p for p in (CODE, os.environ.get("PYTHONPATH", "")) if p)
        return {**os.environ, **BASE_ENV, "PYTHONPATH": path, "VERACITY_DATABASE__URL": self.url, **env}

    def launch(self, name: str, args: list[str], env: dict[str, str], base: str | None = None) -> Proc:
        log_path = self.scratch / f"{name}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "veracity.cli", *args],
                cwd=self.scratch,  # no .env or ./data of the checkout is read
                env=self._env(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, killed as one
            )
        handle = Proc(name, proc, log_path, base)
        self.procs.append(handle)
        return handle

    async def migrate(self) -> None:
        """``veracity migrate``, as the compose file's one-shot step (the bundled corpora are loaded too)."""
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "veracity.cli", "migrate"],
            cwd=self.scratch,
            env=self._env({}),
            capture_output=True,
            timeout=180,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"veracity migrate failed:\n{done.stdout.decode()}{done.stderr.decode()}")

    async def web(self, name: str, **env: str) -> Proc:
        port = _free_port()
        args = ["serve", "--host", "127.0.0.1", "--port", str(port)]
        proc = self.launch(name, args, {"VERACITY_WORKER__EMBEDDED": "false", **env}, f"http://127.0.0.1:{port}")
        await _until(lambda: _listening(port), f"{name} to serve", proc)
        return proc

    async def worker(self, name: str, **env: str) -> Proc:
        proc = self.launch(name, ["worker"], env)
        await _until(lambda: "is taking runs from the queue" in proc.log(), f"{name} to start", proc)
        return proc

    async def retire(self, *procs: Proc) -> None:
        await asyncio.gather(*(p.stop() for p in procs))
        for p in procs:
            self.procs.remove(p)

    # ---- SQL ---------------------------------------------------------------------------------------------
    async def query(self, sql: str, *args: object) -> list[asyncpg.Record]:
        connection = await asyncpg.connect(self.url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            return list(await connection.fetch(sql, *args))
        finally:
            await connection.close()

    async def transactions(self) -> int:
        """Transactions (committed and rolled back) PostgreSQL has counted in the benchmark's database, read from
        the admin database so that reading them counts none here."""
        (row,) = await admin_fetch(
            "SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1", self.database
        )
        return int(row["n"])

    async def run_table_scans(self) -> int:
        """Sequential and index scans PostgreSQL has counted on the runs' tables: every read of a run or its events
        is one (or more); the connection reading them adds none."""
        (row,) = await self.query(
            "SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)), 0) AS n FROM pg_stat_user_tables "
            "WHERE relname = ANY($1::text[])",
            list(RUN_TABLES),
        )
        return int(row["n"])


RUN_TABLES = ("research_runs", "run_events")


async def admin(sql: str) -> None:
    connection = await asyncpg.connect(ADMIN_DSN, timeout=5)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


async def admin_fetch(sql: str, *args: object) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(ADMIN_DSN, timeout=5)
    try:
        return list(await connection.fetch(sql, *args))
    finally:
        await connection.close()


async def postgres_reachable() -> bool:
    try:
        await admin("SELECT 1")
    except (OSError, asyncpg.PostgresError):
        return False
    return True


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


async def _until(check: Any, what: str, proc: Proc | None = None, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if proc is not None and not proc.alive():
            raise RuntimeError(f"{proc.name} exited with {proc.proc.returncode} waiting for {what}:\n{proc.log()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


# ---- viewer clients ----------------------------------------------------------------------------------------
class ViewerClient:
    """One bench/sse_viewers.py process following a run with ``viewers`` streams over ``bases``."""

    def __init__(self, cluster: Cluster, tag: str, run_id: str, viewers: int, bases: list[str]) -> None:
        cluster.clients.append(self)
        self.out = cluster.scratch / f"viewers-{tag}.json"
        self.args = [VIEWERS_CLIENT, "--run", run_id, "--viewers", str(viewers), "--out", str(self.out), *bases]
        self.proc: asyncio.subprocess.Process | None = None
        self.opened = (0, 0)

    async def start(self) -> None:
        """Start the client; return once its streams are open (``opened``: how many opened and failed)."""
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *self.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 120)
        words = line.decode().split()
        if words[:1] != ["opened"]:
            raise RuntimeError(f"viewer client did not open its streams: {line!r}")
        self.opened = (int(words[1]), int(words[2]))

    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def finish(self, stop: bool = False, timeout: float = 150.0) -> dict[str, Any]:
        """The client's figures, once its streams ended (``stop``: ended by asking it to stop)."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        try:
            if stop:
                self.proc.stdin.write(b"stop\n")
                await self.proc.stdin.drain()
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
            if line.strip() != b"done":
                raise RuntimeError(f"viewer client failed: {line!r}")
            figures: dict[str, Any] = json.loads(self.out.read_text())
            return figures
        finally:
            await self.close()

    async def close(self) -> None:
        """The client's process group killed (it has written its figures, or it is being abandoned) and reaped."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            await asyncio.wait_for(self.proc.wait(), 10)
