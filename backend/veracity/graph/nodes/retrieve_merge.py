"""``retrieve_merge``: collapse the branches' evidence with near-identical dedupe; list the sources opened."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from veracity.domain import Evidence
from veracity.events import RetrieveComplete, RetrieveMergeComplete, SourceUse
from veracity.graph.context import Context
from veracity.graph.state import RunState
from veracity.search.evidence import dedupe_near_identical


async def retrieve_merge(state: RunState, runtime: Runtime[Context]) -> dict[str, Any]:
    raw = state.get("evidences", [])
    merged = dedupe_near_identical(raw)
    stats = sorted(state.get("branch_stats", []), key=lambda s: s.subtask_id)
    await runtime.context.emit(
        RetrieveMergeComplete(
            evidences_before=len(raw), evidences_after=len(merged), duplicates_removed=len(raw) - len(merged)
        )
    )
    kept_per_doc: dict[str, int] = {}
    for ev in merged:
        kept_per_doc[ev.source.doc_id] = kept_per_doc.get(ev.source.doc_id, 0) + 1
    first: dict[str, Evidence] = {}
    found_by: dict[str, list[str]] = {}
    for ev in sorted(raw, key=lambda e: (e.origin_subtask_id, -e.score)):
        first.setdefault(ev.source.doc_id, ev)
        subtasks = found_by.setdefault(ev.source.doc_id, [])
        if ev.origin_subtask_id not in subtasks:
            subtasks.append(ev.origin_subtask_id)
    sources = [
        SourceUse(
            doc_id=doc_id,
            title=ev.source.title,
            url=ev.source.url,
            published=ev.source.published,
            corpus=ev.source.corpus,
            subtasks=found_by[doc_id],
            evidences=kept_per_doc.get(doc_id, 0),
            snippet=ev.quote[:240],
        )
        for doc_id, ev in first.items()
    ]
    await runtime.context.emit(
        RetrieveComplete(
            evidences=len(merged),
            pages=runtime.context.coordinator.opened,
            # The counters; the closest passages are the floor's (as evidence, up to 5 a branch), not the stream's.
            branches=[s.model_copy(update={"closest_evidence": []}) for s in stats],
            failed_branches=[s.subtask_id for s in stats if s.status == "failed"],
            sources=sources,
        )
    )
    return {"evidence": merged}
