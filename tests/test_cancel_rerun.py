"""Cancel and re-run (API, page and browser): a cancelled run stops within seconds with one ``error`` event saying
so — whichever process executes it — a queued run is ended at once, a finished one cannot be cancelled; a re-run is
a new run of the same question, template and corpus, linked to the old one."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser

from conftest import SMALL_CORPUS, form, load_docs, make_settings
from test_api import collect
from test_browser import EVENT_DELAY_MS, new_page, serve
from veracity import messages
from veracity.db import runs_repo
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.migrate import upgrade
from veracity.runs.service import RunService

QUESTION = {"question": "coffee production and the coffee market", "template": "market_brief", "corpus": "small"}


async def _start(client: Any) -> str:
    response = await client.post("/runs", data=form(**QUESTION))
    assert response.status_code == 303
    return str(response.headers["location"].rsplit("/", 1)[1])


async def _until_events(client: Any, run_id: str, at_least: int) -> None:
    service = client.app.state.service
    for _ in range(200):
        async with service.sessionmaker() as session:
            if len(await runs_repo.events_after(session=session, run_id=run_id)) >= at_least:
                return
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} did not reach {at_least} events")


async def test_a_running_run_cancelled_through_the_api_stops_with_one_error_and_no_report(
    client_for, small_db_url
) -> None:
    client = await client_for(make_settings(small_db_url, event_delay_ms=200))
    run_id = await _start(client)
    await _until_events(client, run_id, 3)
    response = await client.post(f"/v1/research/{run_id}/cancel")
    assert response.status_code == 202 and response.json()["cancel_requested"] is True
    await client.app.state.service.wait(run_id)
    _, events = await collect(client, "GET", f"/v1/research/{run_id}/events")
    names = [e.event for e in events]
    assert names.count("error") == 1 and names[-1] == "error" and "complete" not in names
    assert json.loads(events[-1].data) == {"message": messages.RUN_CANCELLED}
    assert [int(e.id) for e in events] == list(range(1, len(events) + 1))
    versions = (await client.get(f"/v1/research/{run_id}/versions")).json()
    assert versions["status"] == "failed" and versions["versions"] == []

    again = await client.post(f"/v1/research/{run_id}/cancel")  # finished: nothing to cancel
    assert again.status_code == 409
    assert again.json()["error"]["message"] == messages.RUN_ALREADY_FINISHED.format(run_id=run_id, status="failed")
    assert (await client.post(f"/v1/research/{'0' * 32}/cancel")).status_code == 404


async def test_a_queued_run_is_ended_at_once_and_a_finished_one_is_left_as_it_was(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    service = client.app.state.service
    async with service.sessionmaker() as session, session.begin():  # enqueued, no executor has claimed it yet
        await runs_repo.create_run(
            session=session, run_id="e" * 32, template_id="answer", question="q", corpus="small", budgets={}
        )
    assert (await client.post(f"/v1/research/{'e' * 32}/cancel")).json()["status"] == "failed"
    _, events = await collect(client, "GET", f"/v1/research/{'e' * 32}/events")
    assert [(e.event, json.loads(e.data)) for e in events] == [("error", {"message": messages.RUN_CANCELLED})]

    done = await _start(client)
    await service.wait(done)
    assert (await client.post(f"/v1/research/{done}/cancel")).status_code == 409
    assert (await client.get(f"/v1/research/{done}")).json()["report"]["outcome"] == "shipped"


@pytest.fixture
def pg_small(pg_url: str) -> str:
    upgrade(pg_url)
    asyncio.run(load_docs(pg_url, "small", SMALL_CORPUS))
    return pg_url


async def test_a_cancel_taken_by_another_process_stops_the_run_where_it_executes(pg_small: str) -> None:
    """Two processes on one PostgreSQL database: the run executes in A; the cancel arrives at B (a flag on the
    run's row); A's next write — or its lease upkeep, between writes — ends it."""
    engines = [make_engine(pg_small), make_engine(pg_small)]
    a, b = (
        RunService.from_settings(make_settings(pg_small, event_delay_ms=300, run_lease_seconds=3), make_sessionmaker(e))
        for e in engines
    )
    try:
        run_id = await a.start(**QUESTION)
        for _ in range(100):
            async with b.sessionmaker() as session:
                if len(await runs_repo.events_after(session=session, run_id=run_id)) >= 2:
                    break
            await asyncio.sleep(0.05)
        await b.cancel(run_id)
        await asyncio.wait_for(a.wait(run_id), timeout=30)
        async with b.sessionmaker() as session:
            events = await runs_repo.events_after(session=session, run_id=run_id)
            run = await runs_repo.get_run(session=session, run_id=run_id)
        assert [e.name for e in events].count("error") == 1 and events[-1].payload["message"] == messages.RUN_CANCELLED
        assert run is not None and (run.status, run.owner) == ("failed", None)
    finally:
        await a.shutdown(timeout=5)
        await b.shutdown(timeout=5)
        for e in engines:
            await e.dispose()


async def test_a_rerun_is_a_new_run_of_the_same_question_linked_to_the_old(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    service = client.app.state.service
    first = await _start(client)
    await service.wait(first)
    response = await client.post(f"/v1/research/{first}/rerun")
    assert response.status_code == 201
    second = response.json()["run_id"]
    assert response.json() == {"run_id": second, "rerun_of": first} and second != first
    assert response.headers["location"] == f"/v1/research/{second}"
    await service.wait(second)
    async with service.sessionmaker() as session:
        old = await runs_repo.get_run(session=session, run_id=first)
        new = await runs_repo.get_run(session=session, run_id=second)
    assert new is not None and old is not None and new.rerun_of == first
    assert (new.question, new.template_id, new.corpus) == (old.question, old.template_id, old.corpus)
    assert (await client.get(f"/v1/research/{second}")).json()["report"]["outcome"] == "shipped"
    page = await client.get(f"/runs/{second}")
    assert f'href="/runs/{first}" id="rerun-of"' in page.text
    assert (await client.post(f"/v1/research/{'0' * 32}/rerun")).status_code == 404


@pytest.mark.browser
async def test_cancel_and_rerun_from_the_run_page(browser: Browser, wiki_template_db: Path, tmp_path: Path) -> None:
    for srv in serve(wiki_template_db, tmp_path, VERACITY_LIMITS__EVENT_DELAY_MS=str(max(EVENT_DELAY_MS, 400))):
        page = await new_page(browser)
        await page.goto(srv.base_url + "/")
        await page.fill("#question", "What is the aurora borealis?")
        await page.click("form.ask button[type=submit]")
        await page.wait_for_url("**/runs/**")
        run_url = page.url
        await page.wait_for_selector("#cancel-form button")
        await page.click("#cancel-form button")
        await page.wait_for_selector("#status [data-status=failed]", timeout=30_000)
        assert messages.RUN_CANCELLED in await page.inner_text("#status")
        assert await page.locator("#cancel-form").count() == 0  # a finished run offers no cancel

        await page.click("#rerun-form button")
        await page.wait_for_url(lambda url, old=run_url: url != old and "/runs/" in url)
        link = page.locator("#rerun-of")
        assert await link.get_attribute("href") == run_url.replace(srv.base_url, "")
        await page.wait_for_selector("#status [data-status=done]", timeout=60_000)
        assert page.js_errors == []  # type: ignore[attr-defined]
        await page.context.close()
