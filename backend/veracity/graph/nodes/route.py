"""``route``: the first, deterministic step. Escalation costs no search and no model call."""

from __future__ import annotations

import logging
import re
from typing import Any

from langgraph.runtime import Runtime

from veracity.graph.context import Context
from veracity.graph.state import RunState

logger = logging.getLogger(__name__)


def _matches(phrases: list[str], text: str) -> str | None:
    for phrase in phrases:
        if re.search(r"(?<!\w)" + re.escape(phrase.lower()) + r"(?!\w)", text):
            return phrase
    return None


async def route(state: RunState, runtime: Runtime[Context]) -> dict[str, Any]:
    policy = runtime.context.spec.policy
    text = state["question"].lower()
    if phrase := _matches(policy.crisis_lexicon, text):
        decision, reason = "crisis", f"crisis phrase matched: {phrase!r}"
    elif phrase := _matches(policy.escalation_phrases, text):
        decision, reason = "escalate", f"escalation phrase matched: {phrase!r}"
    else:
        decision, reason = "proceed", "no policy phrase matched"
    logger.info("run %s route=%s (%s)", state["run_id"], decision, reason)
    if decision != "proceed":
        await runtime.context.emit("route_decided", {"route": decision, "reason": reason})
    return {"route": decision, "route_reason": reason}


def after_route(state: RunState) -> str:
    return "plan" if state["route"] == "proceed" else "end"
