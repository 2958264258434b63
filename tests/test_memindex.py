"""The in-memory BM25 index behind the local search: it ranks as FTS5 does, notices a changed corpus, gives way
to FTS5 for corpora over its size limit, and reads PostgreSQL too."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from sqlalchemy import event

from conftest import SMALL_CORPUS, load_docs
from veracity.db.corpus_repo import DocumentIn, search_chunks
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.migrate import upgrade
from veracity.search import memindex
from veracity.search.local import LocalSearch
from veracity.search.memindex import MemoryIndex
from veracity.search.named import named_in, named_titles
from veracity.text import Analyzer, index_stems

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


def _count_statements(engine: Any) -> list[str]:
    """Every SQL statement the engine runs from now on, lower-cased."""
    seen: list[str] = []

    @event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement.lower())

    return seen


async def test_concurrent_branches_share_one_freshness_check_and_one_build(small_db_url: str) -> None:
    engine = make_engine(small_db_url)
    try:
        indexes = memindex.MemoryIndexes(make_sessionmaker(engine), max_chunks=1000)
        statements = _count_statements(engine)
        got = await asyncio.gather(*(indexes.get("small") for _ in range(8)))
        assert got[0] is not None and all(index is got[0] for index in got)
        assert sum("count(" in s for s in statements) == 1
        assert sum("from chunks" in s and "count(" not in s for s in statements) == 1  # one load of the passages
    finally:
        await engine.dispose()


async def test_a_corpus_without_an_index_is_not_counted_on_every_search(
    small_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(small_db_url)
    try:
        indexes = memindex.MemoryIndexes(make_sessionmaker(engine), max_chunks=len(SMALL_CORPUS) - 1)
        statements = _count_statements(engine)
        for corpus in ("small", "no-such-corpus"):  # over the limit; empty
            assert [await indexes.get(corpus) for _ in range(3)] == [None, None, None]
        assert sum("count(" in s for s in statements) == 2 and not any("join" in s for s in statements)
        monkeypatch.setattr(memindex, "RECHECK_SECONDS", 0.0)  # once the check is due, it is made again
        assert await indexes.get("small") is None
        assert sum("count(" in s for s in statements) == 3
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


def test_rarity_is_higher_for_rarer_words_and_zero_for_unknown_ones() -> None:
    from veracity.db.corpus_repo import ChunkHit

    texts = ["coffee production", "oil production", "film production", "steel production", "O'Brien's coffee"]
    hits = [ChunkHit(i, i, str(i), "", t, 0, len(t), 0.0, None, None) for i, t in enumerate(texts)]
    index = MemoryIndex(hits)
    assert index.rarity("Coffee") > index.rarity("production") > 0
    assert index.rarity("zorblax") == 0.0
    # A name with an apostrophe is weighed by the piece the index holds, not lost as a word it never saw.
    assert index_stems(["o'brien", "O’Brien's"]) == ["brien"]
    assert index.stem_rarity(index_stems(["o'brien"])[0]) == index.rarity("brien") > index.rarity("coffee")


async def test_hybrid_search_fuses_dense_vectors_and_lifts_the_topic_a_homonym_outranks_lexically() -> None:
    """BM25 alone ranks the electric eel (which shares "electric") above the article about the topic; with
    passage vectors the topic's article climbs above it into the top two. The "CAR" homonym, which shares both
    "car" and "history", still ranks first: retrieval only has to bring the topic into the pool; the relevance
    model decides which sentences are evidence (tests/test_relevance.py)."""
    from veracity.db.corpus_repo import ChunkHit
    from veracity.semantic.model import head_text, process_semantics

    model = process_semantics(True).model
    assert model is not None
    texts = [
        ("CAR", "CAR is the Central African Republic, a country whose history began in 1960."),
        ("Battery electric vehicle", "A battery electric vehicle is an automobile powered by batteries and motors."),
        ("Electric eel", "The electric eel is a South American fish that can generate electric shocks."),
    ]
    hits = [ChunkHit(i, i, t, t, x, 0, len(x), 0.0, None, None) for i, (t, x) in enumerate(texts)]
    index = MemoryIndex(hits, vectors=model.encode_heads([head_text(t, x) for t, x in texts]))
    query = "history of the electric car"
    lexical = [h.title for h in index.search(query, 3)]
    hybrid = [h.title for h in index.search(query, 3, model.encode([query])[0])]
    assert lexical.index("Battery electric vehicle") > lexical.index("Electric eel")
    assert hybrid[:2] == ["CAR", "Battery electric vehicle"]


def _titled(texts: list[tuple[str, str]], start: int = 0) -> list[Any]:
    from veracity.db.corpus_repo import ChunkHit

    return [ChunkHit(i, i, t, t, x, start, start + len(x), 0.0, None, None) for i, (t, x) in enumerate(texts)]


def test_a_query_naming_a_title_brings_that_articles_lead_first() -> None:
    """BM25 prefers the sequel, which repeats the shared words; the query names "World War I" (the longest name at
    that place, not also "World War"), so its article leads, and k still holds."""
    index = MemoryIndex(
        _titled(
            [
                ("World War II", "World War II was a war. The war after the war ended the war in 1945, war by war."),
                ("World War I", "The Great War was fought from 1914 to 1918."),
                ("World War", "A world war is a war involving most of the world."),
                ("Treaty of Versailles", "The treaty ended the war; the war was over and the war ended."),
            ]
        )
    )
    lexical_order = [h.title for h in MemoryIndex(index.hits).search("world war ended", 4)]
    assert lexical_order.index("World War I") > 0
    assert named_in("When had World War I ended?", index.named) == [1]  # not also "World War" (row 2)
    hits = index.search("When had World War I ended?", 3)
    assert [h.title for h in hits][0] == "World War I" and len(hits) == 3


def test_names_match_titles_by_the_rules_for_one_word_and_several() -> None:
    named = named_titles(
        _titled(
            [
                ("Australia", "A country."),
                ("Car", "A road vehicle."),
                ("Electric car", "A car powered by electricity."),
                ("Python (programming language)", "A language."),
                ("Python (genus)", "Snakes."),
                ("I", "A letter."),
                ("Tesla", "A unit."),
            ]
        )
    )
    titles = ["Australia", "Car", "Electric car", "Python lang", "Python genus", "I", "Tesla"]
    rows = {h: i for i, h in enumerate(titles)}
    assert named_in("What is the capital of Australia?", named) == [rows["Australia"]]
    assert named_in("capital of australia", named) == []  # one word: only as written
    assert named_in("the history of the electric car", named) == [rows["Electric car"]]  # not also "Car"
    assert named_in("a tesla is not a Tesla", named) == [rows["Tesla"]]
    assert named_in("Is a Car a car?", named) == []  # shorter than four characters: "Car", "CAR", "War"
    assert named_in("How do I kill a Python process?", named) == [rows["Python lang"], rows["Python genus"]]
    assert named_in("I", named) == []


def test_only_an_articles_lead_passage_is_named_and_at_most_three_are_lifted_the_best_by_score() -> None:
    later = _titled([("Mona Lisa", "Its later history.")], start=1200)
    assert named_titles(later) == {}
    # "Other" holds every word of the query; "shared" is in every passage (no weight), so among the names the
    # shorter passage scores higher (BM25's length normalisation): Name0 best, Name4 worst.
    texts = [(f"Name{i}", "shared " * (i + 1)) for i in range(5)]
    texts.append(("Other", "Name0 Name1 Name2 Name3 Name4 " + "shared " * 20))
    index = MemoryIndex(_titled(texts))
    assert named_in("Name0 Name1 Name2 Name3 Name4 shared", index.named) == [0, 1, 2, 3, 4]
    hits = index.search("Name0 Name1 Name2 Name3 Name4 shared", 5)
    by_score = sorted(hits[:3], key=lambda h: -h.score)
    assert [h.title for h in hits[:3]] == [h.title for h in by_score] and len({h.title for h in hits[:3]}) == 3
    assert [h.title for h in hits[:3]] == ["Name0", "Name1", "Name2"] and hits[3].title == "Other"
    assert len({h.chunk_id for h in hits}) == 5  # the lifted passages are not listed twice


def test_small_word_titles_one_written_word_titles_and_years_are_named_only_as_written() -> None:
    named = named_titles(
        _titled(
            [
                ("The Who", "A band."),
                ("AT&T", "A company."),
                ("Treaty of Versailles", "A treaty."),
                ("Versailles", "A town."),
                ("1920 (film)", "A film."),
            ]
        )
    )
    assert named_in("Who are The Who?", named) == [0]
    assert named_in("who are the who?", named) == []
    assert named_in("How many stores are at T-Mobile?", named) == []  # not "at" + "t"
    assert named_in("Is AT&T bigger?", named) == [1]
    assert named_in("What did the treaty of Versailles end?", named) == [2]  # not also "Versailles"
    assert named_in("What happened in 1920?", named) == []


def test_a_named_passage_outside_both_halves_of_the_hybrid_search_still_comes_first() -> None:
    """Neither BM25 (no shared word) nor the cosine (an orthogonal vector) puts the named article in the pool; the
    query names it, so it leads, fused with the others (its score is the fused one, the lowest here)."""
    texts = [(f"Other {i}", f"shared words number {i}") for i in range(60)] + [("Kiss and Tell", "A 1945 film.")]
    vectors = np.zeros((len(texts), 2), dtype=np.float32)
    vectors[:60, 0] = 1.0
    vectors[60, 1] = 1.0
    index = MemoryIndex(_titled(texts), vectors=vectors)
    hits = index.search("shared words in Kiss and Tell", 4, np.array([1.0, 0.0], dtype=np.float32))
    assert hits[0].title == "Kiss and Tell" and len(hits) == 4
    assert hits[0].score <= min(h.score for h in hits[1:])
    assert index.search("shared words", 4, np.array([1.0, 0.0], dtype=np.float32))[0].title != "Kiss and Tell"
