"""``retrieve`` (one branch per subtask): search, open each passage once per run, extract evidence.

A failing branch is recorded (status ``failed`` with the reason) and the run goes on.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from langgraph.runtime import Runtime
from sqlalchemy.exc import SQLAlchemyError

from veracity.domain import BranchStat, Evidence
from veracity.errors import VeracityError
from veracity.graph.context import Context
from veracity.graph.state import RetrieveTask
from veracity.search.evidence import dedupe_near_identical, extract_evidence

logger = logging.getLogger(__name__)


async def _progress(ctx: Context, stat: BranchStat, status: str) -> None:
    payload = {
        "subtask_id": stat.subtask_id,
        "status": status,
        "queries": stat.queries,
        "pages": stat.pages,
        "evidences": stat.evidences,
    }
    if stat.error:
        payload["error"] = stat.error
    await ctx.emit("retrieve_map_progress", payload)


async def retrieve(task: RetrieveTask, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    subtask = task["subtask"]
    stat = BranchStat(subtask_id=subtask.id, status="done")
    await _progress(ctx, stat, "running")
    found: list[Evidence] = []
    try:
        fetched_at = datetime.now(UTC).isoformat(timespec="seconds")
        for query in subtask.queries:
            hits = await ctx.search.search(query=query, corpus=task["corpus"], k=ctx.limits.search_k)
            stat.queries += 1
            for hit in hits:
                if not await ctx.coordinator.claim(hit.key):
                    continue
                stat.pages += 1
                found.extend(
                    extract_evidence(
                        hit,
                        query=subtask.question,
                        focus_terms=subtask.focus_terms,
                        subtask_id=subtask.id,
                        corpus=task["corpus"],
                        fetched_at=fetched_at,
                    )
                )
        kept = dedupe_near_identical(found)[: ctx.limits.evidence_per_subtask]
        stat.evidences = len(kept)
    except (VeracityError, SQLAlchemyError, OSError) as exc:
        logger.warning("run %s branch %s failed: %s", task["run_id"], subtask.id, exc)
        stat.status, stat.error = "failed", f"{type(exc).__name__}: {exc}"
        kept = []
    await _progress(ctx, stat, stat.status)
    return {"evidences": kept, "branch_stats": [stat]}
