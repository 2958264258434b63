"""The ``local`` search provider: BM25 over a corpus in the database.

The fast path is the process's in-memory index of the corpus (``veracity.search.memindex``: eager BM25, scored
like FTS5, with the passages of articles the query names by title first); FTS5 (SQLite) or PostgreSQL full text
answers when the corpus is larger than the in-memory limit or the in-memory index is turned off.
"""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity.db.corpus_repo import ChunkHit, search_chunks
from veracity.ports import SearchHit
from veracity.search.memindex import MemoryIndex, MemoryIndexes
from veracity.semantic.model import SemanticModel
from veracity.settings import SearchSettings


class LocalSearch:
    name = "local"

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        memory_max_chunks: int = SearchSettings.model_fields["memory_index_max_chunks"].default,
        semantic: SemanticModel | None = None,
    ) -> None:
        """``memory_max_chunks``: the in-memory index's size limit (0: none); the settings' default unless given
        (``veracity.search.providers.local_search`` passes the configured one). ``semantic``: the model that
        makes the in-memory search hybrid (BM25 + dense over passage vectors); None = BM25 alone."""
        self._sessionmaker = sessionmaker
        self.semantic = semantic
        self.indexes = (
            MemoryIndexes(sessionmaker, max_chunks=memory_max_chunks, semantic=semantic) if memory_max_chunks else None
        )

    async def chunks(self, *, query: str, corpus: str, k: int) -> list[ChunkHit]:
        index = await self.indexes.get(corpus) if self.indexes is not None else None
        if index is not None:
            # Off the event loop, in one hop: the query's embedding and the scoring of every passage of the corpus
            # (a matrix product over its vectors) are CPU work that would stall every page while runs search.
            return await asyncio.to_thread(self._search_index, index, query, k)
        async with self._sessionmaker() as session:
            return await search_chunks(session=session, corpus=corpus, query=query, k=k)

    def _search_index(self, index: MemoryIndex, query: str, k: int) -> list[ChunkHit]:
        vector = None
        if self.semantic is not None and index.vectors is not None:
            vector = self.semantic.encode([query])[0]
        return index.search(query, k, vector)

    async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]:
        hits = await self.chunks(query=query, corpus=corpus, k=k)
        index = self.indexes.peek(corpus) if self.indexes is not None else None
        return [
            SearchHit(
                doc_id=h.doc_id,
                title=h.title,
                text=h.text,
                start=h.start,
                end=h.end,
                score=h.score,
                url=h.url,
                published=h.published,
                key=f"{corpus}:chunk:{h.chunk_id}",
                vector=index.vector_of(h.chunk_id) if index is not None else None,
            )
            for h in hits
        ]
