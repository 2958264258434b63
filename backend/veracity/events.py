"""The run's events: one pydantic model per event, emitted by the graph's nodes and the run service, stored as
``(name, payload)`` rows and decoded once (``decode``) by the one reducer (``veracity.runs.reducer``) that the run
page, its SSE partials, replay and the CLI's progress all read.

Wire format: an event's stored and streamed payload is ``event.payload()`` — the model's fields as JSON; a key the
hand-built dicts of before left out when it had no value (``omitted_when_none``) is still left out, every other key
is always there (null when it has no value). Every key sent before is sent now, nothing renamed or removed; a few
nested rows gained keys (a local passage's row carries the web-only fields as null, a violation its null fields).
The name travels beside the payload (the ``run_events.name`` column, the SSE ``event:`` line), so runs stored
before the models existed decode as they are.

Emitting is strict (an unknown or misspelt field is an error where the event is built); decoding is lenient
(keys a later version added are ignored at any depth, a field that no longer fits is read as absent, and an
event no model reads is kept, whole, as ``Unrecognised`` rather than breaking the page of an old run).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from veracity.domain import BranchStat, ReviewVerdict, Violation

logger = logging.getLogger(__name__)

BranchStatus = Literal["pending", "running", "done", "failed"]
LENIENT = {"lenient": True}
"""Validation context of ``decode``: unknown keys, at any depth, are dropped instead of refused."""


class Part(BaseModel):
    """An event or a value inside one: strict when built (an unknown field is an error), lenient when a stored
    payload is decoded (``LENIENT`` context: unknown keys — fields a later version added — are ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_only(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, dict) and info.context and info.context.get("lenient"):
            return {k: v for k, v in data.items() if k in cls.model_fields}
        return data


class Event(Part):
    """One event of a run. ``name`` is what it is stored and streamed as."""

    name: ClassVar[str]
    omitted_when_none: ClassVar[frozenset[str]] = frozenset()
    """Keys the payload leaves out when they have no value (as the hand-built dicts did); every other key is
    always there, null when it has no value."""
    event: str
    """The discriminator (the same as ``name``); not part of the payload."""

    def payload(self) -> dict[str, Any]:
        """What is stored and streamed: the fields as JSON (``omitted_when_none`` left out when they are None)."""
        data = self.model_dump(mode="json", exclude={"event"})
        return {k: v for k, v in data.items() if not (v is None and k in self.omitted_when_none)}


# ---- the pipeline, in DESIGN.md's order -------------------------------------------------------------------


class RunStarted(Event):
    name = "run_started"
    event: Literal["run_started"] = "run_started"
    template: str
    corpus: str
    run_id: str = ""
    question: str = ""
    sections: list[str] = Field(default_factory=list)
    budgets: dict[str, int | float | None] = Field(default_factory=dict)
    composer: str = ""


class PlannedSubtask(Part):
    """A subtask as planned (``veracity.domain.Subtask``'s fields)."""

    id: str
    question: str = ""
    queries: list[str] = Field(default_factory=list)
    target_sections: list[str] = Field(default_factory=list)
    focus_terms: list[str] = Field(default_factory=list)


class PlannerComplete(Event):
    name = "planner_complete"
    omitted_when_none = frozenset({"reflection_added"})
    event: Literal["planner_complete"] = "planner_complete"
    planner: str = ""
    subtasks: list[PlannedSubtask] = Field(default_factory=list)
    coverage: dict[str, list[str]] = Field(default_factory=dict)
    unrouted_sections: list[str] = Field(default_factory=list)
    summary_sections: list[str] = Field(default_factory=list)
    reflection_added: list[str] | None = None
    """Sections a model planner's reflection on its first plan added (absent for the heuristic planner)."""


class BranchPending(Part):
    subtask_id: str
    status: BranchStatus = "pending"
    question: str = ""


class RetrieveMapStarted(Event):
    name = "retrieve_map_started"
    event: Literal["retrieve_map_started"] = "retrieve_map_started"
    subtasks: list[BranchPending] = Field(default_factory=list)


class OpenedSource(Part):
    """One page or passage a branch opened: a row of the run page's source inspector (no body text)."""

    order: int
    """The run-wide opening order (a page opened by two branches keeps its first number)."""
    kind: Literal["local", "web"]
    doc_id: str
    shared: bool = False
    """Opened first by another branch (this branch read what that one opened)."""
    rank: dict[str, float] = Field(default_factory=dict)
    title: str | None = None
    url: str | None = None
    final_url: str | None = None
    status: Literal["ok", "failed"] = "ok"
    cache: str | None = None
    http_status: int | None = None
    bytes: int | None = None
    content_type: str | None = None
    published: str | None = None
    paywalled: bool | None = None
    error_kind: str | None = None
    error: str | None = None
    fetched_at: str | None = None
    elapsed_ms: float | None = None


class RetrieveMapProgress(Event):
    name = "retrieve_map_progress"
    omitted_when_none = frozenset({"error", "page_errors", "sources"})
    event: Literal["retrieve_map_progress"] = "retrieve_map_progress"
    subtask_id: str
    status: BranchStatus
    queries: int = 0
    pages: int = 0
    evidences: int = 0
    error: str | None = None
    page_errors: list[str] | None = None
    sources: list[OpenedSource] | None = None
    """What the branch opened, on its final progress event."""


class RetrieveMergeComplete(Event):
    name = "retrieve_merge_complete"
    event: Literal["retrieve_merge_complete"] = "retrieve_merge_complete"
    evidences_before: int = 0
    evidences_after: int = 0
    duplicates_removed: int = 0
    answered: float | None = None
    """The question-level judgement: probability that the best evidence answers the question."""
    answered_cutoff: float | None = None
    withheld: int = 0
    """Evidences withheld because the judgement fell below its cut-off (shown as the closest passages)."""


class SourceUse(Part):
    """A source the merged evidence came from: which branches found it and how much of it was kept."""

    doc_id: str
    title: str = ""
    url: str | None = None
    published: str | None = None
    corpus: str | None = None
    subtasks: list[str] = Field(default_factory=list)
    evidences: int = 0
    snippet: str = ""


class RetrieveComplete(Event):
    name = "retrieve_complete"
    event: Literal["retrieve_complete"] = "retrieve_complete"
    evidences: int = 0
    pages: int = 0
    branches: list[BranchStat] = Field(default_factory=list)
    failed_branches: list[str] = Field(default_factory=list)
    sources: list[SourceUse] = Field(default_factory=list)


class SynthesizeMapProgress(Event):
    name = "synthesize_map_progress"
    omitted_when_none = frozenset({"sections", "orphans"})
    event: Literal["synthesize_map_progress"] = "synthesize_map_progress"
    subtask_id: str
    status: BranchStatus
    evidences: int = 0
    sections: dict[str, int] | None = None
    """Evidence this branch routed to each section."""
    orphans: int | None = None
    """Evidence this branch could route to none of its sections."""


class SynthesizeMergeComplete(Event):
    name = "synthesize_merge_complete"
    event: Literal["synthesize_merge_complete"] = "synthesize_merge_complete"
    sections: dict[str, int] = Field(default_factory=dict)
    """Evidence routed to each section."""
    backfilled: list[str] = Field(default_factory=list)
    answers: dict[str, list[str]] = Field(default_factory=dict)
    """Per direct-answer section (a template's ``answers``), the most relevant evidence it took, best first."""


class SelfCheckComplete(Event):
    name = "self_check_complete"
    event: Literal["self_check_complete"] = "self_check_complete"
    attempt: int = 1
    verdict: str = ""
    review: ReviewVerdict | None = None
    layers: dict[str, Literal["passed", "failed", "skipped"]] = Field(default_factory=dict)
    violations: list[Violation] = Field(default_factory=list)
    sections: dict[str, str | None] = Field(default_factory=dict)
    claims: int = 0
    off_topic: int = 0
    confidence: float | None = None


class SynthesizeComplete(Event):
    name = "synthesize_complete"
    event: Literal["synthesize_complete"] = "synthesize_complete"
    decision: str
    reason: str = ""
    attempts: int = 0
    confidence: float | None = None
    sections: dict[str, str | None] = Field(default_factory=dict)


class Complete(Event):
    name = "complete"
    event: Literal["complete"] = "complete"
    outcome: str
    version: int
    report: dict[str, Any]
    """The stored artifact, as its JSON (the same document ``GET /v1/research/{id}`` answers)."""
    metrics: dict[str, Any] = Field(default_factory=dict)


# ---- guards ---------------------------------------------------------------------------------------------


class RouteDecided(Event):
    name = "route_decided"
    event: Literal["route_decided"] = "route_decided"
    route: str
    reason: str = ""
    layer: str | None = None
    matched: list[str] | str | None = None


class DraftComposed(Event):
    name = "draft_composed"
    event: Literal["draft_composed"] = "draft_composed"
    attempt: int = 1
    composer: str = ""
    claims: int = 0
    told: int = 0
    """Violations of the last attempt the composer was told of."""
    malformed: bool = False
    failure: str | None = None


class ReviseRequested(Event):
    name = "revise_requested"
    event: Literal["revise_requested"] = "revise_requested"
    attempt: int = 1
    reason: str = ""
    violations: int = 0


class GateRejected(Event):
    name = "gate_rejected"
    event: Literal["gate_rejected"] = "gate_rejected"
    outcome: str
    rejection: int
    problems: list[str] = Field(default_factory=list)


# ---- models and errors ----------------------------------------------------------------------------------


class RoleUsage(BaseModel):
    model_config = ConfigDict(frozen=True)
    calls: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ms: float = 0.0


class Usage(BaseModel):
    """A run's model calls so far."""

    model_config = ConfigDict(frozen=True)
    calls: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    by_role: dict[str, RoleUsage] = Field(default_factory=dict)


class ModelCall(Event):
    name = "model_call"
    omitted_when_none = frozenset({"error", "finish_reason"})
    event: Literal["model_call"] = "model_call"
    role: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ms: float = 0.0
    cost_usd: float | None = None
    error: str | None = None
    finish_reason: str | None = None
    totals: Usage = Field(default_factory=Usage)


class RunFailed(Event):
    name = "error"
    omitted_when_none = frozenset({"detail"})
    event: Literal["error"] = "error"
    message: str
    """A stable code (``store_artifact_loop_abort``) or a sentence."""
    detail: str | None = None


class Unrecognised(BaseModel):
    """A stored event no model reads: an unknown name, or a payload that no longer fits its model. Kept whole so
    the timeline still shows it."""

    model_config = ConfigDict(frozen=True)
    name: str
    data: dict[str, Any]


AnyEvent = Annotated[
    RunStarted
    | PlannerComplete
    | RetrieveMapStarted
    | RetrieveMapProgress
    | RetrieveMergeComplete
    | RetrieveComplete
    | SynthesizeMapProgress
    | SynthesizeMergeComplete
    | SelfCheckComplete
    | SynthesizeComplete
    | Complete
    | RouteDecided
    | DraftComposed
    | ReviseRequested
    | GateRejected
    | ModelCall
    | RunFailed,
    Field(discriminator="event"),
]
"""Every event the pipeline emits, discriminated by ``event``."""

PIPELINE: tuple[type[Event], ...] = (
    RunStarted,
    PlannerComplete,
    RetrieveMapStarted,
    RetrieveMapProgress,
    RetrieveMergeComplete,
    RetrieveComplete,
    SynthesizeMapProgress,
    SynthesizeMergeComplete,
    SelfCheckComplete,
    SynthesizeComplete,
    Complete,
)
"""The eleven events of DESIGN.md, in order."""
GUARDS: tuple[type[Event], ...] = (RouteDecided, DraftComposed, ReviseRequested, GateRejected)
ALL: tuple[type[Event], ...] = (*PIPELINE, *GUARDS, ModelCall, RunFailed)
BY_NAME: dict[str, type[Event]] = {cls.name: cls for cls in ALL}

PIPELINE_EVENTS = tuple(cls.name for cls in PIPELINE)
ALL_EVENTS = tuple(BY_NAME)
TERMINAL_EVENTS = frozenset({Complete.name, RunFailed.name})


def decode(name: str, payload: dict[str, Any]) -> Event | Unrecognised:
    """A stored ``(name, payload)`` as its event: the one place a payload is read by key."""
    cls = BY_NAME.get(name)
    if cls is None:
        return Unrecognised(name=name, data=payload)
    known = {k: v for k, v in payload.items() if k in cls.model_fields}
    for _ in range(len(known) + 1):
        try:
            return cls.model_validate(known, context=LENIENT)
        except ValidationError as exc:
            # A field that no longer fits (an older run's shape) is read as absent; the rest still counts.
            bad = {err["loc"][0] for err in exc.errors() if err["loc"] and err["loc"][0] in known}
            if not bad:
                break
            logger.warning("stored %s event: %s not readable, left out", name, ", ".join(map(str, sorted(bad))))
            known = {k: v for k, v in known.items() if k not in bad}
    return Unrecognised(name=name, data=payload)
