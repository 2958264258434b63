"""What the run page renders of a run: its view, folded from its events by ``veracity.runs.reducer``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from pydantic import ConfigDict

from veracity.events import (
    OpenedSource,
    SourceUse,
    Usage,
)
from veracity.graph import NODE_ORDER

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
    passages: int = 1
    """Passages of this one local document opened (the inspector shows a document once)."""


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
    withheld: int = 0
    """Evidences ``retrieve_merge`` withheld: together they do not answer the question."""
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
        """What was opened, in run-wide order: each web page once, and each local document once — its further
        passages folded into the row of its first (``passages`` counts them, ``bytes`` adds them up, branches
        joined), so one document is not listed twice."""
        rows: list[InspectorRow] = []
        documents: dict[str, InspectorRow] = {}
        for order in sorted(self.opened):
            row = self.opened[order]
            first = documents.get(row.doc_id) if row.kind == "local" else None
            if first is None:
                row = row.model_copy(deep=True)  # the view's own rows stay as the events made them
                rows.append(row)
                if row.kind == "local":
                    documents[row.doc_id] = row
                continue
            first.passages += 1
            first.bytes = (first.bytes or 0) + (row.bytes or 0)
            first.subtasks += [s for s in row.subtasks if s not in first.subtasks]
        return rows

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
