"""The fetch cache around any ``Fetcher``: keyed by the SHA-256 of the canonical URL, in the database.

- A row within its TTL and outside the revalidation window: served with no network at all (``hit``).
- A row near or past expiry with validators: a conditional GET (``If-None-Match`` / ``If-Modified-Since``);
  ``304`` renews the lease and reuses the stored text (``revalidated``); ``200`` replaces the row (``miss``).
- A row written by another ``EXTRACT_SCHEMA_VERSION``: ignored and re-fetched in full.
- Failures are never cached: the next run asks again.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity.db import fetch_cache_repo
from veracity.db.models import FetchCacheEntry
from veracity.fetch.canonical import BadUrl, canonical_url
from veracity.fetch.types import EXTRACT_SCHEMA_VERSION, Fetcher, FetchError, Page
from veracity.ports import OpenedPage
from veracity.text import sha256_hex

logger = logging.getLogger(__name__)


def _aware(value: datetime) -> datetime:
    """SQLite hands datetimes back naive; they were stored in UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class CachedFetcher:
    def __init__(
        self,
        *,
        fetcher: Fetcher,
        sessionmaker: async_sessionmaker[AsyncSession],
        ttl: timedelta,
        revalidate_within: timedelta,
        schema_version: int = EXTRACT_SCHEMA_VERSION,
    ) -> None:
        self.fetcher = fetcher
        self.sessionmaker = sessionmaker
        self.ttl = ttl
        self.revalidate_within = revalidate_within
        self.schema_version = schema_version

    async def open(self, url: str) -> OpenedPage:
        started = time.perf_counter()
        try:
            canonical = canonical_url(url)
        except BadUrl as exc:
            return _failed(url, "refused", str(exc), None, started)
        key = sha256_hex(canonical)
        async with self.sessionmaker() as session:
            row = await fetch_cache_repo.get_entry(session=session, url_hash=key)
        now = datetime.now(UTC)
        if row is not None and row.extract_schema_version != self.schema_version:
            row = None
        if row is not None and now < _aware(row.expires_at) - self.revalidate_within:
            return _from_row(url, row, "hit", started)
        validators = {"etag": row.etag, "last_modified": row.last_modified} if row is not None else {}
        try:
            page = await self.fetcher.fetch(url, **validators)
        except FetchError as exc:
            logger.info("fetch of %s failed (%s): %s", url, exc.kind, exc.message)
            return _failed(url, exc.kind, exc.message, exc.http_status, started)
        if page.http_status == 304:
            if row is None:  # a 304 we did not ask for: nothing to reuse
                return _failed(url, "http_status", "304 Not Modified without a cached copy", 304, started)
            async with self.sessionmaker() as session, session.begin():
                await fetch_cache_repo.extend_entry(
                    session=session, url_hash=key, expires_at=now + self.ttl, fetched_at=now
                )
            return _from_row(url, row, "revalidated", started, fetched_at=now)
        entry = self._entry(key, canonical, page, now)
        opened = _from_row(url, entry, "miss", started)
        try:
            async with self.sessionmaker() as session, session.begin():
                await fetch_cache_repo.put_entry(session=session, entry=entry)
        except IntegrityError:  # another run stored the same page a moment ago; theirs is as good as ours
            logger.info("fetch cache row for %s written concurrently; keeping the other", canonical)
        return opened

    def _entry(self, key: str, canonical: str, page: Page, now: datetime) -> FetchCacheEntry:
        return FetchCacheEntry(
            url_hash=key,
            canonical_url=canonical,
            final_url=page.final_url,
            http_status=page.http_status,
            content_type=page.content_type[:128],
            raw=page.raw,
            text=page.text,
            title=page.title,
            author=page.author,
            published=page.published,
            paywalled=page.paywalled,
            etag=page.etag,
            last_modified=page.last_modified,
            extract_schema_version=self.schema_version,
            fetched_at=now,
            expires_at=now + self.ttl,
        )


def _from_row(
    url: str, row: FetchCacheEntry, cache: str, started: float, *, fetched_at: datetime | None = None
) -> OpenedPage:
    return OpenedPage(
        url=url,
        final_url=row.final_url,
        ok=True,
        cache=cache,  # type: ignore[arg-type]
        http_status=row.http_status,
        bytes=len(row.raw),
        content_type=row.content_type,
        title=row.title,
        text=row.text,
        fetched_at=_aware(fetched_at or row.fetched_at).isoformat(timespec="seconds"),
        published=row.published,
        author=row.author,
        paywalled=row.paywalled,
        elapsed_ms=(time.perf_counter() - started) * 1000,
    )


def _failed(url: str, kind: str, message: str, http_status: int | None, started: float) -> OpenedPage:
    return OpenedPage(
        url=url,
        final_url=url,
        ok=False,
        cache="none",
        http_status=http_status,
        bytes=0,
        content_type="",
        title="",
        text="",
        fetched_at=datetime.now(UTC).isoformat(timespec="seconds"),
        error_kind=kind,
        error=message,
        elapsed_ms=(time.perf_counter() - started) * 1000,
    )
