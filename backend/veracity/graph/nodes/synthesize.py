"""``synthesize`` (one branch per subtask): route the subtask's own evidence into its target sections."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from veracity.domain import Shard
from veracity.events import SynthesizeMapProgress
from veracity.graph.context import Context
from veracity.graph.state import SynthesizeTask
from veracity.synthesis import SectionFit, route_shard


async def synthesize(task: SynthesizeTask, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    subtask = task["subtask"]
    await ctx.emit(SynthesizeMapProgress(subtask_id=subtask.id, status="running"))
    targets = [ctx.spec.section(sid) for sid in subtask.target_sections]
    fit = SectionFit(ctx.semantic, task["question"])
    # Embedding the sentences (cached since retrieve) and sections is CPU work: off the event loop.
    sections, orphans = await asyncio.to_thread(route_shard, task["evidence"], targets, fit, ctx.spec.evidence_sections)
    shard = Shard(subtask_id=subtask.id, sections=sections, orphans=orphans)
    await ctx.emit(
        SynthesizeMapProgress(
            subtask_id=subtask.id,
            status="done",
            evidences=len(task["evidence"]),
            sections={sid: len(ids) for sid, ids in sections.items()},
            orphans=orphans,
        )
    )
    return {"shards": [shard]}
