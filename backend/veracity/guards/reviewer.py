"""The reviewer: a typed verdict ``ok`` / ``revise`` / ``crisis`` with a reason and concrete concerns (seed 003).

Offline it is rule-based. Crisis language in the person's message, or in what the answer says to them in its own
words, is ``crisis``; any violation from L1–L3 is ``revise`` with those violations as its concerns; otherwise ``ok``.
Both are read with the router's own screen, each claim on its own and apart from the question: a question's "I"
and a quote's "die" never make one message, nor do two unrelated sourced sentences.

The answer's own words are :func:`veracity.guards.voice.spoken`: a quote of the evidence a claim cites, or
someone's reported speech, is the source's words, not the answer's, unless it addresses the reader (issue 14: a
news quote "... told reporters: I want to kill myself ..." is nobody in crisis talking to Veracity). Quotes are
recognised against the run's evidence given to :class:`RuleReviewer`; without it no claim is known to be a quote,
and each claim is read with only its reported speech set aside.

A model reviewer's raw output is parsed by :func:`parse_verdict`; output that does not parse raises
:class:`MalformedOutput` and the run goes to the floor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from veracity.checks import parse_claim
from veracity.domain import Evidence, ReviewVerdict
from veracity.errors import MalformedOutput
from veracity.guards.router import screen
from veracity.guards.screen_model import LearnedScreen
from veracity.guards.voice import spoken
from veracity.models.output import parse_as
from veracity.ports import ReviewRequest, feedback_lines
from veracity.specs.models import Policy

_REASON_CHARS = 500


def parse_verdict(raw: str) -> ReviewVerdict:
    verdict = parse_as(raw, ReviewVerdict)
    if verdict.verdict == "revise" and not verdict.concerns:
        raise MalformedOutput(["a 'revise' verdict must name at least one concrete concern"], raw)
    return verdict


def answer_voice(draft_text: str, quotes: dict[str, str]) -> list[str]:
    """What a rendered draft (a heading or one anchored claim a line) says in its own words, one entry per claim
    that says anything; ``quotes`` maps evidence ids to their quotes."""
    said = []
    for line in draft_text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        claim = parse_claim(line)
        if words := spoken(claim.text, [quotes[eid] for eid in claim.evidence_ids if eid in quotes]):
            said.append(words)
    return said


class RuleReviewer:
    name = "rules"

    def __init__(self, evidence: Sequence[Evidence] = (), screener: LearnedScreen | None = None) -> None:
        self._quotes = {ev.id: ev.quote for ev in evidence}
        self._screener = screener
        """The run's learned screen (the process default when None)."""

    async def review(self, request: ReviewRequest) -> ReviewVerdict:
        policy = request.spec.policy
        read = [("the question", request.question)]
        read += [("the answer's own words", words) for words in answer_voice(request.draft_text, self._quotes)]
        # Off the event loop: the learned screen embeds each text (CPU work every page would wait behind).
        crisis = await asyncio.to_thread(self._first_crisis, read, policy)
        if crisis is not None:
            return crisis
        if request.violations:
            return ReviewVerdict(
                verdict="revise",
                reason=f"{len(request.violations)} check(s) failed",
                concerns=feedback_lines(request.violations)[:20],
            )
        return ReviewVerdict(verdict="ok", reason="every claim is anchored, grounded and within policy")

    def _first_crisis(self, read: list[tuple[str, str]], policy: Policy) -> ReviewVerdict | None:
        """The crisis verdict for the first of ``read`` (where, text) the screen routes to crisis; None if none."""
        for where, text in read:
            decision = screen(text, policy, self._screener, explain=False)
            if decision.route == "crisis":
                return ReviewVerdict(
                    verdict="crisis",
                    reason=f"crisis language in {where}: {decision.reason}"[:_REASON_CHARS],
                    concerns=decision.matched[:5],
                )
        return None
