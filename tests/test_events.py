"""The event contract: every event has a model, an example here, a case in the reducer (its own timeline row, not
the fallback for unread events), and renders through the run page's partials; stored payloads decode back to the
same event, and an old or odd payload degrades to what still fits instead of breaking a page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from veracity import events as ev
from veracity.domain import BranchStat, Report, ReviewVerdict, Violation
from veracity.graph.builder import build_graph
from veracity.runs.reducer import RunView, apply, apply_event, describe
from veracity.web.app import create_app
from veracity.web.sse import page_messages
from veracity.web.topology import graph_shape

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SOURCE = ev.OpenedSource(order=1, kind="local", doc_id="doc-1", title="Doc one", status="ok", cache="none", bytes=10)

REPORT = Report(
    run_id="r", template="answer", question="Why?", corpus="small", outcome="fallback", sections=[], evidence=[]
).model_dump(mode="json")

EXAMPLES: list[ev.Event] = [
    ev.RunStarted(run_id="r", template="answer", question="Why?", corpus="small", sections=["summary"]),
    ev.RouteDecided(route="escalate", reason="personal legal advice", layer="classifier", matched=["my landlord"]),
    ev.PlannerComplete(planner="heuristic", subtasks=[ev.PlannedSubtask(id="s1", target_sections=["summary"])]),
    ev.RetrieveMapStarted(subtasks=[ev.BranchPending(subtask_id="s1", question="Why?")]),
    ev.RetrieveMapProgress(
        subtask_id="s1", status="done", queries=2, pages=1, evidences=3, page_errors=["u: 404"], sources=[SOURCE]
    ),
    ev.RetrieveMergeComplete(evidences_before=4, evidences_after=3, duplicates_removed=1),
    ev.RetrieveComplete(
        evidences=3,
        pages=1,
        branches=[BranchStat(subtask_id="s1", status="done")],
        sources=[ev.SourceUse(doc_id="doc-1", title="Doc one", subtasks=["s1"], evidences=3)],
    ),
    ev.SynthesizeMapProgress(subtask_id="s1", status="done", evidences=3, sections={"summary": 3}, orphans=0),
    ev.SynthesizeMergeComplete(sections={"summary": 3}, backfilled=["details"]),
    ev.DraftComposed(attempt=2, composer="extractive", claims=4, told=1),
    ev.SelfCheckComplete(
        attempt=2,
        verdict="revise",
        review=ReviewVerdict(verdict="ok", reason="fine"),
        layers={"l1": "failed"},
        violations=[Violation(check="anchor", detail="no quote")],
    ),
    ev.ReviseRequested(attempt=2, reason="1 violation", violations=1),
    ev.GateRejected(outcome="shipped", rejection=1, problems=["a [placeholder] left"]),
    ev.SynthesizeComplete(decision="fail_safe", reason="drafting attempts exhausted", attempts=2),
    ev.ModelCall(role="composer", model="m", prompt_tokens=10, completion_tokens=5, ms=12.5, finish_reason="length"),
    ev.Complete(outcome="fallback", version=1, report=REPORT),
    ev.RunFailed(message="store_artifact_loop_abort", detail="three rejections"),
]


def test_every_event_has_an_example_and_the_union_covers_every_model() -> None:
    assert {type(e) for e in EXAMPLES} == set(ev.ALL)
    assert len(ev.ALL) == len(ev.ALL_EVENTS) == len(ev.BY_NAME)  # no two models share a name
    union = ev.AnyEvent.__origin__  # type: ignore[attr-defined]
    assert set(union.__args__) == set(ev.ALL)
    assert ev.PIPELINE_EVENTS[0] == "run_started" and ev.PIPELINE_EVENTS[-1] == "complete"
    assert len(ev.PIPELINE_EVENTS) == 11


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: e.name)
def test_a_stored_payload_decodes_to_the_same_event(event: ev.Event) -> None:
    payload = event.payload()
    assert "event" not in payload  # the name travels beside the payload, as before
    assert ev.decode(event.name, payload) == event


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: e.name)
def test_every_event_has_its_own_timeline_row_and_renders_through_the_partials(event: ev.Event) -> None:
    line = describe(RunView(run_id="r"), event)
    assert line.summary and "not read by this version" not in line.summary
    assert line.kind in {"info", "progress", "guard", "retry", "failure", "done"}

    templates = create_app(migrate=False).state.templates
    shape = graph_shape(build_graph())
    view = RunView(run_id="r")
    stored = _Stored(seq=1, name=event.name, payload=event.payload(), created_at=T0)
    messages = page_messages(templates, shape, view, stored)
    kinds = [m.event for m in messages]
    assert kinds[:3] == ["timeline", "topology", "status"]
    row = str(messages[0].data).replace("<wbr>", "")  # the line-break opportunities are markup, not text
    assert f'data-name="{event.name}"' in row and line.summary.split(":")[0].replace("'", "&#39;") in row
    assert f"<code>{event.name}</code>" in row
    if event.name in ev.TERMINAL_EVENTS:
        assert kinds[-2:] == ["report", "done"]


def test_emitting_is_strict_a_misspelt_or_missing_field_fails_where_the_event_is_built() -> None:
    with pytest.raises(ValidationError):
        ev.RetrieveMapProgress(subtask_id="s1", status="done", evidence=3)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        ev.GateRejected(outcome="shipped")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        ev.RetrieveMapProgress(subtask_id="s1", status="finished")  # type: ignore[arg-type]


def test_decoding_is_lenient_newer_fields_are_ignored_and_a_field_that_no_longer_fits_is_left_out() -> None:
    decoded = ev.decode("draft_composed", {"attempt": 2, "claims": 3, "added_later": True})
    assert decoded == ev.DraftComposed(attempt=2, claims=3)
    decoded = ev.decode("self_check_complete", {"attempt": 1, "verdict": "revise", "violations": [{"check": "x"}]})
    assert isinstance(decoded, ev.SelfCheckComplete) and decoded.verdict == "revise" and decoded.violations == []
    unknown = ev.decode("renamed_since", {"a": 1})
    assert isinstance(unknown, ev.Unrecognised) and unknown.data == {"a": 1}
    broken = ev.decode("gate_rejected", {"problems": ["x"]})  # its required fields are missing
    assert isinstance(broken, ev.Unrecognised)
    view = RunView(run_id="r")
    apply(view, 1, "renamed_since", {"a": 1}, T0)
    assert view.timeline[-1].summary == "renamed_since (not read by this version)"


def test_a_branch_page_error_is_a_note_once_and_a_failed_branch_once() -> None:
    view = RunView(run_id="r")
    first = apply_event(view, 1, ev.RetrieveMapProgress(subtask_id="s1", status="running", page_errors=["a: 404"]), T0)
    again = apply_event(
        view,
        2,
        ev.RetrieveMapProgress(subtask_id="s1", status="failed", error="boom", page_errors=["a: 404", "b: 500"]),
        T0 + timedelta(seconds=1),
    )
    last = apply_event(view, 3, ev.RetrieveMapProgress(subtask_id="s1", status="failed", error="boom"), T0)
    assert first is not None and again is not None and last is not None
    assert first.notes == [("branch s1: page failed: a: 404", True)]
    assert again.notes == [("branch s1: page failed: b: 500", True), ("branch s1 failed: boom", True)]
    assert last.notes == []
    assert apply_event(view, 2, ev.RunFailed(message="late"), T0) is None  # already applied: nothing changes
    assert view.status == "running" and view.branches["s1"].page_errors == ["a: 404", "b: 500"]


class _Stored:
    def __init__(self, *, seq: int, name: str, payload: dict[str, object], created_at: datetime) -> None:
        self.seq, self.name, self.payload, self.created_at = seq, name, payload, created_at


def test_every_key_sent_before_is_still_sent_null_when_it_has_no_value() -> None:
    """The payloads keep the keys the hand-built dicts had: null values stay (a JSON client reading
    ``payload["cost_usd"]`` still finds it); only the keys the dicts left out when empty are left out."""
    call = ev.ModelCall(role="judge", model="m").payload()
    assert call["cost_usd"] is None and call["totals"]["cost_usd"] is None
    assert "error" not in call and "finish_reason" not in call
    routed = ev.RouteDecided(route="proceed").payload()
    assert routed["layer"] is None and routed["matched"] is None
    assert ev.DraftComposed(attempt=1).payload()["failure"] is None
    assert ev.SynthesizeComplete(decision="ship").payload()["confidence"] is None
    running = ev.RetrieveMapProgress(subtask_id="s1", status="running").payload()
    assert not {"error", "page_errors", "sources"} & set(running)
    assert ev.RunFailed(message="boom").payload() == {"message": "boom"}
    assert "reflection_added" not in ev.PlannerComplete().payload()


def test_decoding_ignores_keys_a_later_version_added_at_any_depth() -> None:
    row = {**SOURCE.model_dump(mode="json"), "added_later": 1}
    payload = {"subtask_id": "s1", "status": "done", "sources": [row], "also_new": True}
    decoded = ev.decode("retrieve_map_progress", payload)
    assert isinstance(decoded, ev.RetrieveMapProgress) and decoded.sources == [SOURCE]
    with pytest.raises(ValidationError):  # building one is still strict, nested rows included
        ev.OpenedSource(**row)


def test_the_merge_row_says_what_a_direct_answer_took_and_an_old_payload_without_it_still_reads() -> None:
    took = ev.SynthesizeMergeComplete(sections={"answer": 3, "details": 1}, answers={"answer": ["e1", "e2"]})
    assert describe(RunView(run_id="r"), took).summary == (
        "evidence per section — answer: 3, details: 1; answer took the 2 most relevant"
    )
    old = ev.decode("synthesize_merge_complete", {"sections": {"key_findings": 2}, "backfilled": []})
    assert old == ev.SynthesizeMergeComplete(sections={"key_findings": 2}) and old.answers == {}
    assert describe(RunView(run_id="r"), old).summary == "evidence per section — key_findings: 2"
