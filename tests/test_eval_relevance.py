"""``make eval-relevance``: the split, SQuAD answer normalisation, the metrics' arithmetic on hand-made reports, the
hidden-gold search filter, and the whole measurement through the real pipeline on a tiny synthetic set."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from conftest import sqlite_url
from veracity.db import runs_repo
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.domain import Claim, Outcome, Report, ReportEvidence, ReportSection
from veracity.evals.relevance import (
    HiddenDocs,
    Question,
    RunResult,
    contains_answer,
    main,
    normalize_answer,
    parse_args,
    run,
    score_report,
    select,
    split_of,
    summarize,
)
from veracity.ports import SearchHit

# Three questions over ten paragraphs. q1's and q2's words occur in their gold paragraphs only, so with the gold
# hidden nothing is found. q3's gold is the observatory pair, but "Mount Ferro" is also a distractor's title, and
# q3's answer occurs nowhere in the corpus.
PARAGRAPHS = [
    ("z1", "Zorvath", "Zorvath is a walled city in the valley of Pellin. The Quillon River flows through Zorvath."),
    ("z2", "Quillon River", "The Quillon River is a long river rising in the Marbek hills. It was mapped in 1841."),
    ("b1", "Blue-Harbor Company", "The Blue-Harbor Company is a shipbuilder in the port of Caldera since 1902."),
    ("b2", "Ines Marrow", "Ines Marrow was an engineer from Caldera. She founded the Blue-Harbor shipbuilder in 1902."),
    ("t1", "Tollan Observatory", "The Tollan Observatory stands on the summit of Mount Ferro. Its telescope is large."),
    ("t2", "Tollan telescope", "The main telescope of the Tollan Observatory was built in 1930 from a ground mirror."),
    (
        "d1",
        "Mount Ferro",
        "Mount Ferro is a volcanic mountain with an observatory on its summit. Its road dates from 1955.",
    ),
    ("d2", "Gardening", "Gardening is the practice of growing plants for food and beauty. Gardeners keep compost."),
    ("d3", "Bread", "Bread is a staple food baked from a dough of flour and water. Sourdough uses wild yeast."),
    ("d4", "Chess", "Chess is a board game for two players on a checkered board. Each player has sixteen pieces."),
]
QUESTIONS = [
    ("q1", "Which river flows through the walled city of Zorvath?", ["Quillon river."], ["z1", "z2"]),
    ("q2", "Who founded the Blue-Harbor shipbuilder of Caldera?", ["Marrow, Ines", "ines  MARROW!"], ["b1", "b2"]),
    ("q3", "Who built the main telescope of the Tollan Observatory on Mount Ferro?", ["Lens Guild"], ["t1", "t2"]),
]


def write_set(folder: Path) -> Path:
    folder.mkdir()
    corpus = "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in PARAGRAPHS)
    (folder / "corpus.jsonl").write_text(corpus, encoding="utf-8")
    rows = [{"id": i, "question": q, "answers": a, "supporting_doc_ids": g} for i, q, a, g in QUESTIONS]
    (folder / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def test_split_of_is_the_parity_of_the_ids_sha256() -> None:
    ids = [f"id-{n}" for n in range(400)]
    for qid in ids:
        even = int(hashlib.sha256(qid.encode("utf-8")).hexdigest(), 16) % 2 == 0
        assert split_of(qid) == ("fit" if even else "report")
    assert 150 < sum(split_of(q) == "fit" for q in ids) < 250
    # Fixed values: HotpotQA's first question is a fitting one, its second a reported one.
    assert split_of("5a8c7595554299585d9e36b6") == "fit"
    assert split_of("5a85ea095542994775f606a8") == "report"
    questions = [Question(q, q, (), frozenset()) for q in ("5a8c7595554299585d9e36b6", "q1", "q2", "q3")]
    assert [q.id for q in select(questions, "report", 2)] == ["q1", "q2"]
    assert [q.id for q in select(questions, "fit", 5)] == ["5a8c7595554299585d9e36b6"]
    assert len(select(questions, "all", 10)) == 4


def test_answer_normalisation_is_squads_and_matches_whole_words() -> None:
    assert normalize_answer("  The Quillon   River. ") == "quillon river"
    assert normalize_answer("An Ines-Marrow's") == "inesmarrows"
    assert normalize_answer("a") == ""
    assert contains_answer("The Quillon River flows through Zorvath.", ("quillon RIVER!",))
    assert not contains_answer("The Quillon River flows.", ("Zorvath",))
    assert not contains_answer("It was not ready.", ("no",))  # "no" is not inside "not"
    assert contains_answer("No, it was not.", ("no",))
    assert not contains_answer("The city.", ("the",))  # an answer that normalises to nothing matches nothing


def _report(outcome: Outcome, claims: list[tuple[str, list[str]]], docs: dict[str, str]) -> Report:
    evidence = [
        ReportEvidence(
            id=eid, doc_id=doc, url=None, title=doc, quote="q", start=0, end=1, content_hash="h", origin_subtask_id="s"
        )
        for eid, doc in docs.items()
    ]
    section = ReportSection(
        id="key_findings",
        title="Key findings",
        required=True,
        status="supported",
        claims=[Claim(text=t, evidence_ids=ids) for t, ids in claims],
    )
    summary = section.model_copy(update={"id": "executive_summary", "claims": section.claims[:1]})
    sections = [summary, section]
    return Report(
        run_id="r", template="t", question="q", corpus="c", outcome=outcome, sections=sections, evidence=evidence
    )


def test_a_report_scores_distinct_claims_citing_gold_and_the_answer() -> None:
    question = Question("q", "q", ("Ines Marrow",), frozenset({"b1", "b2"}))
    docs = {"e1": "b1", "e2": "x9", "e3": "b2"}
    claims = [("Ines Marrow founded it.", ["e1"]), ("Boats float.", ["e2"]), ("Mixed sources.", ["e2", "e3"])]
    # The summary repeats the first claim: counted once. A claim citing a gold paragraph among others is gold.
    assert score_report(_report("shipped", claims, docs), question) == (3, 2, True)
    assert score_report(_report("fallback", claims, docs), question) == (0, 0, False)
    assert score_report(None, question) == (0, 0, False)


def test_summary_arithmetic() -> None:
    questions = [Question(f"q{n}", "?", ("x",), frozenset()) for n in range(4)]
    normal = [
        RunResult("q0", "r0", "shipped", 10.0, claims=4, gold_claims=3, answer_found=True),
        RunResult("q1", "r1", "shipped", 20.0, claims=2, gold_claims=0, answer_found=False),
        RunResult("q2", "r2", "fallback", 30.0),
        RunResult("q3", "r3", "shipped", 40.0, claims=4, gold_claims=2, answer_found=True),
    ]
    hidden = [
        RunResult("q0", "h0", "fallback", 50.0),
        RunResult("q1", "h1", "shipped", 60.0, claims=2),
        RunResult("q2", "h2", "shipped", 70.0, claims=0),  # shipped nothing: a decline
        RunResult("q3", "h3", "failed", 80.0),
    ]
    s = summarize(questions, normal, hidden)
    assert s["claim_precision"] == {"count": 5, "of": 10, "rate": 0.5}
    assert s["answer_recall"] == {"count": 2, "of": 4, "rate": 0.5}
    assert s["decline_when_absent"] == {"count": 3, "of": 4, "rate": 0.75}
    assert s["outcomes"] == {"shipped": 3, "fallback": 1}
    assert s["outcomes_gold_hidden"] == {"fallback": 1, "shipped": 2, "failed": 1}
    assert s["run_ms"] == {"median": 45.0, "p90": 80.0, "runs": 8}


class _Fixed:
    name = "fixed"

    def __init__(self, doc_ids: list[str]) -> None:
        self.doc_ids = doc_ids
        self.asked: list[int] = []

    async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]:
        self.asked.append(k)
        return [SearchHit(doc_id=d, title=d, text=d, start=0, end=1, score=1.0) for d in self.doc_ids[:k]]


async def test_hidden_docs_asks_for_more_and_drops_the_hidden_ones() -> None:
    inner = _Fixed(["g1", "a", "g2", "b", "c", "d"])
    search = HiddenDocs(inner)
    assert [h.doc_id for h in await search.search(query="x", corpus="c", k=3)] == ["g1", "a", "g2"]
    search.hidden = frozenset({"g1", "g2"})
    assert [h.doc_id for h in await search.search(query="x", corpus="c", k=3)] == ["a", "b", "c"]
    assert inner.asked == [3, 5]
    # A hidden document with several passages crowds the top: it asks again, wider.
    inner = _Fixed(["g1", "g1", "g1", "a", "b", "c", "d"])
    search = HiddenDocs(inner)
    search.hidden = frozenset({"g1", "g2"})
    assert [h.doc_id for h in await search.search(query="x", corpus="c", k=3)] == ["a", "b", "c"]
    assert inner.asked == [5, 7]
    # Everything else is the wrapped provider's (the pipeline sees the same capabilities).
    assert search.doc_ids is inner.doc_ids
    with pytest.raises(AttributeError):
        search.term_weights  # noqa: B018


async def _recount(url: str, runs: list[dict[str, object]]) -> tuple[int, int, int, int]:
    """(gold claims, claims, questions with the answer shipped, declines with the gold hidden) from the stored
    reports, counted here without the module's helpers."""
    gold = {i: set(g) for i, _, _, g in QUESTIONS}
    answers = {i: a for i, _, a, _ in QUESTIONS}
    engine = make_engine(url)
    good = total = found = declined = 0
    try:
        async with make_sessionmaker(engine)() as session:
            for row in runs:
                hidden = row["hidden"]
                assert isinstance(hidden, dict)
                for run_id, is_hidden in ((row["run_id"], False), (hidden["run_id"], True)):
                    artifact = await runs_repo.latest_artifact(session=session, run_id=str(run_id))
                    assert artifact is not None
                    report = artifact.report
                    doc_of = {e["id"]: e["doc_id"] for e in report["evidence"]}
                    claims = {(c["text"], tuple(c["evidence_ids"])) for s in report["sections"] for c in s["claims"]}
                    if report["outcome"] != "shipped":
                        claims = set()
                    if is_hidden:
                        declined += not claims
                        continue
                    total += len(claims)
                    good += sum(any(doc_of[e] in gold[str(row["question_id"])] for e in ids) for _, ids in claims)
                    text = " " + " ".join(normalize_answer(t) for t, _ in claims) + " "
                    found += any(f" {normalize_answer(a)} " in text for a in answers[str(row["question_id"])])
    finally:
        await engine.dispose()
    return good, total, found, declined


async def test_end_to_end_on_a_tiny_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_set(tmp_path / "qa_tiny")
    url, out = sqlite_url(tmp_path / "relevance.db"), tmp_path / "relevance.json"
    argv = [str(data), "--n", "3", "--templates", "market_brief,no_such_template", "--db", url, "--out", str(out)]
    assert await run(parse_args(argv)) == 0
    printed = capsys.readouterr().out
    assert "split report (fit when int(sha256(id), 16) % 2 == 0, else report): 3 of 3 questions, first 3" in printed
    assert "no_such_template: not available" in printed
    summary = json.loads(out.read_text(encoding="utf-8"))
    assert summary["corpus"] == "tiny" and summary["templates"]["no_such_template"] is None
    s, rows = summary["templates"]["market_brief"], summary["runs"]["market_brief"]
    assert [r["question_id"] for r in rows] == ["q1", "q2", "q3"]
    good, total, found, declined = await _recount(url, rows)
    assert s["claim_precision"]["count"] == good and s["claim_precision"]["of"] == total > 0
    assert s["answer_recall"] == {"count": found, "of": 3, "rate": round(found / 3, 4)}
    assert s["decline_when_absent"]["count"] == declined
    by_id = {r["question_id"]: r for r in rows}
    # By construction: q1 and q2 answer from their gold only and cannot answer without it; q3's answer is nowhere.
    for qid in ("q1", "q2"):
        assert by_id[qid]["outcome"] == "shipped" and by_id[qid]["claims"] == by_id[qid]["gold_claims"] > 0
        assert by_id[qid]["answer_found"]
        assert by_id[qid]["hidden"]["outcome"] != "shipped" or by_id[qid]["hidden"]["claims"] == 0
    assert not by_id["q3"]["answer_found"]
    assert found == 2 and declined >= 2
    # A second run reuses the ingested corpus.
    assert await run(parse_args([*argv[:3], "--templates", "market_brief", "--db", url, "--out", str(out)])) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["ingest_seconds"] == 0.0


def test_missing_data_exits_2_naming_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eval-relevance: data not found: ")
    assert str(tmp_path / "nowhere" / "qa_hotpotqa" / "questions.jsonl") in err


def test_written_notes_become_a_set_and_their_answer_lines_the_fit_s_positives(tmp_path: Path) -> None:
    from veracity.evals.relevance import load_set, notes_set
    from veracity.evals.relevance_fit import notes_rows

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "01_pool.txt").write_text(
        "Riverside pool\nSaturday: 8am to 6pm\nSunday: 8am to 4pm\nLockers take a one pound coin, which is returned.\n"
    )
    (notes / "02_club.md").write_text("# Chess club\nThe chess club meets on Thursdays at the library hall.\n")
    asked = [
        {
            "id": "n1",
            "doc": "01_pool.txt",
            "question": "When does the pool open on Sunday?",
            "answers": ["Sunday: 8am to 4pm"],
        },
        {"id": "n2", "doc": "02_club.md", "question": "Where does the chess club meet?", "answers": []},
    ]
    questions = tmp_path / "notes_questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in asked))
    qa = load_set(notes_set(notes, questions, tmp_path / "set"), questions=None, corpus=None, qrels=None, name="notes")
    # Only an answerable question is measured end to end; its document is the gold, its answer lines the answers.
    assert [(q.id, q.answers, q.gold) for q in qa.questions] == [
        ("n1", ("Sunday: 8am to 4pm",), frozenset({"01_pool.txt"}))
    ]
    corpus = [json.loads(line) for line in qa.corpus_file.read_text().splitlines()]
    assert [(d["_id"], d["title"]) for d in corpus] == [("01_pool.txt", "01 pool"), ("02_club.md", "Chess club")]
    rows = {
        group: dict(zip([c.text for c in cands], labels, strict=True))
        for group, _, cands, labels in notes_rows(notes, questions, None)
    }
    # The answer line is the one positive; a question nothing answers is read as HotpotQA's gold-less reading.
    assert rows["notes:01_pool.txt|n1"]["Sunday: 8am to 4pm"] == 1
    assert sum(rows["notes:01_pool.txt|n1"].values()) == 1
    assert set(rows) == {"notes:01_pool.txt|n1", "notes:02_club.md|n2:hidden"}
    assert not any(rows["notes:02_club.md|n2:hidden"].values())
    from veracity.evals.relevance_fit import fold, source_of

    # A document's questions share its fold (no fold is measured on a document it was fitted on).
    assert fold("notes:01_pool.txt|n1") == fold("notes:01_pool.txt|n7:hidden") == fold("notes:01_pool.txt")
    assert [source_of(g) for g in sorted(rows)] == ["notes", "notes, nothing answers"]
