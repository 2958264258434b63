"""The server-side reducer: folds stored or live events into the view the run page renders.

The live page and a reopened run use this same function over the same events, so they render the
same. It is idempotent and monotonic: an event at or below the last applied seq changes nothing, a node
or branch status only moves forward (pending → running → done/failed), counters never go down.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from pydantic import ConfigDict

from veracity.events import (
    Complete,
    DraftComposed,
    Event,
    GateRejected,
    ModelCall,
    OpenedSource,
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
    SourceUse,
    SynthesizeComplete,
    SynthesizeMapProgress,
    SynthesizeMergeComplete,
    Unrecognised,
    Usage,
    decode,
)
from veracity.graph.builder import NODE_ORDER

STATUS_RANK = {"pending": 0, "skipped": 1, "running": 2, "revise": 3, "done": 4, "failed": 5}
NODES = NODE_ORDER
DECISION_NOTES = {"fail_safe": "fallback (floor answer)", "handoff": "hand off to a person"}
"""How the decide node's outcome reads on the topology."""


@dataclass
class Branch:
    subtask_id: str
    question: str = ""
    targets: list[str] = field(default_factory=list)
    retrieve: str = "pending"
    synthesize: str = "pending"
    queries: int = 0
    pages: int = 0
    evidences: int = 0
    error: str | None = None
    page_errors: list[str] = field(default_factory=list)


class InspectorRow(OpenedSource):
    """A row of the source inspector: what was opened, and every branch that read it."""

    model_config = ConfigDict(frozen=False)
    subtasks: list[str]


class StoredEvent(Protocol):
    """A stored event row (``veracity.db.models.RunEvent``)."""

    @property
    def seq(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def payload(self) -> dict[str, Any]: ...
    @property
    def created_at(self) -> datetime: ...


@dataclass
class TimelineRow:
    seq: int
    name: str
    at: str
    offset_ms: int
    summary: str
    kind: str  # "info" | "progress" | "guard" | "retry" | "failure" | "done"


@dataclass
class RunView:
    run_id: str
    status: str = "pending"
    last_seq: int = 0
    started_at: datetime | None = None
    template: str = ""
    question: str = ""
    nodes: dict[str, str] = field(default_factory=lambda: dict.fromkeys(NODES, "pending"))
    node_notes: dict[str, str] = field(default_factory=dict)
    branches: dict[str, Branch] = field(default_factory=dict)
    timeline: list[TimelineRow] = field(default_factory=list)
    sources: list[SourceUse] = field(default_factory=list)
    opened: dict[int, InspectorRow] = field(default_factory=dict)
    """Pages and passages opened, by their run-wide opening order (the source inspector)."""
    sections: dict[str, int] = field(default_factory=dict)
    report: dict[str, Any] | None = None
    outcome: str | None = None
    error: str | None = None
    error_detail: str | None = None
    model_usage: Usage | None = None
    """Model calls, tokens and cost so far (from the last ``model_call``)."""
    model_calls: int = 0
    """``model_call`` events seen."""
    attempt: int = 0
    """The latest draft's attempt number."""
    verdict: str | None = None
    """The latest self-check's verdict."""
    decision: str | None = None
    """The decide node's decision, once taken."""
    revisions: int = 0
    """How many times the bounded revise loop was taken (``revise_requested``)."""
    version: int | None = None
    """The artifact version the report shown is (the one ``complete`` wrote, or one picked from the history)."""

    @property
    def opened_in_order(self) -> list[InspectorRow]:
        return [self.opened[k] for k in sorted(self.opened)]

    def source_sections(self, subtasks: list[str], doc_id: str | None = None) -> str:
        """The sections a source serves, space-separated (the source inspector filters on it): the sections its
        branches were planned for, and, once there is a report, the sections whose claims cite it."""
        sections: set[str] = set()
        for subtask in subtasks:
            if subtask in self.branches:
                sections.update(self.branches[subtask].targets)
        if self.report and doc_id:
            cited = {ev["id"] for ev in self.report.get("evidence", []) if ev.get("doc_id") == doc_id}
            for section in self.report.get("sections", []):
                if any(eid in cited for claim in section.get("claims", []) for eid in claim.get("evidence_ids", [])):
                    sections.add(section["id"])
        return " ".join(sorted(sections))

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed")


def _advance(current: str, new: str) -> str:
    return new if STATUS_RANK.get(new, 0) > STATUS_RANK.get(current, 0) else current


def _set(view: RunView, node: str, status: str) -> None:
    view.nodes[node] = _advance(view.nodes[node], status)


def _branch(view: RunView, subtask_id: str) -> Branch:
    return view.branches.setdefault(subtask_id, Branch(subtask_id=subtask_id))


@dataclass(frozen=True)
class Line:
    """What one event says: the timeline's one-line summary and kind, the CLI's ``key=value`` fields, and the
    lines worth keeping above a progress bar (text, is_failure)."""

    summary: str
    kind: str
    fields: list[tuple[str, object]] = field(default_factory=list)
    notes: list[tuple[str, bool]] = field(default_factory=list)
    subject: str = ""
    """Which branch, and its status, for a branch's event (``s1 done``)."""


def _branch_line(view: RunView, e: RetrieveMapProgress) -> Line:
    kind = "failure" if e.status == "failed" else "progress"
    text = f"{e.subtask_id} {e.status}: {e.queries} queries, {e.pages} pages, {e.evidences} evidences"
    fields: list[tuple[str, object]] = [("queries", e.queries), ("pages", e.pages), ("evidences", e.evidences)]
    if e.error:
        text += f" — {e.error}"
    page_errors = e.page_errors or []
    if page_errors:
        text += f" — {len(page_errors)} page(s) failed: {'; '.join(page_errors[:3])}"
        kind = "failure"
        fields.append(("page_errors", len(page_errors)))
    if e.error:
        fields.append(("error", e.error))
    before = view.branches.get(e.subtask_id)
    seen = len(before.page_errors) if before else 0
    notes = [(f"branch {e.subtask_id}: page failed: {err}", True) for err in page_errors[seen:]]
    if e.status == "failed" and (before is None or before.retrieve != "failed"):
        notes.append((f"branch {e.subtask_id} failed: {e.error or 'no reason given'}", True))
    return Line(text, kind, fields, notes, subject=f"{e.subtask_id} {e.status}")


def _model_line(e: ModelCall) -> Line:
    t = e.totals
    fields: list[tuple[str, object]] = [
        ("role", e.role),
        ("model", e.model),
        ("prompt_tokens", e.prompt_tokens),
        ("completion_tokens", e.completion_tokens),
        ("ms", e.ms),
        ("error", e.error),
    ]
    if e.error:
        text = f"{e.role} call to {e.model} {e.error} after {e.ms} ms (run: {t.calls} calls, {t.failed} failed)"
        return Line(text, "failure", fields)
    cut = e.finish_reason == "length"
    if cut:
        fields.append(("finish_reason", "length"))
    cost = f", ${e.cost_usd:.4f}" if e.cost_usd is not None else ""
    text = (
        f"{e.role} call to {e.model}: {e.prompt_tokens} prompt + {e.completion_tokens} completion tokens in "
        f"{e.ms} ms{cost} (run: {t.calls} calls, {t.prompt_tokens} + {t.completion_tokens} tokens)"
        + (" — cut off at the token cap" if cut else "")
    )
    return Line(text, "guard" if cut else "info", fields)


def describe(view: RunView, event: Event | Unrecognised) -> Line:
    """What ``event`` says, read against the view before it is applied (for what is new since)."""
    match event:
        case RunStarted():
            return Line(
                f"template {event.template} on corpus {event.corpus}",
                "info",
                [("template", event.template), ("corpus", event.corpus)],
            )
        case RouteDecided():
            proceed = event.route == "proceed"
            fields: list[tuple[str, object]] = [("route", event.route)]
            if not proceed:
                fields.append(("reason", event.reason))
            notes = [] if proceed else [(f"routed: {event.route} ({event.reason})", False)]
            return Line(f"route {event.route}: {event.reason}", "info" if proceed else "guard", fields, notes)
        case PlannerComplete():
            fields = [("subtasks", len(event.subtasks)), ("planner", event.planner or None)]
            return Line(f"{len(event.subtasks)} subtasks planned", "info", fields)
        case RetrieveMapStarted():
            n = len(event.subtasks)
            return Line(f"{n} retrieve branches started", "info", [("branches", n)])
        case RetrieveMapProgress():
            return _branch_line(view, event)
        case RetrieveMergeComplete():
            return Line(
                f"{event.evidences_after} evidences after removing {event.duplicates_removed} duplicates",
                "info",
                [("evidences_before", event.evidences_before), ("evidences_after", event.evidences_after)],
            )
        case RetrieveComplete():
            text = f"{event.evidences} evidences from {len(event.sources)} sources"
            fields = [
                ("evidences", event.evidences),
                ("pages", event.pages),
                ("failed_branches", len(event.failed_branches)),
            ]
            if event.failed_branches:
                return Line(text + f"; failed branches: {', '.join(event.failed_branches)}", "failure", fields)
            return Line(text, "info", fields)
        case SynthesizeMapProgress():
            return Line(
                f"{event.subtask_id} {event.status}: {event.evidences} evidences",
                "failure" if event.status == "failed" else "progress",
                [("evidences", event.evidences)],
                subject=f"{event.subtask_id} {event.status}",
            )
        case SynthesizeMergeComplete():
            routed = ", ".join(f"{k}: {v}" for k, v in event.sections.items())
            return Line(
                f"evidence per section — {routed or 'none routed'}", "info", [("backfilled", len(event.backfilled))]
            )
        case DraftComposed():
            fields = [("attempt", event.attempt), ("claims", event.claims)]
            if event.malformed:
                fields.append(("malformed", True))
            if event.failure:
                fields.append(("failure", event.failure))
                failed = [(f"draft {event.attempt} failed: {event.failure}", True)]
                return Line(f"attempt {event.attempt}: {event.failure}", "failure", fields, failed)
            told = f", told {event.told} violation(s) of the last attempt" if event.told else ""
            shape = "malformed output" if event.malformed else f"{event.claims} claims"
            kind = "guard" if event.malformed else ("retry" if event.attempt > 1 else "info")
            notes = [(f"draft {event.attempt} was malformed", True)] if event.malformed else []
            return Line(f"attempt {event.attempt} by {event.composer}: {shape}{told}", kind, fields, notes)
        case SelfCheckComplete():
            n = len(event.violations)
            layers = ", ".join(f"{k.upper()} {v}" for k, v in event.layers.items())
            reviewer = event.review.verdict if event.review else "-"
            return Line(
                f"attempt {event.attempt}: {layers}; reviewer {reviewer}; verdict {event.verdict}, {n} violation(s)",
                "guard" if n or event.verdict != "ok" else "info",
                [("attempt", event.attempt), ("verdict", event.verdict), ("claims", event.claims)],
            )
        case ReviseRequested():
            return Line(
                f"revise: {event.reason}",
                "retry",
                [("attempt", event.attempt), ("reason", event.reason)],
                [(f"draft {event.attempt} sent back: {event.reason}", False)],
            )
        case GateRejected():
            problems = "; ".join(event.problems)
            return Line(
                f"gate rejected the {event.outcome} report: {problems}",
                "failure",
                [("outcome", event.outcome), ("rejection", event.rejection), ("problems", problems)],
                [(f"gate rejected the {event.outcome} report ({event.rejection}): {problems}", True)],
            )
        case SynthesizeComplete():
            return Line(
                f"decision {event.decision}: {event.reason}",
                "info",
                [("decision", event.decision), ("attempts", event.attempts)],
            )
        case ModelCall():
            return _model_line(event)
        case Complete():
            return Line(f"outcome {event.outcome} (artifact v{event.version})", "done", [("outcome", event.outcome)])
        case RunFailed():
            said = failure_text(event.message, event.detail)
            return Line(
                event.message + (f" — {event.detail}" if event.detail else ""),
                "failure",
                [("message", event.message), ("detail", event.detail)],
                [(f"run failed: {said}", True)],
            )
        case Unrecognised():
            return Line(f"{event.name} (not read by this version)", "info")
    raise AssertionError(f"no description for {type(event).__name__}")  # pragma: no cover — every event has a case


def failure_text(message: str, detail: str | None) -> str:
    """What an ``error`` event says: its message (a stable code or a sentence), then the ``detail`` a reader needs
    to understand it when there is one (``store_artifact_loop_abort: The pre-persistence gate rejected …``)."""
    return f"{message}: {detail}" if detail else message


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
        case RetrieveComplete():
            view.sources = list(event.sources)
            view.node_notes["retrieve_merge"] = f"{event.evidences} evidences"
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
