"""The in-memory BM25 index behind the local search: it ranks as FTS5 does, notices a changed corpus, gives way
to FTS5 for corpora over its size limit, and reads PostgreSQL too."""

from __future__ import annotations

import asyncio

import pytest

from conftest import SMALL_CORPUS, load_docs
from veracity.db.corpus_repo import DocumentIn, search_chunks
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.migrate import upgrade
from veracity.search import memindex
from veracity.search.local import LocalSearch
from veracity.search.memindex import Analyzer, MemoryIndex

QUERIES = ["coffee production in Brazil", "tea exports", "market worth billion dollars", "steel", "nothing matches zz"]


def test_analyzer_stems_like_fts5_porter_and_drops_diacritics() -> None:
    analyzer = Analyzer()
    assert analyzer.tokens("Running caresses ponies, Lourenço's café!") == [
        "run",
        "caress",
        "poni",
        "lourenco",
        "cafe",
    ]


async def test_memory_index_ranks_the_same_documents_first_as_fts5(small_db_url: str) -> None:
    engine = make_engine(small_db_url)
    try:
        sm = make_sessionmaker(engine)
        memory = LocalSearch(sm)
        fts = LocalSearch(sm, memory_max_chunks=0)
        assert memory.indexes is not None and fts.indexes is None
        for query in QUERIES:
            got = await memory.chunks(query=query, corpus="small", k=5)
            want = await fts.chunks(query=query, corpus="small", k=5)
            assert [h.doc_id for h in got][:1] == [h.doc_id for h in want][:1], query
            assert {h.doc_id for h in got} == {h.doc_id for h in want}, query
            assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
            for hit in got:  # passages carry their offsets into the document, as the SQL paths return them
                assert hit.end - hit.start == len(hit.text)
    finally:
        await engine.dispose()


async def test_a_changed_corpus_is_noticed_and_the_index_rebuilt(
    small_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memindex, "RECHECK_SECONDS", 0.0)
    engine = make_engine(small_db_url)
    try:
        search = LocalSearch(make_sessionmaker(engine))
        assert await search.chunks(query="zeppelin airship", corpus="small", k=3) == []
        first = await search.indexes.get("small")  # type: ignore[union-attr]
        # Another process ingests a document: only the database changes.
        doc = DocumentIn(doc_id="zeppelin", title="Zeppelin", text="A zeppelin is a rigid airship. It flew in 1900.")
        await load_docs(small_db_url, "small", [doc])
        hits = await search.chunks(query="zeppelin airship", corpus="small", k=3)
        assert [h.doc_id for h in hits] == ["zeppelin"]
        assert await search.indexes.get("small") is not first  # type: ignore[union-attr]
    finally:
        await engine.dispose()


async def test_a_corpus_over_the_limit_is_searched_by_fts5(small_db_url: str) -> None:
    engine = make_engine(small_db_url)
    try:
        sm = make_sessionmaker(engine)
        search = LocalSearch(sm, memory_max_chunks=len(SMALL_CORPUS) - 1)
        hits = await search.chunks(query="coffee production", corpus="small", k=3)
        async with sm() as session:
            fts = await search_chunks(session=session, corpus="small", query="coffee production", k=3)
        assert hits == fts and await search.indexes.get("small") is None  # type: ignore[union-attr]
    finally:
        await engine.dispose()


def test_ties_are_broken_by_passage_order_and_k_never_exceeds_the_matches() -> None:
    from veracity.db.corpus_repo import ChunkHit

    rows = [ChunkHit(i, i, f"d{i}", "", "same words here", 0, 15, 0.0, None, None) for i in range(1, 5)]
    index = MemoryIndex(rows + [ChunkHit(9, 9, "d9", "", "other text", 0, 10, 0.0, None, None)])
    hits = index.search("same words", 10)
    assert [h.chunk_id for h in hits] == [1, 2, 3, 4]


@pytest.mark.postgres
async def test_the_memory_index_reads_postgresql(pg_url: str) -> None:
    await asyncio.to_thread(upgrade, pg_url)
    await load_docs(pg_url, "small", SMALL_CORPUS)
    engine = make_engine(pg_url)
    try:
        hits = await LocalSearch(make_sessionmaker(engine)).chunks(
            query="coffee production Brazil", corpus="small", k=3
        )
        assert hits and hits[0].doc_id == "coffee"
    finally:
        await engine.dispose()
