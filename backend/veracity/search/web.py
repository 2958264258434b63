"""The ``web`` search providers: ddgs (DuckDuckGo and the other engines that package speaks to) and SearXNG.

Both return search results only (title, URL, snippet, a date when the engine gives one); the pages themselves are
opened later through the run's coordinator and the fetch cache. Results are deduplicated on the canonical URL
(tracking parameters and fragments do not make a second result), and a failure is a ``SearchFailed`` the
branch records — never a crashed run.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx

from veracity.errors import VeracityError
from veracity.fetch.canonical import BadUrl, canonical_url
from veracity.ports import SearchHit
from veracity.text import sha256_hex

logger = logging.getLogger(__name__)


class SearchFailed(VeracityError):
    status_code = 502
    code = "search_failed"


def to_hits(results: list[dict[str, Any]], *, url_key: str, snippet_key: str, date_key: str | None) -> list[SearchHit]:
    """Engine results → hits, first spelling of each canonical URL kept, non-http(s) results dropped."""
    hits: list[SearchHit] = []
    seen: set[str] = set()
    for result in results:
        url = str(result.get(url_key) or "").strip()
        try:
            canonical = canonical_url(url)
        except BadUrl:
            continue
        key = sha256_hex(canonical)
        if key in seen:
            continue
        seen.add(key)
        published = str(result.get(date_key) or "")[:10] if date_key else ""
        hits.append(
            SearchHit(
                doc_id=canonical,
                title=str(result.get("title") or canonical)[:300],
                text=str(result.get(snippet_key) or "")[:1000],
                start=0,
                end=0,
                score=0.0,
                url=url,
                published=published or None,
                key=key,
                fetch=True,
            )
        )
    return hits


class DdgsSearch:
    """Web search through the ``ddgs`` package (synchronous; run in a worker thread)."""

    name = "web"

    def __init__(self, *, engines: str = "duckduckgo", timeout_seconds: float = 10.0) -> None:
        self.engines = engines
        self.timeout = timeout_seconds

    def _text(self, query: str, k: int) -> list[dict[str, Any]]:
        from ddgs import DDGS
        from ddgs.exceptions import DDGSException

        try:
            return list(DDGS(timeout=int(max(1, self.timeout))).text(query, max_results=k, backend=self.engines))
        except DDGSException as exc:
            raise SearchFailed(f"web search failed: {exc}") from exc

    async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]:
        results = await asyncio.to_thread(self._text, query, k)
        return to_hits(results, url_key="href", snippet_key="body", date_key="date")[:k]


class SearxngSearch:
    """Web search through a SearXNG instance's JSON API (``/search?format=json``)."""

    name = "web"

    def __init__(
        self, *, base_url: str, timeout_seconds: float = 10.0, client: httpx.AsyncClient | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout_seconds
        self._client = client

    async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]:
        params = {"q": query, "format": "json", "pageno": "1"}
        client = self._client or httpx.AsyncClient(timeout=self.timeout)
        try:
            response = await client.get(f"{self.base_url}/search", params=params, timeout=self.timeout)
            response.raise_for_status()
            payload = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise SearchFailed(f"SearXNG search failed: {type(exc).__name__}: {exc}") from exc
        finally:
            if self._client is None:
                await client.aclose()
        results = payload.get("results") if isinstance(payload, dict) else None
        if not isinstance(results, list):
            raise SearchFailed("SearXNG answered without a `results` list (is JSON output enabled?)")
        return to_hits(
            [r for r in results if isinstance(r, dict)], url_key="url", snippet_key="content", date_key="publishedDate"
        )[:k]
