"""Replay of recorded raw model outputs (eval cases and tests): the same parsers and checks see them as they
would see a live model's text. ``{E:some words}`` stands for the id of the run's evidence whose quote contains
those words, and ``{E1}``, ``{E2}``… for the run's evidence ids best-scored first — the ids a model would have
read in its prompt. ``!error`` or ``!timeout`` replays a failed call."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from veracity.compose.parse import parse_draft
from veracity.domain import Draft, Evidence, ReviewVerdict
from veracity.errors import ModelError
from veracity.guards.reviewer import parse_verdict
from veracity.ports import ComposeRequest, ReviewRequest, feedback_lines

_TOKEN = re.compile(r"\{E(?:(\d+)|:([^}]+))\}")


def substitute(raw: str, evidence: list[Evidence]) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group(1):
            index = int(match.group(1)) - 1
            return evidence[index].id if 0 <= index < len(evidence) else f"evmissing{index + 1:04d}"
        needle = " ".join(match.group(2).lower().split())
        found = next((ev.id for ev in evidence if needle in " ".join(ev.quote.lower().split())), None)
        return found or "evnotretrieved"

    return _TOKEN.sub(one, raw)


def _replay(outputs: list[str], calls: int) -> str:
    if not outputs:
        raise ModelError("the script has no output for this call")
    raw = outputs[min(calls, len(outputs) - 1)]  # a model that keeps making the same mistake
    if raw.strip() in ("!error", "!timeout"):
        raise ModelError(f"scripted model {raw.strip()[1:]}")
    return raw


@dataclass
class ScriptedComposer:
    outputs: list[str]
    name: str = "scripted"
    feedback: list[list[str]] = field(default_factory=list)
    """What each call was told about the previous attempt's violations (the informed retry, observable)."""

    async def compose(self, request: ComposeRequest) -> Draft:
        self.feedback.append(feedback_lines(request.violations))
        raw = substitute(_replay(self.outputs, len(self.feedback) - 1), request.evidence)
        return parse_draft(raw, request.spec)


@dataclass
class ScriptedReviewer:
    outputs: list[str]
    name: str = "scripted-reviewer"
    calls: int = 0

    async def review(self, request: ReviewRequest) -> ReviewVerdict:
        self.calls += 1
        return parse_verdict(_replay(self.outputs, self.calls - 1))
