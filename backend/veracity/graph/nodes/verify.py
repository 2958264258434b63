"""``verify``: L1 citations (code) → relevance (off-topic claims cut, ``guards.relevance``) → L2 grounding judge
(skipped when L1 failed) → L3 supervisor rules (code) → the reviewer's typed verdict. Filler is cut first;
section status and the run's confidence come last.

Model judgement sits between deterministic layers: L1 and L3 cannot be argued with, and the final verdict is
code combining every layer — a reviewer's ``ok`` cannot ship a draft a check failed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from veracity.checks import render_draft
from veracity.domain import Draft, ReviewVerdict, SectionDraft, Violation
from veracity.errors import MalformedOutput, ModelError
from veracity.events import SelfCheckComplete
from veracity.graph.context import Context
from veracity.graph.state import RunState
from veracity.guards.citations import citation_violations
from veracity.guards.filler import cut_filler
from veracity.guards.grounding import ground
from veracity.guards.relevance import check_relevance
from veracity.guards.reviewer import RuleReviewer
from veracity.guards.status import confidence, with_status
from veracity.guards.supervisor import answer_language, supervisor_violations
from veracity.ports import ReviewRequest

PHRASE_CHECKS = frozenset({"advice_phrase", "echoed_personal_phrase", "forbidden_pattern"})


def _summary(violations: list[Violation]) -> dict[str, Any]:
    return {"passed": not violations, "violations": [v.model_dump(exclude_none=True) for v in violations]}


async def verify(state: RunState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    spec = ctx.spec
    attempt = state.get("attempt", 1)
    evidence = state.get("evidence", [])
    composed: Draft = state["composed"]
    checks: dict[str, Any] = {}
    failure: str | None = state.get("failure")
    if state.get("failure") or state.get("compose_violations"):
        draft: list[SectionDraft] = state["draft"]
        violations = list(state.get("compose_violations", []))
        checks = {
            layer: {"skipped": "the draft did not parse" if violations else "the model failed"}
            for layer in ("l1", "relevance", "l2", "l3")
        }
        review = ReviewVerdict(
            verdict="revise",
            reason="the composer's output could not be checked",
            concerns=[v.detail for v in violations],
        )
    else:
        draft = cut_filler(state["draft"], evidence)
        l1 = citation_violations(draft, evidence, spec.policy.citation_pattern)
        checks["l1"] = _summary(l1)
        drafted = draft  # as the composer wrote it, for the phrase rules below
        # Off the event loop: a reworded claim is embedded to be scored.
        draft, checks["relevance"], emptied = await asyncio.to_thread(
            check_relevance, draft, evidence, ctx.about(state["question"]), spec, ctx.relevance
        )
        if l1:
            l2: list[Violation] = []
            checks["l2"] = {"skipped": "L1 failed; the draft goes back without paying for a judge"}
        else:
            try:
                draft, l2 = await ground(ctx.judge, draft, evidence)
            except (MalformedOutput, ModelError) as exc:
                # A judge that cannot answer has not verified anything: nothing from this draft may ship.
                failure = f"the grounding judge failed: {str(exc)[:300] or 'no output'}"
                l2 = [Violation(check="judge_failed", layer="l2", detail=failure)]
                checks["l2"] = {**_summary(l2), "judge": ctx.judge.name}
            else:
                checks["l2"] = {
                    **_summary(l2),
                    "judge": ctx.judge.name,
                    "labels": {
                        label: sum(1 for s in draft for c in s.claims if c.label == label)
                        for label in ("supported", "partial", "unsupported")
                    },
                }
        checked = composed.model_copy(update={"sections": draft})
        l3 = supervisor_violations(checked, spec.policy)
        # The phrase rules also read what the relevance check cut: a draft that gave medical advice is told so,
        # even if that sentence would not have shipped.
        seen = {(v.check, v.claim) for v in l3}
        l3 += [
            v
            for v in supervisor_violations(composed.model_copy(update={"sections": drafted}), spec.policy)
            if v.check in PHRASE_CHECKS and (v.check, v.claim) not in seen
        ]
        checks["l3"] = _summary(l3)
        violations = l1 + emptied + l2 + l3
        request = ReviewRequest(
            spec=spec, question=state["question"], draft_text=render_draft(draft), violations=violations
        )
        review = await RuleReviewer(evidence, ctx.screener).review(request)
        if review.verdict == "ok" and ctx.reviewer is not None:
            try:
                review = await ctx.reviewer.review(request)
            except (MalformedOutput, ModelError) as exc:
                # Seed 003: a reviewer that does not return its schema (after one informed retry) is a failure,
                # and failures go to the floor.
                again = " twice" if isinstance(exc, MalformedOutput) else ""
                failure = f"the reviewer's output was malformed{again}: {str(exc)[:300] or 'no output'}"
                violations = violations + [Violation(check="reviewer_malformed", layer="reviewer", detail=failure)]
                review = ReviewVerdict(
                    verdict="revise", reason="the reviewer's output was malformed", concerns=[failure]
                )
            else:
                if review.verdict == "revise":
                    violations = violations + [
                        Violation(check="reviewer_concern", layer="reviewer", detail=concern[:300])
                        for concern in review.concerns
                    ]
    draft = with_status(spec, draft, evidence)
    language = answer_language(composed.model_copy(update={"sections": draft}), spec.policy)
    run_confidence = confidence(spec, draft, composed.confidence)
    if review.verdict == "crisis":
        verdict = "crisis"
    elif violations or review.verdict == "revise":
        verdict = "revise"
    else:
        verdict = "ok"
    checks["reviewer"] = review.model_dump()
    await ctx.audit(
        "checks",
        attempt,
        {
            "checks": checks,
            "verdict": verdict,
            "confidence": run_confidence,
            "language": language,
            "violations": [v.model_dump(exclude_none=True) for v in violations],
            "filler_cut": {s.id: s.filler_cut for s in draft if s.filler_cut},
            "off_topic_cut": {s.id: s.off_topic_cut for s in draft if s.off_topic_cut},
        },
    )
    await ctx.emit(
        SelfCheckComplete(
            attempt=attempt,
            verdict=verdict,
            review=review,
            layers={
                k: ("skipped" if "skipped" in v else "passed" if v.get("passed", True) else "failed")
                for k, v in checks.items()
                if k != "reviewer"
            },
            violations=violations,
            sections={s.id: s.status for s in draft},
            claims=sum(len(s.claims) for s in draft),
            off_topic=sum(len(s.off_topic_cut) for s in draft),
            confidence=run_confidence,
        )
    )
    return {
        "draft": draft,
        "violations": violations,
        "review": review,
        "verdict": verdict,
        "language": language,
        "confidence": run_confidence,
        "failure": failure,
    }
