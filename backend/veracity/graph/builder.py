"""The graph's wiring, and nothing else. The floor and the pre-persistence gate live outside it
(``veracity.runs.finish``) so no rewiring here can skip them."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from veracity.graph.context import Context
from veracity.graph.fanout import fan_out_retrieve, fan_out_synthesize
from veracity.graph.nodes.compose import compose
from veracity.graph.nodes.decide import after_decide, decide
from veracity.graph.nodes.plan import plan
from veracity.graph.nodes.retrieve import retrieve
from veracity.graph.nodes.retrieve_merge import retrieve_merge
from veracity.graph.nodes.route import after_route, route
from veracity.graph.nodes.synthesize import synthesize
from veracity.graph.nodes.synthesize_merge import synthesize_merge
from veracity.graph.nodes.verify import verify
from veracity.graph.state import GraphOutput, RunInput, RunState


def build_graph(checkpointer: BaseCheckpointSaver[str] | None = None) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The research graph; with ``checkpointer``, every completed super-step is saved under the run's ID (its
    ``thread_id``) so that another process can resume the run from there (``runs/resume.py``)."""
    builder = StateGraph(RunState, context_schema=Context, input_schema=RunInput, output_schema=GraphOutput)
    builder.add_node("route", route)  # policy phrases → proceed / escalate / crisis; no search, no model
    builder.add_node("plan", plan)  # sub-questions per section, core sections always routed
    builder.add_node("retrieve", retrieve)  # type: ignore[call-overload]  # one branch per subtask (Send)
    builder.add_node("retrieve_merge", retrieve_merge)  # near-identical dedupe across branches
    builder.add_node("synthesize", synthesize)  # type: ignore[call-overload]  # one branch per subtask (Send): evidence → section shard
    builder.add_node("synthesize_merge", synthesize_merge)  # shards → per-section evidence, backfill
    builder.add_node("compose", compose)  # anchored claims per section; summaries from the others
    builder.add_node("verify", verify)  # deterministic checks → violations, labels, verdict
    builder.add_node("decide", decide)  # ship / revise / fail_safe, bounded by drafting attempts
    builder.add_edge(START, "route")  # every run is screened first
    builder.add_conditional_edges("route", after_route, {"plan": "plan", "end": END})  # escalation ends here
    builder.add_conditional_edges("plan", fan_out_retrieve, ["retrieve"])  # fan-out: a Send per subtask
    builder.add_edge("retrieve", "retrieve_merge")  # fan-in: waits for every branch
    builder.add_conditional_edges("retrieve_merge", fan_out_synthesize, ["synthesize"])  # second fan-out
    builder.add_edge("synthesize", "synthesize_merge")  # fan-in
    builder.add_edge("synthesize_merge", "compose")  # first drafting attempt
    builder.add_edge("compose", "verify")  # every draft is checked
    builder.add_edge("verify", "decide")  # code decides from the verdict
    builder.add_conditional_edges("decide", after_decide, {"compose": "compose", "end": END})  # bounded retry
    return builder.compile(checkpointer=checkpointer)


def build_redraft_graph() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The drafting loop alone, for a draft the pre-persistence gate rejected: it re-enters at ``compose``
    (told what the gate found), never at retrieval. Same nodes, same bound; it starts from a run's output
    (``GraphOutput.redraft_input``) and returns the same output."""
    builder = StateGraph(RunState, context_schema=Context, output_schema=GraphOutput)
    builder.add_node("compose", compose)
    builder.add_node("verify", verify)
    builder.add_node("decide", decide)
    builder.add_edge(START, "compose")
    builder.add_edge("compose", "verify")
    builder.add_edge("verify", "decide")
    builder.add_conditional_edges("decide", after_decide, {"compose": "compose", "end": END})
    return builder.compile()
