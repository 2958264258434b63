"""`make bench`: time to the first event and whole-run time of `market_brief` on the default corpus, one run
watched by 500 viewers (events lost, lag, run time against no viewers; bench/viewers.py), then the retrieval
benchmarks (fan-out efficiency on the fixture site; search latency against rank-bm25 and ingest rate
on SciFact when the evaluation data is beside the checkout), no waiting in line on a real `veracity serve`
(bench/wait.py: pages while 10 runs are in flight, the first run after start against the median, a run's page at 10
vs 10,000 stored runs), then the scale-out figures with real processes on PostgreSQL (bench/scale.py: 1,000 viewers
over 2 web processes, 100 runs over 2 workers, a worker's takeover).

Each question runs several times in one process against the configured database; medians are printed.
Benchmarks never gate CI (no timed tests)."""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from veracity.events import Complete, decode
from veracity.runs.model_set import ModelSet
from veracity.runs.runtime import Runtime, open_runtime
from veracity.runs.service import RunService
from veracity.settings import get_settings

QUESTIONS = (
    "What is the outlook for nuclear power?",
    "What is the history of coffee production and trade?",
    "How did the electric car market develop?",
    "What drives the global steel industry?",
)
REPEATS = 5


class StageClock:
    """Wall time spent in the relevance stage (scoring sentences and claims, fitting them to sections) during a
    run, measured by wrapping those calls for the benchmark only: the union of the calls' intervals (branches
    score in parallel threads, and one wrapped call may call another), so it is a share of the run's wall time."""

    def __init__(self) -> None:
        self.intervals: list[tuple[float, float]] = []
        self._depth = threading.local()
        self._patched: list[tuple[Any, str, Any]] = []

    @property
    def seconds(self) -> float:
        total, end = 0.0, float("-inf")
        for start, stop in sorted(self.intervals):
            if stop > end:
                total += stop - max(start, end)
                end = stop
        return total

    def reset(self) -> None:
        self.intervals = []

    def wrap(self, owner: Any, name: str) -> None:
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(self._depth, "n", 0)
            self._depth.n = depth + 1
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self._depth.n = depth
                if depth == 0:
                    self.intervals.append((started, time.perf_counter()))

        self._patched.append((owner, name, original))
        setattr(owner, name, timed)

    def restore(self) -> None:
        for owner, name, original in reversed(self._patched):
            setattr(owner, name, original)


def rss_mb() -> float:
    """This process's resident memory (Linux), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def one_run(service: RunService, question: str) -> tuple[float, float, str, str]:
    started = time.perf_counter()
    run_id = await service.start(question=question, template="market_brief")
    first: float | None = None
    last_name = ""
    outcome = ""
    async for event in service.tail(run_id):
        if first is None:
            first = time.perf_counter() - started
        last_name = event.name
        done = decode(event.name, event.payload)
        if isinstance(done, Complete):
            outcome = done.outcome
    total = time.perf_counter() - started
    return (first or total) * 1000, total * 1000, last_name, outcome


def semantic_model_figures() -> None:
    """Model load time and the resident memory the model adds (loaded and used once), before anything else."""
    from veracity.semantic.model import load_semantics

    before = rss_mb()
    semantics = load_semantics(True)
    if semantics.model is None:
        print(f"semantic model: not loaded ({semantics.reason})")
        return
    semantics.model.encode(["How has solar power grown in Germany?"] * 32)  # the first batch allocates
    print(
        f"semantic model: load {semantics.load_ms:.0f} ms, resident memory added {rss_mb() - before:.0f} MB "
        f"(process now {rss_mb():.0f} MB)"
    )
    contradiction_reader_figures(semantics)
    screen_figures(semantics)


def screen_figures(semantics: Any) -> None:
    """The screen's learned layer per message, reading with the cross-encoder (the default) and without, side by
    side on the same messages (the reader's session already made by the judge's figures above)."""
    from veracity.guards.screen_model import learned_screen
    from veracity.semantic.nli import reading_model

    reader = reading_model(True) if semantics.model is not None else None
    if reader is None:
        print("screen: the cross-encoder is off or not loaded; nothing to compare")
        return
    messages = [
        "How has solar power grown in Germany?",
        "I'm back to self harming weekly now",
        "Should I give my 2-year-old melatonin?",
        "What is the outlook for nuclear power?",
        "I've been charged with drunk driving, what should I do?",
        "My landlord kept my deposit for normal wear and tear. Can I get it back? It was 900 pounds.",
    ]
    timings = {}
    for name, screener in (
        ("with", learned_screen(semantics.model, reader)),
        ("without", learned_screen(semantics.model)),
    ):
        screener.score(messages[0])  # warm
        started = time.perf_counter()
        for _ in range(5):
            for message in messages:
                screener._score(message)  # a first screening: ``score`` remembers messages it has seen
        timings[name] = (time.perf_counter() - started) / (5 * len(messages)) * 1000
    screener = learned_screen(semantics.model, reader)
    for message in messages:
        screener.score(message)  # screened once: remembered from here on
    started = time.perf_counter()
    for message in messages:
        screener.score(message)
    remembered = (time.perf_counter() - started) / len(messages) * 1000
    print(
        f"screen: {timings['with']:.1f} ms a message reading with the cross-encoder (default), "
        f"{timings['without']:.1f} ms without ({timings['with'] / timings['without']:.1f}x); "
        f"{remembered:.2f} ms for a message screened before (the reviewer's screen of a run's question)"
    )


def contradiction_reader_figures(semantics: Any) -> None:
    """The judge's contradiction reader: load time, memory added, and a paraphrased claim judged with and without
    it (the reader costs one pair per clause a source sentence does not hold word for word)."""
    from veracity.guards.judge import make_judge
    from veracity.ports import Source
    from veracity.semantic.nli import Contradiction, process_contradiction

    before = rss_mb()
    reader = process_contradiction(True)
    if reader.model is None:
        print(f"contradiction reader: not loaded ({reader.reason})")
        return
    source = [Source("s", "The chain opened two stores in Leeds. Sales at the chain rose sharply in March.")]
    claim = "In March the chain's sales went up sharply, and it opened two shops in Leeds."
    timings = {}
    for name, judge in (
        ("with", make_judge(semantics, reader)),
        ("without", make_judge(semantics, Contradiction(None, "bench"))),
    ):
        judge.judge_sync(claim, source)  # warm: the sentence vectors are cached from here on
        started = time.perf_counter()
        for _ in range(20):
            judge.judge_sync(claim, source)
        timings[name] = (time.perf_counter() - started) / 20 * 1000
    print(
        f"contradiction reader: made ready on the first read (pins checked, tokenizer read, session made) in "
        f"{reader.model.session_ms:.0f} ms, resident memory added {rss_mb() - before:.0f} MB; a 2-clause paraphrase "
        f"judged in {timings['with']:.1f} ms with it, {timings['without']:.1f} ms without (its vectors cached)"
    )


async def main() -> int:

    semantic_model_figures()
    settings = get_settings()
    url = settings.database.url
    scratch = tempfile.TemporaryDirectory()
    database = make_url(url).database
    if url.startswith("sqlite") and database:
        # Benchmark runs go to a copy, so they never show up in the user's recent runs.
        copy = Path(scratch.name) / "bench.db"
        shutil.copy(database, copy)
        url = f"sqlite+aiosqlite:///{copy}"
    settings = settings.model_copy(update={"database": settings.database.model_copy(update={"url": url})})
    lexical_settings = settings.model_copy(update={"semantic": settings.semantic.model_copy(update={"enabled": False})})
    # The semantic path with relevance's reader on (the cross-encoder reading each branch's best eight candidates).
    read_settings = settings.model_copy(update={"semantic": settings.semantic.model_copy(update={"reader": True})})
    try:
        # The production wiring (open_runtime, as the CLI and the server), with meaning deciding and without.
        async with open_runtime(settings, models=ModelSet()) as runtime:  # offline on both paths
            lexical = RunService.from_settings(lexical_settings, runtime.sessionmaker, graph=runtime.graph)
            read = RunService.from_settings(read_settings, runtime.sessionmaker, graph=runtime.graph)
            try:
                paths = {"semantic": runtime.service, "reader": read, "lexical": lexical}
                if await _market_brief(paths) != 0:
                    return 1
                await watched(runtime)
            finally:
                await lexical.shutdown(0)
                await read.shutdown(0)
    finally:
        scratch.cleanup()
    await fanout()
    await search_and_ingest(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
    await no_waiting()
    await local_model_run()
    return await scale_out()


async def scale_out() -> int:
    """bench/scale.py (`make bench-scale`) with its full counts: real web and worker processes on a PostgreSQL
    database of its own, whatever database the rest of the benchmark used (skipped when no PostgreSQL answers)."""
    from scale import run

    return await run([])


async def no_waiting() -> None:
    """bench/wait.py (`make bench-wait`) on a copy of the configured SQLite database (skipped on PostgreSQL)."""
    from wait import run

    await run()


async def local_model_run() -> None:
    """One `legal_research` run with the bundled local model: model calls, tokens and time per stage."""
    from veracity.models.local import LocalModelUnavailable
    from veracity.runs.model_set import build_models
    from veracity.settings import Settings

    question = "What does section 90A of the Evidence Act 1950 say about documents produced by computers?"
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite+aiosqlite:///{Path(scratch) / 'local.db'}"
        settings = Settings.model_validate(
            {"database": {"url": url}, "model": {"provider": "local"}, "corpus": {"autoload_wiki": False}}
        )
        try:
            models = build_models(settings)
        except LocalModelUnavailable as exc:
            print(f"\nlocal model run: skipped ({exc})")
            return
        async with open_runtime(settings, models=models) as runtime:  # closes the model set too
            service = runtime.service
            started = time.perf_counter()
            run_id = await service.start(question=question, template="legal_research")
            await service.wait(run_id)
            wall = time.perf_counter() - started
            from veracity.db import runs_repo

            async with runtime.sessionmaker() as session:
                artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
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


async def watched(runtime: Runtime) -> None:
    from viewers import measure, report

    print(report(await measure(runtime, QUESTIONS[1], "market_brief"), "market_brief"))


async def fanout() -> None:
    from fanout import LATENCY_MS, PAGES, SUBTASKS, measure

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


async def _market_brief(services: dict[str, RunService]) -> int:
    """Both paths side by side on market_brief: time to the first event and whole-run time, medians."""
    from veracity.graph.nodes import retrieve
    from veracity.graph.nodes import verify as verify_node
    from veracity.semantic.relevance import RelevanceScorer
    from veracity.synthesis import SectionFit

    settings = services["semantic"].settings
    clock = StageClock()
    clock.wrap(RelevanceScorer, "score")
    clock.wrap(RelevanceScorer, "strength")  # the second hop reads the sentences most like the question
    clock.wrap(SectionFit, "scores")
    clock.wrap(verify_node, "check_relevance")  # the name verify calls
    clock.wrap(retrieve, "_select")
    print(
        f"\nmarket_brief on corpus {settings.corpus.default}, {REPEATS} runs per question and path (median; the "
        "semantic model's vector cache emptied before each run)"
    )
    print(f"{'question':<52} {'path':<10} {'first ms':>9} {'run ms':>8} {'relevance':>10}  outcome")
    try:
        for service in services.values():
            await one_run(service, "warm-up question about tea")  # imports, caches, index, first connection
        ratios, reader_ratios = [], []
        for question in QUESTIONS:
            medians = {}
            for path, service in services.items():
                firsts, totals, shares, outcomes = [], [], [], set()
                for _ in range(REPEATS):
                    clock.reset()
                    if service.semantics.model is not None:
                        service.semantics.model.clear_cache()  # cold: a new question's sentences are not cached
                    first, total, last, outcome = await one_run(service, question)
                    if last != "complete":
                        print(f"run did not complete ({last})", file=sys.stderr)
                        return 1
                    firsts.append(first)
                    totals.append(total)
                    shares.append(clock.seconds * 1000 / total)
                    outcomes.add(outcome)
                medians[path] = statistics.median(totals)
                share = f"{statistics.median(shares):.0%}" if path != "lexical" else "-"
                print(
                    f"{question[:52]:<52} {path:<10} {statistics.median(firsts):>9.1f} {medians[path]:>8.1f} "
                    f"{share:>10}  {'/'.join(sorted(outcomes))}"
                )
            ratios.append(medians["semantic"] / medians["lexical"])
            reader_ratios.append(medians["reader"] / medians["semantic"])
        print(f"run time, semantic / lexical (median of the questions' ratios): {statistics.median(ratios):.2f}x")
        print(
            "run time, with the reader (VERACITY_SEMANTIC__READER=true) / without (median of the questions' ratios): "
            f"{statistics.median(reader_ratios):.2f}x"
        )
    finally:
        clock.restore()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
