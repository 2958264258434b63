"""The report's numbered references and its two exports, the quote's source context, and the small view helpers
the run page uses (ages, the sections a source serves, the topology's guard tones)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from veracity.domain import Claim, Report, ReportEvidence, ReportSection
from veracity.runs.reducer import RunView, apply
from veracity.runs.report import export_json, reference_numbers, render_markdown
from veracity.search.evidence import context_around
from veracity.web.topology import _tone
from veracity.web.view import age

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def _ev(eid: str, quote: str, *, url: str | None = None, doc: str = "doc") -> ReportEvidence:
    return ReportEvidence(
        id=eid,
        doc_id=doc,
        url=url,
        title=f"Title of {doc}",
        quote=quote,
        start=10,
        end=10 + len(quote),
        content_hash="0" * 64,
        origin_subtask_id="st1",
        context_before="Before it. ",
        context_after=" After it.",
    )


def _report() -> Report:
    return Report(
        run_id="a" * 32,
        template="market_brief",
        question="What about <b>coffee</b>?",
        corpus="wiki",
        outcome="shipped",
        sections=[
            ReportSection(
                id="summary",
                title="Summary",
                required=True,
                status="supported",
                claims=[
                    Claim(text="Coffee is brewed.", evidence_ids=["evB"], label="supported"),
                    Claim(text="Beans are *roasted* [sic].", evidence_ids=["evA", "evB"], label="partial"),
                ],
            ),
            ReportSection(
                id="findings",
                title="Findings",
                required=False,
                status="supported",
                claims=[Claim(text="Brazil grows most.", evidence_ids=["evC"], label="supported")],
            ),
        ],
        evidence=[
            _ev("evA", "Beans are roasted."),
            _ev("evB", "Coffee is brewed from beans.", url="https://example.org/coffee (1)", doc="coffee"),
            _ev("evC", "Brazil grows most <script>x</script> coffee."),
            _ev("evD", "Never cited.", url="javascript:alert(1)", doc="js"),
        ],
    )


def test_references_are_numbered_by_first_citation_then_uncited() -> None:
    assert reference_numbers(_report()) == {"evB": 1, "evA": 2, "evC": 3, "evD": 4}


def test_markdown_resolves_every_marker_to_a_reference_with_its_quote_and_link() -> None:
    md = render_markdown(_report(), version=2, permalink="http://127.0.0.1:8000/runs/x?version=2")
    body, refs = md.split("## References")
    assert "- Coffee is brewed. [1] *(supported)*" in body
    assert "- Beans are \\*roasted\\* \\[sic\\]. [2][1] *(partial)*" in body
    assert "*Version:* 2" in md and "*Permalink:* <http://127.0.0.1:8000/runs/x?version=2>" in md
    assert md.startswith("# What about &lt;b&gt;coffee&lt;/b&gt;?\n")  # question text cannot inject HTML
    entries = re.findall(r"^(\d+)\. “(.+?)” — (.+)$", refs, flags=re.M)
    assert [int(n) for n, _, _ in entries] == [1, 2, 3, 4]
    assert entries[0][1] == "Coffee is brewed from beans."
    assert "[Title of coffee](https://example.org/coffee%20%281%29)" in entries[0][2]
    assert "Title of doc (doc), characters 10–28" in entries[1][2]
    assert "&lt;script&gt;" in entries[2][1] and "<script>" not in md
    assert "Title of js (javascript:alert(1))" in entries[3][2] and "](javascript:" not in md  # text, never a link


def test_json_export_maps_each_claims_evidence_to_its_reference_numbers() -> None:
    data = json.loads(json.dumps(export_json(_report(), version=1, permalink="p")))
    assert data["format"] == "veracity-report/1" and data["version"] == 1 and data["permalink"] == "p"
    by_number = {r["number"]: r for r in data["references"]}
    assert sorted(by_number) == [1, 2, 3, 4]
    for section in data["sections"]:
        for claim in section["claims"]:
            assert [by_number[n]["id"] for n in claim["references"]] == claim["evidence_ids"]
    assert by_number[3]["quote"] == "Brazil grows most <script>x</script> coffee."  # exact, unescaped in JSON
    assert by_number[1]["context_before"] == "Before it. " and "evidence" not in data


def test_context_around_cuts_at_words_and_marks_the_cut() -> None:
    text = "Alpha beta gamma. The quote is here. Delta epsilon zeta eta theta."
    start, end = text.index("The"), text.index("here.") + 5
    assert context_around(text, start, end) == ("Alpha beta gamma. ", " Delta epsilon zeta eta theta.")
    before, after = context_around(text, start, end, size=10)
    assert before == "…gamma. " and after == " Delta…"
    assert context_around("Only the quote.", 0, 15) == ("", "")


def test_only_http_links_are_links() -> None:
    from veracity.fetch.canonical import link_url

    assert link_url("https://example.org/a?b=1") == "https://example.org/a?b=1"
    assert link_url(" HTTP://example.org ") == "HTTP://example.org"
    bad = ("javascript:alert(1)", " JavaScript:alert(1)", "data:text/html,<script>", "file:///etc/passwd", "https://")
    for url in (*bad, "http:no-host", "", None):
        assert link_url(url) is None, url


def test_age_reads_in_the_largest_whole_unit() -> None:
    assert age(T0, now=T0 + timedelta(seconds=30)) == "just now"
    assert age(T0, now=T0 + timedelta(minutes=5, seconds=59)) == "5 min ago"
    assert age(T0.replace(tzinfo=None), now=T0 + timedelta(hours=3)) == "3 h ago"  # naive = UTC (SQLite)
    assert age(T0, now=T0 + timedelta(days=1)) == "1 day ago"
    assert age(T0, now=T0 + timedelta(days=9)) == "9 days ago"


def test_a_source_serves_its_branches_sections_and_the_sections_citing_it() -> None:
    view = RunView(run_id="r")
    planned = {"subtasks": [{"id": "st1", "target_sections": ["summary"]}, {"id": "st2", "target_sections": []}]}
    apply(view, 1, "planner_complete", planned, T0)
    assert view.source_sections(["st1"], "coffee") == "summary"
    assert view.source_sections(["st2", "unknown"], "coffee") == ""
    report = _report().model_dump(mode="json")
    apply(view, 2, "complete", {"outcome": "shipped", "version": 3, "report": report}, T0)
    assert view.version == 3
    assert view.source_sections(["st2"], "doc") == "findings summary"  # evA (summary) and evC (findings)
    assert view.source_sections(["st1"], "coffee") == "summary"


def test_topology_tones_a_failed_guard_a_floor_decision_and_a_routed_away_run() -> None:
    assert _tone("verify", "verdict ok", None) == ""
    assert _tone("verify", "verdict revise", None) == "warn"
    assert _tone("decide", "ship", "shipped") == ""
    assert _tone("decide", "fallback (floor answer)", "fallback") == "warn"
    assert _tone("decide", "hand off to a person", "handoff") == "warn"
    assert _tone("decide", "crisis", "crisis") == "stop"
    assert _tone("decide", "", "escalated") == ""  # a node that never ran is not coloured by the outcome
    assert _tone("route", "escalate", "escalated") == "stop"


def test_timeline_rows_say_which_are_failures_retries_and_check_findings() -> None:
    view = RunView(run_id="r")
    events = [
        ("retrieve_map_progress", {"subtask_id": "st1", "status": "done", "page_errors": ["http://x: timeout: slow"]}),
        ("draft_composed", {"attempt": 1, "composer": "extractive", "claims": 3}),
        ("self_check_complete", {"attempt": 1, "verdict": "revise", "violations": [{"check": "anchor"}]}),
        ("revise_requested", {"attempt": 1, "reason": "1 violation"}),
        ("draft_composed", {"attempt": 2, "composer": "extractive", "claims": 2, "told": 1}),
        ("error", {"message": "boom"}),
    ]
    for seq, (name, payload) in enumerate(events, start=1):
        apply(view, seq, name, payload, T0 + timedelta(milliseconds=250 * seq))
    assert [r.kind for r in view.timeline] == ["failure", "info", "guard", "retry", "retry", "failure"]
    assert [r.offset_ms for r in view.timeline] == [0, 250, 500, 750, 1000, 1250]
    apply(view, 3, "complete", {"outcome": "shipped"}, T0)  # late: already past seq 3, changes nothing
    assert len(view.timeline) == 6 and view.status == "failed" and view.outcome is None


def test_a_revise_loop_taken_stays_visible_after_the_run_and_a_fallback_reads_as_one() -> None:
    from veracity.graph.builder import build_graph
    from veracity.web.topology import graph_shape, layout

    shape = graph_shape(build_graph())
    view = RunView(run_id="r")
    events = [
        ("draft_composed", {"attempt": 1, "claims": 2}),
        ("self_check_complete", {"attempt": 1, "verdict": "revise"}),
        ("revise_requested", {"attempt": 1, "reason": "1 violation"}),
        ("draft_composed", {"attempt": 2, "claims": 2}),
        ("self_check_complete", {"attempt": 2, "verdict": "revise"}),
        ("synthesize_complete", {"decision": "fail_safe", "reason": "drafting attempts exhausted"}),
    ]
    untaken = [e for e in layout(shape, view).edges if e.kind == "loop"]
    assert untaken and not any(e.active for e in untaken)
    for seq, (name, payload) in enumerate(events, start=1):
        apply(view, seq, name, payload, T0)
    topo = layout(shape, view)
    loops = [e for e in topo.edges if e.kind == "loop"]
    assert loops and all(e.active and e.label == "revised ×1" for e in loops)
    decide = next(b for b in topo.boxes if b.id == "decide")
    assert (decide.state, decide.note, decide.tone) == ("done", "fallback (floor answer)", "warn")
    verify = next(b for b in topo.boxes if b.id == "verify")
    assert verify.note == "verdict revise" and verify.tone == "warn"
