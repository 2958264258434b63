"""``plan``: the heuristic planner. One sub-question per evidence section, phrased by the section's
``query_hint``; every required section is always routed (seed 002's "NOT FOUND" lesson); a coverage
reflection records which subtasks feed which section."""

from __future__ import annotations

import logging
from typing import Any

from langgraph.runtime import Runtime

from veracity.domain import Subtask
from veracity.errors import MalformedOutput, ModelError
from veracity.events import BranchPending, PlannedSubtask, PlannerComplete, RetrieveMapStarted
from veracity.graph.context import Context
from veracity.graph.state import RunState
from veracity.ports import Thread
from veracity.specs.models import Spec
from veracity.text import content_terms

logger = logging.getLogger(__name__)


def heuristic_plan(question: str, spec: Spec, thread: Thread | None = None) -> list[Subtask]:
    """One subtask per evidence section. A follow-up's searches carry the earlier question's words after its own
    ("and its cost?" after "the history of the electric car" searches for the electric car's cost)."""
    sections = spec.evidence_sections
    # Required sections first so a tight subtask budget never drops them.
    ordered = [s for s in sections if s.required] + [s for s in sections if not s.required]
    n = min(spec.budgets.max_subtasks, len(ordered))
    subtasks: list[Subtask] = []
    for i, section in enumerate(ordered[:n]):
        sub_question = section.query_hint.format(question=question.strip())
        focus = content_terms(question)
        if thread is not None:
            focus += [t for t in content_terms(thread.question) if t not in focus]
        # The question's own words first (they carry relevance); the section's phrasing second.
        queries = [" ".join(focus) or question.strip()]
        if spec.budgets.queries_per_subtask > 1 and sub_question.strip().lower() != question.strip().lower():
            queries.append(sub_question)
        subtasks.append(
            Subtask(
                id=f"st{i + 1}",
                question=sub_question,
                queries=queries[: spec.budgets.queries_per_subtask],
                target_sections=[section.id],
                focus_terms=focus,
            )
        )
    # Sections beyond the budget ride along with existing subtasks, round-robin.
    for j, section in enumerate(ordered[n:]):
        subtasks[j % n].target_sections.append(section.id)
    return subtasks


def coverage(subtasks: list[Subtask], spec: Spec) -> dict[str, list[str]]:
    return {s.id: [t.id for t in subtasks if s.id in t.target_sections] for s in spec.evidence_sections}


def ensure_core_sections(subtasks: list[Subtask], spec: Spec) -> list[Subtask]:
    """Route any required evidence section no subtask targets into the first subtask."""
    routed = {sid for t in subtasks for sid in t.target_sections}
    for section in spec.evidence_sections:
        if section.required and section.id not in routed:
            subtasks[0].target_sections.append(section.id)
    return subtasks


async def plan(state: RunState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    spec = ctx.spec
    planner: str = "heuristic"
    reflection_added: list[str] | None = None
    subtasks: list[Subtask] = []
    thread = ctx.thread
    if thread is not None:
        await ctx.audit(
            "plan",
            0,
            {
                "follows": thread.parent_id,
                "parent_question": thread.question,
                "parent_sections": list(thread.sections),
                "parent_passages": len(thread.passages),
            },
        )
    if ctx.planner is not None:
        try:
            asked = thread.framed(state["question"]) if thread is not None else state["question"]
            subtasks, reflection_added = await ctx.planner.plan(asked, spec)
            planner = ctx.planner.name
        except (MalformedOutput, ModelError) as exc:
            # A plan is not a claim: a failed model planner costs the run nothing but its plan.
            planner = f"heuristic (the model planner failed: {str(exc)[:200]})"
            await ctx.audit("plan", 0, {"planner": ctx.planner.name, "failure": str(exc)[:500]})
    subtasks = ensure_core_sections(subtasks or heuristic_plan(state["question"], spec, thread), spec)
    cover = coverage(subtasks, spec)
    unrouted = [sid for sid, ids in cover.items() if not ids]
    logger.info("run %s planned %d subtasks (%s)", state["run_id"], len(subtasks), planner)
    await runtime.context.emit(
        PlannerComplete(
            planner=planner,
            subtasks=[PlannedSubtask.model_validate(t.model_dump()) for t in subtasks],
            coverage=cover,
            unrouted_sections=unrouted,
            summary_sections=[s.id for s in spec.sections if s.summary],
            reflection_added=reflection_added,
        )
    )
    await runtime.context.emit(
        RetrieveMapStarted(subtasks=[BranchPending(subtask_id=t.id, question=t.question) for t in subtasks])
    )
    return {"subtasks": subtasks, "coverage": cover}
