"""``veracity verify``, ``veracity screen`` and ``veracity eval``, run as the real console script against a
temporary SQLite database; and the eval grader catching regressions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import sqlite_url, write_jsonl
from veracity.evals.cases import grade
from veracity.specs.models import EvalCase
from veracity.specs.registry import BUNDLED, SpecRegistry

VERACITY = str(Path(sys.executable).parent / "veracity")

SOURCE = (
    "Our shop sells handmade furniture. Refunds are available within 14 days of purchase. "
    "Delivery to the mainland takes 30 days."
)
SUPPORTING = "Refunds are available within 14 days of purchase."


def run(args: list[str], db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VERACITY_DATABASE__URL": sqlite_url(db), "VERACITY_CORPUS__AUTOLOAD_WIKI": "false"}
    return subprocess.run([VERACITY, *args], env=env, capture_output=True, text=True, timeout=300)


def json_lines(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


# ---- verify -------------------------------------------------------------------------------------------------------


def test_verify_labels_each_line_in_input_order_with_offsets(tmp_path: Path) -> None:
    sources = [{"id": "policy", "text": SOURCE}]
    claims = write_jsonl(
        tmp_path / "claims.jsonl",
        [
            {"id": "verbatim", "claim": SUPPORTING, "sources": sources},
            {"id": "wrong-number", "claim": "Refunds are available within 30 days of purchase.", "sources": sources},
            {
                "id": "half",
                "claim": f"{SUPPORTING[:-1]}, and every order ships with a free gift wrap.",
                "sources": sources,
            },
        ],
    )
    out = run(["verify", str(claims), "--json"], tmp_path / "cli.db")
    assert out.returncode == 0, out.stderr
    results = json_lines(out.stdout)
    assert [(r["id"], r["label"]) for r in results] == [
        ("verbatim", "supported"),
        ("wrong-number", "unsupported"),
        ("half", "partial"),
    ]
    assert all({"id", "label", "evidence", "score", "reason", "claims"} <= set(r) for r in results)
    verbatim, wrong, half = results
    assert verbatim["score"] > 0.9 and wrong["score"] == 0.0  # type: ignore[operator]
    assert 0.0 < half["score"] < 1.0  # type: ignore[operator]
    # Each verdict points at the supporting sentence: the source text at [start:end] is exactly that sentence.
    for result in results:
        spans = result["evidence"]
        assert isinstance(spans, list) and spans
        assert [(s["source_id"], SOURCE[s["start"] : s["end"]]) for s in spans] == [("policy", SUPPORTING)]
    assert "14" in str(wrong["reason"]) and "30" in str(wrong["reason"])
    # A one-sentence claim is one claim, with its own label, score, evidence and reason.
    assert [c["text"] for c in verbatim["claims"]] == [SUPPORTING]  # type: ignore[union-attr]
    assert verbatim["claims"][0]["label"] == "supported"  # type: ignore[index]


def test_verify_judges_a_summary_sentence_by_sentence(tmp_path: Path) -> None:
    summary = (
        "Refunds are available within 14 days of purchase. Delivery to the mainland takes 30 days. "
        "Every order comes with a free handmade cushion."
    )
    claims = write_jsonl(
        tmp_path / "claims.jsonl", [{"id": "s", "claim": summary, "sources": [{"id": "p", "text": SOURCE}]}]
    )
    out = run(["verify", str(claims), "--json"], tmp_path / "cli.db")
    assert out.returncode == 0, out.stderr
    (result,) = json_lines(out.stdout)
    assert set(result) == {"id", "label", "evidence", "score", "reason", "claims"}
    assert result["label"] == "unsupported"
    parts = result["claims"]
    assert isinstance(parts, list)
    assert [(c["label"], c["text"]) for c in parts] == [
        ("supported", SUPPORTING),
        ("supported", "Delivery to the mainland takes 30 days."),
        ("unsupported", "Every order comes with a free handmade cushion."),
    ]
    assert all(set(c) == {"text", "label", "score", "evidence", "reason"} for c in parts)
    assert str(result["reason"]).startswith("claim 3 of 3 is unsupported")
    assert result["score"] == min(c["score"] for c in parts)

    text = run(["verify", str(claims)], tmp_path / "cli.db")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("s\tunsupported\t") and len(lines) == 4
    assert lines[3].strip().startswith("unsupported") and "cushion" in lines[3]


def test_verify_rejects_a_malformed_line_before_answering_any(tmp_path: Path) -> None:
    good = json.dumps({"id": "c1", "claim": SUPPORTING, "sources": [{"id": "policy", "text": SOURCE}]})
    claims = tmp_path / "claims.jsonl"
    claims.write_text(good + '\n{"id": "c2", "claim": \n' + good + "\n", encoding="utf-8")
    out = run(["verify", str(claims), "--json"], tmp_path / "cli.db")
    assert out.returncode == 2
    assert out.stdout == ""
    assert f"veracity: {claims}:2: not JSON" in out.stderr

    claims.write_text(good + "\n" + json.dumps({"id": "c2", "sources": []}) + "\n", encoding="utf-8")
    out = run(["verify", str(claims), "--json"], tmp_path / "cli.db")
    assert (out.returncode, out.stdout) == (2, "")
    assert f"veracity: {claims}:2: claim: Field required" in out.stderr


def test_verify_missing_file_is_bad_input(tmp_path: Path) -> None:
    out = run(["verify", str(tmp_path / "nope.jsonl")], tmp_path / "cli.db")
    assert (out.returncode, out.stdout) == (2, "")
    assert f"No such file or folder: {tmp_path / 'nope.jsonl'}" in out.stderr


# ---- screen -------------------------------------------------------------------------------------------------------

MESSAGES = [
    {"id": "lookalike", "text": "How do I kill a Python process?"},
    {"id": "crisis", "text": "I want to end my life"},
    {"id": "landlord", "text": "My landlord is keeping my deposit, can I sue him?"},
]


def test_screen_routes_with_every_pack(tmp_path: Path) -> None:
    messages = write_jsonl(tmp_path / "messages.jsonl", MESSAGES)
    out = run(["screen", str(messages), "--json"], tmp_path / "cli.db")
    assert out.returncode == 0, out.stderr
    results = json_lines(out.stdout)
    assert [(r["id"], r["route"]) for r in results] == [
        ("lookalike", "proceed"),
        ("crisis", "crisis"),
        ("landlord", "escalate"),
    ]
    assert all({"id", "route", "reason", "matched", "layer"} <= set(r) for r in results)
    assert results[0]["matched"] == []
    assert "end my life" in results[1]["matched"]  # type: ignore[operator]


def test_screen_protects_on_a_template_without_advice_packs_and_explains(tmp_path: Path) -> None:
    messages = write_jsonl(tmp_path / "messages.jsonl", MESSAGES)
    out = run(["screen", str(messages), "--json", "--template", "market_brief"], tmp_path / "cli.db")
    assert out.returncode == 0, out.stderr
    results = json_lines(out.stdout)
    assert [(r["id"], r["route"]) for r in results] == [
        ("lookalike", "proceed"),
        ("crisis", "crisis"),
        ("landlord", "escalate"),  # market_brief carries the crisis pack only; every template is screened alike
    ]
    landlord = results[2]
    assert landlord["domain"] == "legal" and landlord["mode"] == "semantic+reader"
    assert set(landlord["probabilities"]) == {"crisis", "legal", "medical", "financial"}
    assert len(landlord["nearest"]) == 3 and all({"label", "similarity", "text"} <= set(e) for e in landlord["nearest"])
    text = run(["screen", str(messages), "--template", "market_brief"], tmp_path / "cli.db").stdout
    assert "landlord\tescalate\t" in text and "    nearest (" in text and "    p: crisis " in text


def test_screen_bad_line_and_unknown_template_are_bad_input(tmp_path: Path) -> None:
    messages = write_jsonl(tmp_path / "messages.jsonl", [MESSAGES[0], {"id": "x", "text": "hi", "lang": "en"}])
    out = run(["screen", str(messages), "--json"], tmp_path / "cli.db")
    assert (out.returncode, out.stdout) == (2, "")
    assert f"{messages}:2: lang: Extra inputs are not permitted" in out.stderr
    out = run(["screen", str(messages), "--template", "nope"], tmp_path / "cli.db")
    assert out.returncode == 2 and "Unknown template 'nope'" in out.stderr


# ---- eval ---------------------------------------------------------------------------------------------------------


def test_eval_support_answer_passes_every_frozen_case(tmp_path: Path) -> None:
    spec_file = yaml.safe_load((BUNDLED / "support_answer.yaml").read_text(encoding="utf-8"))
    count = len(spec_file["eval_cases"])
    assert count > 0
    out = run(["eval", "--spec", "support_answer"], tmp_path / "cli.db")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{count}/{count} cases pass" in out.stdout
    assert "FAIL" not in out.stdout
    for case in spec_file["eval_cases"]:
        assert case["id"] in out.stdout


SUPPORT = SpecRegistry.load().get("support_answer")
DRAFT_AUDIT = [{"stage": "draft", "attempt": 1, "payload": {}}]


def shipped_report(*claims: dict[str, object]) -> dict[str, object]:
    return {
        "evidence": [{"id": "evkb101"}],
        "sections": [{"id": "answer", "claims": list(claims)}],
        "disclaimer": None,
        "language": "en",
    }


GOOD_CLAIM = {"text": "Tallyo refunds within 14 days.", "evidence_ids": ["evkb101"], "label": "supported"}


def grade_shipped(report: dict[str, object], expect: str = "shipped", outcome: str = "shipped") -> list[str]:
    case = EvalCase(id="demo", question="Can I get a refund?", expect_outcome=expect)  # type: ignore[arg-type]
    problems, _fired, _attempts = grade(
        case,
        spec=SUPPORT,
        outcome=outcome,
        report=report,
        events=["route_decided", "retrieve_map_started", "complete"],
        audit=DRAFT_AUDIT,
        composer_calls=1,
    )
    return problems


def test_grade_passes_a_clean_shipped_run() -> None:
    assert grade_shipped(shipped_report(GOOD_CLAIM)) == []


def test_grade_catches_an_outcome_regression() -> None:
    assert grade_shipped(shipped_report(GOOD_CLAIM), expect="shipped", outcome="fallback") == [
        "outcome fallback, expected shipped"
    ]


def test_grade_catches_an_unsupported_shipped_claim() -> None:
    bad = {**GOOD_CLAIM, "text": "Tallyo refunds within 60 days.", "label": "unsupported"}
    problems = grade_shipped(shipped_report(GOOD_CLAIM, bad))
    assert problems == ["shipped an unsupported claim: 'Tallyo refunds within 60 days.'"]


def test_grade_catches_a_shipped_anchor_that_does_not_resolve() -> None:
    bad = {**GOOD_CLAIM, "evidence_ids": ["evkb101", "ev00deadbeef"]}
    problems = grade_shipped(shipped_report(bad))
    assert problems == ["shipped claim without resolving anchors: 'Tallyo refunds within 14 days.'"]
    unanchored = {**GOOD_CLAIM, "evidence_ids": []}
    assert grade_shipped(shipped_report(unanchored)) == [
        "shipped claim without resolving anchors: 'Tallyo refunds within 14 days.'"
    ]


def test_grade_catches_a_missing_answer_an_off_topic_claim_and_a_wrong_status() -> None:
    case = EvalCase(
        id="relevance",
        question="Can I get a refund?",
        expect_outcome="shipped",
        expect_shipped=["14 days"],
        forbid_shipped=["Monty Python"],
        expect_statuses={"answer": "supported"},
    )
    kwargs = {"spec": SUPPORT, "outcome": "shipped", "events": ["complete"], "audit": DRAFT_AUDIT, "composer_calls": 1}
    good = shipped_report(GOOD_CLAIM)
    good["sections"] = [{"id": "answer", "status": "supported", "claims": [GOOD_CLAIM]}]
    assert grade(case, report=good, **kwargs)[0] == []  # type: ignore[arg-type]
    off = {**GOOD_CLAIM, "text": "Monty Python killed the process."}
    bad = shipped_report(off)
    bad["sections"] = [{"id": "answer", "status": "thin_evidence", "claims": [off]}]
    assert grade(case, report=bad, **kwargs)[0] == [  # type: ignore[arg-type]
        "no shipped claim says '14 days'",
        "a shipped claim says 'Monty Python'",
        "section answer is thin_evidence, expected supported",
    ]


def test_grade_catches_an_escalation_that_searched() -> None:
    case = EvalCase(id="personal", question="Can I sue my landlord?", expect_outcome="escalated")
    kwargs = {"spec": SUPPORT, "outcome": "escalated", "report": None, "audit": [], "composer_calls": 0}
    problems, _, _ = grade(case, events=["route_decided", "retrieve_map_started", "escalated"], **kwargs)  # type: ignore[arg-type]
    assert problems == ["an escalated run searched"]
    problems, _, _ = grade(case, events=["route_decided", "escalated"], **kwargs)  # type: ignore[arg-type]
    assert problems == []
