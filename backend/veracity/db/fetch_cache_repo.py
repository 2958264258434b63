"""Data access for the fetch cache (keyword-only; callers own the transaction)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from veracity.db.models import FetchCacheEntry


async def get_entry(*, session: AsyncSession, url_hash: str) -> FetchCacheEntry | None:
    return (
        await session.execute(select(FetchCacheEntry).where(FetchCacheEntry.url_hash == url_hash))
    ).scalar_one_or_none()


async def put_entry(*, session: AsyncSession, entry: FetchCacheEntry) -> None:
    """Insert or replace the row for ``entry.url_hash``."""
    await session.execute(delete(FetchCacheEntry).where(FetchCacheEntry.url_hash == entry.url_hash))
    session.add(entry)


async def extend_entry(*, session: AsyncSession, url_hash: str, expires_at: datetime, fetched_at: datetime) -> None:
    """A 304 answered: the stored text stays, its lease is renewed."""
    await session.execute(
        update(FetchCacheEntry)
        .where(FetchCacheEntry.url_hash == url_hash)
        .values(expires_at=expires_at, fetched_at=fetched_at)
    )


async def count_entries(*, session: AsyncSession) -> int:
    from sqlalchemy import func

    return int((await session.execute(select(func.count()).select_from(FetchCacheEntry))).scalar_one())
