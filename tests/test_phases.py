"""The AgentDecision envelope and the phase FSM: every decision turn produces a typed decision, routing reads its
fields, and a step outside the current phase's legal set is refused at the dispatch site and never runs."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from test_graph import FakeSearch, Recorder, final_state
from veracity.graph.builder import build_graph
from veracity.graph.context import Context, RetrievalCoordinator
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
from veracity.graph.phases import LEGAL_NEXT, AgentDecision, dispatch
from veracity.graph.state import RunState
from veracity.settings import LimitSettings
from veracity.specs.registry import SpecRegistry

SPECS = SpecRegistry.load()


def context(search: FakeSearch, recorder: Recorder) -> Context:
    spec = SPECS.get("market_brief")
    return Context(
        spec=spec,
        search=search,
        emit=recorder,
        limits=LimitSettings(),
        coordinator=RetrievalCoordinator(max_pages=spec.budgets.max_pages),
    )


@pytest.mark.parametrize(
    ("phase", "decision", "step"),
    [
        ("route", AgentDecision(next_action="call_tool", tool="plan"), "plan"),
        ("route", AgentDecision(next_action="human_review", risk_level="high"), "end"),
        ("decide", AgentDecision(next_action="call_tool", tool="compose"), "compose"),
        ("decide", AgentDecision(next_action="final_answer", success_criteria_met=True), "end"),
        ("decide", AgentDecision(next_action="fail_safe"), "end"),
    ],
)
def test_legal_steps_are_dispatched(phase: str, decision: AgentDecision, step: str) -> None:
    assert dispatch(phase, decision) == (step, None)


@pytest.mark.parametrize(
    ("phase", "tool"), [("decide", "retrieve"), ("decide", "plan"), ("route", "compose"), ("decide", None)]
)
def test_illegal_steps_are_refused_with_an_error_naming_them(phase: str, tool: str | None) -> None:
    step, error = dispatch(phase, AgentDecision(next_action="call_tool", tool=tool))
    assert step == "end" and error is not None
    assert f"illegal step {phase} → {tool or '(none)'}" in error and all(s in error for s in LEGAL_NEXT[phase])


async def test_every_decision_turn_writes_a_typed_envelope_that_routing_reads() -> None:
    recorder = Recorder()
    state = await final_state(
        build_graph(), {"run_id": "r" * 32, "question": "coffee market", "corpus": "c"}, context(FakeSearch(), recorder)
    )
    envelope = state["envelope"]
    assert isinstance(envelope, AgentDecision)
    assert envelope.next_action == "final_answer" and envelope.success_criteria_met and state["decision"] == "ship"
    assert state["next_step"] == "end" and "dispatch_error" not in state


async def test_a_decision_for_an_illegal_step_never_runs_it_and_the_run_goes_to_the_floor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The real decide, whose envelope asks to go back to retrieval (not legal from decide).
    rogue = AgentDecision(next_action="call_tool", tool="retrieve", reason="search again")
    monkeypatch.setattr("veracity.graph.nodes.decide.envelope_for", lambda decision, reason, state: rogue)
    routed: list[Any] = []

    async def spied_route(state: RunState, runtime: Runtime[Context]) -> dict[str, Any]:
        update = await route(state, runtime)
        routed.append(update["envelope"])
        return update

    builder = StateGraph(RunState, context_schema=Context)
    for name, node in [
        ("route", spied_route),
        ("plan", plan),
        ("retrieve", retrieve),
        ("retrieve_merge", retrieve_merge),
        ("synthesize", synthesize),
        ("synthesize_merge", synthesize_merge),
        ("compose", compose),
        ("verify", verify),
        ("decide", decide),
    ]:
        builder.add_node(name, node)  # type: ignore[call-overload]
    builder.add_edge(START, "route")
    builder.add_conditional_edges("route", after_route, {"plan": "plan", "end": END})
    builder.add_conditional_edges("plan", fan_out_retrieve, ["retrieve"])
    builder.add_edge("retrieve", "retrieve_merge")
    builder.add_conditional_edges("retrieve_merge", fan_out_synthesize, ["synthesize"])
    builder.add_edge("synthesize", "synthesize_merge")
    builder.add_edge("synthesize_merge", "compose")
    builder.add_edge("compose", "verify")
    builder.add_edge("verify", "decide")
    # Even wired to retrieval, the dispatch site refuses the step.
    builder.add_conditional_edges("decide", after_decide, {"compose": "compose", "retrieve": "retrieve", "end": END})
    search, recorder = FakeSearch(), Recorder()
    state = await builder.compile().ainvoke(
        {"run_id": "r" * 32, "question": "coffee market", "corpus": "c"}, context=context(search, recorder)
    )
    # Retrieval ran once, not again: each planned query was searched as often as it was planned (the second hop's
    # searches are of names the passages mention, not planned queries).
    planned = [q for t in state["subtasks"] for q in t.queries]
    assert planned and all(search.calls.count(q) == planned.count(q) for q in planned)
    assert recorder.names.count("retrieve_merge_complete") == 1
    assert state["decision"] == "fail_safe" and "illegal step decide → retrieve" in state["dispatch_error"]
    # What decide itself wrote: the envelope it was given, the refusal as the reason, and no step but the end.
    assert state["envelope"] == rogue and state["next_step"] == "end"
    assert state["decision_reason"] == state["dispatch_error"]
    assert [(e.next_action, e.tool) for e in routed] == [("call_tool", "plan")]  # the route turn's own envelope
