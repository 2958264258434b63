"""``route``: the first step, before any search or model call. Patterns first (free, instant), then the cheap
local classifier behind them; ``escalate`` or ``crisis`` ends the run with the spec's answer at no cost."""

from __future__ import annotations

import logging
from typing import Any

from langgraph.runtime import Runtime

from veracity.graph.context import Context
from veracity.graph.state import RunState
from veracity.guards.router import screen

logger = logging.getLogger(__name__)


async def route(state: RunState, runtime: Runtime[Context]) -> dict[str, Any]:
    decision = screen(state["question"], runtime.context.spec.policy)
    logger.info("run %s route=%s (%s)", state["run_id"], decision.route, decision.reason)
    await runtime.context.emit(
        "route_decided",
        {"route": decision.route, "reason": decision.reason, "layer": decision.layer, "matched": decision.matched},
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
        },
    )
    return {"route": decision.route, "route_reason": decision.reason, "route_matched": decision.matched}


def after_route(state: RunState) -> str:
    return "plan" if state["route"] == "proceed" else "end"
