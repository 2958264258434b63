"""Who drafts, who judges, who reviews and who plans one run."""

from __future__ import annotations

from dataclasses import dataclass, field

from veracity.compose.extractive import ExtractiveComposer
from veracity.guards.judge import make_judge
from veracity.ports import Composer, GroundingJudge, Planner, Reviewer


@dataclass
class Providers:
    """Who drafts, who judges and who reviews one run. Offline by default: extractive composer, lexical judge,
    the rule-based reviewer alone."""

    composer: Composer = field(default_factory=ExtractiveComposer)
    judge: GroundingJudge = field(default_factory=make_judge)
    reviewer: Reviewer | None = None
    planner: Planner | None = None
