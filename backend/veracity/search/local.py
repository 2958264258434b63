"""The ``local`` search provider: BM25 over a corpus in the database (FTS5 or PostgreSQL full text)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity.db.corpus_repo import search_chunks
from veracity.graph.context import SearchHit


class LocalSearch:
    name = "local"

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self._sessionmaker = sessionmaker

    async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]:
        async with self._sessionmaker() as session:
            hits = await search_chunks(session=session, corpus=corpus, query=query, k=k)
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
