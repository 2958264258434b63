"""Event names. The eleven of DESIGN.md in order, plus the guard and error events."""

from __future__ import annotations

PIPELINE_EVENTS = (
    "run_started",
    "planner_complete",
    "retrieve_map_started",
    "retrieve_map_progress",
    "retrieve_merge_complete",
    "retrieve_complete",
    "synthesize_map_progress",
    "synthesize_merge_complete",
    "self_check_complete",
    "synthesize_complete",
    "complete",
)
GUARD_EVENTS = ("route_decided", "draft_composed", "revise_requested", "gate_rejected")
MODEL_EVENTS = ("model_call",)
ERROR_EVENTS = ("error",)
ALL_EVENTS = PIPELINE_EVENTS + GUARD_EVENTS + MODEL_EVENTS + ERROR_EVENTS
TERMINAL_EVENTS = frozenset({"complete", "error"})
