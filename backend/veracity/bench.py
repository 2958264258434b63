"""`make bench`: time to the first event and whole-run time of `market_brief` on the default corpus, then the
retrieval benchmarks (fan-out efficiency on the fixture site; search latency against rank-bm25 and ingest rate
on SciFact when the evaluation data is beside the checkout).

Each question runs several times in one process against the configured database; medians are printed.
Benchmarks never gate CI (no timed tests)."""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy.engine import make_url

from veracity.db.engine import make_engine, make_sessionmaker
from veracity.graph.builder import build_graph
from veracity.runs.service import RunService
from veracity.search.providers import hit_ranker, local_search
from veracity.settings import get_settings
from veracity.specs.registry import SpecRegistry

QUESTIONS = (
    "What is the history of coffee production and trade?",
    "How did the electric car market develop?",
    "What drives the global steel industry?",
)
REPEATS = 5


async def one_run(service: RunService, question: str) -> tuple[float, float, str]:
    started = time.perf_counter()
    run_id = await service.start(question=question, template="market_brief")
    first: float | None = None
    last_name = ""
    async for event in service.tail(run_id):
        if first is None:
            first = time.perf_counter() - started
        last_name = event.name
    total = time.perf_counter() - started
    return (first or total) * 1000, total * 1000, last_name


async def main() -> int:
    settings = get_settings()
    url = settings.database.url
    scratch = tempfile.TemporaryDirectory()
    database = make_url(url).database
    if url.startswith("sqlite") and database:
        # Benchmark runs go to a copy, so they never show up in the user's recent runs.
        copy = Path(scratch.name) / "bench.db"
        shutil.copy(database, copy)
        url = f"sqlite+aiosqlite:///{copy}"
    engine = make_engine(url)
    sm = make_sessionmaker(engine)
    service = RunService(
        sessionmaker=sm,
        registry=SpecRegistry.load(),
        settings=settings,
        graph=build_graph(),
        search=local_search(settings, sm),
        ranker=hit_ranker(settings),
    )
    print(f"market_brief on corpus {settings.corpus.default}, {REPEATS} runs per question (median)")
    print(f"{'question':<55} {'first event ms':>15} {'run ms':>10}")
    try:
        await one_run(service, "warm-up question about tea")  # imports, caches, first connection
        for question in QUESTIONS:
            firsts, totals = [], []
            for _ in range(REPEATS):
                first, total, last = await one_run(service, question)
                if last != "complete":
                    print(f"run did not complete ({last})", file=sys.stderr)
                    return 1
                firsts.append(first)
                totals.append(total)
            print(f"{question:<55} {statistics.median(firsts):>15.1f} {statistics.median(totals):>10.1f}")
    finally:
        await engine.dispose()
        scratch.cleanup()
    await fanout()
    await search_and_ingest(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
    await local_model_run()
    return 0


async def local_model_run() -> None:
    """One `legal_research` run with the bundled local model: model calls, tokens and time per stage."""
    from veracity.corpus.bundled import ensure_bundled_corpora
    from veracity.db.migrate import upgrade
    from veracity.models.local import LocalModelUnavailable
    from veracity.models.providers import build_models
    from veracity.settings import Settings

    question = "What does section 90A of the Evidence Act 1950 say about documents produced by computers?"
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite+aiosqlite:///{Path(scratch) / 'local.db'}"
        await asyncio.to_thread(upgrade, url)
        settings = Settings.model_validate(
            {"database": {"url": url}, "model": {"provider": "local"}, "corpus": {"autoload_wiki": False}}
        )
        try:
            models = build_models(settings)
        except LocalModelUnavailable as exc:
            print(f"\nlocal model run: skipped ({exc})")
            return
        engine = make_engine(url)
        sm = make_sessionmaker(engine)
        try:
            await ensure_bundled_corpora(sessionmaker=sm, chunk_chars=settings.corpus.chunk_chars)
            service = RunService(
                sessionmaker=sm,
                registry=SpecRegistry.load(),
                settings=settings,
                graph=build_graph(),
                search=local_search(settings, sm),
                ranker=hit_ranker(settings),
                providers=models.providers,
            )
            started = time.perf_counter()
            run_id = await service.start(question=question, template="legal_research")
            await service.wait(run_id)
            wall = time.perf_counter() - started
            from veracity.db import runs_repo

            async with sm() as session:
                artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
        finally:
            await models.aclose()
            await engine.dispose()
    report = artifact.report if artifact is not None else {}
    usage = (report.get("metrics") or {}).get("model") or {}
    print(f"\nlocal model (SmolLM2-135M via xllamacpp), legal_research: outcome {report.get('outcome')}, {wall:.1f} s")
    print(
        f"  {usage.get('calls', 0)} calls, {usage.get('prompt_tokens', 0)} prompt + "
        f"{usage.get('completion_tokens', 0)} completion tokens"
    )
    for role, row in sorted((usage.get("by_role") or {}).items()):
        print(
            f"  {role:<9} {int(row['calls'])} calls  {int(row['prompt_tokens']):>6} + "
            f"{int(row['completion_tokens']):>5} tokens  {row['ms'] / 1000:6.1f} s"
        )


async def search_and_ingest(eval_data: Path | None) -> None:
    from veracity.evals.retrieval import DEFAULT_DATA
    from veracity.evals.search_bench import bench_ingest_rate, bench_search_latency, format_latency

    data = eval_data or DEFAULT_DATA
    if not (data / "retrieval_scifact" / "corpus.jsonl").is_file():
        print(f"\nsearch latency and ingest rate: skipped, no SciFact data at {data} (give its path: EVAL_DATA=…)")
        return
    with tempfile.TemporaryDirectory() as scratch:
        print()
        print(format_latency(await bench_search_latency(data, f"sqlite+aiosqlite:///{Path(scratch) / 'search.db'}")))
    ingest = await bench_ingest_rate(data)
    rate = ingest["docs_per_s"]
    print(f"ingest: {ingest['documents']} SciFact documents in {ingest['seconds']:.1f} s = {rate:.0f} docs/s")


async def fanout() -> None:
    from veracity.bench_fanout import LATENCY_MS, PAGES, SUBTASKS, measure

    r = await measure()
    print(f"\nfan-out: {SUBTASKS} subtasks x {PAGES} pages, {LATENCY_MS} ms per page (fixture site, real HTTP)")
    print(f"  parallel retrieval   {r.parallel_ms:8.0f} ms  ({r.pages} pages)")
    print(f"  sequential, same work{r.sequential_ms:8.0f} ms")
    print(f"  longest single branch{r.longest_ms:8.0f} ms")
    ratio = r.parallel_ms / r.longest_ms
    verdict = "met" if ratio <= 1.3 else "NOT met"
    print(
        f"  parallel / longest   {ratio:8.2f}   (target <= 1.3: {verdict}); speed-up over sequential "
        f"{r.sequential_ms / r.parallel_ms:.1f}x"
    )


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
