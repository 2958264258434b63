"""The server-side reducer: folds stored or live events into the view the run page renders.

The live page and a reopened run use this same function over the same events, so they render the
same. It is idempotent and monotonic: an event at or below the last applied seq changes nothing, a node
or branch status only moves forward (pending → running → done/failed), counters never go down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

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
    sources: list[dict[str, Any]] = field(default_factory=list)
    opened: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Pages and passages opened, by their run-wide opening order (the source inspector)."""
    sections: dict[str, int | str] = field(default_factory=dict)
    report: dict[str, Any] | None = None
    outcome: str | None = None
    error: str | None = None
    error_detail: str | None = None
    model_usage: dict[str, Any] | None = None
    """Model calls, tokens and cost so far (from the last ``model_call``)."""
    revisions: int = 0
    """How many times the bounded revise loop was taken (``revise_requested``)."""
    version: int | None = None
    """The artifact version the report shown is (the one ``complete`` wrote, or one picked from the history)."""

    @property
    def opened_in_order(self) -> list[dict[str, Any]]:
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


def _summary(name: str, p: dict[str, Any]) -> tuple[str, str]:
    """(one-line summary, kind) for the timeline."""
    if name == "run_started":
        return f"template {p.get('template')} on corpus {p.get('corpus')}", "info"
    if name == "planner_complete":
        return f"{len(p.get('subtasks', []))} subtasks planned", "info"
    if name == "retrieve_map_started":
        return f"{len(p.get('subtasks', []))} retrieve branches started", "info"
    if name in ("retrieve_map_progress", "synthesize_map_progress"):
        extra = f"{p.get('queries', 0)} queries, {p.get('pages', 0)} pages, " if name.startswith("retrieve") else ""
        kind = "failure" if p.get("status") == "failed" else "progress"
        text = f"{p.get('subtask_id')} {p.get('status')}: {extra}{p.get('evidences', 0)} evidences"
        if p.get("error"):
            text += f" — {p['error']}"
        if p.get("page_errors"):
            text += f" — {len(p['page_errors'])} page(s) failed: {'; '.join(p['page_errors'][:3])}"
            kind = "failure"
        return text, kind
    if name == "retrieve_merge_complete":
        return (
            f"{p.get('evidences_after')} evidences after removing {p.get('duplicates_removed')} duplicates",
            "info",
        )
    if name == "retrieve_complete":
        failed = p.get("failed_branches") or []
        text = f"{p.get('evidences')} evidences from {len(p.get('sources', []))} sources"
        return (text + f"; failed branches: {', '.join(failed)}", "failure") if failed else (text, "info")
    if name == "synthesize_merge_complete":
        routed = ", ".join(f"{k}: {v}" for k, v in p.get("sections", {}).items())
        return f"evidence per section — {routed or 'none routed'}", "info"
    if name == "draft_composed":
        if p.get("failure"):
            return f"attempt {p.get('attempt')}: {p['failure']}", "failure"
        told = f", told {p.get('told')} violation(s) of the last attempt" if p.get("told") else ""
        shape = "malformed output" if p.get("malformed") else f"{p.get('claims', 0)} claims"
        kind = "guard" if p.get("malformed") else ("retry" if int(p.get("attempt") or 1) > 1 else "info")
        return f"attempt {p.get('attempt')} by {p.get('composer')}: {shape}{told}", kind
    if name == "self_check_complete":
        n = len(p.get("violations", []))
        layers = ", ".join(f"{k.upper()} {v}" for k, v in p.get("layers", {}).items())
        review = p.get("review") or {}
        return (
            f"attempt {p.get('attempt')}: {layers}; reviewer {review.get('verdict', '-')}; "
            f"verdict {p.get('verdict')}, {n} violation(s)",
            "guard" if n or p.get("verdict") != "ok" else "info",
        )
    if name == "revise_requested":
        return f"revise: {p.get('reason')}", "retry"
    if name == "route_decided":
        return f"route {p.get('route')}: {p.get('reason')}", "guard" if p.get("route") != "proceed" else "info"
    if name == "gate_rejected":
        return f"gate rejected the {p.get('outcome')} report: {'; '.join(p.get('problems', []))}", "failure"
    if name == "synthesize_complete":
        return f"decision {p.get('decision')}: {p.get('reason')}", "info"
    if name == "model_call":
        t = p.get("totals") or {}
        cost = f", ${p['cost_usd']:.4f}" if p.get("cost_usd") is not None else ""
        if p.get("error"):
            return (
                f"{p.get('role')} call to {p.get('model')} {p['error']} after {p.get('ms')} ms "
                f"(run: {t.get('calls')} calls, {t.get('failed', 0)} failed)",
                "failure",
            )
        cut = " — cut off at the token cap" if p.get("finish_reason") == "length" else ""
        return (
            f"{p.get('role')} call to {p.get('model')}: {p.get('prompt_tokens')} prompt + "
            f"{p.get('completion_tokens')} completion tokens in {p.get('ms')} ms{cost} "
            f"(run: {t.get('calls')} calls, {t.get('prompt_tokens')} + {t.get('completion_tokens')} tokens){cut}",
            "guard" if cut else "info",
        )
    if name == "complete":
        return f"outcome {p.get('outcome')} (artifact v{p.get('version')})", "done"
    if name == "error":
        return str(p.get("message")) + (f" — {p['detail']}" if p.get("detail") else ""), "failure"
    return name, "info"


def apply(view: RunView, seq: int, name: str, payload: dict[str, Any], created_at: datetime) -> RunView:
    if seq <= view.last_seq:
        return view  # late or repeated: already applied
    view.last_seq = seq
    if view.started_at is None:
        view.started_at = created_at
    offset = int((created_at - view.started_at).total_seconds() * 1000)
    summary, kind = _summary(name, payload)
    view.timeline.append(
        TimelineRow(
            seq=seq,
            name=name,
            at=created_at.strftime("%H:%M:%S"),
            offset_ms=offset,
            summary=summary,
            kind=kind,
        )
    )
    if not view.finished:
        view.status = "running"
    p = payload
    if name == "run_started":
        view.template, view.question = p.get("template", ""), p.get("question", "")
        _set(view, "route", "running")
    elif name == "route_decided":
        _set(view, "route", "done")
        view.node_notes["route"] = p.get("route", "")
    elif name == "planner_complete":
        _set(view, "route", "done")
        _set(view, "plan", "done")
        for st in p.get("subtasks", []):
            b = _branch(view, st["id"])
            b.question, b.targets = st.get("question", ""), list(st.get("target_sections", []))
    elif name == "retrieve_map_started":
        _set(view, "retrieve", "running")
    elif name == "retrieve_map_progress":
        b = _branch(view, p["subtask_id"])
        b.retrieve = _advance(b.retrieve, p.get("status", "running"))
        b.queries, b.pages = max(b.queries, p.get("queries", 0)), max(b.pages, p.get("pages", 0))
        b.evidences = max(b.evidences, p.get("evidences", 0))
        b.error = p.get("error") or b.error
        for row in p.get("sources", []):
            entry = view.opened.setdefault(int(row.get("order", 0)), {**row, "subtasks": []})
            if p["subtask_id"] not in entry["subtasks"]:
                entry["subtasks"].append(p["subtask_id"])
    elif name == "retrieve_merge_complete":
        _set(view, "retrieve", "done")
        _set(view, "retrieve_merge", "done")
    elif name == "retrieve_complete":
        view.sources = list(p.get("sources", []))
        view.node_notes["retrieve_merge"] = f"{p.get('evidences', 0)} evidences"
    elif name == "synthesize_map_progress":
        _set(view, "synthesize", "running")
        b = _branch(view, p["subtask_id"])
        b.synthesize = _advance(b.synthesize, p.get("status", "running"))
    elif name == "synthesize_merge_complete":
        _set(view, "synthesize", "done")
        _set(view, "synthesize_merge", "done")
        _set(view, "compose", "running")
        view.sections = dict(p.get("sections", {}))
    elif name == "draft_composed":
        _set(view, "compose", "failed" if p.get("failure") else "done")
        _set(view, "verify", "running")
        view.node_notes["compose"] = f"attempt {p.get('attempt')}"
    elif name == "self_check_complete":
        _set(view, "compose", "done")
        _set(view, "verify", "done")
        _set(view, "decide", "running")
        view.node_notes["verify"] = f"verdict {p.get('verdict')}"
    elif name == "revise_requested":
        view.revisions += 1
        view.node_notes["decide"] = "revise"
        view.node_notes["compose"] = f"attempt {int(p.get('attempt', 1)) + 1}"
    elif name == "synthesize_complete":
        _set(view, "decide", "done")
        decision = str(p.get("decision", ""))
        view.node_notes["decide"] = DECISION_NOTES.get(decision, decision)
    elif name == "model_call":
        view.model_usage = p.get("totals")
    elif name == "complete":
        view.status = "done"
        view.outcome = p.get("outcome")
        view.report = p.get("report")
        view.version = p.get("version")
        for node, status in view.nodes.items():
            if status == "pending":
                view.nodes[node] = "skipped"
    elif name == "error":
        view.status = "failed"
        view.error = p.get("message")
        view.error_detail = p.get("detail")
        for node, status in view.nodes.items():
            view.nodes[node] = "failed" if status == "running" else ("skipped" if status == "pending" else status)
    return view


def reduce_events(run_id: str, events: list[Any]) -> RunView:
    view = RunView(run_id=run_id)
    for event in events:
        apply(view, event.seq, event.name, event.payload, event.created_at)
    return view
