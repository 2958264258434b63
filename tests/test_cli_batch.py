"""``veracity ask --questions``: many questions in one process, one JSON line each, in input order."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import make_settings, write_jsonl

VERACITY = str(Path(sys.executable).parent / "veracity")

QUESTIONS = [
    {"id": "coffee", "question": "Which countries grow most of the world's coffee?"},
    {"id": "tea", "question": "Which countries are the largest tea producers?", "template": "answer"},
    {"id": "cars", "question": "How many electric cars were sold in 2023?", "corpus": "small"},
]

Main = Callable[..., tuple[int, str, str]]


@pytest.fixture
def veracity(small_db_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Main:
    """``veracity(*args, stdin=…)`` → (exit code, stdout, stderr) of ``cli.main`` in this process, on a database
    holding the small corpus."""
    from veracity import cli

    monkeypatch.setattr(cli, "get_settings", lambda: make_settings(small_db_url))
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", root.level)  # main() raises the root level; give it back afterwards

    def main(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = cli.main(list(args))
        out = capsys.readouterr()
        return code, out.out, out.err

    return main


def test_ask_batch_prints_one_report_per_question_in_input_order(small_db_url: str, tmp_path: Path) -> None:
    """A real process reading the questions from stdin: the command's options are the lines' defaults."""
    env = {**os.environ, "VERACITY_DATABASE__URL": small_db_url, "VERACITY_CORPUS__AUTOLOAD_WIKI": "false"}
    stdin = "\n".join(json.dumps(q) for q in QUESTIONS[:2]) + "\n\n" + json.dumps(QUESTIONS[2]) + "\n"
    out = subprocess.run(
        [VERACITY, "ask", "--questions", "-", "--template", "market_brief", "--corpus", "small", "--json"]
        + ["--progress", "plain"],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [line["id"] for line in lines] == ["coffee", "tea", "cars"]
    assert [line["template"] for line in lines] == ["market_brief", "answer", "market_brief"]
    for line, asked in zip(lines, QUESTIONS, strict=True):
        assert line["question"] == asked["question"] and line["corpus"] == "small" and "error" not in line
        assert line["outcome"] in {"shipped", "handoff", "fallback"}
        assert line["sections"] and all({"id", "title", "status", "claims"} <= set(s) for s in line["sections"])
    assert len({line["run_id"] for line in lines}) == 3
    # One plain progress line per question on stderr, nothing of the runs' own events.
    progress = [line for line in out.stderr.splitlines() if line.startswith("[")]
    assert [p.split(":")[0] for p in progress] == ["[1/3] coffee", "[2/3] tea", "[3/3] cars"]
    assert all(p.endswith(" ms)") for p in progress) and "planner_complete" not in out.stderr


def test_ask_batch_builds_one_service_for_every_question(
    veracity: Main, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from veracity.runs.service import RunService

    built: list[RunService] = []
    from_settings = RunService.from_settings.__func__  # type: ignore[attr-defined]

    def spy(cls: type[RunService], *args: object, **kw: object) -> RunService:
        built.append(from_settings(cls, *args, **kw))
        return built[-1]

    monkeypatch.setattr(RunService, "from_settings", classmethod(spy))
    questions = write_jsonl(tmp_path / "q.jsonl", QUESTIONS)  # type: ignore[arg-type]
    code, out, _err = veracity("ask", "--questions", str(questions), "--corpus", "small", "--progress", "none")
    assert code == 0
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["coffee", "tea", "cars"]
    assert len(built) == 1


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        ('{"id": "two", "question": ', "not JSON (Expecting value)"),
        ('{"id": "two"}', "question: Field required"),
        ('{"id": 2, "question": "Which countries grow tea?"}', "id: Input should be a valid string"),
        ('{"id": "two", "question": "   "}', "question: String should have at least 1 character"),
        ('{"id": "coffee", "question": "Who grows tea?"}', "id: 'coffee' repeats line 1"),
    ],
)
def test_ask_batch_rejects_the_whole_file_on_one_bad_line(
    veracity: Main, small_db_url: str, tmp_path: Path, bad_line: str, reason: str
) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(f"{json.dumps(QUESTIONS[0])}\n{bad_line}\n{json.dumps(QUESTIONS[2])}\n", encoding="utf-8")
    code, out, err = veracity("ask", "--questions", str(questions), "--corpus", "small", "--json")
    assert code == 2 and out == ""
    assert err == f"veracity: {questions}:2: {reason}\n"
    assert _run_count(small_db_url) == 0  # nothing was asked, not even the good first line


def test_ask_batch_from_stdin_names_stdin_in_a_rejection(veracity: Main) -> None:
    code, out, err = veracity("ask", "--questions", "-", stdin='{"id": "a", "question": "tea"}\nnot json\n')
    assert (code, out) == (2, "")
    assert err == "veracity: <stdin>:2: not JSON (Expecting value)\n"


def test_ask_wants_a_question_or_a_questions_file_not_both(veracity: Main, tmp_path: Path) -> None:
    questions = write_jsonl(tmp_path / "q.jsonl", QUESTIONS[:1])  # type: ignore[arg-type]
    for args in (["ask"], ["ask", "Who grows tea?", "--questions", str(questions)]):
        code, out, err = veracity(*args)
        assert (code, out, err) == (2, "", "veracity: give a QUESTION or --questions FILE.jsonl\n")


def test_ask_batch_unknown_corpus_gives_an_error_line_and_the_others_answer(veracity: Main, tmp_path: Path) -> None:
    rows = [QUESTIONS[0], {"id": "nowhere", "question": "Who grows tea?", "corpus": "nope"}, QUESTIONS[2]]
    questions = write_jsonl(tmp_path / "q.jsonl", rows)  # type: ignore[arg-type]
    code, out, err = veracity("ask", "--questions", str(questions), "--corpus", "small", "--progress", "plain")
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["id"] for line in lines] == ["coffee", "nowhere", "cars"]
    # the bundled corpora and the test's
    known = "coach_reply, investment_memo, legal_research, market_brief, small, support_answer"
    message = f"Unknown corpus 'nope'. Known corpora: {known}."
    assert lines[1] == {"id": "nowhere", "error": {"code": "bad_input", "message": message}}
    assert all(line["outcome"] and line["sections"] for line in (lines[0], lines[2]))
    assert code == 1
    assert f"[2/3] nowhere: failed: {message} (" in err
    assert err.endswith("veracity: 1 of 3 question(s) failed\n")


def test_ask_batch_run_without_a_report_gives_its_error_with_the_detail(
    veracity: Main, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gate that rejects every report of one question: that run ends in a loop abort with no report, and its
    line carries the run id and the error event's detail, not just its code; the next question still answers."""
    from veracity import messages
    from veracity.domain import Report, Violation
    from veracity.guards import gate
    from veracity.specs.models import Spec

    real_check = gate.check

    def check(report: Report, spec: Spec) -> list[Violation]:
        if report.question.startswith("Can I get a refund"):
            return [Violation(check="stand_in", layer="gate", detail="a stand-in rejection")]
        return real_check(report, spec)

    monkeypatch.setattr(gate, "check", check)
    rows = [{"id": "refund", "question": "Can I get a refund 10 days after payment?"}, QUESTIONS[2]]
    questions = write_jsonl(tmp_path / "q.jsonl", rows)  # type: ignore[arg-type]
    code, out, err = veracity("ask", "--questions", str(questions), "--corpus", "small", "--progress", "none")
    refund, cars = (json.loads(line) for line in out.splitlines())
    detail = messages.LOOP_ABORT_DETAIL.format(rejections=3, problems="a stand-in rejection")
    assert refund == {
        "id": "refund",
        "run_id": refund["run_id"],
        "error": {"code": "run_failed", "message": f"{gate.LOOP_ABORT}: {detail}"},
    }
    assert len(refund["run_id"]) == 32 and refund["run_id"] != cars["run_id"]
    assert cars["id"] == "cars" and cars["corpus"] == "small" and cars["outcome"] and cars["sections"]
    assert code == 1 and err == "veracity: 1 of 2 question(s) failed\n"


def _run_count(url: str) -> int:
    import sqlite3

    with sqlite3.connect(url.removeprefix("sqlite+aiosqlite:///")) as db:
        return int(db.execute("SELECT count(*) FROM research_runs").fetchone()[0])
