"""``retrieve_merge``: collapse the branches' evidence with near-identical dedupe; list the sources opened; judge
whether the best of it answers the question at all (``relevance.answered``): when it does not, no evidence goes on
— it is withheld, shown as the closest passages, and the run says that nothing in the corpus answers it."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from veracity.domain import BranchStat, Evidence
from veracity.events import RetrieveComplete, RetrieveMergeComplete, SourceUse
from veracity.graph.context import Context
from veracity.graph.nodes.decide import closest_of
from veracity.graph.state import RunState
from veracity.search.evidence import dedupe_near_identical
from veracity.semantic.relevance import Answered


def answered(ctx: Context, question: str, merged: list[Evidence], stats: list[BranchStat]) -> Answered | None:
    """The question-level judgement over what the branches kept and the best of what they did not, each sentence
    once at its best relevance (branches share passages, and a pool fitted one search at a time holds each sentence
    once), its ``kept`` count at the run's cut-off: a template that sets its own (``relevance.min_relevance``, for a
    curated corpus the model scores low) says what is evidence there, and the judgement reads that evidence — with
    relevances and words only: the reader's head is fitted on the same material as the relevance model that such a
    template overrules, and read, the help centre's answer to "How do I kill an export that is stuck…" scored 0.40
    against 0.53 (0.60 against 0.56 unread). None
    for a run over the web: the model was fitted on local pools only (HotpotQA's corpus and written notes), and web
    pages were never measured."""
    if ctx.fetcher is not None:
        return None
    pool = closest_of(stats, merged)
    own_cutoff = ctx.spec.relevance.min_relevance
    return ctx.relevance.answered(
        question,
        [(ev.relevance or 0.0, ev.quote, ev.source.title) for ev in pool],
        ctx.relevance.threshold(own_cutoff),
        read=own_cutoff is None,
    )


async def retrieve_merge(state: RunState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    raw = state.get("evidences", [])
    merged = dedupe_near_identical(raw)
    stats = sorted(state.get("branch_stats", []), key=lambda s: s.subtask_id)
    judged = answered(ctx, ctx.about(state["question"]), merged, stats)
    withheld = merged if judged is not None and not judged.passed else []
    kept = [] if withheld else merged  # what goes on
    await ctx.audit(
        "answered",
        0,
        {"mode": ctx.relevance.mode, "judged": False, "why": "a run over the web (not fitted on web pages)"}
        if judged is None
        else {
            "mode": ctx.relevance.mode,
            "judged": True,
            "read": judged.read,
            "probability": judged.probability,
            "cutoff": judged.cutoff,
            "passed": judged.passed,
            "withheld": len(withheld),
        },
    )
    await ctx.emit(
        RetrieveMergeComplete(
            evidences_before=len(raw),
            evidences_after=len(merged),
            duplicates_removed=len(raw) - len(merged),
            answered=None if judged is None else judged.probability,
            answered_cutoff=None if judged is None else judged.cutoff,
            withheld=len(withheld),
        )
    )
    kept_per_doc: dict[str, int] = {}
    for ev in kept:  # withheld evidence is no source's kept evidence
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
    return {"evidence": kept, "withheld": withheld}
