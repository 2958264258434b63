"""The run's phases and their legal next steps (seed 004's legality middleware), and the typed decision every
decision turn produces.

Routing reads an :class:`AgentDecision`'s typed fields, never a message. Each dispatch is checked at the dispatch
site against ``LEGAL_NEXT``: a step outside the current phase's legal set is refused there — it never runs — and
the refusal is recorded in the state (``dispatch_error``) for the next turn to see; the run goes to the floor.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import BaseModel, Field

logger = logging.getLogger(__name__)

NextAction = Literal["call_tool", "ask_user", "final_answer", "human_review", "fail_safe"]

LEGAL_NEXT: dict[str, frozenset[str]] = {
    # phase: the steps it may dispatch ("end" leaves the graph for the floor / the gate / storage)
    "route": frozenset({"plan", "end"}),
    "plan": frozenset({"retrieve"}),
    "retrieve": frozenset({"retrieve_merge"}),
    "retrieve_merge": frozenset({"synthesize"}),
    "synthesize": frozenset({"synthesize_merge"}),
    "synthesize_merge": frozenset({"compose"}),
    "compose": frozenset({"verify"}),
    "verify": frozenset({"decide"}),
    "decide": frozenset({"compose", "end"}),
}


class AgentDecision(BaseModel):
    """What a decision turn decided, typed. ``call_tool`` names the next step in ``tool``."""

    next_action: NextAction
    tool: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    risk_level: Literal["low", "medium", "high"] = "low"
    success_criteria_met: bool = False
    reason: str = ""


def target_of(decision: AgentDecision) -> str:
    """The graph step a decision asks for: a tool call names it; every other action leaves the graph."""
    return decision.tool or "" if decision.next_action == "call_tool" else "end"


def dispatch(phase: str, decision: AgentDecision) -> tuple[str, str | None]:
    """(the step to take, the refusal if the decision's step is not legal from ``phase``)."""
    target = target_of(decision)
    if target in LEGAL_NEXT.get(phase, frozenset()):
        return target, None
    error = f"illegal step {phase} → {target or '(none)'} refused; legal: {', '.join(sorted(LEGAL_NEXT[phase]))}"
    logger.warning("%s", error)
    return "end", error
