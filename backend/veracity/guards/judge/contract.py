"""What a grounding judge is, apart from any one judge: a claim and its sources in, a ``Judgement`` out. The
pipeline's L2 (``guards.grounding``), ``veracity verify`` and the model judge (``guards.model``) all speak it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

Label = Literal["supported", "partial", "unsupported"]
LABEL_ORDER: tuple[Label, ...] = ("supported", "partial", "unsupported")
"""Best to worst: an input of several claims takes its worst claim's label."""


@dataclass(frozen=True)
class Source:
    id: str
    text: str


@dataclass(frozen=True)
class Span:
    source_id: str
    start: int  # char offset into that Source.text
    end: int


@dataclass(frozen=True)
class Judgement:
    label: Label
    score: float  # 0..1, higher = better supported
    evidence: list[Span]  # the supporting source sentences: the smallest set found that covers the claim
    reason: str  # one short human sentence: why this label


class GroundingJudge(Protocol):
    name: str

    async def judge(self, claim: str, sources: list[Source]) -> Judgement: ...
