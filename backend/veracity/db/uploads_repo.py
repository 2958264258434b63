"""Data access for uploads and their progress events. Callers own the transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from veracity.db.models import Upload, UploadEvent, utcnow

ACTIVE = ("pending", "running")
TERMINAL = ("upload_complete", "upload_failed")


async def create_upload(*, session: AsyncSession, upload_id: str, corpus: str, user_id: int | None) -> Upload:
    upload = Upload(id=upload_id, corpus=corpus, user_id=user_id, status="pending", report={})
    session.add(upload)
    await session.flush()
    return upload


async def get_upload(*, session: AsyncSession, upload_id: str) -> Upload | None:
    return await session.get(Upload, upload_id)


async def append_event(*, session: AsyncSession, upload_id: str, name: str, payload: dict[str, Any]) -> UploadEvent:
    """The upload's next event (seq 1, 2, …); one writer per upload, so max+1 is safe."""
    last = await session.scalar(select(func.max(UploadEvent.seq)).where(UploadEvent.upload_id == upload_id))
    event = UploadEvent(upload_id=upload_id, seq=(last or 0) + 1, name=name, payload=payload)
    session.add(event)
    await session.flush()
    return event


async def events_after(*, session: AsyncSession, upload_id: str, after_seq: int = 0) -> Sequence[UploadEvent]:
    result = await session.execute(
        select(UploadEvent)
        .where(UploadEvent.upload_id == upload_id, UploadEvent.seq > after_seq)
        .order_by(UploadEvent.seq)
    )
    return result.scalars().all()


async def set_status(
    *, session: AsyncSession, upload_id: str, status: str, report: dict[str, Any] | None = None
) -> None:
    values: dict[str, Any] = {"status": status, "updated_at": utcnow()}
    if report is not None:
        values["report"] = report
    # An upload the sweep has ended stays ended, even if its process was only slow.
    await session.execute(update(Upload).where(Upload.id == upload_id, Upload.status.in_(ACTIVE)).values(**values))


async def stale_uploads(*, session: AsyncSession, before: datetime) -> Sequence[Upload]:
    """Uploads still pending or running that nothing has touched since ``before`` (their process died)."""
    result = await session.execute(
        select(Upload).where(Upload.status.in_(ACTIVE), Upload.updated_at < before).order_by(Upload.created_at)
    )
    return result.scalars().all()


async def recent_uploads(*, session: AsyncSession, corpus: str, limit: int = 5) -> Sequence[Upload]:
    result = await session.execute(
        select(Upload).where(Upload.corpus == corpus).order_by(Upload.created_at.desc()).limit(limit)
    )
    return result.scalars().all()


async def active_upload(*, session: AsyncSession, corpus: str) -> str | None:
    """An upload still ingesting into ``corpus`` (its id), if any."""
    return await session.scalar(select(Upload.id).where(Upload.corpus == corpus, Upload.status.in_(ACTIVE)).limit(1))


async def forget_uploads(*, session: AsyncSession, corpus: str) -> None:
    """Delete the records of the uploads into ``corpus`` (deleted with it: they name its files)."""
    await session.execute(delete(Upload).where(Upload.corpus == corpus))


async def active_count(*, session: AsyncSession, user_id: int | None) -> int:
    """Uploads of ``user_id`` still ingesting (None: single-user mode's)."""
    whose = Upload.user_id.is_(None) if user_id is None else Upload.user_id == user_id
    return int(await session.scalar(select(func.count()).where(whose, Upload.status.in_(ACTIVE))) or 0)


async def touch(*, session: AsyncSession, upload_id: str) -> None:
    """The upload is alive: its process is still working on it (the stale sweep leaves it be)."""
    await session.execute(
        update(Upload).where(Upload.id == upload_id, Upload.status.in_(ACTIVE)).values(updated_at=utcnow())
    )
