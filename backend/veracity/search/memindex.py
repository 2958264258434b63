"""An in-memory BM25 index per local corpus, scored eagerly: the fast path of the ``local`` search provider.

FTS5 (or PostgreSQL full text) stays the durable index and the fallback; this is a cache of it in the process.
At build time every (term, passage) pair gets its BM25 contribution precomputed, so a query is a handful of
vector additions and a partial sort — no per-query scoring of every matching row (the BM25S idea: Lù, "BM25S:
Orders of magnitude faster lexical search via eager sparse scoring", 2024).

Scoring follows FTS5's ``bm25(chunks_fts, 2.0, 1.0)`` so both paths rank alike: Porter-stemmed words (FTS5's
``porter unicode61``), k1 = 1.2, b = 0.75, the row length (title + text) against the corpus average, a column
weight of 2 on the title, and idf = ln((N − n + 0.5) / (n + 0.5)) floored at 1e-6. One deliberate difference:
N and n count this corpus only (FTS5 shares one table between corpora, so one corpus's word statistics leak
into another's ranking). One addition: a query that names an article's title (``named_in``) gets that article's lead
passage first — FTS5 has no such lookup, so a corpus over the size limit is ranked by BM25 alone.

Freshness: an ingest (in this process or another) is noticed by a (count, max id) check of the corpus's
passages, made at most every ``RECHECK_SECONDS`` and by one caller at a time — the others wait for its answer.
A corpus with no index (empty, or over the size limit) is remembered with its check as well, so FTS5 answers it
without a count on every search.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity.db.corpus_repo import ChunkHit
from veracity.db.models import Chunk, Document
from veracity.rank.embed import fuse_scores
from veracity.search.named import name_starts, named_in, named_titles
from veracity.semantic.model import SemanticModel
from veracity.semantic.vectors import ensure_vectors, load_matrix
from veracity.text import Analyzer, query_terms

K1, B, TITLE_WEIGHT = 1.2, 0.75, 2.0
RECHECK_SECONDS = 1.0


@dataclass(frozen=True)
class Posting:
    rows: npt.NDArray[np.int32]
    impacts: npt.NDArray[np.float32]


HYBRID_POOL = 40
"""Candidates taken from each half (BM25 and dense) before fusion."""
NAMED_MAX = 3
"""Passages a query brings to the top by naming their article's title."""
DENSE_WEIGHT = 0.5
"""Share of the dense cosine in the fused score: the uninformed prior (both signals count equally), fixed before
any measurement (see ``veracity.rank.embed.fuse_scores``)."""


class MemoryIndex:
    def __init__(
        self, hits: list[ChunkHit], analyzer: Analyzer | None = None, vectors: npt.NDArray[np.float32] | None = None
    ) -> None:
        """``vectors``: one passage-head vector per hit (row order), for the dense half of ``search``."""
        self.hits = hits
        self.vectors = vectors
        self._rows = {h.chunk_id: row for row, h in enumerate(hits)} if vectors is not None else {}
        self.analyzer = analyzer or Analyzer()
        titles = [Counter(self.analyzer.tokens(h.title)) for h in hits]
        texts = [Counter(self.analyzer.tokens(h.text)) for h in hits]
        lengths = np.array([sum(t.values()) + sum(x.values()) for t, x in zip(titles, texts, strict=True)])
        avg = float(lengths.mean()) if len(hits) else 1.0
        norm = K1 * (1 - B + B * lengths / max(avg, 1e-9))
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for row, (title, body) in enumerate(zip(titles, texts, strict=True)):
            for term in title.keys() | body.keys():
                # As FTS5: the column weights scale the term's frequency, then one saturation over the row.
                freq = TITLE_WEIGHT * title.get(term, 0) + body.get(term, 0)
                part = freq * (K1 + 1) / (freq + norm[row])
                rows, parts = postings.setdefault(term, ([], []))
                rows.append(row)
                parts.append(part)
        self.named = named_titles(hits)
        self.name_starts = name_starts(self.named)
        n = len(hits)
        self.postings: dict[str, Posting] = {}
        for term, (rows, parts) in postings.items():
            idf = max(math.log((n - len(rows) + 0.5) / (len(rows) + 0.5)), 1e-6)
            self.postings[term] = Posting(np.array(rows, dtype=np.int32), np.array(parts, dtype=np.float32) * idf)

    def vector_of(self, chunk_id: int) -> npt.NDArray[np.float32] | None:
        """The passage's head vector, when this index has vectors."""
        row = self._rows.get(chunk_id)
        return self.vectors[row] if self.vectors is not None and row is not None else None

    def rarity(self, word: str) -> float:
        """How much a word says about a passage: ln(1 + N / df) over this corpus's passages, always positive;
        0 for a word no passage holds (nothing this corpus returns can carry it)."""
        return self.stem_rarity(self.analyzer.stem(word.lower()))

    def stem_rarity(self, stem: str) -> float:
        """``rarity`` of an already analysed word (a key of ``postings``; Porter stemming is not idempotent)."""
        posting = self.postings.get(stem)
        return math.log(1 + len(self.hits) / len(posting.rows)) if posting is not None else 0.0

    def search(self, query: str, k: int, vector: npt.NDArray[np.float32] | None = None) -> list[ChunkHit]:
        """Best ``k`` passages for the query's content words (an OR of them, as the FTS5 path sends); with the
        query's ``vector`` and passage vectors, hybrid: the best ``HYBRID_POOL`` of each half, fused. The lead
        passages of the articles the query names (``named_in``) come first, at most ``NAMED_MAX`` of them (the best
        by the same score), then the rest by score; every hit carries its BM25 (or fused) score, so a lifted
        passage may score lower than one after it."""
        if k <= 0:
            return []
        stems = {self.analyzer.stem(t) for t in query_terms(query)}
        postings = [self.postings[s] for s in stems if s in self.postings]
        scores = np.zeros(len(self.hits), dtype=np.float32)
        for p in postings:
            scores[p.rows] += p.impacts
        named = np.array(self.named_rows(query), dtype=np.int64)
        if vector is not None and self.vectors is not None and len(self.hits):
            return self._hybrid(scores, self.vectors @ vector, k, named)
        matching = int(np.count_nonzero(scores))
        if not matching and not len(named):
            return []
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        rows = np.union1d(top[scores[top] > 0], named)
        return self._ranked(rows, scores[rows].astype(np.float64), named, k)

    def named_rows(self, query: str) -> list[int]:
        """The lead passages of the articles whose titles the query names (``named_in``)."""
        return named_in(query, self.named, self.name_starts)

    def _hybrid(
        self, lexical: npt.NDArray[np.float32], dense: npt.NDArray[np.float32], k: int, named: npt.NDArray[np.int64]
    ) -> list[ChunkHit]:
        """BM25 and cosine fused over the union of each one's best ``HYBRID_POOL`` and the named passages (min-max,
        convex)."""
        pool = min(HYBRID_POOL, len(self.hits))
        from_lexical = np.argpartition(-lexical, pool - 1)[:pool] if pool < len(lexical) else np.arange(len(lexical))
        from_lexical = from_lexical[lexical[from_lexical] > 0]
        from_dense = np.argpartition(-dense, pool - 1)[:pool] if pool < len(dense) else np.arange(len(dense))
        rows = np.unique(np.concatenate([from_lexical, from_dense, named]))
        fused = np.asarray(
            fuse_scores(lexical[rows].tolist(), dense[rows].tolist(), weight=DENSE_WEIGHT), dtype=np.float64
        )
        return self._ranked(rows, fused, named, k)

    def _ranked(
        self, rows: npt.NDArray[np.int64], score: npt.NDArray[np.float64], named: npt.NDArray[np.int64], k: int
    ) -> list[ChunkHit]:
        """``rows`` (``score`` aligned with them) best first, ties by row (passage-id order: rows are loaded sorted
        by id); the named ones among them lifted to the top, at most ``NAMED_MAX``; ``k`` in all."""
        order = np.lexsort((rows, -score))
        wanted = set(named.tolist())
        lifted = [i for i in order.tolist() if rows[i] in wanted][:NAMED_MAX]
        chosen = lifted + [i for i in order.tolist() if i not in lifted]
        return [replace(self.hits[rows[i]], score=round(float(score[i]), 6)) for i in chosen[:k]]


@dataclass
class _Entry:
    index: MemoryIndex | None
    """None: the corpus is empty or over the size limit, and FTS5 answers it."""
    token: tuple[int, int]
    checked: float


class MemoryIndexes:
    """The process's in-memory indexes, one per corpus, built on first use and rebuilt when the corpus changes."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        max_chunks: int,
        semantic: SemanticModel | None = None,
    ) -> None:
        """``semantic``: the model whose passage vectors make the search hybrid (None: BM25 alone)."""
        self.sessionmaker = sessionmaker
        self.max_chunks = max_chunks
        self.semantic = semantic
        self._entries: dict[str, _Entry] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def _fresh(self, corpus: str) -> _Entry | None:
        entry = self._entries.get(corpus)
        return entry if entry is not None and time.monotonic() - entry.checked < RECHECK_SECONDS else None

    def peek(self, corpus: str) -> MemoryIndex | None:
        """The corpus's index as last built, without a freshness check (``get`` has just made one)."""
        entry = self._entries.get(corpus)
        return entry.index if entry is not None else None

    async def get(self, corpus: str) -> MemoryIndex | None:
        """The corpus's index, or None when the corpus is empty or larger than ``max_chunks`` (FTS5 then
        answers). Concurrent callers share one freshness check (and at most one build)."""
        entry = self._fresh(corpus)
        if entry is not None:
            return entry.index
        async with self._locks.setdefault(corpus, asyncio.Lock()):
            entry = self._fresh(corpus)  # another caller may have checked while this one waited for the lock
            if entry is not None:
                return entry.index
            entry = self._entries.get(corpus)
            async with self.sessionmaker() as session:
                token = await _token(session, corpus)
                if entry is not None and entry.token == token:
                    entry.checked = time.monotonic()
                    return entry.index
                hits = None
                if 0 < token[0] <= self.max_chunks:
                    hits = await _all_chunks(session, corpus)
            vectors = None
            if hits is not None and self.semantic is not None:
                # A corpus ingested before (or without) the model gets its vectors now, once, and keeps them.
                await ensure_vectors(sessionmaker=self.sessionmaker, model=self.semantic, corpus=corpus)
                async with self.sessionmaker() as session:
                    vectors = await load_matrix(
                        session=session, corpus=corpus, model=self.semantic.id, chunk_ids=[h.chunk_id for h in hits]
                    )
            index = await asyncio.to_thread(MemoryIndex, hits, None, vectors) if hits is not None else None
            self._entries[corpus] = _Entry(index=index, token=token, checked=time.monotonic())
            return index


async def _token(session: AsyncSession, corpus: str) -> tuple[int, int]:
    row = (
        await session.execute(select(func.count(), func.coalesce(func.max(Chunk.id), 0)).where(Chunk.corpus == corpus))
    ).one()
    return int(row[0]), int(row[1])


async def _all_chunks(session: AsyncSession, corpus: str) -> list[ChunkHit]:
    stmt = (
        select(Chunk.id, Chunk.document_id, Document.doc_id, Chunk.title, Chunk.text, Chunk.start, Chunk.end)
        .add_columns(Document.url, Document.published)
        .join(Document, Document.id == Chunk.document_id)
        .where(Chunk.corpus == corpus)
        .order_by(Chunk.id)
    )
    return [
        ChunkHit(
            chunk_id=r[0],
            doc_pk=r[1],
            doc_id=r[2],
            title=r[3] or "",
            text=r[4],
            start=r[5],
            end=r[6],
            score=0.0,
            url=r[7],
            published=r[8],
        )
        for r in (await session.execute(stmt)).all()
    ]
