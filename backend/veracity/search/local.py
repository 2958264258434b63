"""The ``local`` search provider: BM25 over a corpus in the database.

The fast path is the process's in-memory index of the corpus (``veracity.search.memindex``: eager BM25, scored
like FTS5); FTS5 (SQLite) or PostgreSQL full text answers when the corpus is larger than the in-memory limit or
the in-memory index is turned off.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity.db.corpus_repo import ChunkHit, search_chunks
from veracity.graph.context import SearchHit
from veracity.search.memindex import MemoryIndexes, index_stems
from veracity.settings import SearchSettings

RARITY_MIN_PASSAGES = 1000


class LocalSearch:
    name = "local"

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        memory_max_chunks: int = SearchSettings.model_fields["memory_index_max_chunks"].default,
    ) -> None:
        """``memory_max_chunks``: the in-memory index's size limit (0: none); the settings' default unless given
        (``veracity.search.providers.local_search`` passes the configured one)."""
        self._sessionmaker = sessionmaker
        self.indexes = MemoryIndexes(sessionmaker, max_chunks=memory_max_chunks) if memory_max_chunks else None

    async def chunks(self, *, query: str, corpus: str, k: int) -> list[ChunkHit]:
        index = await self.indexes.get(corpus) if self.indexes is not None else None
        if index is not None:
            return index.search(query, k)
        async with self._sessionmaker() as session:
            return await search_chunks(session=session, corpus=corpus, query=query, k=k)

    async def term_weights(self, *, terms: list[str], corpus: str) -> dict[str, float] | None:
        """The terms' rarity in the corpus (``MemoryIndex.rarity``) keyed by their index stems (``index_stems``:
        "o'brien" is weighed as "brien", "elections" as "elect"), or None when it cannot be measured: no
        in-memory index, or fewer than ``RARITY_MIN_PASSAGES`` passages — in a dozen help articles "get" and
        "since" look rarer than "refund", and a curated corpus that small is on topic by construction."""
        index = await self.indexes.get(corpus) if self.indexes is not None else None
        if index is None or len(index.hits) < RARITY_MIN_PASSAGES:
            return None
        return {stem: index.stem_rarity(stem) for stem in index_stems(terms)}

    async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]:
        hits = await self.chunks(query=query, corpus=corpus, k=k)
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
            )
            for h in hits
        ]
