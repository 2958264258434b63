"""What ``/healthz`` asks of the database: can it be written to right now, and how many runs wait or run.

A ``SELECT 1`` answers while the database cannot take a single write (SQLite's lock held by another connection,
a read-only file, a PostgreSQL standby or a read-only transaction default), so the probe writes for real: it
inserts a row into ``fetch_cache`` — a table nothing references, keyed by text so PostgreSQL spends no sequence
value — and rolls it back. A new table (and migration) for the probe was not worth it while the runs tables are
changing. It waits at most ``timeout`` for a lock (PostgreSQL then twice that for the statement): SQLite's
busy timeout and PostgreSQL's lock and statement timeouts are lowered for the probe alone (SQLite's restored
before the connection goes back to the pool).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from veracity.db.models import FetchCacheEntry, ResearchRun
from veracity.db.runs_repo import ACTIVE


async def probe_write(*, session: AsyncSession, timeout: float) -> None:
    """Insert one row and roll it back, waiting at most ``timeout`` seconds for a lock; raises what the database
    raised. ``session`` must be fresh (nothing of its own to lose to the rollback)."""
    ms = max(1, round(timeout * 1000))
    sqlite = session.get_bind().dialect.name == "sqlite"
    previous: int | None = None
    now = datetime.now(UTC)
    try:
        if sqlite:
            previous = int((await session.execute(text("PRAGMA busy_timeout"))).scalar_one())
            await session.execute(text(f"PRAGMA busy_timeout = {ms}"))
        else:  # both end with the transaction; a lock wait is the likelier failure, so it is reported as such
            await session.execute(text(f"SET LOCAL lock_timeout = {ms}"))
            await session.execute(text(f"SET LOCAL statement_timeout = {2 * ms}"))
        await session.execute(
            insert(FetchCacheEntry).values(
                url_hash=f"healthz-probe-{uuid.uuid4().hex}",
                canonical_url="",
                final_url="",
                http_status=0,
                content_type="",
                raw=b"",
                text="",
                title="",
                extract_schema_version=0,
                fetched_at=now,
                expires_at=now,
            )
        )
    finally:
        if previous is not None:  # a failed INSERT leaves SQLite's transaction usable for this
            await session.execute(text(f"PRAGMA busy_timeout = {previous}"))
        await session.rollback()


async def executors_seen(*, session: AsyncSession, since: datetime) -> list[str]:
    """The executors (``host:pid:nonce``) holding an active run whose lease was renewed since ``since``: the
    workers and servers seen executing runs now (an idle worker holds none, so it is not counted)."""
    rows = await session.execute(
        select(ResearchRun.owner)
        .where(
            ResearchRun.status.in_(ACTIVE),
            ResearchRun.owner.is_not(None),
            ResearchRun.updated_at >= since,
        )
        .distinct()
    )
    return sorted(str(owner) for (owner,) in rows.all())


async def queue_depth(*, session: AsyncSession) -> dict[str, int]:
    """Runs waiting to start (``pending``) and being executed (``running``), across every process."""
    rows = await session.execute(
        select(ResearchRun.status, func.count()).where(ResearchRun.status.in_(ACTIVE)).group_by(ResearchRun.status)
    )
    counts = {status: 0 for status in ACTIVE}
    counts.update({status: int(n) for status, n in rows.all()})
    return counts
