"""The fixed LangGraph pipeline: route → plan → retrieve ×N → retrieve_merge → synthesize ×N →
synthesize_merge → compose → verify → decide (→ compose, bounded)."""

NODE_ORDER = (
    "route",
    "plan",
    "retrieve",
    "retrieve_merge",
    "synthesize",
    "synthesize_merge",
    "compose",
    "verify",
    "decide",
)
"""The pipeline's nodes in order (here, not in ``builder``, so that what only draws a run need not import
LangGraph: the CLI's progress and the run views)."""
