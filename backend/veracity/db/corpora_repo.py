"""Corpora as owned things: whose each corpus is (``corpora``), which ones a reader may see and search, their sizes
and documents as the corpora pages list them, and deleting a document or a whole corpus. Callers own the
transaction.

A corpus with no owner is shared (made by the CLI or bundled: everyone searches it); an owned one is seen only by
its owner and admins. A corpus whose documents have no ``corpora`` row (stored before corpora had owners, or by a
test's fixture) reads as shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import CursorResult, delete, exists, func, select, true
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from veracity.db.models import Chunk, ChunkVector, Corpus, Document, User, utcnow


@dataclass(frozen=True)
class CorpusInfo:
    """A corpus as the corpora page lists it: whose (``user_id`` None: shared), how much it holds and since when."""

    name: str
    user_id: int | None
    owner: str | None
    documents: int
    chars: int
    created_at: datetime | None
    updated_at: datetime | None


@dataclass(frozen=True)
class DocumentInfo:
    id: int
    doc_id: str
    title: str
    chars: int
    url: str | None
    published: str | None
    created_at: datetime


def _not_others(user_id: int | None, every: bool) -> Any:
    """Corpora a reader may use: all (``every``: an admin, single-user mode), else the shared ones (no owner, or no
    row at all — a corpus stored before corpora had owners, or by a test) and ``user_id``'s own."""
    if every:
        return true()
    owned_by_other = (
        select(Corpus.name)
        .where(Corpus.name == Document.corpus, Corpus.user_id.is_not(None))
        .where(Corpus.user_id != user_id if user_id is not None else true())
    )
    return ~exists(owned_by_other)


async def ensure_corpus(*, session: AsyncSession, name: str, user_id: int | None) -> None:
    """The corpus's row, made owned by ``user_id`` (None: shared) when it has none yet; an existing row is kept as
    it is (two ingests racing to make it both succeed)."""
    if await session.get(Corpus, name) is not None:
        return
    insert_ = sqlite_insert if session.get_bind().dialect.name == "sqlite" else pg_insert
    await session.execute(
        insert_(Corpus).values(name=name, user_id=user_id, created_at=utcnow()).on_conflict_do_nothing()
    )


async def claim_corpus(*, session: AsyncSession, name: str, user_id: int | None) -> tuple[bool, int | None]:
    """Take ``name`` for ``user_id`` unless it is taken: (whether it existed before, its owner). A name whose
    documents have no row yet exists and is shared. The row is made (or locked, on PostgreSQL) in the caller's
    transaction, so of two uploads starting into the same new name, one makes it and the other finds it made."""
    row = await session.get(Corpus, name, with_for_update=True)
    if row is not None:
        return True, row.user_id
    if await session.scalar(select(Document.id).where(Document.corpus == name).limit(1)) is not None:
        await ensure_corpus(session=session, name=name, user_id=None)
        return True, None
    insert_ = sqlite_insert if session.get_bind().dialect.name == "sqlite" else pg_insert
    made = await session.execute(
        insert_(Corpus)
        .values(name=name, user_id=user_id, created_at=utcnow())
        .on_conflict_do_nothing()
        .returning(Corpus.name)
    )
    if made.first() is not None:
        return False, user_id
    row = await session.get(Corpus, name, with_for_update=True, populate_existing=True)
    return True, row.user_id if row is not None else None


async def corpus_info(*, session: AsyncSession, name: str, user_id: int | None, every: bool) -> CorpusInfo | None:
    """One corpus as the corpora pages show it, when the reader may see it (sizes of this corpus alone)."""
    row = (
        await session.execute(
            select(
                func.count(Document.id),
                func.coalesce(func.sum(func.length(Document.text)), 0),
                func.min(Document.created_at),
                func.max(Document.created_at),
            ).where(Document.corpus == name)
        )
    ).one()
    owned = (
        await session.execute(
            select(Corpus.user_id, User.username, Corpus.created_at)
            .outerjoin(User, User.id == Corpus.user_id)
            .where(Corpus.name == name)
        )
    ).first()
    if owned is None and not row[0]:
        return None
    owner_id, owner, made = owned if owned is not None else (None, None, None)
    if not (every or owner_id is None or owner_id == user_id):
        return None
    return CorpusInfo(name, owner_id, owner, int(row[0]), int(row[1]), row[2] or made, row[3])


async def corpus_exists(*, session: AsyncSession, name: str) -> bool:
    """A row or a document names it."""
    if await session.get(Corpus, name) is not None:
        return True
    return await session.scalar(select(Document.id).where(Document.corpus == name).limit(1)) is not None


async def corpus_owner(*, session: AsyncSession, name: str) -> int | None:
    """The owner's user id of ``name`` (None: shared, or no row)."""
    return await session.scalar(select(Corpus.user_id).where(Corpus.name == name))


async def corpus_usable(*, session: AsyncSession, corpus: str, user_id: int | None, every: bool) -> bool:
    """``corpus`` holds a document and the reader may search it (one indexed lookup: run starts pay it)."""
    found = await session.scalar(
        select(Document.id).where(Document.corpus == corpus, _not_others(user_id, every)).limit(1)
    )
    return found is not None


async def usable_corpora(*, session: AsyncSession, user_id: int | None, every: bool) -> dict[str, int]:
    """Document counts of the corpora the reader may search, by name."""
    result = await session.execute(
        select(Document.corpus, func.count()).where(_not_others(user_id, every)).group_by(Document.corpus)
    )
    return {name: count for name, count in result.all()}


async def list_corpora(*, session: AsyncSession, user_id: int | None, every: bool) -> list[CorpusInfo]:
    """Every corpus the reader may see, with its size (documents, characters) and dates, by name; a corpus with a
    row but no document yet (an upload whose every file was refused) is listed too."""
    sizes = (
        select(
            Document.corpus.label("name"),
            func.count().label("documents"),
            func.coalesce(func.sum(func.length(Document.text)), 0).label("chars"),
            func.min(Document.created_at).label("first"),
            func.max(Document.created_at).label("last"),
        )
        .where(_not_others(user_id, every))
        .group_by(Document.corpus)
        .subquery()
    )
    rows = await session.execute(
        select(
            sizes.c.name, Corpus.user_id, User.username, sizes.c.documents, sizes.c.chars, sizes.c.first, sizes.c.last
        )
        .outerjoin(Corpus, Corpus.name == sizes.c.name)
        .outerjoin(User, User.id == Corpus.user_id)
    )
    found = {
        name: CorpusInfo(name, uid, owner, int(docs), int(chars), first, last)
        for name, uid, owner, docs, chars, first, last in rows.all()
    }
    empty = select(Corpus.name, Corpus.user_id, User.username, Corpus.created_at).outerjoin(
        User, User.id == Corpus.user_id
    )
    if not every:
        mine = Corpus.user_id.is_(None) if user_id is None else (Corpus.user_id == user_id) | Corpus.user_id.is_(None)
        empty = empty.where(mine)
    for name, uid, owner, created in (await session.execute(empty)).all():
        if name not in found:
            found[name] = CorpusInfo(name, uid, owner, 0, 0, created, None)
    return [found[name] for name in sorted(found)]


async def corpus_documents(*, session: AsyncSession, corpus: str, offset: int, limit: int) -> list[DocumentInfo]:
    """A page of ``corpus``'s documents, newest first."""
    rows = await session.execute(
        select(
            Document.id,
            Document.doc_id,
            Document.title,
            func.length(Document.text),
            Document.url,
            Document.published,
            Document.created_at,
        )
        .where(Document.corpus == corpus)
        .order_by(Document.created_at.desc(), Document.id.desc())
        .offset(offset)
        .limit(limit)
    )
    return [DocumentInfo(*row) for row in rows.all()]


async def delete_documents(*, session: AsyncSession, corpus: str, document_id: int | None = None) -> int:
    """Delete one document of ``corpus`` (by its row id) or, without ``document_id``, all of them and the corpus's
    row; their passages and vectors go with them (deleted explicitly, so SQLite's full-text triggers see each).
    Returns how many documents were deleted."""
    which = select(Document.id).where(Document.corpus == corpus)
    if document_id is not None:
        which = which.where(Document.id == document_id)
    chunks = select(Chunk.id).where(Chunk.document_id.in_(which))
    await session.execute(delete(ChunkVector).where(ChunkVector.chunk_id.in_(chunks)))
    await session.execute(delete(Chunk).where(Chunk.document_id.in_(which)))
    result = await session.execute(delete(Document).where(Document.id.in_(which)))
    if document_id is None:
        await session.execute(delete(Corpus).where(Corpus.name == corpus))
    return result.rowcount if isinstance(result, CursorResult) else 0
