"""The typed values that flow through a run: subtasks, evidence, claims, sections and the report."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

SectionStatus = Literal["supported", "thin_evidence", "not_found", "stale"]
Outcome = Literal["shipped", "escalated", "crisis", "handoff", "fallback"]
ClaimLabel = Literal["supported", "partial", "unsupported"]


WEB_SOURCE = "web"
"""The corpus name that means the open web: a run over it searches the web and fetches pages. Reserved — no
local corpus may take this name."""


class Subtask(BaseModel):
    id: str
    question: str = Field(description="The sub-question this branch researches.")
    queries: list[str]
    target_sections: list[str]
    focus_terms: list[str] = Field(
        default_factory=list, description="Content words of the user's question; evidence must touch one."
    )


class SourceRef(BaseModel):
    doc_id: str
    title: str
    url: str | None = None
    published: str | None = None
    fetched_at: str | None = None
    corpus: str | None = None


class Evidence(BaseModel):
    id: str
    quote: str
    start: int = Field(description="Offset of the quote's first character in the stored source text.")
    end: int = Field(description="Offset just past the quote's last character.")
    content_hash: str = Field(description="SHA-256 of the quote.")
    source: SourceRef
    origin_subtask_id: str
    score: float
    relevance: float | None = Field(
        default=None, description="Probability that the sentence helps answer the question (the relevance model)."
    )
    context_before: str = Field(default="", description="Source text just before the quote, as read.")
    context_after: str = Field(default="", description="Source text just after the quote, as read.")


CLOSEST_SHOWN = 5
"""Closest passages a run that keeps nothing shows, and names in its reason (the best sentences below the cut-off,
or withheld as not answering the question; fewer are worth reading)."""


class BranchStat(BaseModel):
    subtask_id: str
    status: Literal["done", "failed"]
    queries: int = 0
    pages: int = 0
    evidences: int = 0
    error: str | None = None
    closest_evidence: list[Evidence] = Field(
        default_factory=list,
        description="The best sentences below the relevance cut-off, as evidence (quote, offsets, source, "
        "relevance), never handed to the composer: what a run that keeps nothing shows as its closest passages.",
    )
    page_errors: list[str] = Field(
        default_factory=list, description="Pages this branch could not open (URL: why); the branch went on."
    )
    pages_read: int = Field(
        default=0, description="Pages or passages this branch opened and could read (a failed fetch not counted)."
    )


class Shard(BaseModel):
    subtask_id: str
    sections: dict[str, list[str]] = Field(description="section id → evidence ids routed there")
    orphans: int = 0


class SupportSpan(BaseModel):
    """Where a claim's support lies: offsets into the stored text of the evidence's source."""

    evidence_id: str
    start: int
    end: int


class Claim(BaseModel):
    text: str
    evidence_ids: list[str]
    label: ClaimLabel | None = None
    score: float | None = Field(default=None, description="The grounding judge's score, 0..1.")
    support: list[SupportSpan] = Field(default_factory=list, description="The span(s) the judge found.")
    reason: str | None = Field(default=None, description="Why the judge labelled the claim as it did.")
    relevance: float | None = Field(
        default=None, description="The relevance check's probability that the claim answers the question."
    )
    paragraph: int = Field(default=0, description="The paragraph of its section the claim belongs to (0 = first).")


class SectionDraft(BaseModel):
    id: str
    title: str
    claims: list[Claim] = Field(default_factory=list)
    status: SectionStatus | None = None
    note: str | None = None
    filler_cut: list[str] = Field(default_factory=list, description="Sentences cut: prose no evidence supports.")
    off_topic_cut: list[str] = Field(
        default_factory=list, description="Claims cut by the relevance check: they do not answer the question."
    )


Layer = Literal["compose", "l1", "relevance", "l2", "l3", "reviewer", "gate", "budget"]


class Violation(BaseModel):
    """One thing a check found wrong: which claim, which check, why. Fed verbatim into the next draft."""

    check: str
    layer: Layer = "l1"
    section_id: str | None = None
    claim_index: int | None = None
    claim: str | None = Field(default=None, description="The claim's text (shortened), for the next draft.")
    detail: str


class ReviewVerdict(BaseModel):
    """The reviewer's typed verdict: three named states, a reason, and concrete concerns on ``revise``."""

    verdict: Literal["ok", "revise", "crisis"]
    reason: str = Field(min_length=1, max_length=500)
    concerns: list[str] = Field(default_factory=list, max_length=20)


class Draft(BaseModel):
    """What a composer produced: the raw text (kept for the audit trail) and its parsed sections."""

    raw: str
    sections: list[SectionDraft]
    disclaimer: str | None = None
    confidence: float | None = Field(default=None, description="The composer's own confidence, when it states one.")
    needs_human: bool | None = None
    contract: dict[str, object] | None = Field(default=None, description="The strict JSON contract, when required.")
    refine: str | None = Field(
        default=None, description="What the optional refine pass did: accepted, or why its rewrite was rejected."
    )


DIGEST_ID = "evidence_digest"
"""The floor's own section: the evidence digest, or, when nothing answers the question (nothing reached the
relevance cut-off, or what did was withheld as not answering it), the closest passages."""


class ReportSection(BaseModel):
    id: str
    title: str
    required: bool
    status: SectionStatus
    claims: list[Claim]
    note: str | None = None
    filler_cut: int = Field(default=0, description="Sentences cut because no evidence supports them.")

    @property
    def closest_passages(self) -> bool:
        """A fallback's closest passages: the best sentences below the relevance cut-off or withheld as not
        answering the question, shown, never claimed (the digest that is ``not_found`` yet holds sentences)."""
        return self.id == DIGEST_ID and self.status == "not_found" and bool(self.claims)


class ReportEvidence(BaseModel):
    id: str
    doc_id: str
    url: str | None
    title: str
    quote: str
    start: int
    end: int
    content_hash: str
    origin_subtask_id: str
    published: str | None = None
    context_before: str = ""
    context_after: str = ""


class Report(BaseModel):
    run_id: str
    template: str
    question: str
    corpus: str
    outcome: Outcome
    outcome_reason: str | None = None
    sections: list[ReportSection]
    evidence: list[ReportEvidence]
    metrics: dict[str, Any] = Field(default_factory=dict)
    """Timings, counts, and (with a model provider) the run's model usage: calls, tokens, cost, per role."""
    notes: list[str] = Field(default_factory=list)
    disclaimer: str | None = None
    language: str | None = None
    confidence: float | None = None
    needs_human_reason: str | None = None
    contract: dict[str, object] | None = None
