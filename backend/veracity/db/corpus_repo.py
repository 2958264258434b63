"""Data access for local corpora: documents, their chunks and full-text search over them.

SQLite uses the FTS5 table ``chunks_fts`` ranked by ``bm25()``; PostgreSQL uses the generated ``tsv``
column ranked by ``ts_rank_cd``. Both take the same OR-of-content-terms query so results are comparable.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import CursorResult, delete, exists, func, select, text, true
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from veracity.db.models import Chunk, ChunkVector, Corpus, Document, User, utcnow
from veracity.text import query_terms, sentence_spans, sha256_hex


@dataclass(frozen=True)
class DocumentIn:
    doc_id: str
    title: str
    text: str
    url: str | None = None
    source_path: str | None = None
    published: str | None = None


@dataclass(frozen=True)
class ChunkHit:
    chunk_id: int
    doc_pk: int
    doc_id: str
    title: str
    text: str
    start: int
    end: int
    score: float
    url: str | None
    published: str | None


def chunk_spans(text_: str, target_chars: int) -> list[tuple[int, int]]:
    """Split a document into passages of about ``target_chars`` at sentence boundaries (offsets kept)."""
    spans = sentence_spans(text_)
    if not spans:
        return []
    chunks: list[tuple[int, int]] = []
    start, end = spans[0]
    for s, e in spans[1:]:
        if e - start > target_chars and end > start:
            chunks.append((start, end))
            start = s
        end = e
    chunks.append((start, end))
    return chunks


async def upsert_document(*, session: AsyncSession, corpus: str, doc: DocumentIn, chunk_chars: int) -> str:
    """Insert or replace one document and its chunks. Returns 'added', 'updated' or 'unchanged'."""
    digest = sha256_hex(doc.title + "\x00" + doc.text)
    existing = await session.scalar(select(Document).where(Document.corpus == corpus, Document.doc_id == doc.doc_id))
    if existing is not None and existing.content_hash == digest:
        return "unchanged"
    if existing is not None:
        await session.execute(delete(Chunk).where(Chunk.document_id == existing.id))
        existing.title, existing.text, existing.content_hash = doc.title, doc.text, digest
        existing.url, existing.source_path, existing.published = doc.url, doc.source_path, doc.published
        document = existing
        outcome = "updated"
    else:
        document = Document(
            corpus=corpus,
            doc_id=doc.doc_id,
            title=doc.title,
            text=doc.text,
            url=doc.url,
            source_path=doc.source_path,
            content_hash=digest,
            published=doc.published,
        )
        session.add(document)
        outcome = "added"
    await session.flush()
    session.add_all(
        Chunk(
            document_id=document.id,
            corpus=corpus,
            ord=i,
            start=s,
            end=e,
            title=doc.title,
            text=doc.text[s:e],
        )
        for i, (s, e) in enumerate(chunk_spans(doc.text, chunk_chars))
    )
    await session.flush()
    return outcome


async def corpus_counts(*, session: AsyncSession) -> dict[str, int]:
    result = await session.execute(select(Document.corpus, func.count()).group_by(Document.corpus))
    return {name: count for name, count in result.all()}


async def corpus_exists(*, session: AsyncSession, corpus: str) -> bool:
    """One indexed row lookup; used on every run start instead of counting the corpora."""
    return await session.scalar(select(Document.id).where(Document.corpus == corpus).limit(1)) is not None


async def document_count(*, session: AsyncSession, corpus: str) -> int:
    return int(await session.scalar(select(func.count()).where(Document.corpus == corpus)) or 0)


async def search_chunks(*, session: AsyncSession, corpus: str, query: str, k: int) -> list[ChunkHit]:
    """Best ``k`` chunks of ``corpus`` for ``query`` (higher score is better)."""
    terms = query_terms(query)
    if not terms:
        return []
    dialect = session.bind.dialect.name if session.bind is not None else "sqlite"
    if dialect == "sqlite":
        # Rank in a subquery that carries only (id, score), then fetch the k winners' columns: sorting every
        # matching row with its text made the query about 1.5x slower (thousands of matches for an OR query).
        sql = text(
            'SELECT c.id, c.document_id, d.doc_id, c.title, c.text, c.start, c."end", r.score, d.url, d.published '
            "FROM (SELECT chunks_fts.rowid AS id, -bm25(chunks_fts, 2.0, 1.0) AS score "
            "FROM chunks_fts JOIN chunks m ON m.id = chunks_fts.rowid "
            "WHERE chunks_fts MATCH :q AND m.corpus = :corpus ORDER BY score DESC LIMIT :k) r "
            "JOIN chunks c ON c.id = r.id JOIN documents d ON d.id = c.document_id "
            "ORDER BY r.score DESC"
        )
        params = {"q": " OR ".join(f'"{t}"' for t in terms), "corpus": corpus, "k": k}
    else:
        sql = text(
            'SELECT c.id, c.document_id, d.doc_id, c.title, c.text, c.start, c."end", '
            "ts_rank_cd(c.tsv, q, 1) AS score, d.url, d.published "
            "FROM chunks c JOIN documents d ON d.id = c.document_id, to_tsquery('english', :q) q "
            "WHERE c.tsv @@ q AND c.corpus = :corpus "
            "ORDER BY score DESC, c.id LIMIT :k"
        )
        params = {"q": " | ".join(terms), "corpus": corpus, "k": k}
    result = await session.execute(sql, params)
    return [
        ChunkHit(
            chunk_id=row[0],
            doc_pk=row[1],
            doc_id=row[2],
            title=row[3],
            text=row[4],
            start=row[5],
            end=row[6],
            score=float(row[7]),
            url=row[8],
            published=row[9],
        )
        for row in result.all()
    ]


# ---- corpora as owned things ---------------------------------------------------------------------------------------


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
    dialect = session.bind.dialect.name if session.bind is not None else "sqlite"
    insert_ = sqlite_insert if dialect == "sqlite" else pg_insert
    await session.execute(
        insert_(Corpus).values(name=name, user_id=user_id, created_at=utcnow()).on_conflict_do_nothing()
    )


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
