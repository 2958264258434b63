"""The HTTP edge over a real app (lifespan, migrations, SQLite): SSE names, ids and order; resume from
Last-Event-ID; replay equals live; bad input gets a clear message and writes nothing."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

import pytest
from httpx_sse import aconnect_sse
from sqlalchemy import func, select

from conftest import form, make_settings
from veracity.db.engine import make_engine
from veracity.db.models import ResearchRun, RunEvent
from veracity.db.runs_repo import Fence
from veracity.events import PIPELINE_EVENTS
from veracity.specs.registry import SpecRegistry

QUESTION = {
    "question": "coffee production and the coffee market",
    "template": "market_brief",
    "corpus": "small",
}


async def collect(client: Any, method: str, url: str, **kwargs: Any) -> tuple[Any, list[Any]]:
    async with aconnect_sse(client, method, url, **kwargs) as source:
        events = [sse async for sse in source.aiter_sse()]
        return source.response, events


async def counts(url: str) -> tuple[int, int]:
    engine = make_engine(url)
    async with engine.connect() as conn:
        runs = await conn.scalar(select(func.count()).select_from(ResearchRun))
        events = await conn.scalar(select(func.count()).select_from(RunEvent))
    await engine.dispose()
    return int(runs or 0), int(events or 0)


async def test_stream_emits_the_eleven_events_in_order_with_sequential_ids(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    response, events = await collect(client, "POST", "/v1/research/stream", json=QUESTION)
    assert response.status_code == 200
    run_id = response.headers["x-run-id"]
    names = [e.event for e in events]
    assert [int(e.id) for e in events] == list(range(1, len(events) + 1))
    collapsed = [x for i, x in enumerate(names) if i == 0 or x != names[i - 1]]
    assert [x for x in collapsed if x in PIPELINE_EVENTS] == list(PIPELINE_EVENTS)
    # The guard events sit where their steps run: the route before planning, the draft before its check.
    expected = list(PIPELINE_EVENTS)
    expected.insert(1, "route_decided")
    expected.insert(expected.index("self_check_complete"), "draft_composed")
    assert collapsed == expected
    assert json.loads(events[1].data)["route"] == "proceed"
    planned = json.loads(events[names.index("planner_complete")].data)["subtasks"]
    assert names.count("retrieve_map_progress") == 2 * len(planned)
    assert names.count("synthesize_map_progress") == 2 * len(planned)
    final = json.loads(events[-1].data)
    assert final["outcome"] == "shipped" and final["report"]["run_id"] == run_id

    artifact = (await client.get(f"/v1/research/{run_id}")).json()
    assert artifact["version"] == 1 and artifact["report"] == final["report"]
    report = artifact["report"]
    evidence = {e["id"]: e for e in report["evidence"]}
    for section in report["sections"]:
        for claim in section["claims"]:
            assert claim["evidence_ids"] and all(eid in evidence for eid in claim["evidence_ids"])
            assert claim["label"] == "supported"
    # The stored Markdown resolves anchors to numbered references: every [n] after a claim has a References entry
    # quoting the evidence it stands for.
    markdown = artifact["markdown"]
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", markdown.split("## References")[0])}
    entries = dict(re.findall(r"^(\d+)\. “(.+?)” — ", markdown, flags=re.M))
    assert cited and cited == {int(n) for n in entries}
    quotes = {e["quote"] for e in report["evidence"]}
    assert all(" ".join(q.split()) in {" ".join(x.split()) for x in quotes} for q in entries.values())
    versions = (await client.get(f"/v1/research/{run_id}/versions")).json()
    assert [v["version"] for v in versions["versions"]] == [1]


async def test_replay_equals_live_and_resumes_after_last_event_id(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    response, live = await collect(client, "POST", "/v1/research/stream", json=QUESTION)
    run_id = response.headers["x-run-id"]
    _, replay = await collect(client, "GET", f"/v1/research/{run_id}/events")
    assert [(e.id, e.event, e.data) for e in replay] == [(e.id, e.event, e.data) for e in live]
    _, resumed = await collect(client, "GET", f"/v1/research/{run_id}/events", headers={"Last-Event-ID": "7"})
    assert [(e.id, e.event, e.data) for e in resumed] == [(e.id, e.event, e.data) for e in live[7:]]


async def test_dropped_live_stream_resumes_without_loss_or_duplicates(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url, event_delay_ms=20))
    seen: list[Any] = []
    async with aconnect_sse(client, "POST", "/v1/research/stream", json=QUESTION) as source:
        run_id = source.response.headers["x-run-id"]
        async for sse in source.aiter_sse():
            seen.append(sse)
            if len(seen) == 4:
                break  # the client drops the connection mid-run
    _, rest = await collect(client, "GET", f"/v1/research/{run_id}/events", headers={"Last-Event-ID": seen[-1].id})
    ids = [int(e.id) for e in seen + rest]
    assert ids == list(range(1, len(ids) + 1))
    assert rest[-1].event == "complete"


async def test_run_keeps_going_and_persists_when_the_client_disconnects(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url, event_delay_ms=20))
    async with aconnect_sse(client, "POST", "/v1/research/stream", json=QUESTION) as source:
        run_id = source.response.headers["x-run-id"]
        async for _ in source.aiter_sse():
            break
    await client.app.state.service.wait(run_id)
    body = (await client.get(f"/v1/research/{run_id}")).json()
    assert body["status"] == "done" and body["report"]["outcome"] == "shipped"


@pytest.mark.parametrize(
    ("payload", "status", "message"),
    [
        (
            {"question": "", "template": "market_brief"},
            422,
            "The question is empty. Type what you want researched.",
        ),
        (
            {"question": "  \n\t ", "template": "market_brief"},
            422,
            "The question is empty. Type what you want researched.",
        ),
        (
            {"question": "x" * 2001, "template": "market_brief"},
            422,
            "The question is 2001 characters long; the limit is 2000.",
        ),
        (
            {"question": "coffee", "template": "horoscope"},
            422,
            "Unknown template 'horoscope'. Known templates: "
            "answer, coach_reply, investment_memo, legal_research, market_brief, support_answer.",
        ),
        (
            {"question": "coffee", "template": "market_brief", "corpus": "nope"},
            422,
            "Unknown corpus 'nope'. Known corpora: coach_reply, investment_memo, legal_research, market_brief, small, "
            "support_answer.",
        ),
    ],
)
async def test_bad_research_request_gets_a_clear_message_and_writes_nothing(
    client_for, small_db_url, payload, status, message
) -> None:
    client = await client_for(make_settings(small_db_url))
    before = await counts(small_db_url)
    response = await client.post("/v1/research/stream", json=payload)
    assert response.status_code == status
    assert response.json() == {"error": {"code": "bad_input", "message": message}}
    assert await counts(small_db_url) == before


async def test_question_of_exactly_the_limit_is_accepted(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    response, events = await collect(
        client, "POST", "/v1/research/stream", json={**QUESTION, "question": ("coffee " * 400)[:2000]}
    )
    assert response.status_code == 200 and events[-1].event == "complete"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/v1/research/" + "0" * 32, f"No run with ID '{'0' * 32}'."),
        ("/v1/research/" + "0" * 32 + "/events", f"No run with ID '{'0' * 32}'."),
        ("/v1/research/not-a-run", "'not-a-run' is not a run ID (run IDs are 32 hexadecimal characters)."),
        (
            "/v1/research/not-a-run/versions",
            "'not-a-run' is not a run ID (run IDs are 32 hexadecimal characters).",
        ),
    ],
)
async def test_unknown_or_malformed_run_id_is_404_with_message(client_for, small_db_url, path, message) -> None:
    client = await client_for(make_settings(small_db_url))
    response = await client.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["message"] == message


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "7 8"])
async def test_malformed_last_event_id_is_refused(client_for, small_db_url, value) -> None:
    client = await client_for(make_settings(small_db_url))
    response, _ = await collect(client, "POST", "/v1/research/stream", json=QUESTION)
    run_id = response.headers["x-run-id"]
    before = await counts(small_db_url)
    bad = await client.get(f"/v1/research/{run_id}/events", headers={"Last-Event-ID": value})
    assert bad.status_code == 422
    limit = 2**31 - 1
    assert bad.json()["error"]["message"] == (
        f"Last-Event-ID (or ?after=) must be a whole number from 0 to {limit}, got '{value}'."
    )
    assert await counts(small_db_url) == before


async def test_form_post_with_empty_question_rerenders_home_with_message(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    before = await counts(small_db_url)
    response = await client.post("/runs", data=form(question="   ", template="market_brief", corpus="small"))
    assert response.status_code == 422
    assert "The question is empty. Type what you want researched." in response.text
    assert await counts(small_db_url) == before


async def test_run_page_renders_the_same_report_as_the_api(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    response = await client.post("/runs", data=form(question="coffee market", template="market_brief", corpus="small"))
    assert response.status_code == 303
    run_id = response.headers["location"].rsplit("/", 1)[1]
    await client.app.state.service.wait(run_id)
    page = (await client.get(f"/runs/{run_id}")).text
    report = (await client.get(f"/v1/research/{run_id}")).json()["report"]
    assert 'data-outcome="shipped"' in page and "sse-connect" not in page  # finished: no live stream needed
    for section in report["sections"]:
        assert f'data-section="{section["id"]}" data-status="{section["status"]}"' in page
    assert page.count('<tr class="ev') == len(await _events(client, run_id))


async def test_run_page_states_a_template_and_corpus_that_do_not_belong_together(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))

    async def note(question: str, template: str, corpus: str) -> str | None:
        response = await client.post("/runs", data=form(question=question, template=template, corpus=corpus))
        assert response.status_code == 303, response.text
        run_id = response.headers["location"].rsplit("/", 1)[1]
        await client.app.state.service.wait(run_id)
        found = re.search(
            r'<p class="mismatch" id="corpus-mismatch"[^>]*>([^<]*)</p>', (await client.get(f"/runs/{run_id}")).text
        )
        return found.group(1) if found else None

    general = await note("coffee market", "market_brief", "coach_reply")  # a general template on a template's corpus
    assert general and "holds the sources of template coach_reply" in general
    own = await note("coffee market", "coach_reply", "small")  # a template with its own corpus, elsewhere
    assert own and "written for corpus coach_reply" in own and "searched small" in own
    assert await note("coffee market", "market_brief", "small") is None  # any corpus of the user's: no note
    assert await note("I sleep badly since the baby came", "coach_reply", "coach_reply") is None


async def test_exports_and_versions_over_http(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    response = await client.post("/runs", data=form(question="coffee market", template="market_brief", corpus="small"))
    run_id = response.headers["location"].rsplit("/", 1)[1]
    await client.app.state.service.wait(run_id)
    report = (await client.get(f"/v1/research/{run_id}")).json()["report"]

    md = await client.get(f"/runs/{run_id}/report.md")
    assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
    assert md.headers["content-disposition"] == f'attachment; filename="veracity-{run_id[:12]}-v1.md"'
    assert f"*Permalink:* <http://testserver/runs/{run_id}?version=1>" in md.text
    exported = await client.get(f"/runs/{run_id}/report.json?version=1")
    data = exported.json()
    assert exported.headers["content-disposition"].endswith('-v1.json"')
    assert data["version"] == 1 and data["permalink"] == f"http://testserver/runs/{run_id}?version=1"
    cited = [eid for s in report["sections"] for c in s["claims"] for eid in c["evidence_ids"]]
    assert {r["id"] for r in data["references"]} == {e["id"] for e in report["evidence"]} >= set(cited)

    # A second version (as a later re-check would write): the page and the exports reach either one and say which.
    engine = make_engine(small_db_url)
    from sqlalchemy.ext.asyncio import async_sessionmaker

    from veracity.db import runs_repo

    async with async_sessionmaker(engine)() as session, session.begin():
        v2 = {**report, "outcome_reason": "second version", "sections": report["sections"][:1]}
        await runs_repo.add_artifact_version(session=session, run_id=run_id, report=v2, markdown="")
    await engine.dispose()
    latest = (await client.get(f"/runs/{run_id}?version=2")).text
    assert 'data-version="2" data-latest="2"' in latest and "(latest)" in latest
    older = (await client.get(f"/runs/{run_id}?version=1")).text
    assert 'data-version="1" data-latest="2"' in older and "an earlier version" in older
    assert f'href="/runs/{run_id}?version=2"' in older
    assert older.count('class="section-card"') == len(report["sections"]) > latest.count('class="section-card"') == 1
    assert (await client.get(f"/runs/{run_id}/report.json")).json()["version"] == 2
    assert "*Version:* 1" in (await client.get(f"/runs/{run_id}/report.md?version=1")).text

    missing = await client.get(f"/runs/{run_id}/report.md?version=7")
    assert missing.status_code == 404
    assert f"Run '{run_id}' has no artifact version 7 (it has 1, 2)." in missing.text
    assert (await client.get(f"/runs/{run_id}?version=7")).status_code == 404
    assert (await client.get(f"/runs/{run_id}?version=0")).status_code == 422


async def _events(client: Any, run_id: str) -> list[Any]:
    _, events = await collect(client, "GET", f"/v1/research/{run_id}/events")
    return events


async def _unfinished_run(url: str, run_id: str, *, renewed_seconds_ago: float, owner: str = "gone:1:dead") -> None:
    """A run row left running, as by another process, whose lease was last renewed that long ago."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import update

    from veracity.db import runs_repo
    from veracity.db.engine import make_sessionmaker

    engine = make_engine(url)
    async with make_sessionmaker(engine)() as session, session.begin():
        await runs_repo.create_run(
            session=session,
            run_id=run_id,
            template_id="market_brief",
            question="q",
            corpus="small",
            budgets={},
            owner=owner,
        )
        renewed = datetime.now(UTC) - timedelta(seconds=renewed_seconds_ago)
        await session.execute(update(ResearchRun).where(ResearchRun.id == run_id).values(updated_at=renewed))
    await engine.dispose()


async def test_a_run_whose_process_died_is_resumed_at_the_next_start(client_for, small_db_url) -> None:
    """Its process died before the run's first step completed (no checkpoint, nothing stored): the next server takes
    it over and runs it from the beginning, announced once."""
    await _unfinished_run(small_db_url, "a" * 32, renewed_seconds_ago=120)  # its process died 2 minutes ago
    client = await client_for(make_settings(small_db_url))
    _, events = await collect(client, "GET", f"/v1/research/{'a' * 32}/events")
    names = [e.event for e in events]
    assert names[0] == "run_started" and names[-1] == "complete"
    assert names.count("run_started") == 1 and "error" not in names
    assert [int(e.id) for e in events] == list(range(1, len(events) + 1))


async def test_a_second_process_leaves_a_live_processs_runs_alone_and_sweeps_a_dead_ones(
    client_for, small_db_url
) -> None:
    """Two processes on one database: starting one must not fail the runs another is executing (their lease is
    fresh); a run whose process stops renewing it is taken over and resumed by the sweep once its lease lapses."""
    # Renewed "3 s from now": fresh at start-up with a margin however slowly the app starts under load.
    await _unfinished_run(small_db_url, "b" * 32, renewed_seconds_ago=-3)
    # Events 150 ms apart: this process's own run outlives the 1.5 s lease several times over while sweeps run.
    client = await client_for(make_settings(small_db_url, run_lease_seconds=1.5, event_delay_ms=150))
    first = (await client.get(f"/v1/research/{'b' * 32}/versions")).json()
    assert first["status"] == "pending"  # left alone at start-up: its process may be alive

    # This process's own runs keep their lease while they run, however long the lease is outlived.
    response = await client.post("/runs", data=form(question="coffee market", template="market_brief", corpus="small"))
    own = response.headers["location"].rsplit("/", 1)[1]
    # Nobody renews run b: once its lease lapses (~4.5 s) the sweep (every lease) takes it over, bounded here.
    for _ in range(80):
        if (await client.get(f"/v1/research/{'b' * 32}/versions")).json()["status"] != "pending":
            break
        await asyncio.sleep(0.25)
    _, events = await collect(client, "GET", f"/v1/research/{'b' * 32}/events")
    assert [e.event for e in events][0] == "run_started" and [e.event for e in events][-1] == "complete"
    await client.app.state.service.wait(own)
    own_events = await _events(client, own)
    assert own_events[-1].event == "complete" and "error" not in [e.event for e in own_events]
    assert json.loads(own_events[-1].data)["outcome"] == "shipped"


async def _renewed_at(service: Any, run_id: str) -> Any:
    from veracity.db import runs_repo

    async with service.sessionmaker() as session:
        run = await runs_repo.get_run(session=session, run_id=run_id)
        assert run is not None
        return run.status, run.updated_at


async def test_keep_leases_renews_this_processs_runs_and_another_process_sweeps_them_once_renewals_stop(
    client_for, small_db_url
) -> None:
    """A long run that emits nothing for longer than a lease: its lease is kept by ``keep_leases`` alone (not by
    events). A second process on the same database leaves it alone while it is renewed, and takes it over (resumes
    it) once the first process stops renewing (as when it dies)."""
    lease = 2.0
    first = await client_for(make_settings(small_db_url, run_lease_seconds=lease))
    service = first.app.state.service
    run_id = "c" * 32
    await _unfinished_run(small_db_url, run_id, renewed_seconds_ago=0, owner=service.owner)
    silent = asyncio.create_task(asyncio.sleep(3600))  # this process executes run c, silently
    service._tasks[run_id] = silent
    service.journal.hold(Fence(run_id=run_id, owner=service.owner, generation=1))  # its claim (as start makes)
    try:
        _, created = await _renewed_at(service, run_id)
        renewed = created
        for _ in range(40):  # a renewal every third of a lease
            await asyncio.sleep(0.25)
            status, renewed = await _renewed_at(service, run_id)
            if renewed > created:
                break
        assert renewed > created, "keep_leases did not renew this process's running run"

        second = await client_for(make_settings(small_db_url, run_lease_seconds=lease))
        other = second.app.state.service
        # Longer than a whole lease after the row was written: only the renewals keep it fresh.
        deadline = asyncio.get_running_loop().time() + lease * 1.5
        while asyncio.get_running_loop().time() < deadline:
            assert await other.recover_interrupted() == []
            await asyncio.sleep(0.25)
        status, latest = await _renewed_at(service, run_id)
        assert status == "pending" and latest > renewed

        await service.stop_upkeep()  # the first process stops renewing (its task is still "running" there)
        swept: list[str] = []
        for _ in range(60):
            swept = await other.recover_interrupted()
            if swept:
                break
            await asyncio.sleep(0.25)
        assert swept == [run_id]
        _, events = await collect(second, "GET", f"/v1/research/{run_id}/events")
        assert [e.event for e in events][0] == "run_started" and [e.event for e in events][-1] == "complete"
    finally:
        service._tasks.pop(run_id, None)
        silent.cancel()


async def test_a_run_that_ends_while_its_renewal_waits_is_not_reported_lost_and_a_lost_one_is_stopped(
    client_for, small_db_url, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The renewal found the run no longer active because this process had just written its ending (it waited for
    the write lock meanwhile): finished, not lost, so no "lease lost" and its task is left alone. A run whose
    claim really went elsewhere is reported and its task stopped."""
    from sqlalchemy import update

    from veracity.db.engine import make_sessionmaker

    lease = 1.5
    client = await client_for(make_settings(small_db_url, run_lease_seconds=lease))
    service = client.app.state.service
    ended, released, taken = "d" * 32, "f" * 32, "e" * 32
    tasks = {}
    for run_id in (ended, released, taken):
        await _unfinished_run(small_db_url, run_id, renewed_seconds_ago=0, owner=service.owner)
        tasks[run_id] = asyncio.create_task(asyncio.sleep(3600))
        service._tasks[run_id] = tasks[run_id]
        service.journal.hold(Fence(run_id=run_id, owner=service.owner, generation=1))
    engine = make_engine(small_db_url)
    async with make_sessionmaker(engine)() as session, session.begin():
        await session.execute(update(ResearchRun).where(ResearchRun.id.in_([ended, released])).values(status="done"))
        await session.execute(update(ResearchRun).where(ResearchRun.id == taken).values(owner="other:1:alive"))
    await engine.dispose()
    service.journal._ending.add(ended)  # its ending is being written here (Journal.store)
    # The renewal took its list of claims before this one's ending was written and released.
    stale = service.journal.fences()
    service.journal.release(released)
    monkeypatch.setattr(service.journal, "fences", lambda: stale)
    try:
        caplog.set_level(logging.WARNING, logger="veracity.runs.leases")
        for _ in range(40):  # a renewal every third of a lease
            await asyncio.sleep(0.25)
            if tasks[taken].done():
                break
        assert tasks[taken].cancelled(), "a run whose claim was lost kept executing here"
        said = caplog.text
        assert f"run {taken}: lease lost" in said
        for finished in (ended, released):
            assert f"run {finished}: lease lost" not in said and not tasks[finished].done()
    finally:
        for run_id in (ended, released, taken):
            service._tasks.pop(run_id, None)
            service.journal.release(run_id)
            tasks[run_id].cancel()


async def test_healthz_reports_the_corpora(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    health = (await client.get("/healthz")).json()
    # The test corpus plus the knowledge corpora the bundled templates ship with, loaded at start-up.
    assert health["status"] == "ok" and health["corpora"]["small"] == 3
    assert set(health["corpora"]) == {
        "small",
        "legal_research",
        "support_answer",
        "coach_reply",
        "market_brief",
        "investment_memo",
    }


async def test_pages_and_the_api_read_the_templates_the_runtime_hands_them(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    state = client.app.state
    assert state.registry is state.service.registry  # the templates the runs use
    answer = state.registry.get("answer")
    state.registry = SpecRegistry({"answer": answer})  # what web/deps.py hands the handlers, not the run service
    assert [t["id"] for t in (await client.get("/v1/templates")).json()] == ["answer"]
    home = (await client.get("/")).text
    assert answer.title in home and state.service.registry.get("market_brief").title not in home


async def test_concurrent_runs_do_not_mix_events(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    results = await asyncio.gather(*[collect(client, "POST", "/v1/research/stream", json=QUESTION) for _ in range(3)])
    run_ids = {r.headers["x-run-id"] for r, _ in results}
    assert len(run_ids) == 3
    for _, events in results:
        assert [int(e.id) for e in events] == list(range(1, len(events) + 1))
        assert events[-1].event == "complete"


async def test_verify_endpoint_labels_each_claim_with_its_span(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    source = "Refunds are available within 14 days after payment. After 14 days, refunds are not available."
    kb = {"id": "kb", "text": source}
    body = {
        "items": [
            {"id": "a", "claim": "Refunds are available within 14 days after payment.", "sources": [kb]},
            {"id": "b", "claim": "Refunds are available within 30 days after payment.", "sources": [kb]},
        ]
    }
    response = await client.post("/v1/verify", json=body)
    assert response.status_code == 200
    results = {r["id"]: r for r in response.json()["results"]}
    assert results["a"]["label"] == "supported"
    span = results["a"]["evidence"][0]
    assert source[span["start"] : span["end"]] == "Refunds are available within 14 days after payment."
    assert results["b"]["label"] == "unsupported"


async def test_verify_endpoint_judges_a_summary_claim_by_claim(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    source = "Refunds are available within 14 days after payment. Delivery takes 30 days."
    summary = "You can get your money back within two weeks of paying. Every order ships with a free gift."
    body = {"items": [{"id": "s", "claim": summary, "sources": [{"id": "kb", "text": source}]}]}
    response = await client.post("/v1/verify", json=body)
    assert response.status_code == 200
    (result,) = response.json()["results"]
    assert result["label"] == "unsupported"  # its worst claim's
    assert [c["text"] for c in result["claims"]] == [
        "You can get your money back within two weeks of paying.",
        "Every order ships with a free gift.",
    ]
    # The paraphrase is held (supported or partly), the invented gift is not.
    first, gift = result["claims"]
    assert gift["label"] == "unsupported"
    assert first["label"] in ("supported", "partial")
    assert set(first) == {"text", "label", "score", "evidence", "reason"}
    span = first["evidence"][0]
    assert source[span["start"] : span["end"]] == "Refunds are available within 14 days after payment."


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"items": []}, "items"),
        ({"items": [{"id": "a", "claim": "", "sources": []}]}, "claim"),
        ({"items": [{"id": "a", "claim": "x", "sources": [{"id": "s"}]}]}, "text"),
    ],
)
async def test_verify_endpoint_refuses_bad_input_with_a_message(client_for, small_db_url, body, fragment) -> None:
    client = await client_for(make_settings(small_db_url))
    response = await client.post("/v1/verify", json=body)
    assert response.status_code == 422
    assert fragment in response.json()["error"]["message"]


async def test_audit_trail_is_returned_by_the_api_and_shown_on_the_run_page(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    response, events = await collect(client, "POST", "/v1/research/stream", json=QUESTION)
    run_id = response.headers["x-run-id"]
    audit = (await client.get(f"/v1/research/{run_id}/audit")).json()
    stages = [e["stage"] for e in audit["entries"]]
    assert stages == ["route", "answered", "draft", "checks", "decision", "gate", "shipped"]
    assert [e["seq"] for e in audit["entries"]] == list(range(1, len(stages) + 1))
    answered = audit["entries"][1]["payload"]  # the question-level judgement, before anything is drafted
    assert answered["passed"] is True and answered["probability"] >= answered["cutoff"] and answered["withheld"] == 0
    checks = audit["entries"][3]["payload"]["checks"]
    assert checks["l1"]["passed"] and checks["l2"]["passed"] and checks["reviewer"]["verdict"] == "ok"
    page = (await client.get(f"/runs/{run_id}")).text
    assert 'data-stage="checks"' in page and 'id="outcome-banner"' in page and "outcome-banner-shipped" in page
    assert 'data-stage="answered"' in page and "does the evidence answer the question?" in page


def test_the_audit_panel_says_what_the_question_level_judgement_decided() -> None:
    from veracity.web.app import create_app

    panel = create_app(migrate=False).state.templates.get_template("partials/_audit.html")
    judged = {"mode": "semantic", "judged": True, "probability": 0.4592, "cutoff": 0.56, "passed": False}
    entries = [
        {"stage": "answered", "attempt": 0, "payload": {**judged, "withheld": 7}},
        {"stage": "answered", "attempt": 0, "payload": {**judged, "probability": 0.9, "passed": True, "withheld": 0}},
        {
            "stage": "answered",
            "attempt": 0,
            "payload": {"mode": "semantic", "judged": False, "why": "a run over the web"},
        },
    ]
    html = panel.render(audit=entries)
    assert "no: 7 evidence sentence(s) withheld" in html and "(semantic, probability 0.46, cut-off 0.56)" in html
    assert '<span class="ok">yes</span>' in html and "probability 0.90" in html
    assert "not judged: a run over the web" in html
