"""A run over the open web, end to end through the real service: SearXNG-format search and pages on the
fixture site over real HTTP, the coordinator, the fetch cache, evidence with offsets into the stored text,
failures recorded on the branch, and the source inspector's rows in the stored events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import pytest

from conftest import make_settings
from fixture_site import FixtureSite
from veracity import messages
from veracity.db import fetch_cache_repo, runs_repo
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.errors import BadInput
from veracity.fetch.cache import CachedFetcher
from veracity.fetch.http import HttpFetcher
from veracity.fetch.types import FetchPolicy
from veracity.graph.builder import build_graph
from veracity.runs.service import RunService
from veracity.search.local import LocalSearch
from veracity.search.providers import WebRetrieval, hit_ranker
from veracity.search.web import SearxngSearch
from veracity.specs.registry import SpecRegistry


@pytest.fixture(scope="module")
def site() -> Iterator[FixtureSite]:
    with FixtureSite() as running:
        yield running


@pytest.fixture
async def service(db_url: str, site: FixtureSite) -> AsyncIterator[RunService]:
    engine = make_engine(db_url)
    sessionmaker = make_sessionmaker(engine)
    settings = make_settings(db_url)
    pages = CachedFetcher(
        fetcher=HttpFetcher(FetchPolicy(allow_loopback=True, timeout_seconds=3)),
        sessionmaker=sessionmaker,
        ttl=timedelta(hours=24),
        revalidate_within=timedelta(hours=2),
    )
    yield RunService(
        sessionmaker=sessionmaker,
        registry=SpecRegistry.load(),
        settings=settings,
        graph=build_graph(),
        search=LocalSearch(sessionmaker),
        web=WebRetrieval(search=SearxngSearch(base_url=site.url("/searxng")), pages=pages),
        ranker=hit_ranker(settings),
    )
    await engine.dispose()


async def web_run(service: RunService, question: str) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    run_id = await service.start(question=question, template="market_brief", corpus="web")
    await service.wait(run_id)
    async with service.sessionmaker() as session:
        events = [(e.name, e.payload) for e in await runs_repo.events_after(session=session, run_id=run_id)]
        artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
    assert artifact is not None, [n for n, _ in events]
    return artifact.report, events


def opened_rows(events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    rows: dict[int, dict[str, Any]] = {}
    for name, payload in events:
        if name == "retrieve_map_progress":
            for row in payload.get("sources", []):
                rows.setdefault(row["order"], row)
    return [rows[k] for k in sorted(rows)]


async def test_a_web_run_searches_fetches_each_page_once_and_cites_the_pages(
    service: RunService, site: FixtureSite
) -> None:
    site.reset()
    report, events = await web_run(service, "coffee production in Brazil")
    assert report["outcome"] == "shipped"
    rows = opened_rows(events)
    # Every page was requested from the site exactly once although three branches searched, each several times,
    # and the engine listed article 1 under three spellings.
    article_paths = [p for p in site.hits if p.startswith("/articles/")]
    assert article_paths and all(site.hits[p] == 1 for p in article_paths)
    assert len(rows) == len(article_paths)
    assert [r["order"] for r in rows] == list(range(1, len(rows) + 1))
    assert all(r["kind"] == "web" and r["status"] == "ok" and r["cache"] == "miss" and r["bytes"] > 1000 for r in rows)
    assert rows[0]["published"] and rows[0]["title"]
    # Evidence comes from the fetched pages, with offsets into the stored text, and every claim cites it.
    evidence = {e["id"]: e for e in report["evidence"]}
    assert evidence and all(e["url"].startswith(site.url("/articles/")) for e in evidence.values())
    claims = [c for s in report["sections"] for c in s["claims"]]
    assert claims and all(set(c["evidence_ids"]) <= set(evidence) for c in claims)
    async with service.sessionmaker() as session:
        for e in list(evidence.values())[:5]:
            from veracity.fetch.canonical import url_key

            row = await fetch_cache_repo.get_entry(session=session, url_hash=url_key(e["url"]))
            assert row is not None and row.text[e["start"] : e["end"]] == e["quote"]
    # The Brazil article outranks the others: it is the one about the question's place.
    assert "Brazil" in rows[0]["title"]


async def test_a_second_run_reads_the_cache_and_asks_the_site_nothing(service: RunService, site: FixtureSite) -> None:
    await web_run(service, "cocoa exports from Ghana")
    site.reset()
    report, events = await web_run(service, "cocoa exports from Ghana")
    assert report["outcome"] == "shipped"
    assert not any(p.startswith("/articles/") for p in site.hits)
    assert {r["cache"] for r in opened_rows(events)} == {"hit"}


async def test_failed_pages_are_recorded_on_the_branch_shown_and_the_run_goes_on(
    service: RunService, site: FixtureSite
) -> None:
    site.reset()
    site.search_traps = ["/status/404", "/to-private", "/endless"]
    try:
        report, events = await web_run(service, "copper mining in Chile")
    finally:
        site.search_traps = []
    assert report["outcome"] == "shipped"
    failed = {r["url"].rsplit(":", 1)[-1].split("/", 1)[-1]: r for r in opened_rows(events) if r["status"] == "failed"}
    assert {k: v["error_kind"] for k, v in failed.items()} == {
        "status/404": "http_status",
        "to-private": "refused",
        "endless": "timeout",
    }
    assert failed["status/404"]["http_status"] == 404
    assert site.hits["/status/404"] == 1 and site.hits["/endless"] == 1  # each trap opened once in the whole run
    done = [p for n, p in events if n == "retrieve_map_progress" and p["status"] == "done"]
    errors = [e for p in done for e in p.get("page_errors", [])]
    assert len(errors) == 3 and any("169.254.169.254" in e for e in errors)
    assert {p["status"] for p in done} == {"done"}


async def test_the_page_budget_caps_what_a_web_run_opens(service: RunService, site: FixtureSite) -> None:
    spec = service.registry.get("market_brief")
    small = spec.model_copy(update={"budgets": spec.budgets.model_copy(update={"max_pages": 2})})
    service.registry = SpecRegistry({"market_brief": small})
    site.reset()
    _, events = await web_run(service, "wheat harvest in Canada")
    assert len(opened_rows(events)) == 2
    assert sum(v for p, v in site.hits.items() if p.startswith("/articles/")) == 2


async def test_web_is_refused_with_a_clear_message_when_the_process_has_no_web_search(db_url: str) -> None:
    engine = make_engine(db_url)
    sessionmaker = make_sessionmaker(engine)
    try:
        service = RunService(
            sessionmaker=sessionmaker,
            registry=SpecRegistry.load(),
            settings=make_settings(db_url),
            graph=build_graph(),
            search=LocalSearch(sessionmaker),
        )
        with pytest.raises(BadInput) as caught:
            await service.start(question="coffee", template="market_brief", corpus="web")
        assert caught.value.message == messages.WEB_UNAVAILABLE
        async with sessionmaker() as session:
            assert list(await runs_repo.recent_runs(session=session, limit=5)) == []
    finally:
        await engine.dispose()
