"""The ``veracity`` command line. Errors go to stderr with a non-zero exit; ``--json`` output to stdout."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from veracity import messages
from veracity.errors import BadInput, VeracityError
from veracity.settings import Settings, get_settings

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1


def _err(message: str) -> None:
    print(f"veracity: {message}", file=sys.stderr)


class _Runtime:
    """Engine, migrations and the run service for one CLI invocation."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.models: Any = None
        self._service: Any = None

    async def __aenter__(self) -> _Runtime:
        from veracity.corpus.bundled import ensure_bundled_corpora
        from veracity.db.engine import make_engine, make_sessionmaker
        from veracity.db.migrate import upgrade

        await asyncio.to_thread(upgrade, self.settings.database.url)
        self.engine = make_engine(self.settings.database.url)
        self.sessionmaker = make_sessionmaker(self.engine)
        await ensure_bundled_corpora(sessionmaker=self.sessionmaker, chunk_chars=self.settings.corpus.chunk_chars)
        return self

    async def __aexit__(self, *_exc: object) -> None:
        if self._service is not None:
            await self._service.stop_upkeep()
        if self.models is not None:
            await self.models.aclose()
        await self.engine.dispose()

    def service(self) -> Any:
        from veracity.models.providers import build_models
        from veracity.runs.service import RunService

        self.models = build_models(self.settings)
        self._service = RunService.from_settings(self.settings, self.sessionmaker, self.models)
        return self._service


# ---- commands --------------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from veracity.web.app import create_app

    host = args.host or settings.server.host
    port = args.port or settings.server.port
    print(f"Veracity is serving on http://{host}:{port}/", flush=True)
    uvicorn.run(create_app(settings), host=host, port=port, log_level=settings.log_level.lower())
    return 0


async def _ingest(args: argparse.Namespace, settings: Settings) -> int:
    from veracity.corpus.ingest import ingest_path
    from veracity.progress import IngestProgress, resolve_mode

    mode = resolve_mode(args.progress, sys.stderr)
    async with _Runtime(settings) as rt:
        with IngestProgress(mode, stream=sys.stderr) as progress:
            report = await ingest_path(
                sessionmaker=rt.sessionmaker,
                path=Path(args.path),
                corpus=args.corpus,
                chunk_chars=settings.corpus.chunk_chars,
                progress=progress if mode != "none" else None,
            )
    for error in report.errors:
        _err(error)
    summary = report.as_dict()
    if args.json:
        print(json.dumps({"corpus": args.corpus, **summary}))
    else:
        print(
            f"corpus {args.corpus}: {report.files} file(s), {report.added} added, {report.updated} updated, "
            f"{report.unchanged} unchanged, {len(report.errors)} failed"
        )
    return EXIT_FAILED if report.errors else 0


async def _load_default(_args: argparse.Namespace, settings: Settings) -> int:
    from veracity.corpus.wiki import ensure_wiki_corpus

    async with _Runtime(settings) as rt:
        report = await ensure_wiki_corpus(sessionmaker=rt.sessionmaker, chunk_chars=settings.corpus.chunk_chars)
    if report is None:
        print("corpus wiki: already loaded")
    else:
        print(f"corpus wiki: {report.added} documents loaded")
    return 0


async def _migrate(_args: argparse.Namespace, settings: Settings) -> int:
    async with _Runtime(settings):
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
    async with _Runtime(settings) as rt:
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
                for number, line in enumerate(Path(args.queries).read_text(encoding="utf-8").splitlines(), 1):
                    if not line.strip():
                        continue
                    try:
                        item = json.loads(line)
                        qid, query = item["id"], item["query"]
                    except (json.JSONDecodeError, KeyError, TypeError):
                        raise BadInput(messages.QUERIES_FILE_BAD_LINE.format(path=args.queries, line=number)) from None
                    print(json.dumps({"id": qid, "hits": await run(str(query))}))
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


async def _ask(args: argparse.Namespace, settings: Settings) -> int:
    from veracity.db import runs_repo
    from veracity.progress import AskProgress, resolve_mode

    mode = resolve_mode(args.progress, sys.stderr)
    async with _Runtime(settings) as rt:
        service = rt.service()
        run_id = await service.start(question=args.question, template=args.template, corpus=args.corpus)
        # Progress goes to stderr only: stdout stays exactly the report, so it can be piped.
        with AskProgress(mode, stream=sys.stderr) as progress:
            progress.started(run_id)
            async for event in service.tail(run_id):
                progress.event(event.seq, event.name, event.payload)
            await service.wait(run_id)
        async with rt.sessionmaker() as session:
            run = await runs_repo.get_run(session=session, run_id=run_id)
            artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
    if artifact is None:
        # The error event says what happened (a loop abort's detail, not just its code); the run row, the code.
        _err(progress.failure or (run.error if run is not None and run.error else "the run produced no report"))
        return EXIT_FAILED
    if args.json:
        print(json.dumps(artifact.report))
    else:
        print(artifact.markdown)
    return 0


def _read_lines(path: str) -> tuple[list[str], str]:
    if path == "-":
        return sys.stdin.read().splitlines(), "<stdin>"
    file = Path(path)
    if not file.is_file():
        raise BadInput(messages.INGEST_PATH_MISSING.format(path=path))
    return file.read_text(encoding="utf-8").splitlines(), str(file)


async def _verify(args: argparse.Namespace, settings: Settings) -> int:
    from veracity.compose.base import MalformedOutput, ModelError
    from veracity.errors import PipelineError
    from veracity.guards.io import VerifyItem, parse_lines, verify_items
    from veracity.guards.judge import make_judge
    from veracity.models.providers import build_models

    lines, source = _read_lines(args.file)
    items = parse_lines(lines, VerifyItem, source)
    models = build_models(settings)
    try:
        results = await verify_items(items, models.judge or make_judge())
    except (MalformedOutput, ModelError) as exc:
        raise PipelineError(f"the grounding judge failed: {exc}") from exc
    finally:
        await models.aclose()
    for result in results:
        if args.json:
            print(json.dumps(result))
        else:
            print(f"{result['id']}\t{result['label']}\t{result['score']:.2f}\t{result['reason']}")
    return 0


async def _screen(args: argparse.Namespace, _settings: Settings) -> int:
    from veracity.guards.io import ScreenItem, parse_lines, screen_items
    from veracity.specs.policy import all_packs_policy
    from veracity.specs.registry import SpecRegistry

    policy = SpecRegistry.load().get(args.template).policy if args.template else all_packs_policy()
    lines, source = _read_lines(args.file)
    items = parse_lines(lines, ScreenItem, source)
    for result in screen_items(items, policy):
        if args.json:
            print(json.dumps(result))
        else:
            print(f"{result['id']}\t{result['route']}\t{result['reason']}")
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
    p.add_argument("-k", type=int, default=10)
    p.add_argument("--json", action="store_true")
    p.add_argument("--queries", help='JSONL file of {"id", "query"}; one output line each')

    p = sub.add_parser("verify", help="ground claims in sources: supported / partial / unsupported per line")
    p.add_argument("file", help='JSONL, each line {"id", "claim", "sources": [{"id", "text"}]}; - for stdin')
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("screen", help="route messages: proceed / escalate / crisis per line")
    p.add_argument("file", help='JSONL, each line {"id", "text"}; - for stdin')
    p.add_argument("--template", default=None, help="apply this template's policy (default: every policy pack)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("eval", help="run the templates' frozen eval cases; non-zero exit on regression")
    p.add_argument("--spec", default=None, help="only this template's cases")

    p = sub.add_parser("ask", help="research a question and print the report")
    p.add_argument("question")
    p.add_argument("--template", default="market_brief")
    p.add_argument(
        "--corpus",
        default=None,
        help="a local corpus, or `web` to search the open web and fetch pages (default: the template's)",
    )
    p.add_argument("--json", action="store_true")
    _progress_option(p)
    return parser


def _progress_option(p: argparse.ArgumentParser) -> None:
    from veracity.progress import CHOICES

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
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = get_settings()
    except ValueError as exc:
        _err(f"invalid settings: {exc}")
        return EXIT_BAD_INPUT
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command != "serve":
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


if __name__ == "__main__":
    sys.exit(main())
