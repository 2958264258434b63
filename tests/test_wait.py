"""No waiting in line (issue 18, item 7): a server warms what runs load before it answers, and says what each part
cost; a question submitted while other runs work is answered at once; runs beyond the process's concurrency wait,
pending, for a slot; this process's SQLite writers queue at one gate, a request's write before a run's. Behaviour
and order only: how fast lives in ``make bench`` (bench/wait.py)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from conftest import SMALL_CORPUS, form, load_docs
from veracity import messages
from veracity.compose.extractive import ExtractiveComposer
from veracity.db import runs_repo
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.write_gate import WriteGate, background_writes, write_gate
from veracity.domain import Draft
from veracity.graph.builder import build_graph
from veracity.ports import ComposeRequest, SearchHit
from veracity.runs.model_set import ModelSet
from veracity.runs.providers import Providers
from veracity.runs.runtime import open_runtime
from veracity.runs.service import RunService
from veracity.runs.warmup import warm_up
from veracity.semantic.model import process_semantics
from veracity.settings import Settings
from veracity.specs.registry import SpecRegistry

QUESTION = "coffee production and the coffee market"


async def _until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    for _ in range(400):
        if await check():
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"never: {what}")


def _settings(url: str, **limits: Any) -> Settings:
    """Two runs at once (the least there is), the small corpus by default."""
    corpus = {"autoload_wiki": False, "default": "small"}
    return Settings(database={"url": url}, corpus=corpus, worker={"concurrency": 2}, limits=limits)


# ---- warm-up ---------------------------------------------------------------------------------------------------
async def test_a_server_warms_what_runs_load_before_it_answers_and_logs_what_each_part_cost(
    client_for, small_db_url, caplog
) -> None:
    caplog.set_level(logging.INFO)
    client = await client_for(_settings(small_db_url))  # returns once the lifespan has started: serving
    said = [r.getMessage() for r in caplog.records if r.name in ("veracity.runs.warmup", "veracity.web.app")]
    steps = [m for m in said if m.startswith("warmed ")]
    for part in ("search over corpus small", "the ranker", "the relevance model", "the grounding judge", "the screen"):
        assert any(re.fullmatch(rf"warmed {part} in \d+\.\d\d s", m) for m in steps), (part, steps)
    assert any(re.fullmatch(r"warmed the language identifier in \d+\.\d\d s", m) for m in steps), steps
    assert any(re.fullmatch(r"warm-up done in \d+\.\d\d s \(\d+ steps\)", m) for m in said), said
    assert any(re.fullmatch(r"warmed the page templates in \d+\.\d\d s", m) for m in said), said
    # The corpus's in-memory index is built: the first run searches it, it does not build it.
    assert client.app.state.service.search.indexes.peek("small") is not None  # type: ignore[attr-defined]
    assert (await client.get("/healthz")).status_code == 200


async def test_a_queue_only_web_process_executes_no_run_and_warms_none(pg_url, caplog) -> None:
    caplog.set_level(logging.INFO)
    settings = Settings(database={"url": pg_url}, corpus={"autoload_wiki": False}, worker={"embedded": False})
    async with open_runtime(settings, serve=True, models=ModelSet()):
        pass
    assert not [r.getMessage() for r in caplog.records if r.name == "veracity.runs.warmup"]


class GoneSearch:
    """A search provider whose database went away."""

    name = "gone"

    async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]:
        raise RuntimeError("the corpus is gone")


async def test_a_part_that_cannot_warm_is_logged_and_the_others_still_warm(small_db_url, caplog) -> None:
    engine = make_engine(small_db_url)
    service = RunService(
        sessionmaker=make_sessionmaker(engine),
        registry=SpecRegistry.load(),
        settings=_settings(small_db_url),
        graph=build_graph(),
        search=GoneSearch(),
        semantics=process_semantics(True),
    )
    try:
        warmed = await warm_up(service)
    finally:
        await service.shutdown(0)
        await engine.dispose()
    failed = {w.what: w.error for w in warmed if w.error is not None}
    assert failed and all(what.startswith("search over corpus ") for what in failed), failed
    assert set(failed.values()) == {"the corpus is gone"}
    assert {"the screen", "the language identifier", "the grounding judge"} <= {w.what for w in warmed if not w.error}
    assert any(
        r.levelno == logging.WARNING and "warming search over corpus small failed" in r.getMessage()
        for r in caplog.records
    )


# ---- the concurrency a process executes runs with ----------------------------------------------------------------
class HeldComposer(ExtractiveComposer):
    """Drafts once let go, counting the runs that reached it."""

    def __init__(self) -> None:
        super().__init__()
        self.reached = 0
        self.go = asyncio.Event()

    async def compose(self, request: ComposeRequest) -> Draft:
        self.reached += 1
        await self.go.wait()
        return await super().compose(request)


async def test_runs_beyond_the_concurrency_wait_pending_and_start_as_slots_free(db_url) -> None:
    await load_docs(db_url, "small", SMALL_CORPUS)
    engine = make_engine(db_url)
    service = RunService.from_settings(_settings(db_url), make_sessionmaker(engine))
    composer = HeldComposer()
    try:
        runs = [
            await service.start(
                question=QUESTION, template="answer", corpus="small", providers=Providers(composer=composer)
            )
            for _ in range(3)
        ]

        async def two_drafting() -> bool:
            return composer.reached == 2

        await _until(two_drafting, "two runs drafting")
        async with service.sessionmaker() as session:
            third = await runs_repo.get_run(session=session, run_id=runs[2])
            assert third is not None and third.status == "pending"  # no slot: not started, not announced
            assert not await runs_repo.events_after(session=session, run_id=runs[2])
        composer.go.set()
        for run_id in runs:
            await service.wait(run_id)
        assert composer.reached == 3
        async with service.sessionmaker() as session:
            for run_id in runs:
                names = [e.name for e in await runs_repo.events_after(session=session, run_id=run_id)]
                assert names[0] == "run_started" and names[-1] == "complete", names
    finally:
        await service.shutdown(0)
        await engine.dispose()


async def test_a_question_submitted_while_every_slot_is_busy_is_answered_at_once_and_shown_waiting(
    client_for, small_db_url
) -> None:
    # Every event takes 0.3 s: the first two runs hold both slots a while.
    client = await client_for(_settings(small_db_url, event_delay_ms=300))
    service = client.app.state.service  # type: ignore[attr-defined]
    started = []
    for _ in range(3):
        response = await client.post("/runs", data=form(question=QUESTION, template="answer", corpus="small"))
        assert response.status_code == 303  # the redirect to its page, whatever the other runs are doing
        started.append(response.headers["location"].rsplit("/", 1)[1])
    page = await client.get(f"/runs/{started[2]}")
    assert page.status_code == 200 and 'data-status="pending"' in page.text and "Waiting to start" in page.text
    for run_id in started:  # cancelled while running, and while waiting for a slot
        assert (await client.post(f"/v1/research/{run_id}/cancel")).status_code == 202
    for run_id in started:
        await service.wait(run_id)
        async with service.sessionmaker() as session:
            run = await runs_repo.get_run(session=session, run_id=run_id)
        assert run is not None and run.status == "failed" and run.error == messages.RUN_CANCELLED


# ---- the write gate ----------------------------------------------------------------------------------------------
async def test_the_gate_serves_a_request_before_run_writes_that_waited_longer() -> None:
    gate = WriteGate()
    order: list[str] = []
    assert await gate.acquire()

    async def writer(name: str, background: bool) -> None:
        if background:
            background_writes()
        assert await gate.acquire()
        order.append(name)
        gate.release()

    tasks = [asyncio.create_task(writer("run 1", True)), asyncio.create_task(writer("run 2", True))]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(writer("request", False)))
    await asyncio.sleep(0)
    assert gate.waiting == 3
    gate.release()
    await asyncio.gather(*tasks)
    assert order == ["request", "run 1", "run 2"]
    assert not gate.held and gate.waiting == 0


async def test_a_writer_cancelled_while_waiting_leaves_the_queue_and_the_gate_moves_on() -> None:
    gate = WriteGate()
    assert await gate.acquire()
    waiting = asyncio.create_task(gate.acquire())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert gate.waiting == 0
    gate.release()
    assert not gate.held


async def test_the_engines_writers_queue_at_the_gate_from_their_first_write_to_commit_or_rollback(db_url) -> None:
    engine = make_engine(db_url)
    gate = write_gate(engine)
    assert gate is not None
    sessionmaker = make_sessionmaker(engine)
    order: list[str] = []
    writing, finish = asyncio.Event(), asyncio.Event()

    async def create(run_id: str, name: str) -> None:
        async with sessionmaker() as session, session.begin():
            await runs_repo.create_run(
                session=session, run_id=run_id, template_id="answer", question="q", corpus="small", budgets={}
            )
            # Recorded before the commit that releases the gate: recorded after it, the writer the release woke
            # could commit and record itself while this one still closes its session.
            order.append(name)

    async def long_run_write() -> None:
        background_writes()
        async with sessionmaker() as session, session.begin():
            await runs_repo.create_run(
                session=session, run_id="a" * 32, template_id="answer", question="q", corpus="small", budgets={}
            )
            writing.set()
            await finish.wait()
            order.append("the long write")  # before the commit, as in create

    async def write(name: str, run_id: str, background: bool) -> None:
        if background:
            background_writes()
        await create(run_id, name)

    try:
        async with sessionmaker() as session:  # reading takes nothing
            await runs_repo.get_run(session=session, run_id="0" * 32)
        assert not gate.held
        holder = asyncio.create_task(long_run_write())
        await writing.wait()
        assert gate.held
        run = asyncio.create_task(write("a run's write", "b" * 32, True))

        async def queued(n: int) -> bool:
            return gate.waiting == n

        await _until(lambda: queued(1), "the run's write waiting")
        request = asyncio.create_task(write("a request's write", "c" * 32, False))
        await _until(lambda: queued(2), "the request's write waiting")
        finish.set()
        await asyncio.gather(holder, run, request)
        assert order == ["the long write", "a request's write", "a run's write"]
        assert not gate.held

        with pytest.raises(RuntimeError):
            async with sessionmaker() as session, session.begin():
                await runs_repo.create_run(
                    session=session, run_id="d" * 32, template_id="answer", question="q", corpus="small", budgets={}
                )
                raise RuntimeError("the write is abandoned")
        assert not gate.held  # let go at the rollback
    finally:
        await engine.dispose()
