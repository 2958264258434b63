"""The typed values that flow through a run: subtasks, evidence, claims, sections and the report."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

SectionStatus = Literal["supported", "thin_evidence", "not_found", "stale"]
Outcome = Literal["shipped", "escalated", "crisis", "handoff", "fallback"]
ClaimLabel = Literal["supported", "partial", "unsupported"]


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


class BranchStat(BaseModel):
    subtask_id: str
    status: Literal["done", "failed"]
    queries: int = 0
    pages: int = 0
    evidences: int = 0
    error: str | None = None


class Shard(BaseModel):
    subtask_id: str
    sections: dict[str, list[str]] = Field(description="section id → evidence ids routed there")
    orphans: int = 0


class Claim(BaseModel):
    text: str
    evidence_ids: list[str]
    label: ClaimLabel | None = None


class SectionDraft(BaseModel):
    id: str
    title: str
    claims: list[Claim] = Field(default_factory=list)
    status: SectionStatus | None = None
    note: str | None = None


class Violation(BaseModel):
    check: str
    section_id: str | None = None
    claim_index: int | None = None
    detail: str


class ReportSection(BaseModel):
    id: str
    title: str
    required: bool
    status: SectionStatus
    claims: list[Claim]
    note: str | None = None


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


class Report(BaseModel):
    run_id: str
    template: str
    question: str
    corpus: str
    outcome: Outcome
    outcome_reason: str | None = None
    sections: list[ReportSection]
    evidence: list[ReportEvidence]
    metrics: dict[str, float | int | str | None] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
