"""The reviewer: a typed verdict ``ok`` / ``revise`` / ``crisis`` with a reason and concrete concerns (seed 003).

Offline it is rule-based: crisis language in the question or the draft (the router's own screen over both)
is ``crisis``; any violation from L1–L3 is ``revise`` with those violations as its concerns; otherwise ``ok``.
A model reviewer's raw output is parsed by :func:`parse_verdict`; output that does not parse raises
:class:`MalformedOutput` and the run goes to the floor.
"""

from __future__ import annotations

from veracity.compose.base import MalformedOutput, ReviewRequest, feedback_lines
from veracity.compose.parse import parse_as
from veracity.domain import ReviewVerdict
from veracity.guards.router import screen


def parse_verdict(raw: str) -> ReviewVerdict:
    verdict = parse_as(raw, ReviewVerdict)
    if verdict.verdict == "revise" and not verdict.concerns:
        raise MalformedOutput(["a 'revise' verdict must name at least one concrete concern"], raw)
    return verdict


class RuleReviewer:
    name = "rules"

    async def review(self, request: ReviewRequest) -> ReviewVerdict:
        decision = screen(f"{request.question}\n{request.draft_text}", request.spec.policy)
        if decision.route == "crisis":
            return ReviewVerdict(
                verdict="crisis", reason=f"crisis language: {decision.reason}", concerns=decision.matched[:5]
            )
        if request.violations:
            return ReviewVerdict(
                verdict="revise",
                reason=f"{len(request.violations)} check(s) failed",
                concerns=feedback_lines(request.violations)[:20],
            )
        return ReviewVerdict(verdict="ok", reason="every claim is anchored, grounded and within policy")
