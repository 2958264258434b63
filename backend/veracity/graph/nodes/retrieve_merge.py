"""``retrieve_merge``: collapse the branches' evidence with near-identical dedupe; list the sources opened."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from veracity.graph.context import Context
from veracity.graph.state import RunState
from veracity.search.evidence import dedupe_near_identical


async def retrieve_merge(state: RunState, runtime: Runtime[Context]) -> dict[str, Any]:
    raw = state.get("evidences", [])
    merged = dedupe_near_identical(raw)
    stats = sorted(state.get("branch_stats", []), key=lambda s: s.subtask_id)
    await runtime.context.emit(
        "retrieve_merge_complete",
        {
            "evidences_before": len(raw),
            "evidences_after": len(merged),
            "duplicates_removed": len(raw) - len(merged),
        },
    )
    sources: dict[str, dict[str, Any]] = {}
    for ev in sorted(raw, key=lambda e: (e.origin_subtask_id, -e.score)):
        entry = sources.setdefault(
            ev.source.doc_id,
            {
                "doc_id": ev.source.doc_id,
                "title": ev.source.title,
                "url": ev.source.url,
                "published": ev.source.published,
                "corpus": ev.source.corpus,
                "subtasks": [],
                "evidences": 0,
                "snippet": ev.quote[:240],
            },
        )
        if ev.origin_subtask_id not in entry["subtasks"]:
            entry["subtasks"].append(ev.origin_subtask_id)
    kept_per_doc: dict[str, int] = {}
    for ev in merged:
        kept_per_doc[ev.source.doc_id] = kept_per_doc.get(ev.source.doc_id, 0) + 1
    for doc_id, entry in sources.items():
        entry["evidences"] = kept_per_doc.get(doc_id, 0)
    await runtime.context.emit(
        "retrieve_complete",
        {
            "evidences": len(merged),
            "pages": runtime.context.coordinator.opened,
            "branches": [s.model_dump() for s in stats],
            "failed_branches": [s.subtask_id for s in stats if s.status == "failed"],
            "sources": list(sources.values()),
        },
    )
    return {"evidence": merged}
