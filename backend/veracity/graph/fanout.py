"""The two fan-outs: routing functions that return one ``Send`` per subtask (never a gather in a node)."""

from __future__ import annotations

from langgraph.types import Send

from veracity.graph.state import RetrieveTask, RunState, SynthesizeTask


def fan_out_retrieve(state: RunState) -> list[Send]:
    return [
        Send(
            "retrieve",
            RetrieveTask(run_id=state["run_id"], corpus=state["corpus"], question=state["question"], subtask=subtask),
        )
        for subtask in state["subtasks"]
    ]


def fan_out_synthesize(state: RunState) -> list[Send]:
    evidence = state.get("evidence", [])
    return [
        Send(
            "synthesize",
            SynthesizeTask(
                run_id=state["run_id"],
                question=state["question"],
                subtask=subtask,
                evidence=[ev for ev in evidence if ev.origin_subtask_id == subtask.id],
            ),
        )
        for subtask in state["subtasks"]
    ]
