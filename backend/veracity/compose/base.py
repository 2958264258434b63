"""The composer and reviewer contracts. Every implementation (extractive, scripted replay, model-backed) returns
raw text that goes through the same parsers, so a model's output and the offline one are checked alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from veracity.domain import Draft, Evidence, ReviewVerdict, Violation
from veracity.semantic.model import SemanticModel
from veracity.specs.models import Spec


class MalformedOutput(Exception):
    """A composer or reviewer wrote something that does not parse into its contract."""

    def __init__(self, problems: list[str], raw: str = "") -> None:
        super().__init__("; ".join(problems))
        self.problems = problems
        self.raw = raw


class TruncatedOutput(MalformedOutput):
    """The model stopped at its token cap (``finish_reason == "length"``): what it wrote is cut off, whether or not
    it happens to parse, and the next attempt is told so."""

    def __init__(self, max_tokens: int, raw: str = "", *, thinking: bool = False) -> None:
        where = " while still thinking (a <think> block with no answer after it)" if thinking else ""
        super().__init__(
            [
                f"the answer was cut off at the {max_tokens}-token limit{where}; write less: fewer and shorter "
                "sentences, no preamble"
            ],
            raw,
        )
        self.max_tokens = max_tokens


class ModelError(Exception):
    """The model could not be reached, timed out, or refused; the run falls to the floor."""


@dataclass
class ComposeRequest:
    spec: Spec
    question: str
    section_evidence: dict[str, list[str]]
    evidence: list[Evidence]
    attempt: int
    per_section: int
    violations: list[Violation] = field(default_factory=list)
    """What failed in the previous attempt: which claim, which check, why. Empty on the first attempt."""
    semantic: SemanticModel | None = None
    """The semantic model, for near-duplicate claims (the extractive composer); None = by words."""


class Composer(Protocol):
    name: str

    async def compose(self, request: ComposeRequest) -> Draft: ...


@dataclass
class ReviewRequest:
    spec: Spec
    question: str
    draft_text: str
    violations: list[Violation]


class Reviewer(Protocol):
    name: str

    async def review(self, request: ReviewRequest) -> ReviewVerdict: ...


def feedback_lines(violations: list[Violation]) -> list[str]:
    """The violations as lines a drafter can act on (the informed part of the retry)."""
    lines = []
    for v in violations:
        where = f"section {v.section_id}" if v.section_id else "the answer"
        claim = f" claim {v.claim!r}" if v.claim else ""
        lines.append(f"[{v.layer}:{v.check}] {where}{claim}: {v.detail}")
    return lines
