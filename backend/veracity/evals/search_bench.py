"""Search speed on BEIR SciFact: the local search against the rank-bm25 package, and the ingest rate.

- ``bench_search_latency``: the 300 SciFact claims searched one at a time, in this process, by the local search
  as runs use it (``LocalSearch``: the in-memory BM25 index, passages collapsed to their best 10 documents) and
  by ``rank_bm25.BM25Okapi`` over the same documents (title + text).
  rank-bm25 gets the same words the local search sends (lower-cased, stopwords dropped, split at apostrophes; no
  stemming, which it lacks) and FTS5's constants (k1 1.2, b 0.75). Its index build is timed apart; a query's time
  is tokenising it, scoring every document and taking the top 10. Median and mean ms per query, the ratio of the
  medians (rank-bm25 / local) and both nDCG@10.
- ``bench_ingest_rate``: documents per second of the project's ingest (read, chunk, write, index) of the SciFact
  corpus into a fresh corpus of a fresh, migrated SQLite database.

Called by ``make bench``; also ``python -m veracity.evals.search_bench [DATA_DIR] [--db URL]``. Timings are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from veracity.corpus.ingest import ingest_path
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.migrate import upgrade
from veracity.evals.ir_metrics import mean, ndcg_at_k
from veracity.evals.retrieval import DEFAULT_DATA, DEFAULT_DB, ensure_corpus, eval_set, missing_files, search_documents
from veracity.search.providers import local_search
from veracity.settings import get_settings
from veracity.text import STOPWORDS, words

CORPUS = "scifact"
TOP = 10
WARM_UP = 10


def bm25_tokens(text: str) -> list[str]:
    """The words the local search would send for ``text``, repeats kept (term frequency counts for documents)."""
    parts = (p for w in words(text) for p in w.replace("’", "'").split("'"))
    return [p for p in parts if p.isalnum() and (len(p) > 1 or p.isdigit()) and p not in STOPWORDS]


def _timing(ms: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(ms), "mean_ms": statistics.fmean(ms)}


async def bench_search_latency(eval_data: Path, db_url: str) -> dict[str, Any]:
    """Per-query latency and nDCG@10 of the local search and of rank-bm25 on the SciFact claims (see the module)."""
    from rank_bm25 import BM25Okapi

    data = eval_set(eval_data, CORPUS)
    await asyncio.to_thread(upgrade, db_url)
    engine = make_engine(db_url)
    sessionmaker = make_sessionmaker(engine)
    queries = list(data.queries.items())
    local_ms: list[float] = []
    local_ndcg: list[float] = []
    try:
        await ensure_corpus(
            sessionmaker=sessionmaker,
            corpus=CORPUS,
            path=data.corpus_file,
            chunk_chars=get_settings().corpus.chunk_chars,
        )
        searcher = local_search(get_settings(), sessionmaker)
        started = time.perf_counter()
        await searcher.chunks(query="warm up", corpus=CORPUS, k=1)  # the in-memory index is built on first use
        local_build_s = time.perf_counter() - started
        for i, (qid, query) in enumerate(queries[:WARM_UP] + queries):
            started = time.perf_counter()
            hits = await search_documents(search=searcher, corpus=CORPUS, query=query, depth=TOP)
            if i >= WARM_UP:
                local_ms.append((time.perf_counter() - started) * 1000)
                local_ndcg.append(ndcg_at_k([h.doc_id for h in hits], data.qrels[qid], TOP))
    finally:
        await engine.dispose()

    docs = [json.loads(line) for line in data.corpus_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    ids = [str(d["_id"]) for d in docs]
    started = time.perf_counter()
    index = BM25Okapi([bm25_tokens(f"{d.get('title') or ''} {d['text']}") for d in docs], k1=1.2, b=0.75)
    build_s = time.perf_counter() - started
    ref_ms: list[float] = []
    ref_ndcg: list[float] = []
    for i, (qid, query) in enumerate(queries[:WARM_UP] + queries):
        started = time.perf_counter()
        scores = index.get_scores(list(dict.fromkeys(bm25_tokens(query))))
        top = np.argsort(-scores, kind="stable")[:TOP]
        ranked = [ids[j] for j in top if scores[j] > 0]
        if i >= WARM_UP:
            ref_ms.append((time.perf_counter() - started) * 1000)
            ref_ndcg.append(ndcg_at_k(ranked, data.qrels[qid], TOP))

    local, reference = _timing(local_ms), _timing(ref_ms)
    return {
        "queries": len(queries),
        "documents": len(docs),
        "local": local | {"ndcg@10": mean(local_ndcg), "index_build_s": local_build_s},
        "rank_bm25": reference | {"ndcg@10": mean(ref_ndcg), "index_build_s": build_s},
        "speedup_median": reference["median_ms"] / local["median_ms"],
        "speedup_mean": reference["mean_ms"] / local["mean_ms"],
    }


async def bench_ingest_rate(eval_data: Path, db_url: str | None = None) -> dict[str, Any]:
    """Documents/s ingesting the SciFact corpus into a fresh corpus. ``db_url`` None means a fresh temporary SQLite
    database; a given database gets a new corpus name each call (left in place: use a scratch database)."""
    data = eval_set(eval_data, CORPUS)
    with tempfile.TemporaryDirectory() as scratch:
        url = db_url or f"sqlite+aiosqlite:///{Path(scratch) / 'ingest-bench.db'}"
        await asyncio.to_thread(upgrade, url)
        engine = make_engine(url)
        corpus = f"ingest-bench-{time.time_ns()}"
        try:
            started = time.perf_counter()
            report = await ingest_path(
                sessionmaker=make_sessionmaker(engine),
                path=data.corpus_file,
                corpus=corpus,
                chunk_chars=get_settings().corpus.chunk_chars,
            )
            seconds = time.perf_counter() - started
        finally:
            await engine.dispose()
    return {"documents": report.added, "seconds": seconds, "docs_per_s": report.added / seconds, "corpus": corpus}


def format_latency(result: dict[str, Any]) -> str:
    def row(label: str, r: dict[str, float]) -> str:
        return f"  {label:<22} {r['median_ms']:>10.2f} {r['mean_ms']:>9.2f} {r['ndcg@10']:>8.3f}"

    ref = result["rank_bm25"]
    return "\n".join(
        [
            f"SciFact search, {result['queries']} queries over {result['documents']} documents (top {TOP}):",
            f"  {'':<22} {'median ms':>10} {'mean ms':>9} {'nDCG@10':>8}",
            row("local (in-memory BM25)", result["local"])
            + f"   (index build {result['local']['index_build_s']:.1f} s, not counted)",
            row("rank-bm25 BM25Okapi", ref) + f"   (index build {ref['index_build_s']:.1f} s, not counted)",
            f"  local is {result['speedup_median']:.1f}x faster by median, {result['speedup_mean']:.1f}x by mean",
        ]
    )


async def _main(data: Path, db_url: str) -> int:
    if missing := missing_files(data, CORPUS):  # SciFact only: HotpotQA need not be there
        print(f"search-bench: data not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    print(format_latency(await bench_search_latency(data, db_url)))
    ingest = await bench_ingest_rate(data)
    print(f"ingest: {ingest['documents']} documents in {ingest['seconds']:.1f} s = {ingest['docs_per_s']:.0f} docs/s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m veracity.evals.search_bench", description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA, help="the eval-data folder")
    parser.add_argument("--db", default=DEFAULT_DB, help="database URL holding (or given) the scifact corpus")
    args = parser.parse_args(argv)
    return asyncio.run(_main(args.data, args.db))


if __name__ == "__main__":
    sys.exit(main())
