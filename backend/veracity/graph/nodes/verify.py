"""``verify``: the deterministic check of the draft — every anchor resolves to evidence retrieved in this
run, every claim is anchored and is a span of what it cites; section status from cited evidence."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from veracity.checks import citation_violations, label_and_status, label_violations
from veracity.graph.context import Context
from veracity.graph.state import RunState


async def verify(state: RunState, runtime: Runtime[Context]) -> dict[str, Any]:
    spec = runtime.context.spec
    evidence = state.get("evidence", [])
    violations = citation_violations(state["draft"], evidence)
    draft = label_and_status(spec, state["draft"], evidence)
    violations += label_violations(draft)
    verdict = "ok" if not violations else "revise"
    await runtime.context.emit(
        "self_check_complete",
        {
            "attempt": state.get("attempt", 1),
            "verdict": verdict,
            "violations": [v.model_dump() for v in violations],
            "sections": {s.id: s.status for s in draft},
            "claims": sum(len(s.claims) for s in draft),
        },
    )
    return {"draft": draft, "violations": violations, "verdict": verdict}
