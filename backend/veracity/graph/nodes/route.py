"""``route``: the first step, before any search or model call. Patterns first (free, instant), then the learned
screen behind them (local: one sentence embedding and, by default, one cross-encoder reading); ``escalate`` or
``crisis`` ends the run with the spec's answer at no cost."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langgraph.runtime import Runtime

from veracity.events import RouteDecided
from veracity.graph.context import Context
from veracity.graph.phases import AgentDecision, dispatch
from veracity.graph.state import RunState
from veracity.guards.router import screen

logger = logging.getLogger(__name__)


async def route(state: RunState, runtime: Runtime[Context]) -> dict[str, Any]:
    # Off the event loop: the learned screen embeds the question (CPU work every page would wait behind).
    decision = await asyncio.to_thread(screen, state["question"], runtime.context.spec.policy, runtime.context.screener)
    logger.info("run %s route=%s (%s)", state["run_id"], decision.route, decision.reason)
    await runtime.context.emit(
        RouteDecided(route=decision.route, reason=decision.reason, layer=decision.layer, matched=decision.matched)
    )
    await runtime.context.audit(
        "route",
        0,
        {
            "route": decision.route,
            "reason": decision.reason,
            "layer": decision.layer,
            "matched": decision.matched,
            "score": decision.score,
            "domain": decision.domain,
            "mode": decision.mode,
            "probabilities": decision.probabilities,
            "nearest": [{"label": e.label, "text": e.text, "similarity": e.similarity} for e in decision.nearest],
        },
    )
    envelope = (
        AgentDecision(next_action="call_tool", tool="plan", reason=decision.reason)
        if decision.route == "proceed"
        else AgentDecision(
            next_action="human_review",
            risk_level="high" if decision.route == "crisis" else "medium",
            reason=decision.reason,
        )
    )
    return {
        "route": decision.route,
        "route_reason": decision.reason,
        "route_matched": decision.matched,
        "route_domain": decision.domain,
        "envelope": envelope,
    }


def after_route(state: RunState) -> str:
    """The dispatch site: reads the typed envelope, and takes only a step legal from ``route``."""
    step, _refused = dispatch("route", state["envelope"])
    return step
