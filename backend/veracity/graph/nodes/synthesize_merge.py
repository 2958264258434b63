"""``synthesize_merge``: collapse shards into per-section evidence, dedupe, give a direct-answer section the run's
most relevant sentences, backfill empty required sections."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from veracity.events import SynthesizeMergeComplete
from veracity.graph.context import Context
from veracity.graph.state import RunState
from veracity.synthesis import SectionFit, backfill, take_answers


async def synthesize_merge(state: RunState, runtime: Runtime[Context]) -> dict[str, Any]:
    spec = runtime.context.spec
    evidence = state.get("evidence", [])
    rank = {ev.id: i for i, ev in enumerate(evidence)}
    sections: dict[str, list[str]] = {s.id: [] for s in spec.evidence_sections}
    for shard in sorted(state.get("shards", []), key=lambda s: s.subtask_id):
        for sid, ids in shard.sections.items():
            sections.setdefault(sid, []).extend(ids)
    # An evidence id lands once per section, best-scored first.
    sections = {sid: sorted(set(ids), key=lambda i: rank.get(i, len(rank))) for sid, ids in sections.items()}
    sections, answers = take_answers(spec, sections, evidence)
    fit = SectionFit(runtime.context.semantic, runtime.context.about(state["question"]))
    taken = {eid for ids in answers.values() for eid in ids}
    sections, filled = await asyncio.to_thread(backfill, spec, sections, evidence, fit, taken)
    await runtime.context.emit(
        SynthesizeMergeComplete(
            sections={sid: len(ids) for sid, ids in sections.items()}, backfilled=filled, answers=answers
        )
    )
    return {"section_evidence": sections}
