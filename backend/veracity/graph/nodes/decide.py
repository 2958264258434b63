"""``decide``: code turns the verdict, the attempt count, the confidence and the qa policy into the next step:
``ship`` / ``revise`` (back to ``compose``, bounded by the spec's drafting attempts) / ``handoff`` / ``crisis``
/ ``fail_safe`` (the floor)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from veracity import messages
from veracity.domain import CLOSEST_SHOWN, BranchStat, Evidence
from veracity.events import ReviseRequested, SynthesizeComplete
from veracity.graph.context import Context
from veracity.graph.phases import AgentDecision, dispatch
from veracity.graph.state import RunState
from veracity.guards.gate import may_redraft, missing_required, supported_shortfall
from veracity.guards.status import confidence


def _decision(state: RunState, ctx: Context) -> tuple[str, str, str | None]:
    spec = ctx.spec
    attempt = state.get("attempt", 1)
    draft = state["draft"]
    violations = state.get("violations", [])
    if state.get("failure"):
        if not state.get("evidence"):  # nothing to write from: that, not the model that was asked anyway, is why
            return "fail_safe", no_evidence_reason(state), None
        return "fail_safe", str(state["failure"]), None
    if state["verdict"] == "crisis":
        return "crisis", f"the reviewer flagged a crisis: {state['review'].reason}", None
    if not state.get("evidence"):
        # Nothing relevant was retrieved: no redraft can fix that, whatever the composer made of nothing.
        return "fail_safe", no_evidence_reason(state), None
    if state["verdict"] == "revise":
        checks = ", ".join(sorted({v.check for v in violations})) or "reviewer concerns"
        if may_redraft(spec, attempt):
            return "revise", f"attempt {attempt} failed: {checks}", None
        return "fail_safe", f"drafting attempts exhausted ({attempt}) with failed checks: {checks}", None
    if not any(s.claims for s in draft):
        return "fail_safe", no_evidence_reason(state), None
    missing = missing_required(spec, {s.id for s in draft if s.claims})
    if missing:  # the pre-persistence gate would refuse it: no point shipping a draft only to see it rejected
        return "fail_safe", f"required sections without a supported claim: {', '.join(missing)}", None
    shortfall = supported_shortfall(spec, {s.id for s in draft if s.status == "supported"})
    if shortfall is not None:
        supported_required, needed = shortfall
        return (
            "fail_safe",
            f"only {supported_required} required section(s) supported; the template needs {needed}",
            None,
        )
    composed = state.get("composed")
    if composed is not None and composed.needs_human:
        return "handoff", "the composer asked for a human", "the composer set needs_human"
    judged = handoff_confidence(state, ctx)
    if judged < spec.qa_policy.min_confidence:
        why = f"confidence {judged:.2f} is below the template's {spec.qa_policy.min_confidence:.2f}"
        return "handoff", why, why
    partial = sum(1 for s in draft for c in s.claims if c.label == "partial")
    if partial and spec.qa_policy.ship_partial:
        return (
            "ship",
            f"every claim is anchored and within policy; {partial} partial claim(s) ship labelled partial",
            None,
        )
    return "ship", "every claim is anchored, grounded and within policy", None


def handoff_confidence(state: RunState, ctx: Context) -> float:
    """The confidence the qa policy's threshold reads: the run's, or — when the template ships partial claims with
    their label — the same with a partial claim counted as supported (its label, not a handoff, tells the reader)."""
    if not ctx.spec.qa_policy.ship_partial:
        return float(state.get("confidence", 0.0))
    composed = state.get("composed")
    stated = composed.confidence if composed is not None else None
    return confidence(ctx.spec, state["draft"], stated, partial_weight=1.0)


def no_evidence_reason(state: RunState) -> str:
    """Why nothing could be written: the search failed (every branch, or some branch with nothing found by the
    others: evidence withheld as not answering the question counts as found), it answered but not one page it
    found could be opened (an unreachable web), or it worked and nothing relevant was found."""
    stats = state.get("branch_stats", [])
    failed = [s for s in stats if s.status == "failed"]
    if failed and not state.get("evidence") and not state.get("withheld"):
        errors = "; ".join(dict.fromkeys(str(s.error) for s in failed))[:300]
        return messages.SEARCH_FAILED.format(failed=len(failed), branches=len(stats), errors=errors)
    page_errors = [e for s in stats for e in s.page_errors]
    if page_errors and not any(s.pages_read for s in stats):
        errors = "; ".join(page_errors[:3])[:300]
        return messages.PAGES_UNREACHABLE.format(failed=len(page_errors), errors=errors)
    return nothing_relevant(state)


def nothing_relevant(state: RunState) -> str:
    """The honest reason when no claim is left: nothing in the corpus answers the question, and what came
    closest (the titles of the sentences the floor shows: its evidence digest when evidence passed the cut-off
    and the checks then cut every claim, else the best sentences below the cut-off or withheld as not answering
    the question), and which judgement decided when evidence was withheld."""
    evidence = state.get("evidence") or []
    withheld = state.get("withheld") or []
    shown = evidence[:CLOSEST_SHOWN] or closest_of(state.get("branch_stats", []), withheld)[:CLOSEST_SHOWN]
    titles = list(dict.fromkeys(ev.source.title or ev.source.doc_id or "" for ev in shown))[:3]
    where = f"corpus {state.get('corpus', '?')}"
    reason = (
        messages.NOTHING_RELEVANT_CLOSEST.format(where=where, closest="; ".join(titles))
        if titles
        else messages.NOTHING_RELEVANT.format(where=where)
    )
    return reason + (messages.ANSWERED_WITHHELD.format(count=len(withheld)) if withheld and not evidence else "")


def closest_of(stats: list[BranchStat], withheld: list[Evidence] | None = None) -> list[Evidence]:
    """Every branch's closest passages below the relevance cut-off and the evidence withheld as not answering the
    question as a whole, each sentence once (at its best relevance), most relevant first."""
    found: dict[str, Evidence] = {}
    for ev in [*(withheld or []), *(ev for stat in stats for ev in stat.closest_evidence)]:
        if ev.id not in found or (ev.relevance or 0.0) > (found[ev.id].relevance or 0.0):
            found[ev.id] = ev
    return sorted(found.values(), key=lambda ev: -(ev.relevance or 0.0))


async def decide(state: RunState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    decision, reason, needs_human = _decision(state, ctx)
    attempt = state.get("attempt", 1)
    await ctx.audit("decision", attempt, {"decision": decision, "reason": reason, "needs_human_reason": needs_human})
    if decision == "revise":
        await ctx.emit(ReviseRequested(attempt=attempt, reason=reason, violations=len(state.get("violations", []))))
    else:
        await ctx.emit(
            SynthesizeComplete(
                decision=decision,
                reason=reason,
                attempts=attempt,
                confidence=state.get("confidence"),
                sections={s.id: s.status for s in state["draft"]},
            )
        )
    envelope = envelope_for(decision, reason, state)
    step, refused = dispatch("decide", envelope)
    update: dict[str, Any] = {
        "decision": decision,
        "decision_reason": reason,
        "needs_human_reason": needs_human,
        "envelope": envelope,
        "next_step": step,
    }
    if refused:
        update |= {"decision": "fail_safe", "decision_reason": refused, "dispatch_error": refused}
    return update


def envelope_for(decision: str, reason: str, state: RunState) -> AgentDecision:
    confidence = float(state.get("confidence") or 0.0)
    if decision == "revise":
        return AgentDecision(
            next_action="call_tool",
            tool="compose",
            args={"attempt": state.get("attempt", 1) + 1, "violations": len(state.get("violations", []))},
            confidence=confidence,
            reason=reason,
        )
    action, risk = {
        "ship": ("final_answer", "low"),
        "handoff": ("human_review", "medium"),
        "crisis": ("human_review", "high"),
    }.get(decision, ("fail_safe", "medium"))
    return AgentDecision(
        next_action=action,  # type: ignore[arg-type]
        confidence=confidence,
        risk_level=risk,  # type: ignore[arg-type]
        success_criteria_met=decision == "ship",
        reason=reason,
    )


def after_decide(state: RunState) -> str:
    """The dispatch site: reads the typed envelope, and takes only a step legal from ``decide``."""
    envelope = state.get("envelope")
    if envelope is None:
        return "end"
    step, _refused = dispatch("decide", envelope)
    return step
