"""The retrieval eval's metrics (hand-computed values), score fusion, the embedding rerank, and the search terms."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from conftest import load_docs, sqlite_url
from veracity.db.corpus_repo import DocumentIn, search_chunks
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.migrate import upgrade
from veracity.evals.ir_metrics import all_found_at_k, ndcg_at_k, recall_at_k
from veracity.evals.retrieval import search_documents
from veracity.evals.search_bench import bm25_tokens
from veracity.rank.embed import INSTALL_HINT, Embedder, fuse_scores
from veracity.search.local import LocalSearch


def test_ndcg_at_10_with_binary_relevance() -> None:
    # DCG = 1/log2(2) + 1/log2(4) = 1.5; ideal DCG = 1 + 1/log2(3).
    assert ndcg_at_k(["a", "x", "b"], {"a": 1, "b": 1}, 10) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))


def test_ndcg_at_10_with_graded_relevance_uses_linear_gain() -> None:
    # DCG = 1 + 2/log2(3); ideal puts the grade-2 document first: 2 + 1/log2(3).
    expected = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert ndcg_at_k(["b", "a"], {"a": 2, "b": 1}, 10) == pytest.approx(expected)
    assert ndcg_at_k(["a", "b"], {"a": 2, "b": 1}, 10) == pytest.approx(1.0)


def test_ndcg_at_10_ignores_hits_past_the_cutoff_and_empty_judgements() -> None:
    ranked = [f"x{i}" for i in range(10)] + ["a"]
    assert ndcg_at_k(ranked, {"a": 1}, 10) == 0.0
    assert ndcg_at_k([], {"a": 1}, 10) == 0.0
    assert ndcg_at_k(["a"], {}, 10) == 0.0
    # Judged-irrelevant documents (grade 0) do not count as relevant.
    assert ndcg_at_k(["z", "a"], {"a": 1, "z": 0}, 10) == pytest.approx(1 / math.log2(3))


def test_recall_at_k_counts_the_share_of_relevant_documents_in_the_top_k() -> None:
    assert recall_at_k(["a", "b", "c"], {"a", "d"}, 2) == 0.5
    assert recall_at_k(["b", "c", "a"], {"a", "c"}, 2) == 0.5
    assert recall_at_k(["b", "c", "a"], {"a", "c"}, 3) == 1.0
    assert recall_at_k(["a"], set(), 10) == 0.0


def test_both_gold_at_k_needs_every_relevant_document() -> None:
    assert all_found_at_k(["g1", "x", "g2"], {"g1", "g2"}, 3) == 1.0
    assert all_found_at_k(["g1", "x", "g2"], {"g1", "g2"}, 2) == 0.0
    assert all_found_at_k(["g1"], set(), 10) == 0.0


def test_fusion_is_a_convex_combination_of_min_max_scores() -> None:
    # first stage → [1, 0.5, 0]; similarities → [0, 1, 0.5]
    assert fuse_scores([10.0, 5.0, 0.0], [0.1, 0.9, 0.5], weight=0.5) == pytest.approx([0.5, 0.75, 0.25])
    assert fuse_scores([10.0, 5.0, 0.0], [0.1, 0.9, 0.5], weight=0.0) == pytest.approx([1.0, 0.5, 0.0])
    assert fuse_scores([10.0, 5.0, 0.0], [0.1, 0.9, 0.5], weight=1.0) == pytest.approx([0.0, 1.0, 0.5])
    # A signal that cannot tell the candidates apart leaves the order to the other one.
    assert fuse_scores([3.0, 3.0], [0.2, 0.8], weight=0.5) == pytest.approx([0.5, 1.0])
    assert fuse_scores([], [], weight=0.5) == []
    with pytest.raises(ValueError):
        fuse_scores([1.0], [0.1, 0.2], weight=0.5)
    with pytest.raises(ValueError):
        fuse_scores([1.0], [0.1], weight=1.5)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    found = Embedder.load()
    if found is None:
        # The rerank's wheels are part of the test install; a missing one is a failure, never a skip.
        pytest.fail(f"the embedding rerank is not installed; {INSTALL_HINT}")
    return found


def test_embedder_vectors_are_unit_length_and_in_input_order(embedder: Embedder) -> None:
    texts = ["Bees make honey from nectar.", "A much longer sentence about the tides of the ocean and the moon."]
    vectors = embedder.encode(texts)
    assert vectors.shape == (2, 384)
    assert [float(v @ v) for v in vectors] == pytest.approx([1.0, 1.0], abs=1e-5)
    assert embedder.encode(texts[::-1])[0] == pytest.approx(vectors[1], abs=1e-5)


def test_rerank_puts_the_passage_that_answers_first_when_bm25_ties(embedder: Embedder) -> None:
    docs = [
        "The stock exchange closed lower on Friday as bank shares fell.",
        "Honeybees turn flower nectar into honey by evaporating it in the hive.",
    ]
    fused = embedder.rerank("How do bees make honey?", docs, [4.0, 4.0], weight=0.5)
    assert fused[1] > fused[0]


def test_rerank_with_weight_zero_keeps_the_first_stage_order(embedder: Embedder) -> None:
    docs = ["Honeybees turn flower nectar into honey.", "The stock exchange closed lower on Friday."]
    fused = embedder.rerank("How do bees make honey?", docs, [1.0, 9.0], weight=0.0)
    assert fused[1] > fused[0]


NAMES = [
    DocumentIn(
        doc_id="mutarelli", title="Mutarelli", text="Lourenço Mutarelli is a Brazilian comics artist and novelist."
    ),
    DocumentIn(doc_id="brien", title="Late night", text="Conan O'Brien hosted a late-night talk show for NBC."),
    DocumentIn(doc_id="tea", title="Tea", text="Tea is an aromatic beverage. Green tea is popular in Japan."),
]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def names_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    url = sqlite_url(tmp_path / "names.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")
    upgrade(url)
    return url


async def test_search_keeps_accented_words_and_splits_at_apostrophes(names_url: str) -> None:
    await load_docs(names_url, "names", NAMES)
    engine = make_engine(names_url)
    try:
        async with make_sessionmaker(engine)() as session:
            # "Lourenço" was dropped from the query before (not ASCII), leaving no query at all.
            hits = await search_chunks(session=session, corpus="names", query="Who is Lourenço?", k=5)
            assert [h.doc_id for h in hits] == ["mutarelli"]
            # "O'Brien" is indexed as "o" + "brien"; the query used to send "obrien", which matches nothing.
            hits = await search_chunks(session=session, corpus="names", query="Who is O'Brien?", k=5)
            assert [h.doc_id for h in hits] == ["brien"]
    finally:
        await engine.dispose()


async def test_search_documents_collapses_passages_to_their_best(small_db_url: str) -> None:
    from veracity.corpus.ingest import IngestReport, ingest_documents

    # A long document cut into short passages, several of them matching the query with different strengths.
    paragraphs = [
        "The coffee market grew quickly. A zeppelin carried coffee and tea traders to market every week.",
        "Shipping lanes carried many goods across the sea, and coffee was one of them in later decades.",
        "Zeppelin after zeppelin: the tea market and the coffee market were the busiest in a zeppelin town.",
        "Harbours were built and rebuilt over the centuries as trade moved along the coast to new towns.",
    ]
    query = "coffee tea market zeppelin"
    long_doc = DocumentIn(doc_id="trade", title="Trade history", text="\n\n".join(paragraphs))
    engine = make_engine(small_db_url)
    try:
        sm = make_sessionmaker(engine)
        await ingest_documents(sessionmaker=sm, corpus="small", docs=[long_doc], chunk_chars=200, report=IngestReport())
        search = LocalSearch(sm)
        passages = await search.chunks(query=query, corpus="small", k=100)
        hits = await search_documents(search=search, corpus="small", query=query, depth=10)
    finally:
        await engine.dispose()
    trade = [p for p in passages if p.doc_id == "trade"]
    assert len(trade) >= 2 and len({p.score for p in trade}) >= 2  # the collapse has a choice to make
    ids = [h.doc_id for h in hits]
    assert len(ids) == len(set(ids)) and set(ids) == {"coffee", "tea", "trade"}
    best = max(trade, key=lambda p: p.score)
    (doc,) = [h for h in hits if h.doc_id == "trade"]
    assert (doc.score, doc.chunk_id) == (best.score, best.chunk_id)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_bm25_tokens_are_the_words_the_local_search_sends() -> None:
    assert bm25_tokens("The men's team, Téa and the team") == ["men", "team", "téa", "team"]


def test_one_eval_set_loads_without_the_other(tmp_path: Path) -> None:
    from veracity.evals.retrieval import eval_set, eval_sets, missing_files

    sci = tmp_path / "retrieval_scifact"
    (sci / "qrels").mkdir(parents=True)
    (sci / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "x"}\n', encoding="utf-8")
    (sci / "queries.jsonl").write_text('{"_id": "q1", "text": "a claim"}\n{"_id": "q2", "text": "unjudged"}\n')
    (sci / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    got = eval_set(tmp_path, "scifact")  # SciFact alone is enough for the search benchmark
    assert got.queries == {"q1": "a claim"} and got.qrels == {"q1": {"d1": 1}}
    assert missing_files(tmp_path, "scifact") == [] and len(missing_files(tmp_path)) == 3
    with pytest.raises(FileNotFoundError, match="qa_hotpotqa"):
        eval_sets(tmp_path)
