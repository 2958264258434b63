"""How a run ends, outside the graph: only a ``ship`` decision ships the draft, everything else gets its honest
answer (routed, crisis, the floor); then the pre-persistence gate, whose rejection of a draft re-enters at
``compose``; then the journal stores the artifact. ``run_metrics`` is what the report says about the run. All of it
reads the graph's typed output (:class:`GraphOutput`), never its state by key."""

from __future__ import annotations

import logging
import time
from typing import Any

from langgraph.graph.state import CompiledStateGraph

from veracity import messages
from veracity.domain import Report
from veracity.events import GateRejected
from veracity.graph.context import Context
from veracity.graph.nodes.decide import closest_of
from veracity.graph.state import GraphOutput
from veracity.guards import gate
from veracity.models.usage import current_meter
from veracity.runs.floor import floor_report, routed_report
from veracity.runs.journal import Journal
from veracity.runs.report import shipped_report
from veracity.specs.models import Spec

logger = logging.getLogger(__name__)


async def gate_and_store(
    journal: Journal,
    redraft_graph: CompiledStateGraph[Any, Any, Any, Any],
    run_id: str,
    spec: Spec,
    question: str,
    corpus: str,
    output: GraphOutput,
    context: Context,
    started: float,
    emit_started: float,
    first_event_ms: float,
) -> None:
    """Outside the graph: the floor replaces anything not shippable, then the pre-persistence gate. A gate
    rejection of a draft re-enters at ``compose`` told what the gate found while the template's drafting
    attempts last (every draft counts against them), and falls to the floor after; a rejected floor is retried
    as the bare note; the third rejection ends the run with ``store_artifact_loop_abort``."""
    rejections = 0
    bare_floor = False
    while True:
        report = finish_report(run_id, spec, question, corpus, output, bare_floor=bare_floor)
        report.metrics = run_metrics(output, started, emit_started, first_event_ms)
        problems = gate.check(report, spec)
        attempt = output.attempt
        await journal.audit(
            run_id,
            "gate",
            attempt,
            {
                "outcome": report.outcome,
                "passed": not problems,
                "problems": [p.model_dump(exclude_none=True) for p in problems],
            },
        )
        if not problems:
            break
        rejections += 1
        logger.warning("run %s gate rejected the %s report (%d)", run_id, report.outcome, rejections)
        await journal.emit(
            run_id, GateRejected(outcome=report.outcome, rejection=rejections, problems=[p.detail for p in problems])
        )
        if rejections >= gate.MAX_REJECTIONS:
            await journal.audit(run_id, "abort", attempt, {"reason": gate.LOOP_ABORT, "rejections": rejections})
            detail = messages.LOOP_ABORT_DETAIL.format(
                rejections=rejections, problems="; ".join(p.detail for p in problems)
            )
            await journal.fail(run_id, gate.LOOP_ABORT, detail=detail)
            return
        if report.outcome == "shipped" and gate.may_redraft(spec, attempt):
            redrafted = await redraft_graph.ainvoke(
                output.redraft_input(problems),
                context=context,
            )
            output = GraphOutput.model_validate(redrafted)
        elif report.outcome == "shipped":
            # The template's drafting attempts are spent (every draft counts, the gate's included): the floor.
            output = output.model_copy(
                update={"decision": "fail_safe", "decision_reason": gate.exhausted_reason(attempt, problems)}
            )
        else:
            bare_floor = True
    await journal.audit(
        run_id,
        "shipped" if report.outcome == "shipped" else "outcome",
        output.attempt,
        {
            "outcome": report.outcome,
            "reason": report.outcome_reason,
            "claims": sum(len(s.claims) for s in report.sections),
            "needs_human_reason": report.needs_human_reason,
            "confidence": report.confidence,
        },
    )
    await journal.store(run_id, report)


def finish_report(
    run_id: str, spec: Spec, question: str, corpus: str, output: GraphOutput, *, bare_floor: bool = False
) -> Report:
    """Outside the graph: only a ``ship`` decision ships the draft; everything else gets its honest answer."""
    if output.route != "proceed":
        return routed_report(
            run_id=run_id,
            spec=spec,
            question=question,
            corpus=corpus,
            route=output.route,
            reason=output.route_reason,
            domain=output.route_domain,
        )
    decision = output.decision
    if decision == "ship" and not bare_floor:
        return shipped_report(
            run_id=run_id,
            spec=spec,
            question=question,
            corpus=corpus,
            draft=output.draft,
            evidence=output.evidence,
            composed=output.composed,
            language=output.language,
            confidence=output.confidence,
        )
    if decision == "crisis":
        return routed_report(
            run_id=run_id,
            spec=spec,
            question=question,
            corpus=corpus,
            route="crisis",
            reason=_or(output.decision_reason, "the reviewer flagged a crisis"),
        )
    return floor_report(
        run_id=run_id,
        spec=spec,
        question=question,
        corpus=corpus,
        evidence=[] if bare_floor else output.evidence,
        reason=_or(output.decision_reason, "not shippable")
        + (" (the evidence digest was withheld: the gate rejected it)" if bare_floor else ""),
        outcome="handoff" if decision == "handoff" and not bare_floor else "fallback",
        needs_human_reason=output.needs_human_reason,
        language=output.language,
        closest=[]
        if bare_floor
        else [ev for ev in closest_of(output.branch_stats, output.withheld) if not gate.text_problems(ev.quote, spec)],
    )


def _or(reason: str | None, default: str) -> str:
    """``reason``, or ``default`` when nothing decided (an empty reason stays empty, as it was written)."""
    return default if reason is None else reason


def run_metrics(output: GraphOutput, started: float, emit_started: float, first_event_ms: float) -> dict[str, Any]:
    stats = output.branch_stats
    return {
        "elapsed_ms": round((time.perf_counter() - started) * 1000, 1),
        "first_event_ms": round(first_event_ms, 1),
        "subtasks": len(output.subtasks),
        "queries": sum(s.queries for s in stats),
        "pages": sum(s.pages for s in stats),
        "failed_branches": sum(1 for s in stats if s.status == "failed"),
        "evidences": len(output.evidence),
        "claims": sum(len(s.claims) for s in output.draft),
        "attempts": output.attempt,
        "confidence": output.confidence,
        "model": meter.totals() if (meter := current_meter.get()) is not None else None,
    }
