"""``decide``: code turns the verdict, the attempt count and the qa policy into the next step."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from veracity.graph.context import Context
from veracity.graph.state import RunState


async def decide(state: RunState, runtime: Runtime[Context]) -> dict[str, Any]:
    spec = runtime.context.spec
    attempt = state.get("attempt", 1)
    draft = state["draft"]
    supported_required = sum(1 for s in draft if spec.section(s.id).required and s.status == "supported")
    needed = min(spec.qa_policy.min_supported_required, sum(1 for s in spec.sections if s.required))
    if state["verdict"] == "crisis":
        decision, reason = "crisis", "the reviewer flagged a crisis"
    elif state["verdict"] == "revise" and attempt < spec.budgets.drafting_attempts:
        decision, reason = "revise", f"{len(state.get('violations', []))} violation(s) in attempt {attempt}"
    elif state["verdict"] == "revise":
        decision, reason = "fail_safe", f"drafting attempts exhausted ({attempt}) with violations left"
    elif not any(s.claims for s in draft):
        decision, reason = "fail_safe", "no evidence was found for any section"
    elif supported_required < needed:
        decision, reason = (
            "fail_safe",
            f"only {supported_required} required section(s) supported; the template needs {needed}",
        )
    else:
        decision, reason = "ship", "every claim is anchored to retrieved evidence"
    if decision == "revise":
        await runtime.context.emit("revise_requested", {"attempt": attempt, "reason": reason})
    else:
        await runtime.context.emit(
            "synthesize_complete",
            {
                "decision": decision,
                "reason": reason,
                "attempts": attempt,
                "sections": {s.id: s.status for s in draft},
            },
        )
    return {"decision": decision, "decision_reason": reason}


def after_decide(state: RunState) -> str:
    return "compose" if state["decision"] == "revise" else "end"
