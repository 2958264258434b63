"""``retrieve`` (one branch per subtask): search, rank, open each page or passage once per run, extract evidence.

Local corpus hits carry their passage text. Web hits carry a snippet: the page is opened through the run's
coordinator (once per run, within the page budget, under the IO semaphore) and the fetch cache. A page that
fails (timeout, 404, refused, parse error) is recorded on the branch and the branch goes on; a branch whose
search itself fails is recorded as failed and the run goes on.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from langgraph.runtime import Runtime
from sqlalchemy.exc import SQLAlchemyError

from veracity.domain import BranchStat, Evidence, Subtask
from veracity.errors import VeracityError
from veracity.graph.context import Context, SearchHit
from veracity.graph.state import RetrieveTask
from veracity.search.evidence import dedupe_near_identical, extract_evidence

logger = logging.getLogger(__name__)


async def _progress(ctx: Context, stat: BranchStat, status: str, sources: list[dict[str, Any]] | None = None) -> None:
    payload: dict[str, Any] = {
        "subtask_id": stat.subtask_id,
        "status": status,
        "queries": stat.queries,
        "pages": stat.pages,
        "evidences": stat.evidences,
    }
    if stat.error:
        payload["error"] = stat.error
    if stat.page_errors:
        payload["page_errors"] = stat.page_errors
    if sources is not None:
        payload["sources"] = sources
    await ctx.emit("retrieve_map_progress", payload)


async def _open_web(ctx: Context, hit: SearchHit, stat: BranchStat, sources: list[dict[str, Any]]) -> SearchHit | None:
    """Open a web result through the coordinator; the page as a hit to read, or None (budget, failure)."""
    if ctx.fetcher is None:
        raise VeracityError("web results need a fetcher and this run has none")
    fetcher, url = ctx.fetcher, hit.url or hit.doc_id
    opened = await ctx.coordinator.open_once(hit.key, lambda: fetcher.open(url))
    if opened is None:
        return None
    page, order, first = opened
    sources.append(
        {
            "order": order,
            "kind": "web",
            "doc_id": hit.doc_id,
            "shared": not first,
            "rank": hit.rank_terms,
            **page.summary(),
        }
    )
    stat.pages += 1
    if not page.ok:
        if first:  # a branch that only shared another's failed fetch does not report it again
            stat.page_errors.append(f"{url}: {page.error_kind}: {page.error}")
        return None
    return SearchHit(
        doc_id=hit.doc_id,
        title=page.title or hit.title,
        text=page.text,
        start=0,
        end=len(page.text),
        score=hit.score,
        url=page.final_url or url,
        published=page.published or hit.published,
        key=hit.key,
    )


async def _open_local(ctx: Context, hit: SearchHit, stat: BranchStat, sources: list[dict[str, Any]]) -> bool:
    order = await ctx.coordinator.claim(hit.key)
    if order is None:
        return False
    stat.pages += 1
    sources.append(
        {
            "order": order,
            "kind": "local",
            "doc_id": hit.doc_id,
            "title": hit.title,
            "url": hit.url,
            "status": "ok",
            "cache": "none",
            "bytes": len(hit.text.encode()),
            "published": hit.published,
            "rank": hit.rank_terms,
        }
    )
    return True


async def _search_and_read(
    ctx: Context, task: RetrieveTask, subtask: Subtask, stat: BranchStat, sources: list[dict[str, Any]]
) -> list[Evidence]:
    found: list[Evidence] = []
    for query in subtask.queries:
        hits = await ctx.search.search(query=query, corpus=task["corpus"], k=ctx.limits.search_k)
        stat.queries += 1
        if ctx.ranker is not None:
            # Off the event loop: the gazetteer and (when on) the embedding rerank are CPU work.
            hits = await asyncio.to_thread(ctx.ranker.rank, query, hits)
        if any(h.fetch for h in hits):
            hits = hits[: ctx.pages_per_query]
        for hit in hits:
            fetched_at = datetime.now(UTC).isoformat(timespec="seconds")
            if hit.fetch:
                page = await _open_web(ctx, hit, stat, sources)
                if page is None:
                    continue
                hit, fetched_at = page, sources[-1]["fetched_at"]
            elif not await _open_local(ctx, hit, stat, sources):
                continue
            found.extend(
                extract_evidence(
                    hit,
                    query=subtask.question,
                    focus_terms=subtask.focus_terms,
                    subtask_id=subtask.id,
                    corpus=task["corpus"],
                    fetched_at=fetched_at,
                    weights=ctx.focus_weights,
                )
            )
    return found


async def retrieve(task: RetrieveTask, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    subtask = task["subtask"]
    stat = BranchStat(subtask_id=subtask.id, status="done")
    await _progress(ctx, stat, "running")
    sources: list[dict[str, Any]] = []
    try:
        found = await _search_and_read(ctx, task, subtask, stat, sources)
        kept = dedupe_near_identical(found)[: ctx.limits.evidence_per_subtask]
        stat.evidences = len(kept)
    except (VeracityError, SQLAlchemyError, OSError) as exc:
        logger.warning("run %s branch %s failed: %s", task["run_id"], subtask.id, exc)
        stat.status, stat.error = "failed", f"{type(exc).__name__}: {exc}"
        kept = []
    await _progress(ctx, stat, stat.status, sources)
    return {"evidences": kept, "branch_stats": [stat]}
