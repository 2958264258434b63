"""The source inspector in a real browser: a run over "the open web" (a SearXNG-format engine and pages on the
fixture site, over real HTTP from a real ``veracity serve``) lists every page opened, in order, with its
status, cache hit or miss, bytes and date; failures stand out; a second run is served from the cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.async_api import Browser

from fixture_site import FixtureSite
from test_browser import ARTIFACTS, Server, new_page, serve, submit_question, wait_finished

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site() -> Iterator[FixtureSite]:
    with FixtureSite() as running:
        yield running


@pytest.fixture(scope="module")
def web_server(wiki_template_db: Path, tmp_path_factory: pytest.TempPathFactory, site: FixtureSite) -> Iterator[Server]:
    yield from serve(
        wiki_template_db,
        tmp_path_factory.mktemp("web-server"),
        VERACITY_SEARCH__WEB_BACKEND="searxng",
        VERACITY_SEARCH__SEARXNG_URL=site.url("/searxng"),
        # The fixture site is on loopback; a real deployment keeps the SSRF guard on.
        VERACITY_FETCH__ALLOW_PRIVATE="true",
        VERACITY_FETCH__TIMEOUT_SECONDS="3",
        VERACITY_LIMITS__EVENT_DELAY_MS="0",
    )


async def inspector_rows(page) -> list[dict[str, str]]:  # type: ignore[no-untyped-def]
    return await page.eval_on_selector_all(
        "#sources tr.opened-row",
        """els => els.map(r => ({order: r.dataset.order, status: r.dataset.status, cache: r.dataset.cache,
                               text: r.innerText}))""",
    )


async def test_source_inspector_lists_web_pages_in_order_with_status_cache_bytes_and_date(
    web_server: Server, site: FixtureSite, browser: Browser
) -> None:
    site.search_traps = ["/status/404"]
    try:
        page = await new_page(browser, viewport={"width": 1280, "height": 900})
        await page.goto(f"{web_server.base_url}/")
        await page.select_option("select#corpus", "web")
        await submit_question(page, web_server, "coffee production in Brazil")
        assert await wait_finished(page) == "done"
        rows = await inspector_rows(page)
    finally:
        site.search_traps = []
    assert [int(r["order"]) for r in rows] == list(range(1, len(rows) + 1))
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == 1 and "http_status 404" in failed[0]["text"]
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok and {r["cache"] for r in ok} == {"miss"}
    first = ok[0]["text"]
    assert "Coffee production in Brazil" in first and "127.0.0.1" in first and "2024-" in first
    assert any(ch.isdigit() for ch in first.split("miss")[-1])  # bytes column
    await page.screenshot(path=str(ARTIFACTS / "sources-web-run.png"), full_page=True)
    assert await page.locator("#report article[data-outcome=shipped]").count() == 1
    assert not page.js_errors  # type: ignore[attr-defined]

    # The same question again: every page comes from the fetch cache, and the site is not asked.
    site.reset()
    await page.goto(f"{web_server.base_url}/")
    await page.select_option("select#corpus", "web")
    await submit_question(page, web_server, "coffee production in Brazil")
    assert await wait_finished(page) == "done"
    again = await inspector_rows(page)
    assert again and {r["cache"] for r in again} == {"hit"}
    assert not any(p.startswith("/articles/") for p in site.hits)
    # Reopened without the live stream, the inspector is the same.
    await page.reload()
    assert [r["text"] for r in await inspector_rows(page)] == [r["text"] for r in again]
