"""The server-side reducer: folds stored or live events into the view the run page renders.

The live page and a reopened run use this same function over the same events, so they render the
same. It is idempotent and monotonic: an event at or below the last applied seq changes nothing, a node
or branch status only moves forward (pending → running → done/failed), counters never go down.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from veracity.events import (
    Complete,
    DraftComposed,
    Event,
    GateRejected,
    ModelCall,
    PlannerComplete,
    RetrieveComplete,
    RetrieveMapProgress,
    RetrieveMapStarted,
    RetrieveMergeComplete,
    ReviseRequested,
    RouteDecided,
    RunFailed,
    RunStarted,
    SelfCheckComplete,
    SynthesizeComplete,
    SynthesizeMapProgress,
    SynthesizeMergeComplete,
    Unrecognised,
    decode,
)
from veracity.runs.describe import Line, describe, failure_text
from veracity.runs.view import DECISION_NOTES, STATUS_RANK, Branch, InspectorRow, RunView, StoredEvent, TimelineRow

__all__ = ["Line", "RunView", "StoredEvent", "apply", "apply_event", "describe", "failure_text", "reduce_events"]


def _advance(current: str, new: str) -> str:
    return new if STATUS_RANK.get(new, 0) > STATUS_RANK.get(current, 0) else current


def _set(view: RunView, node: str, status: str) -> None:
    view.nodes[node] = _advance(view.nodes[node], status)


def _branch(view: RunView, subtask_id: str) -> Branch:
    return view.branches.setdefault(subtask_id, Branch(subtask_id=subtask_id))


def _fold(view: RunView, event: Event | Unrecognised) -> None:
    """The event's effect on the view."""
    match event:
        case RunStarted():
            view.template, view.question = event.template, event.question
            _set(view, "route", "running")
        case RouteDecided():
            _set(view, "route", "done")
            view.node_notes["route"] = event.route
        case PlannerComplete():
            _set(view, "route", "done")
            _set(view, "plan", "done")
            for st in event.subtasks:
                b = _branch(view, st.id)
                b.question, b.targets = st.question, list(st.target_sections)
        case RetrieveMapStarted():
            _set(view, "retrieve", "running")
            for pending in event.subtasks:
                _branch(view, pending.subtask_id)
        case RetrieveMapProgress():
            b = _branch(view, event.subtask_id)
            b.retrieve = _advance(b.retrieve, event.status)
            b.queries, b.pages = max(b.queries, event.queries), max(b.pages, event.pages)
            b.evidences = max(b.evidences, event.evidences)
            b.error = event.error or b.error
            if event.page_errors and len(event.page_errors) > len(b.page_errors):
                b.page_errors = list(event.page_errors)
            for row in event.sources or []:
                entry = view.opened.setdefault(row.order, InspectorRow(**row.model_dump(), subtasks=[]))
                if event.subtask_id not in entry.subtasks:
                    entry.subtasks.append(event.subtask_id)
        case RetrieveMergeComplete():
            _set(view, "retrieve", "done")
            _set(view, "retrieve_merge", "done")
            view.withheld = event.withheld
        case RetrieveComplete():
            view.sources = list(event.sources)
            view.node_notes["retrieve_merge"] = (
                f"{event.evidences} evidences withheld" if view.withheld else f"{event.evidences} evidences"
            )
        case SynthesizeMapProgress():
            _set(view, "synthesize", "running")
            b = _branch(view, event.subtask_id)
            b.synthesize = _advance(b.synthesize, event.status)
        case SynthesizeMergeComplete():
            _set(view, "synthesize", "done")
            _set(view, "synthesize_merge", "done")
            _set(view, "compose", "running")
            view.sections = dict(event.sections)
        case DraftComposed():
            _set(view, "compose", "failed" if event.failure else "done")
            _set(view, "verify", "running")
            view.node_notes["compose"] = f"attempt {event.attempt}"
            view.attempt = max(view.attempt, event.attempt)
        case SelfCheckComplete():
            _set(view, "compose", "done")
            _set(view, "verify", "done")
            _set(view, "decide", "running")
            view.node_notes["verify"] = f"verdict {event.verdict}"
            view.verdict = event.verdict
        case ReviseRequested():
            view.revisions += 1
            view.node_notes["decide"] = "revise"
            view.node_notes["compose"] = f"attempt {event.attempt + 1}"
        case SynthesizeComplete():
            _set(view, "decide", "done")
            view.decision = event.decision
            view.node_notes["decide"] = DECISION_NOTES.get(event.decision, event.decision)
        case ModelCall():
            view.model_usage = event.totals
            view.model_calls += 1
        case Complete():
            view.status = "done"
            view.outcome = event.outcome
            view.report = event.report
            view.version = event.version
            for node, status in view.nodes.items():
                if status == "pending":
                    view.nodes[node] = "skipped"
        case RunFailed():
            view.status = "failed"
            view.error = event.message
            view.error_detail = event.detail
            for node, status in view.nodes.items():
                view.nodes[node] = "failed" if status == "running" else ("skipped" if status == "pending" else status)
        case GateRejected() | Unrecognised():
            pass


def apply_event(view: RunView, seq: int, event: Event | Unrecognised, created_at: datetime) -> Line | None:
    """Fold one event into the view; what it says (None for a late or repeated event, which changes nothing)."""
    if seq <= view.last_seq:
        return None  # late or repeated: already applied
    view.last_seq = seq
    if view.started_at is None:
        view.started_at = created_at
    offset = int((created_at - view.started_at).total_seconds() * 1000)
    line = describe(view, event)
    name = event.name
    view.timeline.append(
        TimelineRow(
            seq=seq,
            name=name,
            at=created_at.strftime("%H:%M:%S"),
            offset_ms=offset,
            summary=line.summary,
            kind=line.kind,
        )
    )
    if not view.finished:
        view.status = "running"
    _fold(view, event)
    return line


def apply(view: RunView, seq: int, name: str, payload: dict[str, Any], created_at: datetime) -> Line | None:
    """Fold one stored event (decoded here, the one place a stored payload is read) into the view."""
    if seq <= view.last_seq:
        return None
    return apply_event(view, seq, decode(name, payload), created_at)


def reduce_events(run_id: str, events: Iterable[StoredEvent]) -> RunView:
    view = RunView(run_id=run_id)
    for event in events:
        apply(view, event.seq, event.name, event.payload, event.created_at)
    return view
