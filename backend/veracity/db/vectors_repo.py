"""Data access for passage vectors (``chunk_vectors``): which passages of a corpus lack one, store, load."""

from __future__ import annotations

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncSession

from veracity.db.models import Chunk, ChunkVector


async def chunks_without_vectors(
    *, session: AsyncSession, corpus: str, model: str, limit: int
) -> list[tuple[int, str, str]]:
    """Up to ``limit`` passages of ``corpus`` with no vector from ``model``: (chunk id, title, text)."""
    stmt = (
        select(Chunk.id, Chunk.title, Chunk.text)
        .outerjoin(ChunkVector, and_(ChunkVector.chunk_id == Chunk.id, ChunkVector.model == model))
        .where(Chunk.corpus == corpus, ChunkVector.chunk_id.is_(None))
        .order_by(Chunk.id)
        .limit(limit)
    )
    return [(r[0], r[1] or "", r[2]) for r in (await session.execute(stmt)).all()]


async def store_vectors(*, session: AsyncSession, model: str, rows: list[tuple[int, bytes]]) -> None:
    """Insert or replace each chunk's vector (a vector of another model is replaced)."""
    ids = [chunk_id for chunk_id, _ in rows]
    existing = {
        v.chunk_id: v for v in (await session.scalars(select(ChunkVector).where(ChunkVector.chunk_id.in_(ids))))
    }
    for chunk_id, vector in rows:
        row = existing.get(chunk_id)
        if row is None:
            session.add(ChunkVector(chunk_id=chunk_id, model=model, vector=vector))
        else:
            row.model, row.vector = model, vector


async def corpus_vectors(*, session: AsyncSession, corpus: str, model: str) -> dict[int, bytes]:
    """Chunk id → vector bytes of every passage of ``corpus`` that has one from ``model``."""
    stmt = (
        select(ChunkVector.chunk_id, ChunkVector.vector)
        .join(Chunk, Chunk.id == ChunkVector.chunk_id)
        .where(Chunk.corpus == corpus, ChunkVector.model == model)
    )
    return {r[0]: r[1] for r in (await session.execute(stmt)).all()}
