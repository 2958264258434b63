"""Data access for local corpora: documents, their chunks and full-text search over them.

SQLite uses the FTS5 table ``chunks_fts`` ranked by ``bm25()``; PostgreSQL uses the generated ``tsv``
column ranked by ``ts_rank_cd``. Both take the same OR-of-content-terms query so results are comparable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import delete, func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from veracity.db.models import Chunk, Document
from veracity.text import query_terms, sentence_spans, sha256_hex

T = TypeVar("T")


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


async def upsert_documents(
    *, session: AsyncSession, corpus: str, docs: Sequence[DocumentIn], chunk_chars: int
) -> list[str]:
    """Insert or replace documents and their chunks, a whole batch in a few statements (one lookup, one delete,
    the inserts batched) rather than several round trips a document. Returns each document's outcome in order:
    'added', 'updated' or 'unchanged'; a doc_id given twice is stored as one at a time would store it (the later
    replaces the earlier, or is unchanged when it is the same)."""
    outcomes: list[str] = []
    start = 0
    while start < len(docs):
        seen: set[str] = set()
        end = start
        while end < len(docs) and docs[end].doc_id not in seen:
            seen.add(docs[end].doc_id)
            end += 1
        outcomes += await _upsert_distinct(session, corpus, docs[start:end], chunk_chars)
        start = end
    return outcomes


IN_LIST = 500
"""Values bound in one ``IN (...)``: below the 999 variables an SQLite older than 3.32 allows a statement."""


def _slices(values: list[T]) -> list[list[T]]:
    return [values[i : i + IN_LIST] for i in range(0, len(values), IN_LIST)]


async def _upsert_distinct(
    session: AsyncSession, corpus: str, docs: Sequence[DocumentIn], chunk_chars: int
) -> list[str]:
    """``upsert_documents`` of documents whose doc_ids are all different."""
    existing: dict[str, Document] = {}
    for part in _slices([d.doc_id for d in docs]):
        found = await session.scalars(select(Document).where(Document.corpus == corpus, Document.doc_id.in_(part)))
        existing.update((d.doc_id, d) for d in found)
    outcomes: list[str] = []
    stale: list[int] = []
    written: list[tuple[Document, DocumentIn]] = []
    for doc in docs:
        digest = sha256_hex(doc.title + "\x00" + doc.text)
        document = existing.get(doc.doc_id)
        if document is not None and document.content_hash == digest:
            outcomes.append("unchanged")
            continue
        if document is not None:
            stale.append(document.id)
            document.title, document.text, document.content_hash = doc.title, doc.text, digest
            document.url, document.source_path, document.published = doc.url, doc.source_path, doc.published
            outcomes.append("updated")
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
            outcomes.append("added")
        written.append((document, doc))
    for ids in _slices(stale):
        await session.execute(delete(Chunk).where(Chunk.document_id.in_(ids)))
    await session.flush()  # the new documents' ids
    rows = [
        {
            "document_id": document.id,
            "corpus": corpus,
            "ord": i,
            "start": s,
            "end": e,
            "title": doc.title,
            "text": doc.text[s:e],
        }
        for document, doc in written
        for i, (s, e) in enumerate(chunk_spans(doc.text, chunk_chars))
    ]
    if rows:
        await session.execute(insert(Chunk), rows)
    return outcomes


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


async def existing_doc_ids(*, session: AsyncSession, corpus: str, doc_ids: set[str]) -> set[str]:
    """Which of ``doc_ids`` ``corpus`` still holds."""
    if not doc_ids:
        return set()
    result = await session.execute(
        select(Document.doc_id).where(Document.corpus == corpus, Document.doc_id.in_(doc_ids))
    )
    return set(result.scalars().all())
