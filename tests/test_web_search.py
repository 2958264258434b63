"""The web search providers at the HTTP seam: real requests to engine-format endpoints on the fixture site
(SearXNG's JSON API; DuckDuckGo's HTML endpoint read by the real ``ddgs`` engine). Never the live web."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from fixture_site import FixtureSite
from veracity.fetch.canonical import canonical_url
from veracity.search.web import DdgsSearch, SearchFailed, SearxngSearch


@pytest.fixture(scope="module")
def site() -> Iterator[FixtureSite]:
    with FixtureSite() as running:
        yield running


async def test_searxng_results_become_hits_deduplicated_on_the_canonical_url(site: FixtureSite) -> None:
    hits = await SearxngSearch(base_url=site.url("/searxng")).search(query="coffee production Brazil", corpus="", k=10)
    urls = [h.url for h in hits]
    # Three spellings of article 1 (plain, utm_*, fbclid + fragment) are one hit; the javascript: result is gone.
    assert urls[0] == site.url("/articles/1")
    assert sum(canonical_url(u) == site.url("/articles/1") for u in urls) == 1
    assert not any(u.startswith("javascript:") for u in urls)
    assert len({h.key for h in hits}) == len(hits)
    first = hits[0]
    assert first.fetch and first.title.startswith("Coffee production in Brazil")
    assert "Brazil produced" in first.text and first.published == "2024-01-05"
    assert len(first.key) == 64 and first.doc_id == site.url("/articles/1")


async def test_searxng_answers_at_most_k_hits(site: FixtureSite) -> None:
    hits = await SearxngSearch(base_url=site.url("/searxng")).search(query="production", corpus="", k=3)
    assert len(hits) == 3


@pytest.mark.parametrize(
    ("base", "message"),
    [
        ("/status/500", "SearXNG search failed: HTTPStatusError"),  # no /search there: an HTTP error status
        ("/searxng-html", "SearXNG search failed: JSONDecodeError"),  # a 200 HTML page, JSON output not enabled
        ("/searxng-odd", "SearXNG answered without a `results` list"),
    ],
)
async def test_a_searxng_failure_is_a_search_failed_error(site: FixtureSite, base: str, message: str) -> None:
    with pytest.raises(SearchFailed, match=re.escape(message)):
        await SearxngSearch(base_url=site.url(base)).search(query="coffee", corpus="", k=5)


async def test_an_unreachable_searxng_is_a_search_failed_error() -> None:
    with pytest.raises(SearchFailed, match="ConnectError"):
        await SearxngSearch(base_url="http://127.0.0.1:9").search(query="coffee", corpus="", k=5)


async def test_ddgs_engine_reads_the_duckduckgo_html_endpoint(
    site: FixtureSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ddgs.engines.duckduckgo import Duckduckgo

    # The one seam ddgs offers: its engine's endpoint URL. Everything else — the POST, the HTML parsing, ddgs's
    # own result merging — is the real package talking real HTTP to a page in DuckDuckGo's markup.
    monkeypatch.setattr(Duckduckgo, "search_url", site.url("/ddg/html/"))
    hits = await DdgsSearch(engines="duckduckgo", timeout_seconds=5).search(query="cocoa Ghana", corpus="", k=5)
    assert hits, "ddgs returned nothing from the fixture endpoint"
    assert all(h.fetch and h.url and h.url.startswith(site.url("/articles/")) for h in hits)
    assert any("Ghana" in h.title for h in hits)
    assert len({canonical_url(h.url or "") for h in hits}) == len(hits)
    assert site.hits["/ddg/html/"] >= 1


async def test_ddgs_with_no_reachable_engine_fails_as_search_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    from ddgs.engines.duckduckgo import Duckduckgo

    monkeypatch.setattr(Duckduckgo, "search_url", "http://127.0.0.1:9/html/")
    with pytest.raises(SearchFailed, match="web search failed"):
        await DdgsSearch(engines="duckduckgo", timeout_seconds=2).search(query="cocoa", corpus="", k=5)
