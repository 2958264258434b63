"""The fetch cache against the fixture site over real HTTP: TTL hits with no network, conditional GETs near
expiry (304 renews the lease and reuses the text), a changed page replaces the row, an extractor version
mismatch invalidates, failures are never cached. SQLite here, PostgreSQL in the last test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from fixture_site import FixtureSite
from veracity.db import fetch_cache_repo
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.migrate import upgrade
from veracity.db.models import FetchCacheEntry
from veracity.fetch.cache import CachedFetcher
from veracity.fetch.canonical import url_key
from veracity.fetch.http import HttpFetcher
from veracity.fetch.types import FetchPolicy


@pytest.fixture(scope="module")
def site() -> Iterator[FixtureSite]:
    with FixtureSite() as running:
        yield running


@pytest.fixture
async def sessionmaker(db_url: str) -> AsyncIterator[object]:
    engine = make_engine(db_url)
    yield make_sessionmaker(engine)
    await engine.dispose()


def cached(sessionmaker, *, ttl_hours: float = 24, revalidate_hours: float = 2, version: int = 1) -> CachedFetcher:
    return CachedFetcher(
        fetcher=HttpFetcher(FetchPolicy(allow_loopback=True, timeout_seconds=5)),
        sessionmaker=sessionmaker,
        ttl=timedelta(hours=ttl_hours),
        revalidate_within=timedelta(hours=revalidate_hours),
        schema_version=version,
    )


async def age(sessionmaker, url: str, *, expires_in: timedelta) -> None:
    async with sessionmaker() as session, session.begin():
        await session.execute(
            update(FetchCacheEntry)
            .where(FetchCacheEntry.url_hash == url_key(url))
            .values(expires_at=datetime.now(UTC) + expires_in)
        )


async def test_a_page_within_its_ttl_is_served_with_no_network(site: FixtureSite, sessionmaker) -> None:
    url = site.url("/articles/11")
    site.reset()
    first = await cached(sessionmaker).open(url)
    assert first.ok and first.cache == "miss" and site.hits["/articles/11"] == 1
    second = await cached(sessionmaker).open(url + "?utm_source=news#top")  # same canonical page
    assert second.cache == "hit" and site.hits["/articles/11"] == 1
    assert second.text == first.text and second.title == first.title and second.bytes == first.bytes > 1000
    assert second.published == first.published == "2024-02-04"
    async with sessionmaker() as session:
        row = await fetch_cache_repo.get_entry(session=session, url_hash=url_key(url))
    assert row is not None and row.raw.startswith(b"<!DOCTYPE html>") and row.etag and row.last_modified
    assert row.extract_schema_version == 1 and row.canonical_url == url


async def test_near_expiry_a_conditional_get_304_renews_the_lease_and_reuses_the_text(
    site: FixtureSite, sessionmaker
) -> None:
    url = site.url("/articles/12")
    site.reset()
    first = await cached(sessionmaker).open(url)
    await age(sessionmaker, url, expires_in=timedelta(minutes=30))  # inside the 2 h revalidation window
    again = await cached(sessionmaker).open(url)
    assert again.cache == "revalidated" and again.text == first.text
    assert site.conditional_hits[("/articles/12", True)] == 1 and site.not_modified["/articles/12"] == 1
    async with sessionmaker() as session:
        row = await fetch_cache_repo.get_entry(session=session, url_hash=url_key(url))
    assert row is not None
    renewed = row.expires_at if row.expires_at.tzinfo else row.expires_at.replace(tzinfo=UTC)
    assert renewed > datetime.now(UTC) + timedelta(hours=23)
    third = await cached(sessionmaker).open(url)
    assert third.cache == "hit" and site.hits["/articles/12"] == 2


async def test_an_expired_page_whose_validators_no_longer_match_is_fetched_again_in_full(
    site: FixtureSite, sessionmaker
) -> None:
    url = site.url("/articles/13")
    site.reset()
    await cached(sessionmaker).open(url)
    async with sessionmaker() as session, session.begin():
        await session.execute(
            update(FetchCacheEntry)
            .where(FetchCacheEntry.url_hash == url_key(url))
            .values(
                etag='"stale"', last_modified=None, text="old text", expires_at=datetime.now(UTC) - timedelta(days=1)
            )
        )
    fresh = await cached(sessionmaker).open(url)
    assert fresh.cache == "miss" and "old text" not in fresh.text and "Vietnam produced" in fresh.text
    assert site.conditional_hits[("/articles/13", True)] == 1 and site.not_modified["/articles/13"] == 0


async def test_a_row_from_another_extractor_version_is_ignored(site: FixtureSite, sessionmaker) -> None:
    url = site.url("/articles/14")
    site.reset()
    await cached(sessionmaker, version=1).open(url)
    upgraded = await cached(sessionmaker, version=2).open(url)
    assert upgraded.cache == "miss"
    # The new version's fetch was unconditional: the old row's validators were not trusted.
    assert site.conditional_hits[("/articles/14", False)] == 2 and site.conditional_hits[("/articles/14", True)] == 0
    async with sessionmaker() as session:
        row = await fetch_cache_repo.get_entry(session=session, url_hash=url_key(url))
    assert row is not None and row.extract_schema_version == 2


@pytest.mark.parametrize(("path", "kind"), [("/status/404", "http_status"), ("/to-private", "refused")])
async def test_failures_are_reported_and_never_cached(site: FixtureSite, sessionmaker, path: str, kind: str) -> None:
    site.reset()
    for _ in range(2):
        page = await cached(sessionmaker).open(site.url(path))
        assert not page.ok and page.cache == "none" and page.error_kind == kind
    assert site.hits[path] == 2  # asked again the second time: nothing was stored
    async with sessionmaker() as session:
        assert await fetch_cache_repo.count_entries(session=session) == 0


async def test_concurrent_opens_of_one_page_store_one_row(site: FixtureSite, sessionmaker) -> None:
    url = site.url("/articles/15")
    pages = await asyncio.gather(*(cached(sessionmaker).open(url) for _ in range(4)))
    assert all(p.ok for p in pages)
    async with sessionmaker() as session:
        assert await fetch_cache_repo.count_entries(session=session) == 1


@pytest.mark.postgres
async def test_the_cache_works_on_postgresql(site: FixtureSite, pg_url: str) -> None:
    await asyncio.to_thread(upgrade, pg_url)
    engine = make_engine(pg_url)
    try:
        sm = make_sessionmaker(engine)
        url = site.url("/report.pdf")
        site.reset()
        first = await cached(sm).open(url)
        assert first.ok and first.cache == "miss" and "Commodity" in first.title
        assert (await cached(sm).open(url)).cache == "hit" and site.hits["/report.pdf"] == 1
        await age(sm, url, expires_in=timedelta(minutes=5))
        assert (await cached(sm).open(url)).cache == "revalidated" and site.not_modified["/report.pdf"] == 1
    finally:
        await engine.dispose()
