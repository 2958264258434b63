"""The ``veracity`` command line. Errors go to stderr with a non-zero exit; ``--json`` output to stdout."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from veracity import messages
from veracity.errors import BadInput, VeracityError
from veracity.inputs import check_text, loads_json, unstorable
from veracity.progress import (  # light: tqdm is imported only when a bar is drawn
    CHOICES,
    AskProgress,
    Display,
    IngestProgress,
    Mode,
    _Progress,
    resolve_mode,
    wants_colour,
)
from veracity.settings import Settings, get_settings

if TYPE_CHECKING:
    from veracity.runs.runtime import Runtime

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1


def _err(message: str) -> None:
    print(f"veracity: {message}", file=sys.stderr)


def _runtime(settings: Settings) -> AbstractAsyncContextManager[Runtime]:
    """The process for one CLI invocation: the composition root every entry point uses (imported on demand, so
    ``veracity --help`` stays fast)."""
    from veracity.runs.runtime import open_runtime

    return open_runtime(settings)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) is reachable from this machine only."""
    import ipaddress

    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def _accounts(args: argparse.Namespace, settings: Settings) -> int:
    from veracity import cli_accounts
    from veracity.db.migrate import upgrade

    await asyncio.to_thread(upgrade, settings.database.url)
    return await cli_accounts.run(args, settings)


# ---- commands --------------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from veracity.web.app import create_app

    host = args.host or settings.server.host
    port = args.port or settings.server.port
    if not settings.auth.enabled and not is_loopback(host):
        _err(messages.NOT_LOOPBACK.format(host=host))
        return EXIT_BAD_INPUT
    print(f"Veracity is serving on http://{host}:{port}/", flush=True)
    uvicorn.run(create_app(settings), host=host, port=port, log_level=settings.log_level.lower())
    return 0


async def _worker(_args: argparse.Namespace, settings: Settings) -> int:
    """Execute queued runs until SIGTERM or SIGINT; then take no new run, let this worker's runs finish (up to
    ``VERACITY_WORKER__SHUTDOWN_SECONDS``; the rest are recorded as interrupted) and exit 0."""
    import signal

    if not settings.database.url.startswith("postgresql"):  # checked before the database package is imported
        raise BadInput(messages.WORKER_NEEDS_POSTGRESQL)
    from veracity.runs.runtime import open_runtime

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with open_runtime(settings, worker=True) as rt:
        print(f"Veracity worker {rt.service.owner} is taking runs from the queue", flush=True)
        stopping = asyncio.create_task(stop.wait())
        worker = asyncio.create_task(rt.wait_worker())
        await asyncio.wait({stopping, worker}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if worker.done():
            worker.result()  # the worker ended by itself: only an unexpected error does that; let it show
        print("Veracity worker: stopping (no new runs; finishing this worker's runs)", flush=True)
    return 0


async def _ingest(args: argparse.Namespace, settings: Settings) -> int:
    from veracity.corpus.ingest import ingest_path

    mode = resolve_mode(args.progress, sys.stderr)
    async with _runtime(settings) as rt:
        with IngestProgress(mode, stream=sys.stderr) as progress:
            report = await ingest_path(
                sessionmaker=rt.sessionmaker,
                path=Path(args.path),
                corpus=args.corpus,
                chunk_chars=settings.corpus.chunk_chars,
                progress=progress if mode != "none" else None,
                max_file_bytes=settings.corpus.max_file_bytes,
                max_documents=settings.corpus.max_documents_per_file,
            )
        made = await _embed_passages(rt, settings, args.corpus, quiet=mode == "none")
    for error in report.errors:
        _err(error)
    summary = report.as_dict() | {"vectors": made}
    if args.json:
        print(json.dumps({"corpus": args.corpus, **summary}))
    else:
        print(
            f"corpus {args.corpus}: {report.files} file(s), {report.added} added, {report.updated} updated, "
            f"{report.unchanged} unchanged, {len(report.errors)} failed"
        )
    return EXIT_FAILED if report.errors else 0


async def _embed_passages(rt: Any, settings: Settings, corpus: str, *, quiet: bool = False) -> int:
    """Passage vectors for hybrid retrieval, made now rather than at the corpus's first search (about 140
    passages/s embedded; the default corpus's are shipped, ``semantic.shipped``); progress on stderr. 0 when the
    semantic model is off or missing."""
    from veracity.semantic.model import process_semantics
    from veracity.semantic.vectors import ensure_vectors

    model = process_semantics(settings.semantic.enabled).model
    if model is None:
        return 0
    done = 0

    def step(count: int) -> None:
        nonlocal done
        done += count
        if not quiet:
            print(f"corpus {corpus}: {done} passage vectors stored for hybrid retrieval", file=sys.stderr)

    return await ensure_vectors(sessionmaker=rt.sessionmaker, model=model, corpus=corpus, progress=step)


async def _load_default(_args: argparse.Namespace, settings: Settings) -> int:
    from veracity.corpus.wiki import ensure_wiki_corpus
    from veracity.semantic.model import process_semantics

    async with _runtime(settings) as rt:
        report = await ensure_wiki_corpus(sessionmaker=rt.sessionmaker, chunk_chars=settings.corpus.chunk_chars)
        if report is None:
            print("corpus wiki: already loaded")
        else:
            print(f"corpus wiki: {report.added} documents loaded")
        made = await _embed_passages(rt, settings, "wiki")
        if process_semantics(settings.semantic.enabled).model is not None:
            print(f"corpus wiki: passage vectors {'made for ' + str(made) + ' passages' if made else 'ready'}")
    return 0


async def _migrate(_args: argparse.Namespace, settings: Settings) -> int:
    async with _runtime(settings):
        pass
    print("database is at the latest migration")
    return 0


def _search_hits(hits: Sequence[Any]) -> list[dict[str, Any]]:
    """One hit per document (its best passage), best first."""
    out: dict[str, dict[str, Any]] = {}
    for h in hits:
        if h.doc_id not in out:
            out[h.doc_id] = {"doc_id": h.doc_id, "title": h.title, "score": round(h.score, 6), "text": h.text}
    return list(out.values())


async def _search(args: argparse.Namespace, settings: Settings) -> int:
    from veracity.db.corpus_repo import corpus_counts
    from veracity.search.providers import local_search

    if args.query is None and args.queries is None:
        raise BadInput("give a QUERY or --queries FILE.jsonl")
    # Every query checked before the runtime starts, and before any is answered.
    queries = _query_lines(args.queries) if args.queries else []
    if args.query is not None:
        check_text(args.query, what="The search query")
    async with _runtime(settings) as rt:
        async with rt.sessionmaker() as session:
            counts = await corpus_counts(session=session)
            if args.corpus not in counts:
                raise BadInput(
                    messages.CORPUS_UNKNOWN.format(corpus=args.corpus, known=", ".join(sorted(counts)) or "none")
                )

            # The same search a run uses (the in-memory index, or FTS5 / full text for very large corpora).
            local = local_search(settings, rt.sessionmaker)

            async def run(query: str) -> list[dict[str, Any]]:
                # Over-fetch passages so that k distinct documents survive the per-document collapse.
                hits = await local.chunks(query=query, corpus=args.corpus, k=args.k * 3)
                return _search_hits(hits)[: args.k]

            if args.queries:
                for qid, query in queries:
                    print(json.dumps({"id": qid, "hits": await run(query)}))
                return 0
            if not args.query.strip():
                raise BadInput(messages.SEARCH_QUERY_EMPTY)
            hits = await run(args.query)
    if args.json:
        print(json.dumps({"query": args.query, "hits": hits}))
    else:
        for i, hit in enumerate(hits, 1):
            print(f"{i:>2}. {hit['title'] or hit['doc_id']}  ({hit['score']:.3f})\n    {hit['text'][:160]}")
    return 0


def _query_lines(path: str) -> list[tuple[Any, str]]:
    """(id, query) of every line of a ``--queries`` file, all checked before any is answered."""
    lines, source = _read_lines(path)
    out: list[tuple[Any, str]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = loads_json(line)
            qid, query = item["id"], str(item["query"])
        except (ValueError, KeyError, TypeError):
            raise BadInput(messages.QUERIES_FILE_BAD_LINE.format(path=source, line=number)) from None
        if unstorable(query):
            reason = f"query: cannot be searched: it holds {unstorable(query)}"
            raise BadInput(messages.JSONL_BAD_LINE.format(path=source, line=number, reason=reason))
        out.append((qid, query))
    return out


async def _result(rt: Runtime, run_id: str) -> tuple[Any, str | None]:
    """A finished run's artifact, or why there is none: its ``error`` event (a loop abort's detail, not just its
    code), else the run row's error."""
    from veracity.db import runs_repo

    async with rt.sessionmaker() as session:
        artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
        if artifact is not None:
            return artifact, None
        run = await runs_repo.get_run(session=session, run_id=run_id)
        from veracity.runs.reducer import failure_text, reduce_events

        view = reduce_events(run_id, await runs_repo.events_after(session=session, run_id=run_id))
    if view.error:
        return None, failure_text(view.error, view.error_detail)
    return None, run.error if run is not None and run.error else "the run produced no report"


async def _ask(args: argparse.Namespace, settings: Settings) -> int:
    if (args.question is None) == (args.questions is None):
        raise BadInput("give a QUESTION or --questions FILE.jsonl")
    if args.questions is not None:
        return await _ask_batch(args, settings)
    mode = resolve_mode(args.progress, sys.stderr)
    async with _runtime(settings) as rt:
        service = rt.service
        run_id = await service.start(question=args.question, template=args.template, corpus=args.corpus)
        # Progress goes to stderr only: stdout stays exactly the report, so it can be piped.
        with AskProgress(mode, stream=sys.stderr) as progress:
            progress.started(run_id)
            async for event in service.tail(run_id):
                progress.event(event.seq, event.name, event.payload, event.created_at)
            await service.wait(run_id)
        artifact, failure = await _result(rt, run_id)
    if artifact is None:
        _err(failure or "the run produced no report")
        return EXIT_FAILED
    if args.json:
        print(json.dumps(artifact.report))
    else:
        print(artifact.markdown)
    return 0


# ---- veracity ask --questions ----------------------------------------------------------------------

BATCH_CONCURRENCY = 1
"""Questions of one batch researched at a time. Measured in one process on 60 wiki questions (2 cores), two at a
time was no faster than one (247 against 251 ms a question, within the noise): the runs share the GIL and one
SQLite writer. One at a time keeps stderr's progress lines in input order too."""


class AskLine(BaseModel):
    """One line of ``veracity ask --questions``; template and corpus default to the command's options."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=200)
    question: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    template: str | None = None
    corpus: str | None = None


def _ask_lines(path: str) -> list[AskLine]:
    """Every line validated before any question is asked; one bad line (or a repeated id) rejects the file."""
    from veracity.guards.io import parse_lines

    lines, source = _read_lines(path)
    items: list[AskLine] = parse_lines(lines, AskLine, source)
    numbers = [n for n, line in enumerate(lines, start=1) if line.strip()]  # parse_lines skips blank lines
    first: dict[str, int] = {}
    for number, item in zip(numbers, items, strict=True):
        if item.id in first:
            reason = f"id: {item.id!r} repeats line {first[item.id]}"
            raise BadInput(messages.JSONL_BAD_LINE.format(path=source, line=number, reason=reason))
        first[item.id] = number
    return items


class _BatchProgress(_Progress):
    """A batch on stderr: a bar over the questions (the outcomes counted), or one plain line per answered
    question: ``[ 3/60] q3: shipped (412 ms)``, ``[ 4/60] q4: failed: MESSAGE (12 ms)``."""

    def __init__(self, mode: Mode, *, stream: TextIO, total: int) -> None:
        self.display = Display(mode, stream=stream, colour=wants_colour(), label="ask", unit="questions")
        self.total = total
        self.done = 0
        self.counts: Counter[str] = Counter()

    def description(self, ending: str | None = None) -> str:
        counts = ", ".join(f"{outcome} {n}" for outcome, n in sorted(self.counts.items()))
        return f"{ending}: {counts}" if ending else counts

    def answered(self, line: dict[str, Any], ms: float) -> None:
        """One question's output line is ready (after ``ms`` of research)."""
        self.done += 1
        error = line.get("error")
        self.counts["failed" if error else str(line.get("outcome"))] += 1
        qid = str(line["id"])
        shown = qid if qid.isprintable() and not any(c.isspace() or c in "\"':" for c in qid) else json.dumps(qid)
        where = f"[{self.done:>{len(str(self.total))}}/{self.total}] {shown}"
        if error:
            self.display.line(f"{where}: failed: {error['message']} ({ms:.0f} ms)", failure=True)
        elif self.display.mode == "plain":
            self.display.line(f"{where}: {line.get('outcome')} ({ms:.0f} ms)")
        self.display.show(self.done, self.description())


async def _answer(rt: Runtime, service: Any, item: AskLine, *, template: str, corpus: str | None) -> dict[str, Any]:
    """One question of a batch: ``{"id", **report}``, or ``{"id", "error"}`` when it is refused or its run fails."""
    try:
        run_id = await service.start(
            question=item.question, template=item.template or template, corpus=item.corpus or corpus
        )
    except VeracityError as exc:  # refused at run time (an unknown corpus or template, too long): the batch goes on
        return {"id": item.id, "error": {"code": exc.code, "message": exc.message}}
    # Not tailed: following every event costs a batch about a third of its time, and only the batch's progress
    # is shown.
    await service.wait(run_id)
    artifact, failure = await _result(rt, run_id)
    if artifact is None:
        return {"id": item.id, "run_id": run_id, "error": {"code": "run_failed", "message": failure}}
    return {"id": item.id, **artifact.report}


async def _ask_batch(args: argparse.Namespace, settings: Settings) -> int:
    """Every question in one runtime and one service (one in-memory index, models loaded once); one JSON line per
    question on stdout, in input order."""
    items = _ask_lines(args.questions)
    if not items:
        return 0
    failed = 0
    async with _runtime(settings) as rt:
        service = rt.service
        slots = asyncio.Semaphore(BATCH_CONCURRENCY)
        with _BatchProgress(resolve_mode(args.progress, sys.stderr), stream=sys.stderr, total=len(items)) as progress:

            async def answer(item: AskLine) -> dict[str, Any]:
                async with slots:
                    started = time.perf_counter()
                    line = await _answer(rt, service, item, template=args.template, corpus=args.corpus)
                    progress.answered(line, (time.perf_counter() - started) * 1000)
                    return line

            progress.display.open_bar(len(items))
            tasks = [asyncio.create_task(answer(item)) for item in items]
            try:
                for task in tasks:  # in input order, each printed once it and those before it are done
                    line = await task
                    failed += "error" in line
                    print(json.dumps(line), flush=True)
            finally:
                for task in tasks:
                    task.cancel()
    if failed:
        _err(f"{failed} of {len(items)} question(s) failed")
    return EXIT_FAILED if failed else 0


def _read_lines(path: str) -> tuple[list[str], str]:
    """The lines of a JSONL input file (``-``: standard input), or ``BadInput`` saying why it cannot be read."""
    if path == "-":
        binary = getattr(sys.stdin, "buffer", None)  # bytes, to say so when they are not UTF-8 (a StringIO has none)
        raw = binary.read() if binary is not None else sys.stdin.read().encode("utf-8", "surrogateescape")
        source = "<stdin>"
    else:
        file = Path(path)
        source = str(file)
        if not file.is_file():
            raise BadInput(messages.INGEST_PATH_MISSING.format(path=path))
        try:
            raw = file.read_bytes()
        except OSError as exc:
            raise BadInput(messages.FILE_UNREADABLE.format(path=path, reason=exc.strerror)) from exc
    try:
        return raw.decode("utf-8-sig").splitlines(), source
    except UnicodeDecodeError as exc:
        reason = f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise BadInput(messages.FILE_UNREADABLE.format(path=source, reason=reason)) from None


async def _verify(args: argparse.Namespace, settings: Settings) -> int:
    from veracity.errors import MalformedOutput, ModelError, PipelineError
    from veracity.guards.io import VerifyItem, parse_lines, verify_items
    from veracity.guards.judge import make_judge
    from veracity.runs.model_set import build_models
    from veracity.semantic.model import process_semantics

    lines, source = _read_lines(args.file)
    items = parse_lines(lines, VerifyItem, source)
    models = build_models(settings)
    try:
        judge = models.judge or make_judge(process_semantics(settings.semantic.enabled))
        results = await verify_items(items, judge)
    except (MalformedOutput, ModelError) as exc:
        raise PipelineError(f"the grounding judge failed: {exc}") from exc
    finally:
        await models.aclose()
    for result in results:
        if args.json:
            print(json.dumps(result))
            continue
        print(f"{result['id']}\t{result['label']}\t{result['score']:.2f}\t{result['reason']}")
        if len(result["claims"]) > 1:
            for claim in result["claims"]:
                print(f"    {claim['label']}\t{claim['score']:.2f}\t{claim['text'][:100]}")
    return 0


async def _screen(args: argparse.Namespace, settings: Settings) -> int:
    from veracity.guards.io import ScreenItem, parse_lines, screen_items
    from veracity.guards.screen_model import process_screen
    from veracity.semantic.model import process_semantics
    from veracity.specs.policy import all_packs_policy
    from veracity.specs.registry import SpecRegistry

    policy = SpecRegistry.load().get(args.template).policy if args.template else all_packs_policy()
    lines, source = _read_lines(args.file)
    items = parse_lines(lines, ScreenItem, source)
    screener = process_screen(process_semantics(settings.semantic.enabled).model, settings.semantic.screen_reader)
    for result in screen_items(items, policy, screener):
        if args.json:
            print(json.dumps(result))
            continue
        print(f"{result['id']}\t{result['route']}\t{result['reason']}")
        if result["probabilities"]:
            print("    p: " + ", ".join(f"{k} {v:.2f}" for k, v in result["probabilities"].items()))
        if result["matched"]:
            print("    matched: " + "; ".join(result["matched"][:6]))
        for example in result["nearest"]:
            print(f"    nearest ({example['label']}, {example['similarity']:.2f}): {example['text'][:100]}")
    return 0


async def _eval(args: argparse.Namespace, settings: Settings) -> int:
    from veracity.evals.cases import format_results, run_eval_cases

    results = await run_eval_cases(settings=settings, spec_id=args.spec)
    print(format_results(results))
    return 0 if all(r.passed for r in results) else EXIT_FAILED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="veracity", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="serve the web app and API")
    p.add_argument("--host")
    p.add_argument("--port", type=int)

    sub.add_parser("worker", help="execute queued runs (PostgreSQL; same settings as serve) until SIGTERM or Ctrl-C")

    p = sub.add_parser("ingest", help="ingest files or folders (.md .txt .html .pdf .jsonl) into a corpus")
    p.add_argument("path")
    p.add_argument("--corpus", default="local")
    p.add_argument("--json", action="store_true")
    _progress_option(p)

    sub.add_parser("load-default-corpus", help="load the bundled Wikipedia lead sections when the wiki corpus is empty")
    sub.add_parser("migrate", help="bring the database to the latest migration")

    p = sub.add_parser("search", help="search a corpus")
    p.add_argument("query", nargs="?")
    p.add_argument("--corpus", default=None)
    p.add_argument("-k", type=_count, default=10, help="documents to show (1-1000)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--queries", help='JSONL file of {"id", "query"}; one output line each')

    p = sub.add_parser(
        "verify", help="ground claims in sources, sentence by sentence: supported / partial / unsupported per line"
    )
    p.add_argument("file", help='JSONL, each line {"id", "claim", "sources": [{"id", "text"}]}; - for stdin')
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("screen", help="route messages: proceed / escalate / crisis per line")
    p.add_argument("file", help='JSONL, each line {"id", "text"}; - for stdin')
    p.add_argument("--template", default=None, help="apply this template's policy (default: every policy pack)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("eval", help="run the templates' frozen eval cases; non-zero exit on regression")
    p.add_argument("--spec", default=None, help="only this template's cases")

    p = sub.add_parser("ask", help="research a question and print the report")
    p.add_argument("question", nargs="?")
    p.add_argument(
        "--questions",
        metavar="FILE.jsonl",
        help='JSONL of {"id", "question"} (optional "template", "corpus"); - for stdin; one JSON line each, '
        "in order, all in one process",
    )
    p.add_argument("--template", default="answer")
    p.add_argument(
        "--corpus",
        default=None,
        help="a local corpus, or `web` to search the open web and fetch pages (default: the template's)",
    )
    p.add_argument("--json", action="store_true")
    _progress_option(p)
    from veracity.cli_accounts import add_parsers

    add_parsers(sub)
    return parser


def _count(value: str) -> int:
    """``-k``: a whole number of ASCII digits from 1 to 1000."""
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= 1000:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 1000, got {value!r}")
    return int(value)


def _progress_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--progress",
        choices=CHOICES,
        default="auto",
        help="progress on stderr: a bar, one plain line per step, or none "
        "(default auto: a bar when stderr is a terminal and TERM is not dumb, else plain lines)",
    )


COMMANDS = {
    "verify": _verify,
    "screen": _screen,
    "eval": _eval,
    "ingest": _ingest,
    "load-default-corpus": _load_default,
    "migrate": _migrate,
    "search": _search,
    "ask": _ask,
    "worker": _worker,
    "user": _accounts,
    "token": _accounts,
    "security-log": _accounts,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = get_settings()
    except ValueError as exc:
        _err(f"invalid settings: {exc}")
        return EXIT_BAD_INPUT
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command not in ("serve", "worker"):
        logging.getLogger().setLevel(max(logging.WARNING, logging.getLogger().level))
    if args.command == "search" and args.corpus is None:
        args.corpus = settings.corpus.default
    if args.command == "serve":
        return cmd_serve(args, settings)
    try:
        return asyncio.run(COMMANDS[args.command](args, settings))
    except VeracityError as exc:
        _err(exc.message)
        return EXIT_BAD_INPUT if isinstance(exc, BadInput) else EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # The edge of last resort, as the web's ServerErrors is: one line, not a traceback; DEBUG shows where.
        if settings.log_level == "DEBUG":
            raise
        error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        _err(messages.UNEXPECTED_CLI_FAILURE.format(error=error))
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
