"""Follow-ups, refreshes and what changed between versions.

A follow-up is a new run linked to its parent: both pages show the thread, its planner's searches carry the
parent's words (and the audit trail says what it was told), and its retrieval may read the passages the parent
quoted. A refresh runs the report's question again against the corpus as it is now and writes the result as the
next artifact version of the same run; the changes page lists claims added, removed and re-labelled and sources
added or gone."""

from __future__ import annotations

import asyncio
from typing import Any

from httpx import AsyncClient

from conftest import SMALL_CORPUS, form, load_docs, make_settings
from test_accounts import auth_settings, browser_of, signup, start
from veracity import messages
from veracity.db.corpus_repo import DocumentIn
from veracity.domain import Claim, Report, ReportEvidence, ReportSection
from veracity.runs.diff import diff_reports
from veracity.search.memindex import RECHECK_SECONDS

COFFEE = {"question": "coffee production and the coffee market", "template": "market_brief", "corpus": "small"}


async def started(client: AsyncClient, response: Any) -> str:
    assert response.status_code == 303, response.text
    run_id = response.headers["location"].rsplit("/", 1)[1]
    await client.app.state.service.wait(run_id)  # type: ignore[attr-defined]
    return run_id


async def test_follow_up_links_both_pages_and_its_planner_reads_the_parent(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    parent = await started(client, await client.post("/runs", data=form(**COFFEE)))
    page = (await client.get(f"/runs/{parent}")).text
    assert 'id="follow-up-form"' in page and 'id="refresh-form"' in page

    child = await started(
        client, await client.post(f"/runs/{parent}/follow-up", data=form(question="What about prices?"))
    )
    run = (await client.get(f"/v1/research/{child}")).json()
    assert run["report"]["question"] == "What about prices?" and run["report"]["template"] == "market_brief"

    # The planner's searches carry the parent's words after the follow-up's own; the audit says what it was told.
    events = (await client.get(f"/v1/research/{child}/audit")).json()
    told = next(e["payload"] for e in events["entries"] if e["stage"] == "plan" and "follows" in e["payload"])
    assert told["follows"] == parent and told["parent_question"] == COFFEE["question"]
    assert told["parent_sections"] and told["parent_passages"] >= 1
    stream = (await client.get(f"/v1/research/{child}/events")).text
    assert '"queries":["prices coffee production market"' in stream.replace(" ,", ",")
    # Both pages show the thread.
    child_page = (await client.get(f"/runs/{child}")).text
    assert 'id="ancestors"' in child_page and f'href="/runs/{parent}"' in child_page
    parent_page = (await client.get(f"/runs/{parent}")).text
    assert 'id="follow-ups"' in parent_page and f'href="/runs/{child}"' in parent_page

    empty = await client.post(f"/runs/{parent}/follow-up", data=form(question="   "))
    assert empty.status_code == 422 and messages.FOLLOW_UP_EMPTY in empty.text
    unknown = await client.post("/runs/" + "0" * 32 + "/follow-up", data=form(question="why?"))
    assert unknown.status_code == 404


async def test_a_follow_up_of_a_run_that_answered_nothing_is_not_told_it_covered_its_closest_passages(
    client_for, small_db_url
) -> None:
    """The parent fell back with nothing relevant and shows its closest passages: they are quotes, not sections
    it answered, so the follow-up's planner is told of no section."""
    client = await client_for(make_settings(small_db_url))
    nonsense = {"question": "Zorblax quuxification of the vemtrian flibber", "template": "answer", "corpus": "small"}
    parent = await started(client, await client.post("/runs", data=form(**nonsense)))
    report = (await client.get(f"/v1/research/{parent}")).json()["report"]
    assert report["outcome"] == "fallback"
    (digest,) = [s for s in report["sections"] if s["id"] == "evidence_digest"]
    assert digest["title"] == "Closest passages" and digest["claims"], digest
    child = await started(
        client, await client.post(f"/runs/{parent}/follow-up", data=form(question="What about prices?"))
    )
    events = (await client.get(f"/v1/research/{child}/audit")).json()
    told = next(e["payload"] for e in events["entries"] if e["stage"] == "plan" and "follows" in e["payload"])
    assert told["follows"] == parent and not told["parent_sections"], told


async def test_follow_up_may_reuse_the_parents_quotes(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    parent = await started(client, await client.post("/runs", data=form(**COFFEE)))
    child = await started(
        client, await client.post(f"/runs/{parent}/follow-up", data=form(question="And how much was it worth?"))
    )
    stream = (await client.get(f"/v1/research/{child}/events")).text
    assert '"cache":"parent run"' in stream
    # "it" is the coffee market: relevance is judged with the question followed, so the answer ships.
    report = (await client.get(f"/v1/research/{child}")).json()["report"]
    shipped = " ".join(c["text"] for s in report["sections"] for c in s["claims"])
    assert report["outcome"] == "shipped" and "200 billion dollars" in shipped


async def test_refresh_writes_the_next_version_of_the_same_run_and_the_changes_page_shows_it(
    client_for, small_db_url
) -> None:
    client = await client_for(make_settings(small_db_url))
    run_id = await started(client, await client.post("/runs", data=form(**COFFEE)))
    v1 = (await client.get(f"/v1/research/{run_id}")).json()

    # The corpus changes: a new document with a fresh figure.
    fresh = DocumentIn(
        doc_id="coffee-2026",
        title="Coffee market 2026",
        text="Coffee production reached 178 million bags in 2026, a record for the coffee market.",
    )
    await load_docs(small_db_url, "small", [*SMALL_CORPUS, fresh])
    await asyncio.sleep(RECHECK_SECONDS + 0.1)  # the process's search index notices an ingest within this

    refresh = await client.post(f"/runs/{run_id}/refresh", data=form())
    refresher = await started(client, refresh)
    assert refresher != run_id
    refresher_page = (await client.get(f"/runs/{refresher}")).text
    assert 'id="refresh-of"' in refresher_page

    versions = (await client.get(f"/v1/research/{run_id}/versions")).json()["versions"]
    assert [v["version"] for v in versions] == [1, 2]
    v2 = (await client.get(f"/v1/research/{run_id}")).json()
    assert v2["version"] == 2 and v2["report"]["run_id"] == run_id
    assert v2["report"]["metrics"]["refreshed_by"] == refresher
    shipped = " ".join(c["text"] for s in v2["report"]["sections"] for c in s["claims"])
    assert "178 million bags" in shipped
    assert v1["report"] != v2["report"]

    page = (await client.get(f"/runs/{run_id}")).text
    assert 'data-version="2"' in page and 'id="changes-link"' in page
    changes = await client.get(f"/runs/{run_id}/changes")
    assert changes.status_code == 200
    assert "version 1 to version 2" in changes.text and 'id="claims-added"' in changes.text
    assert "178 million bags" in changes.text and 'id="sources-added"' in changes.text
    api = (await client.get(f"/v1/research/{run_id}/changes?from=1&to=2")).json()
    assert any("178 million bags" in c["text"] for c in api["claims_added"])
    assert any(s["title"] == "Coffee market 2026" for s in api["sources_added"])
    # A refresh is not listed among the runs on its own; the home page lists the run once.
    home = (await client.get("/")).text
    assert refresher[:12] not in home and run_id[:12] in home
    same = await client.get(f"/runs/{run_id}/changes?from=2&to=2")
    assert same.status_code == 422 and messages.VERSIONS_SAME in same.text
    assert (await client.get(f"/runs/{run_id}/changes?from=7")).status_code == 404


async def test_refresh_of_an_unfinished_run_or_twice_at_once_is_refused(client_for, small_db_url) -> None:
    settings = make_settings(small_db_url, event_delay_ms=50)
    client = await client_for(settings)
    response = await client.post("/runs", data=form(**COFFEE))
    run_id = response.headers["location"].rsplit("/", 1)[1]
    early = await client.post(f"/v1/research/{run_id}/refresh")
    assert early.status_code == 409
    status = early.json()["error"]["message"].rsplit("(it is ", 1)[1].rstrip(").")
    assert early.json()["error"]["message"] == messages.RUN_NOT_FINISHED.format(run_id=run_id, status=status)
    await client.app.state.service.wait(run_id)  # type: ignore[attr-defined]
    first = await client.post(f"/v1/research/{run_id}/refresh")
    assert first.status_code == 202
    second = await client.post(f"/v1/research/{run_id}/refresh")
    assert second.status_code == 409
    refresh = first.json()["refresh_run_id"]
    assert second.json()["error"]["message"] == messages.REFRESH_UNDER_WAY.format(run_id=run_id, refresh=refresh)
    await client.app.state.service.wait(first.json()["refresh_run_id"])  # type: ignore[attr-defined]


def _report(claims: list[tuple[str, str, str]], evidence: list[tuple[str, str]], outcome: str = "shipped") -> Report:
    return Report(
        run_id="r",
        template="t",
        question="q",
        corpus="c",
        outcome=outcome,  # type: ignore[arg-type]
        sections=[
            ReportSection(
                id="s",
                title="Findings",
                required=True,
                status="supported",
                claims=[Claim(text=t, evidence_ids=[e], label=label) for t, e, label in claims],  # type: ignore[arg-type]
            )
        ],
        evidence=[
            ReportEvidence(
                id=eid,
                doc_id=doc,
                url=None,
                title=doc,
                quote="x",
                start=0,
                end=1,
                content_hash="h",
                origin_subtask_id="s",
            )
            for eid, doc in evidence
        ],
    )


def test_diff_reports_claims_added_removed_relabelled_and_sources() -> None:
    before = _report(
        [("Sales rose.", "e1", "supported"), ("Prices  fell.", "e2", "supported")], [("e1", "a"), ("e2", "b")]
    )
    after = _report(
        [("prices fell.", "e2", "partial"), ("Exports doubled.", "e3", "supported")], [("e2", "b"), ("e3", "c")]
    )
    diff = diff_reports(before, after, (1, 2))
    assert [c.text for c in diff.added] == ["Exports doubled."]
    assert [c.text for c in diff.removed] == ["Sales rose."]
    assert [(c.before, c.label) for c in diff.relabelled] == [("supported", "partial")]
    assert [s.link for s in diff.sources_added] == ["c"] and [s.link for s in diff.sources_gone] == ["a"]
    assert not diff.unchanged and diff_reports(before, before, (1, 1)).unchanged


async def test_follow_up_refresh_and_changes_of_another_users_run_are_404(client_for, small_db_url) -> None:
    ada = await client_for(auth_settings(small_db_url, open_signup=True))
    await signup(ada, "ada")  # the admin
    alice, bob = browser_of(ada), browser_of(ada)
    await signup(alice, "alice")
    await signup(bob, "bob")
    run_id = await start(alice)
    for response in [
        await bob.post(f"/runs/{run_id}/follow-up", data=form(question="why?")),
        await bob.post(f"/runs/{run_id}/refresh", data=form()),
        await bob.get(f"/runs/{run_id}/changes"),
        await bob.post(f"/v1/research/{run_id}/follow-up", json={"question": "why?"}),
        await bob.post(f"/v1/research/{run_id}/refresh"),
        await bob.get(f"/v1/research/{run_id}/changes"),
    ]:
        assert response.status_code == 404, response.request.url
    assert (await bob.post(f"/runs/{run_id}/refresh", data={})).status_code == 403  # no CSRF field
    # The admin refreshes alice's run: the refresh is alice's (she sees it; it searches what she may).
    refreshed = await ada.post(f"/v1/research/{run_id}/refresh")
    assert refreshed.status_code == 202
    refresher = refreshed.json()["refresh_run_id"]
    await ada.app.state.service.wait(refresher)  # type: ignore[attr-defined]
    assert (await alice.get(f"/runs/{refresher}")).status_code == 200
    assert (await bob.get(f"/runs/{refresher}")).status_code == 404
    assert [v["version"] for v in (await alice.get(f"/v1/research/{run_id}/versions")).json()["versions"]] == [1, 2]
    # A refresh is refreshed or followed up through the run it refreshes.
    again = await alice.post(f"/v1/research/{refresher}/refresh")
    assert again.status_code == 409
    assert again.json()["error"]["message"] == messages.REFRESH_OF_REFRESH.format(run_id=refresher, target=run_id)
