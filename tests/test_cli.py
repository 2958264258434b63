"""The ``veracity`` console script, run as a real subprocess against a temporary SQLite database."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import sqlite_url, write_jsonl

VERACITY = str(Path(sys.executable).parent / "veracity")


def run(args: list[str], db: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VERACITY_DATABASE__URL": sqlite_url(db), "VERACITY_CORPUS__AUTOLOAD_WIKI": "false"}
    return subprocess.run([VERACITY, *args], env=env, capture_output=True, text=True, timeout=120, **kw)


def test_ingest_search_and_ask_end_to_end(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    corpus = write_jsonl(
        tmp_path / "kb.jsonl",
        [
            {
                "_id": "mars",
                "title": "Mars",
                "text": "Mars is the fourth planet from the Sun. Mars has two small moons named Phobos and Deimos.",
            },
            {
                "_id": "venus",
                "title": "Venus",
                "text": "Venus is the second planet from the Sun. Venus has a thick carbon dioxide atmosphere.",
            },
        ],
    )
    out = run(["ingest", str(corpus), "--corpus", "planets", "--json"], db)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "corpus": "planets",
        "files": 1,
        "added": 2,
        "updated": 0,
        "unchanged": 0,
        "errors": [],
        "per_file": [{"path": str(corpus), "outcome": "ingested", "documents": 2}],
        "vectors": 2,  # passage vectors made at ingest, not at the first search
    }

    out = run(["search", "moons of Mars", "--corpus", "planets", "--json", "-k", "5"], db)
    result = json.loads(out.stdout)
    assert result["query"] == "moons of Mars" and result["hits"][0]["doc_id"] == "mars"
    assert set(result["hits"][0]) == {"doc_id", "title", "score", "text"}

    queries = write_jsonl(
        tmp_path / "q.jsonl", [{"id": "q1", "query": "Venus atmosphere"}, {"id": "q2", "query": "Phobos"}]
    )
    out = run(["search", "--queries", str(queries), "--corpus", "planets", "--json"], db)
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(x["id"], x["hits"][0]["doc_id"]) for x in lines] == [("q1", "venus"), ("q2", "mars")]

    out = run(
        ["ask", "What are the moons of Mars?", "--template", "market_brief", "--corpus", "planets", "--json"],
        db,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert {"run_id", "outcome", "sections", "evidence", "metrics"} <= set(report)
    assert report["outcome"] == "shipped"
    assert "planner_complete" in out.stderr and "complete" in out.stderr  # progress lines on stderr
    ev = {e["id"]: e for e in report["evidence"]}
    for section in report["sections"]:
        assert {"id", "title", "status", "claims"} <= set(section)
        for claim in section["claims"]:
            assert all(i in ev for i in claim["evidence_ids"])
    for e in ev.values():
        assert {"id", "doc_id", "url", "title", "quote", "start", "end"} <= set(e)


def test_cli_bad_input_goes_to_stderr_with_nonzero_exit(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    out = run(["ask", "   "], db)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().endswith("veracity: The question is empty. Type what you want researched.")
    out = run(["ask", "coffee", "--template", "nope"], db)
    assert out.returncode == 2 and "Unknown template 'nope'" in out.stderr
    out = run(["ingest", str(tmp_path / "missing"), "--corpus", "x"], db)
    assert out.returncode == 2 and f"No such file or folder: {tmp_path / 'missing'}" in out.stderr
    out = run(["ingest", str(tmp_path), "--corpus", "bad name!"], db)
    assert out.returncode == 2 and "Corpus names are 1-64 letters" in out.stderr
    out = run(["search", "x", "--corpus", "nope"], db)
    assert out.returncode == 2 and "Unknown corpus 'nope'" in out.stderr


def test_ask_failing_on_a_loop_abort_says_why_on_stderr(
    small_db_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A template whose gate rejects every draft: the run ends with ``store_artifact_loop_abort``, and the CLI's
    failure message (like the plain progress line) carries the detail, not the bare code."""
    from conftest import make_settings
    from veracity import cli
    from veracity.specs.registry import SpecRegistry

    spec = SpecRegistry.load().get("support_answer")
    # Too short for every draft, and the floor's own note forbidden: the gate rejects all three reports.
    directives = {"min_chars": 5000, "forbidden_patterns": ["could not produce a report"]}
    strict = SpecRegistry(
        {"support_answer": spec.model_copy(update={"composer": spec.composer.model_copy(update=directives)})}
    )
    monkeypatch.setattr(SpecRegistry, "load", classmethod(lambda cls, *folders: strict))
    monkeypatch.setattr(cli, "get_settings", lambda: make_settings(small_db_url))
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", root.level)  # main() raises the root level; give it back afterwards
    question = "Can I get a refund for my subscription if 10 days have passed since payment?"
    code = cli.main(["ask", question, "--template", "support_answer", "--progress", "plain"])
    out = capsys.readouterr()
    assert code == 1 and out.out == ""
    detail = "The pre-persistence gate rejected 3 reports in a row (last: forbidden pattern"
    assert f"veracity: store_artifact_loop_abort: {detail}" in out.err
    assert f'error message=store_artifact_loop_abort detail="{detail}' in out.err
