"""Run state, what a run's graph takes and hands back, and the payloads of the two fan-outs. Nodes read state and
return only the fields they own.

Fields written by parallel branches (``Send``) use an additive reducer so that every branch's output is
kept; everything else is last-writer-wins and written by exactly one node. The graph takes a :class:`RunInput` and
returns a :class:`GraphOutput` (its ``output_schema``): the part of the state a run's ending reads, and what a
redraft re-enters with; the rest of the state stays inside the graph.
"""

from __future__ import annotations

import operator
from typing import Annotated, Literal, TypedDict, cast

from pydantic import BaseModel, ConfigDict, Field

from veracity.domain import BranchStat, Draft, Evidence, ReviewVerdict, SectionDraft, Shard, Subtask, Violation
from veracity.graph.phases import AgentDecision


class RunState(TypedDict, total=False):
    run_id: str
    """The run's ID (32 hex characters); on every log line."""
    question: str
    """The user's question, validated before the graph starts."""
    corpus: str
    """Local corpus searched by the retrieve branches."""
    route: Literal["proceed", "escalate", "crisis"]
    """Written by ``route``: whether the run goes on to planning."""
    route_reason: str
    """Why ``route`` decided as it did (the matched phrase or classifier score)."""
    route_matched: list[str]
    """The phrases or terms the router matched."""
    route_domain: str | None
    """What a routed question is about (crisis, legal, medical, financial); None when it proceeds."""
    subtasks: list[Subtask]
    """Written by ``plan``: one entry per retrieve branch."""
    coverage: dict[str, list[str]]
    """Written by ``plan``: section id → subtask ids routed to it (the planner's coverage reflection)."""
    evidences: Annotated[list[Evidence], operator.add]
    """Appended by every ``retrieve`` branch, before dedupe."""
    branch_stats: Annotated[list[BranchStat], operator.add]
    """Appended by every ``retrieve`` branch: counters and failure reason."""
    evidence: list[Evidence]
    """Written by ``retrieve_merge``: deduplicated evidence, best-scored first."""
    withheld: list[Evidence]
    """Written by ``retrieve_merge``: the evidence kept back because it does not answer the question as a whole
    (``relevance.answered``); shown as the closest passages."""
    shards: Annotated[list[Shard], operator.add]
    """Appended by every ``synthesize`` branch."""
    section_evidence: dict[str, list[str]]
    """Written by ``synthesize_merge``: section id → evidence ids, deduplicated and backfilled."""
    attempt: int
    """Drafting attempts so far in the run, the gate's redrafts included; ``compose`` increments it, and the
    template's ``drafting_attempts`` bounds it."""
    composed: Draft
    """Written by ``compose``: the composer's raw text and its parse (disclaimer, stated confidence, contract)."""
    compose_violations: list[Violation]
    """Written by ``compose``: the output did not parse (malformed); ``verify`` passes these straight on."""
    failure: str | None
    """Written by ``compose``: the model errored or timed out; ``decide`` goes to the floor."""
    draft: list[SectionDraft]
    """Written by ``compose`` (parsed sections), then by ``verify`` (filler cut, labels, spans, status)."""
    violations: list[Violation]
    """Written by ``verify`` (or the gate): what failed — which claim, which check, why; fed to the next ``compose``."""
    review: ReviewVerdict
    """Written by ``verify``: the reviewer's typed verdict."""
    verdict: Literal["ok", "revise", "crisis"]
    """Written by ``verify``: the checks and the reviewer combined; code, not the model, has the last word."""
    language: str | None
    """Written by ``verify``: the language of the answer (for its disclaimer)."""
    confidence: float
    """Written by ``verify``: label weights × supported required sections, capped by the composer's own."""
    envelope: AgentDecision
    """The last decision turn's typed decision (route, then each decide); routing reads only this."""
    next_step: str
    """The step the last decide dispatched, after the legality check."""
    dispatch_error: str
    """A refused dispatch (a step not legal from the current phase), for the next turn and the floor to see."""
    decision: Literal["ship", "revise", "handoff", "crisis", "fail_safe"]
    """Written by ``decide``; routes the graph back to ``compose`` or to the end."""
    decision_reason: str
    """Why ``decide`` decided as it did."""
    needs_human_reason: str | None
    """Written by ``decide`` on ``handoff``: why a person must look at this."""


class RunInput(TypedDict):
    """What a run's graph starts from (its ``input_schema``)."""

    run_id: str
    question: str
    corpus: str


class GraphOutput(BaseModel):
    """What a run's graph hands back (its ``output_schema``), parsed once: the fields of :class:`RunState` that the
    run's ending reads (the floor, the report, the metrics) and that a redraft after the gate re-enters with. The
    graph returns only the keys its nodes wrote; a key no node wrote (a routed run is never planned) takes its
    default here. Every field is a :class:`RunState` field of the same name; see there for who writes it. A graph
    compiled without this schema (a test's own wiring) hands back its whole state: the rest is ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    run_id: str
    question: str
    corpus: str
    route: Literal["proceed", "escalate", "crisis"] = "proceed"
    """Whether the run went on to planning."""
    route_reason: str = ""
    """Why ``route`` decided as it did."""
    route_domain: str | None = None
    """What a routed question is about; None when it proceeds."""
    subtasks: list[Subtask] = Field(default_factory=list)
    """One per retrieve branch; none for a routed run."""
    branch_stats: list[BranchStat] = Field(default_factory=list)
    """Every retrieve branch's counters and failure reason."""
    evidence: list[Evidence] = Field(default_factory=list)
    """The deduplicated evidence, best-scored first."""
    withheld: list[Evidence] = Field(default_factory=list)
    """Evidence kept back: the question-level judgement found that it does not answer the question."""
    section_evidence: dict[str, list[str]] = Field(default_factory=dict)
    """Section id → evidence ids (a redraft composes from it)."""
    attempt: int = 0
    """Drafting attempts so far, the gate's redrafts included."""
    composed: Draft | None = None
    """The composer's last raw text and its parse."""
    draft: list[SectionDraft] = Field(default_factory=list)
    """The last checked draft."""
    language: str | None = None
    """The language of the answer."""
    confidence: float | None = None
    """The run's confidence; None before any draft was checked."""
    decision: Literal["ship", "revise", "handoff", "crisis", "fail_safe"] | None = None
    """What the last ``decide`` decided; None for a routed run."""
    decision_reason: str | None = None
    """Why it decided so; None when nothing decided."""
    needs_human_reason: str | None = None
    """Why a person must look at this (``handoff``)."""

    def redraft_input(self, violations: list[Violation]) -> RunState:
        """The state a redraft re-enters ``compose`` with: what the graph handed back (the keys it wrote, no
        defaults added) and what the gate found."""
        written = {name: getattr(self, name) for name in self.model_fields_set}
        return cast(RunState, {**written, "violations": violations})


class RetrieveTask(TypedDict):
    """What one ``retrieve`` branch sees (sent by the fan-out)."""

    run_id: str
    corpus: str
    question: str
    """The user's question: relevance is judged against it, whatever the sub-question."""
    subtask: Subtask


class SynthesizeTask(TypedDict):
    """What one ``synthesize`` branch sees (sent by the fan-out)."""

    run_id: str
    question: str
    subtask: Subtask
    evidence: list[Evidence]
