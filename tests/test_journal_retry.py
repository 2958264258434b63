"""The journal's writes on a database that hiccups: a transient failure is retried, a commit whose acknowledgement
was lost is not stored twice, and a run that dies on a database error tells its reader so — without the SQL or its
parameters."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncSession

from conftest import SMALL_CORPUS, service_with_docs
from veracity import messages
from veracity.db import runs_repo
from veracity.events import RouteDecided
from veracity.runs.providers import Providers
from veracity.specs.models import Spec


def _locked() -> OperationalError:
    return OperationalError(
        "INSERT INTO run_events (run_id, seq, name, payload) VALUES (?, ?, ?, ?)",
        {"payload": "p" * 1800},
        sqlite3.OperationalError("database is locked"),
    )


class _LostAcks:
    """A session factory whose first ``failures`` transactions commit, then fail as if the acknowledgement of the
    commit was lost on the way back (the write landed; the writer was told it did not)."""

    def __init__(self, real: Any, failures: int) -> None:
        self.real, self.failures = real, failures

    def __call__(self) -> Any:
        outer = self

        class _Session:
            def __init__(self) -> None:
                self.session: AsyncSession = outer.real()

            async def __aenter__(self) -> _Session:
                await self.session.__aenter__()
                return self

            async def __aexit__(self, *exc: object) -> None:
                await self.session.__aexit__(*exc)

            def __getattr__(self, name: str) -> Any:
                return getattr(self.session, name)

            @asynccontextmanager
            async def begin(self) -> AsyncIterator[None]:
                async with self.session.begin():
                    yield
                if outer.failures:
                    outer.failures -= 1
                    raise _locked()

        return _Session()


async def test_an_event_whose_commit_acknowledgement_was_lost_is_stored_once(small_db_url: str) -> None:
    async with service_with_docs(small_db_url, "extra", SMALL_CORPUS[:1]) as (service, sessionmaker):
        run_id = await service.start(question="coffee market", template="market_brief", corpus="small")
        await service.wait(run_id)
        # A run of our own, held again, to write into (the finished run's claim is released): a fresh pending row.
        async with sessionmaker() as session, session.begin():
            await runs_repo.create_run(
                session=session,
                run_id="d" * 32,
                template_id="answer",
                question="q",
                corpus="small",
                budgets={},
                owner=service.owner,
            )
        service.journal.hold(runs_repo.Fence(run_id="d" * 32, owner=service.owner, generation=1))
        real = service.journal.sessionmaker
        service.journal.sessionmaker = _LostAcks(real, failures=2)
        try:
            await service.journal.emit("d" * 32, RouteDecided(route="proceed", reason="ok"))
        finally:
            service.journal.sessionmaker = real
        async with sessionmaker() as session:
            stored = await runs_repo.events_after(session=session, run_id="d" * 32)
        assert [(e.seq, e.name) for e in stored] == [(1, "route_decided")]


class _BrokenPlanner:
    """A planner whose database went away mid-call: the error carries a statement and 1.8 KB of parameters."""

    name = "broken"

    async def plan(self, question: str, spec: Spec) -> tuple[list[Any], list[str]]:
        raise _locked()


async def test_a_run_that_dies_on_a_database_error_says_so_without_the_sql(
    small_db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with service_with_docs(small_db_url, "extra", SMALL_CORPUS[:1]) as (service, sessionmaker):
        providers = Providers(planner=_BrokenPlanner())  # type: ignore[arg-type]
        run_id = await service.start(
            question="coffee market", template="market_brief", corpus="small", providers=providers
        )
        await service.wait(run_id)
        async with sessionmaker() as session:
            stored = await runs_repo.events_after(session=session, run_id=run_id)
            run = await runs_repo.get_run(session=session, run_id=run_id)
    error = stored[-1]
    assert error.name == "error" and run is not None and run.status == "failed"
    assert error.payload["message"] == messages.RUN_FAILED.format(reason=messages.DATABASE_FAILED)
    assert "INSERT" not in str(error.payload) and "ppp" not in str(error.payload) and "INSERT" not in (run.error or "")
    assert "INSERT INTO run_events" in caplog.text  # the whole of it is in the log, for whoever runs the server


async def test_waiting_on_a_run_whose_task_was_cancelled_returns(small_db_url: str) -> None:
    """The lease upkeep cancels the task of a run it finds cancelled or lost; whoever waits on it (the CLI, a batch,
    an eval) is told it ended, not cancelled itself."""
    import asyncio

    async with service_with_docs(small_db_url, "extra", SMALL_CORPUS[:1]) as (service, _):
        task = asyncio.create_task(asyncio.sleep(3600))
        service._tasks["f" * 32] = task
        task.cancel()
        await asyncio.wait_for(service.wait("f" * 32), 5)
        assert task.cancelled()
        service._tasks.pop("f" * 32, None)
