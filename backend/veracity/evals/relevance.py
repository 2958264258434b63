"""``make eval-relevance``: end-to-end answering measured on HotpotQA (or any set of the same shape).

Every question goes through the real pipeline (``RunService`` built as the CLI builds it, over a corpus ingested
into ``./data/eval-relevance.db``) once per template, and the stored report is scored:

- claim precision: distinct claims of shipped reports citing evidence from a gold paragraph (any of its anchors'
  ``doc_id`` in ``supporting_doc_ids``) / distinct claims of shipped reports. A summary section repeats other
  sections' claims; a repeated claim (same text, same anchors) is counted once per report.
- answer recall: questions where a gold answer (SQuAD normalisation) occurs, as whole words, inside a shipped
  claim / questions with a gold answer.
- decline when the answer is absent: the same questions run again with their gold paragraphs hidden from search
  (``HiddenDocs``); a run declines when it does not ship or ships no claim. Declined / questions.
- run time per run (median, p90 by nearest rank), outcome counts, wall time.

The split: a question is in ``fit`` when ``int(sha256(id), 16)`` is even, else in ``report``. Reported figures
use the first N ``report`` questions in file order; ``fit`` is kept for fitting thresholds elsewhere.
Usage: ``python -m veracity.evals.relevance [DATA_DIR|SET_DIR] [--n 60] [--templates answer,market_brief]
[--split report|fit|all] [--questions-file F --corpus-file F --qrels F]``; exit 2 when the data is missing, else 0
(a measurement, not a gate).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import math
import re
import statistics
import string
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from veracity.corpus.readers import read_file
from veracity.db import runs_repo
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.migrate import upgrade
from veracity.domain import Report
from veracity.evals.retrieval import ensure_corpus, read_qrels
from veracity.ports import SearchHit, SearchProvider
from veracity.runs.model_set import build_models
from veracity.runs.service import RunService
from veracity.settings import Settings, get_settings

DEFAULT_DATA = Path("../shared/eval-data")
DEFAULT_SET = "qa_hotpotqa"
DEFAULT_DB = "sqlite+aiosqlite:///./data/eval-relevance.db"
DEFAULT_OUT = Path("data/eval-relevance.json")
DEFAULT_TEMPLATES = ("answer", "market_brief")
SPLITS = ("report", "fit", "all")
SPLIT_RULE = "fit when int(sha256(id), 16) % 2 == 0, else report"


def split_of(question_id: str) -> str:
    """``fit`` (thresholds are fitted on these) or ``report`` (figures are reported on these), fixed by the id."""
    return "fit" if int(hashlib.sha256(question_id.encode("utf-8")).hexdigest(), 16) % 2 == 0 else "report"


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, punctuation removed, articles removed, whitespace collapsed."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def contains_answer(text: str, answers: tuple[str, ...]) -> bool:
    """Whether a normalised answer occurs in the normalised ``text`` as whole words ("no" is not in "not")."""
    padded = f" {normalize_answer(text)} "
    return any(f" {a} " in padded for a in map(normalize_answer, answers) if a)


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answers: tuple[str, ...]
    gold: frozenset[str]


@dataclass(frozen=True)
class QASet:
    corpus: str
    corpus_file: Path
    questions: list[Question]


def read_questions(path: Path, qrels: dict[str, dict[str, int]] | None = None) -> list[Question]:
    """``{id, question, answers, supporting_doc_ids}`` a line; ``qrels``, when given, are the gold instead."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        qid = str(row.get("id", row.get("_id")))
        if qrels is not None:
            gold = frozenset(d for d, grade in qrels.get(qid, {}).items() if grade > 0)
        else:
            gold = frozenset(str(d) for d in row.get("supporting_doc_ids", []))
        answers = tuple(str(a) for a in row.get("answers", []))
        out.append(Question(qid, str(row.get("question", row.get("text"))), answers, gold))
    return out


def load_set(
    data: Path, *, questions: Path | None, corpus: Path | None, qrels: Path | None, name: str | None = None
) -> QASet:
    """The set under ``data`` (a set folder, or the eval-data folder holding ``qa_hotpotqa``), any file given
    explicitly taking precedence; its corpus is ``name``, else the set folder's name without ``qa_``. Raises
    FileNotFoundError naming what is missing."""
    folder = data if (data / "questions.jsonl").is_file() else data / DEFAULT_SET
    questions = questions or folder / "questions.jsonl"
    corpus = corpus or folder / "corpus.jsonl"
    if missing := [str(p) for p in (questions, corpus, qrels) if p is not None and not p.is_file()]:
        raise FileNotFoundError(", ".join(missing))
    name = name or re.sub(r"[^A-Za-z0-9_-]", "_", corpus.resolve().parent.name.removeprefix("qa_"))[:64] or "qa"
    return QASet(name, corpus, read_questions(questions, read_qrels(qrels) if qrels else None))


NOTES_SET = Path("data/eval-notes")


def notes_set(folder: Path, questions: Path, out: Path = NOTES_SET) -> Path:
    """The project's written notes (``training/relevance/notes``) and their hand-labelled questions as a set of
    this shape in ``out``: one document per file, titled as an upload titles it (``read_file``), the answerable
    questions with their answer lines as ``answers`` and their document as the gold (hidden for the decline). Only
    ``relevance_fit --notes … --notes-questions …`` reads them: the shipped sentence model was not fitted on them, the
    question-level judgement (``answered``) was, so its figures here are development figures (see README)."""
    out.mkdir(parents=True, exist_ok=True)
    docs = [doc for path in sorted(p for p in folder.iterdir() if p.is_file()) for doc in read_file(path, path.name)]
    lines = [json.dumps({"_id": d.doc_id, "title": d.title, "text": d.text}, ensure_ascii=False) for d in docs]
    (out / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    asked = [json.loads(line) for line in questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [
        {"id": q["id"], "question": q["question"], "answers": q["answers"], "supporting_doc_ids": [q["doc"]]}
        for q in asked
        if q["answers"]
    ]
    (out / "questions.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return out


def select(questions: list[Question], split: str, n: int) -> list[Question]:
    return [q for q in questions if split == "all" or split_of(q.id) == split][:n]


class HiddenDocs:
    """A search provider that never returns passages of the ``hidden`` documents: it asks the wrapped provider
    for ``k`` + as many hits as there are hidden documents (more while hidden passages still crowd the top) and
    drops those. Anything else (corpus statistics, say) is the wrapped provider's, unchanged: attributes this
    class does not define are read from it, so the pipeline sees the same capabilities either way."""

    def __init__(self, inner: SearchProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.hidden: frozenset[str] = frozenset()
        """Set before each run; runs are executed one at a time."""

    def __getattr__(self, attribute: str) -> Any:
        if attribute == "inner":  # not set yet (a copy being made): no recursion
            raise AttributeError(attribute)
        return getattr(self.inner, attribute)

    async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]:
        if not self.hidden:
            return await self.inner.search(query=query, corpus=corpus, k=k)
        extra = len(self.hidden)
        while True:
            hits = await self.inner.search(query=query, corpus=corpus, k=k + extra)
            kept = [h for h in hits if h.doc_id not in self.hidden]
            if len(kept) >= k or len(hits) < k + extra:
                return kept[:k]
            extra *= 2


@dataclass
class RunResult:
    question_id: str
    run_id: str
    outcome: str
    ms: float
    claims: int = 0
    """Distinct claims shipped (0 unless the outcome is ``shipped``)."""
    gold_claims: int = 0
    answer_found: bool = False
    answer_closest: bool = False
    """Nothing shipped, and a gold answer is in one of the closest passages the fallback shows."""


def score_report(report: Report | None, question: Question) -> tuple[int, int, bool]:
    """(distinct shipped claims, those citing a gold paragraph, whether a gold answer is inside one)."""
    if report is None or report.outcome != "shipped":
        return 0, 0, False
    doc_of = {e.id: e.doc_id for e in report.evidence}
    claims = {(c.text, tuple(c.evidence_ids)) for s in report.sections for c in s.claims}
    gold = sum(1 for _, ids in claims if any(doc_of.get(i) in question.gold for i in ids))
    found = any(contains_answer(text, question.answers) for text, _ in claims)
    return len(claims), gold, found


def closest_answer(report: Report | None, question: Question) -> bool:
    """A fallback with nothing relevant shows its closest passages: is a gold answer in one of them?"""
    if report is None or report.outcome != "fallback":
        return False
    return any(
        contains_answer(c.text, question.answers) for s in report.sections if s.closest_passages for c in s.claims
    )


async def run_question(service: RunService, question: Question, *, template: str, corpus: str) -> RunResult:
    started = time.perf_counter()
    run_id = await service.start(question=question.question, template=template, corpus=corpus)
    await service.wait(run_id)
    ms = (time.perf_counter() - started) * 1000
    async with service.sessionmaker() as session:
        run = await runs_repo.get_run(session=session, run_id=run_id)
        artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
    report = Report.model_validate(artifact.report) if artifact is not None else None
    outcome = (run.outcome if run is not None else None) or "failed"
    claims, gold, found = score_report(report, question)
    return RunResult(question.id, run_id, outcome, round(ms, 1), claims, gold, found, closest_answer(report, question))


def p90(values: list[float]) -> float:
    """Nearest-rank 90th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)] if ordered else 0.0


def ratio(part: int, whole: int) -> dict[str, Any]:
    return {"count": part, "of": whole, "rate": round(part / whole, 4) if whole else None}


def summarize(questions: list[Question], normal: list[RunResult], hidden: list[RunResult]) -> dict[str, Any]:
    """The template's figures from its runs with the gold visible (``normal``) and hidden (``hidden``)."""
    answerable = {q.id for q in questions if any(normalize_answer(a) for a in q.answers)}
    declined = sum(1 for r in hidden if r.outcome != "shipped" or r.claims == 0)
    recalled = sum(1 for r in normal if r.answer_found and r.question_id in answerable)
    closest = sum(1 for r in normal if r.answer_closest and r.question_id in answerable)
    ms = [r.ms for r in normal + hidden]
    return {
        "questions": len(questions),
        "claim_precision": ratio(sum(r.gold_claims for r in normal), sum(r.claims for r in normal)),
        "answer_recall": ratio(recalled, len(answerable)),
        "answer_in_closest": ratio(closest, len(answerable)),
        "decline_when_absent": ratio(declined, len(hidden)),
        "outcomes": dict(Counter(r.outcome for r in normal).most_common()),
        "outcomes_gold_hidden": dict(Counter(r.outcome for r in hidden).most_common()),
        "run_ms": {"median": statistics.median(ms) if ms else 0.0, "p90": p90(ms), "runs": len(ms)},
    }


@dataclass
class Measured:
    summary: dict[str, Any] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)


async def measure(
    service: RunService, search: HiddenDocs, questions: list[Question], *, template: str, corpus: str
) -> Measured:
    started = time.perf_counter()
    normal, hidden = [], []
    for question in questions:
        search.hidden = frozenset()
        normal.append(await run_question(service, question, template=template, corpus=corpus))
        search.hidden = question.gold
        hidden.append(await run_question(service, question, template=template, corpus=corpus))
    search.hidden = frozenset()
    summary = summarize(questions, normal, hidden) | {"wall_seconds": round(time.perf_counter() - started, 1)}
    rows = [asdict(n) | {"hidden": asdict(h)} for n, h in zip(normal, hidden, strict=True)]
    return Measured(summary, rows)


def _fraction(r: dict[str, Any]) -> str:
    return (
        f"{r['count']:>5}/{r['of']:<5} {r['rate']:.3f}" if r["rate"] is not None else f"{r['count']:>5}/{r['of']:<5} —"
    )


def format_template(template: str, s: dict[str, Any] | None) -> str:
    if s is None:
        return f"{template}: not available (no such template in the registry)"
    counts = ", ".join(f"{k} {v}" for k, v in s["outcomes"].items())
    hidden = ", ".join(f"{k} {v}" for k, v in s["outcomes_gold_hidden"].items())
    ms = s["run_ms"]
    return "\n".join(
        [
            f"{template} ({s['questions']} questions)",
            f"  claim precision           {_fraction(s['claim_precision'])}  shipped claims citing a gold paragraph",
            f"  answer recall             {_fraction(s['answer_recall'])}  gold answer inside a shipped claim",
            f"  answer in closest shown   {_fraction(s['answer_in_closest'])}  not shipped; a gold answer among the "
            "closest passages the fallback shows",
            f"  decline when absent       {_fraction(s['decline_when_absent'])}  gold hidden: not shipped or no claim",
            f"  outcomes                  {counts}",
            f"  outcomes, gold hidden     {hidden}",
            f"  run ms                    median {ms['median']:.0f}, p90 {ms['p90']:.0f} ({ms['runs']} runs)",
            f"  wall                      {s['wall_seconds']:.1f} s",
        ]
    )


def eval_settings(db_url: str) -> Settings:
    """The process's settings (as the CLI reads them) on the eval's own database, with no demo pause."""
    settings = get_settings()
    return settings.model_copy(
        update={
            "database": settings.database.model_copy(update={"url": db_url}),
            "limits": settings.limits.model_copy(update={"event_delay_ms": 0}),
        }
    )


async def evaluate(qa: QASet, questions: list[Question], *, templates: list[str], settings: Settings) -> dict[str, Any]:
    """Ingest the corpus (unless there), build the run service as the CLI does, measure every template."""
    db_url = settings.database.url
    await asyncio.to_thread(upgrade, db_url)
    engine = make_engine(db_url)
    sessionmaker = make_sessionmaker(engine)
    models = build_models(settings)
    service = RunService.from_settings(settings, sessionmaker, models)
    search = service.search = HiddenDocs(service.search)
    out: dict[str, Any] = {"templates": {}, "runs": {}}
    try:
        seconds = await ensure_corpus(
            sessionmaker=sessionmaker, corpus=qa.corpus, path=qa.corpus_file, chunk_chars=settings.corpus.chunk_chars
        )
        out["ingest_seconds"] = round(seconds, 1)
        if questions and (available := [t for t in templates if t in service.registry.ids()]):
            # The first run builds the corpus's in-memory index and loads lazy parts (language detection...): a
            # one-off, not a run's cost. It runs the first question, and is not counted.
            await run_question(service, questions[0], template=available[0], corpus=qa.corpus)
        for template in templates:
            if template not in service.registry.ids():
                out["templates"][template] = None
                continue
            measured = await measure(service, search, questions, template=template, corpus=qa.corpus)
            out["templates"][template], out["runs"][template] = measured.summary, measured.runs
            print(format_template(template, measured.summary), flush=True)
    finally:
        await service.shutdown()
        await models.aclose()
        await engine.dispose()
    return out


async def run(args: argparse.Namespace) -> int:
    if args.notes is not None:
        asked = args.notes.parent / "notes_questions.jsonl"
        if missing := [str(p) for p, ok in ((args.notes, args.notes.is_dir()), (asked, asked.is_file())) if not ok]:
            print(f"eval-relevance: data not found: {', '.join(missing)}", file=sys.stderr)
            return 2
        args.data, args.split = notes_set(args.notes, asked), "all"
        args.corpus_name = args.corpus_name or "notes"
    try:
        qa = load_set(
            args.data, questions=args.questions_file, corpus=args.corpus_file, qrels=args.qrels, name=args.corpus_name
        )
    except FileNotFoundError as exc:
        print(f"eval-relevance: data not found: {exc}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    questions = select(qa.questions, args.split, args.n)
    in_split = len(select(qa.questions, args.split, len(qa.questions)))
    templates = [t.strip() for t in args.templates.split(",") if t.strip()]
    print(f"split {args.split} ({SPLIT_RULE}): {in_split} of {len(qa.questions)} questions, first {len(questions)}")
    print(f"corpus {qa.corpus} ({qa.corpus_file}), database {args.db}")
    if args.split != "report":
        print(f"NOTE: figures on the {args.split} split are not the reported ones")
    results = await evaluate(qa, questions, templates=templates, settings=eval_settings(args.db))
    for template, summary in results["templates"].items():
        if summary is None:
            print(format_template(template, None))
    wall = round(time.perf_counter() - started, 1)
    print(f"wall time {wall:.1f} s (ingest {results['ingest_seconds']:.1f} s)")
    summary = {
        "split": {"name": args.split, "rule": SPLIT_RULE, "questions_in_split": in_split, "measured": len(questions)},
        "corpus": qa.corpus,
        "corpus_file": str(qa.corpus_file),
        "wall_seconds": wall,
        **results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"summary written to {args.out}")
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m veracity.evals.relevance", description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA, help="eval-data folder or a set folder")
    parser.add_argument("--questions-file", type=Path, help="questions.jsonl (id, question, answers, gold ids)")
    parser.add_argument("--corpus-file", type=Path, help="corpus.jsonl, BEIR style (_id, title, text)")
    parser.add_argument("--qrels", type=Path, help="BEIR qrels.tsv: the gold paragraphs, instead of the questions'")
    parser.add_argument("--corpus-name", help="corpus to ingest into (default: the set folder's name, e.g. hotpotqa)")
    parser.add_argument("--n", type=int, default=60, help="questions measured (the first N of the split)")
    parser.add_argument("--templates", default=",".join(DEFAULT_TEMPLATES), help="comma-separated template ids")
    parser.add_argument("--split", choices=SPLITS, default="report", help="which questions (default: report)")
    parser.add_argument("--db", default=DEFAULT_DB, help="database URL (default: ./data/eval-relevance.db)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON summary (default: ./data/...json)")
    parser.add_argument(
        "--notes", type=Path, help="training/relevance/notes: the written notes and their questions (split: all)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
