"""``retrieve`` (one branch per subtask): search, rank, open each page or passage once per run, extract evidence.

Local corpus hits carry their passage text. Web hits carry a snippet: the page is opened through the run's
coordinator (once per run, within the page budget, under the IO semaphore) and the fetch cache. A page that
fails (timeout, 404, refused, parse error) is recorded on the branch and the branch goes on; a branch whose
search itself fails is recorded as failed and the run goes on. Text in what was opened that addresses the model
("SYSTEM: ...", "ignore previous instructions") is never evidence; each source holding some is recorded in the
audit trail as ``instruction_in_source`` (by the branch that opened it, so once per page or passage).
"""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import UTC, datetime
from typing import Any

from langgraph.runtime import Runtime
from sqlalchemy.exc import SQLAlchemyError

from veracity.db.failures import public_error
from veracity.domain import CLOSEST_SHOWN, BranchStat, Evidence, Subtask
from veracity.errors import LeaseLost, ModelError, RunCancelled, VeracityError
from veracity.events import BranchStatus, OpenedSource, RetrieveMapProgress
from veracity.graph.context import Context
from veracity.graph.state import RetrieveTask
from veracity.ports import SearchHit
from veracity.search.evidence import (
    SentenceCandidate,
    SourceInstruction,
    dedupe_near_identical,
    read_passage,
    to_evidence,
)
from veracity.search.hop import HOP_K, hop_names
from veracity.semantic.relevance import Candidate

logger = logging.getLogger(__name__)

MAX_AUDIT_CHARS = 300
"""Longest text of a sentence addressed to the model kept in the audit trail."""
ANAPHOR = re.compile(r"^\W*(?:he|she|it|they|his|her|its|their|him|them)\b", re.I)
"""A sentence opening with a pronoun names its subject in the sentence before ("She founded the shipbuilder in
1902." after "Ines Marrow was an engineer from Caldera.")."""


async def _progress(
    ctx: Context, stat: BranchStat, status: BranchStatus, sources: list[OpenedSource] | None = None
) -> None:
    await ctx.emit(
        RetrieveMapProgress(
            subtask_id=stat.subtask_id,
            status=status,
            queries=stat.queries,
            pages=stat.pages,
            evidences=stat.evidences,
            error=stat.error or None,
            page_errors=stat.page_errors or None,
            sources=sources,
        )
    )


async def _open_web(ctx: Context, hit: SearchHit, stat: BranchStat, sources: list[OpenedSource]) -> SearchHit | None:
    """Open a web result through the coordinator; the page as a hit to read, or None (budget, failure)."""
    if ctx.fetcher is None:
        raise VeracityError("web results need a fetcher and this run has none")
    fetcher, url = ctx.fetcher, hit.url or hit.doc_id
    opened = await ctx.coordinator.open_once(hit.key, lambda: fetcher.open(url))
    if opened is None:
        return None
    page, order, first = opened
    if _read_here(sources, order):
        return None
    sources.append(
        OpenedSource(
            order=order, kind="web", doc_id=hit.doc_id, shared=not first, rank=hit.rank_terms, **page.summary()
        )
    )
    stat.pages += 1
    if not page.ok:
        if first:  # a branch that only shared another's failed fetch does not report it again
            stat.page_errors.append(f"{url}: {page.error_kind}: {page.error}")
        return None
    stat.pages_read += 1
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


def _read_here(sources: list[OpenedSource], order: int) -> bool:
    """This branch read the page or passage already (another of its queries found it again)."""
    return any(s.order == order for s in sources)


async def _open_local(
    ctx: Context, hit: SearchHit, stat: BranchStat, sources: list[OpenedSource], cache: str = "none"
) -> bool:
    opened = await ctx.coordinator.read(hit.key)
    if opened is None:
        return False
    order, first = opened
    if _read_here(sources, order):
        return False
    stat.pages += 1
    stat.pages_read += 1
    sources.append(
        OpenedSource(
            order=order,
            kind="local",
            doc_id=hit.doc_id,
            shared=not first,
            title=hit.title,
            url=hit.url,
            status="ok",
            cache=cache,
            bytes=len(hit.text.encode()),
            published=hit.published,
            rank=hit.rank_terms,
        )
    )
    return True


async def _read_hits(
    ctx: Context,
    query: str,
    k: int,
    task: RetrieveTask,
    stat: BranchStat,
    sources: list[OpenedSource],
    addressed: list[tuple[SearchHit, list[SourceInstruction]]],
) -> list[list[SentenceCandidate]]:
    """Search one query, open each hit once per run, and read what was opened: its fact-shaped sentences per
    passage, in rank order. What addresses the model in a passage this branch opened first goes to
    ``addressed``."""
    hits = await ctx.search.search(query=query, corpus=task["corpus"], k=k)
    stat.queries += 1
    if ctx.ranker is not None:
        # Off the event loop: the gazetteer and (when on) the embedding rerank are CPU work.
        hits = await asyncio.to_thread(ctx.ranker.rank, query, hits)
    if any(h.fetch for h in hits):
        hits = hits[: ctx.pages_per_query]
    per_hit: list[list[SentenceCandidate]] = []
    # Where the search ranked a passage among those with text: a page that could not be opened (failed,
    # refused, over the page budget) holds nothing and pushes nobody down. A passage another branch opened is read
    # here too (shared), so a branch's sentences do not depend on which branch was scheduled first.
    rank = 0
    for hit in hits:
        fetched_at = datetime.now(UTC).isoformat(timespec="seconds")
        if hit.fetch:
            page = await _open_web(ctx, hit, stat, sources)
            if page is None:
                continue
            hit, fetched_at = page, sources[-1].fetched_at or fetched_at
        elif not await _open_local(ctx, hit, stat, sources):
            rank += 1
            continue
        rank += 1
        candidates, found = read_passage(hit, fetched_at, rank - 1)
        if found and not sources[-1].shared:
            addressed.append((hit, found))
        per_hit.append(candidates)
    return per_hit


async def _search_and_read(
    ctx: Context,
    task: RetrieveTask,
    subtask: Subtask,
    stat: BranchStat,
    sources: list[OpenedSource],
    addressed: list[tuple[SearchHit, list[SourceInstruction]]],
) -> list[SentenceCandidate]:
    """Search each query and read what was opened: at most ``max_candidates`` sentences a branch (relevance is
    paid per sentence), taken round-robin over the opened passages in rank order (each passage's first sentence,
    then each one's second…), so a long first passage cannot crowd out the others, nor the second query's. Then,
    over a local corpus, the second hop (``search.hop``): the names the sentences most like the question mention
    that the question does not, each searched on its own."""
    per_hit: list[list[SentenceCandidate]] = []
    for query in subtask.queries:
        per_hit += await _read_hits(ctx, query, ctx.limits.search_k, task, stat, sources, addressed)
    for rank, hit in enumerate(ctx.thread.passages if ctx.thread is not None else ()):
        # A follow-up may reuse what its parent quoted: each branch reads them (shared after the first opened them),
        # ranked in the order the parent's report quoted them.
        if await _open_local(ctx, hit, stat, sources, cache="parent run"):
            per_hit.append(read_passage(hit, datetime.now(UTC).isoformat(timespec="seconds"), rank)[0])
    found = round_robin(per_hit, ctx.max_candidates)
    if ctx.fetcher is not None or not found or ctx.max_candidates < 3:
        # A run over the web never hops (a follow-up whose searches found nothing still holds its parent's quotes);
        # nor does a branch with no room for the hop's sentences.
        return found
    question = ctx.about(task["question"])
    strength = await asyncio.to_thread(ctx.relevance.strength, question, _as_candidates(found))
    names = hop_names(question, [c.text for c in found], strength, [c.hit.title for c in found])
    hopped: list[list[SentenceCandidate]] = []
    for name in names:
        hopped += await _read_hits(ctx, name, HOP_K, task, stat, sources, addressed)
    # The hop's sentences take at most a third of the branch's candidates, from the first pass's deepest ones.
    hop = round_robin(hopped, ctx.max_candidates // 3)
    return found[: ctx.max_candidates - len(hop)] + hop


def round_robin(per_hit: list[list[SentenceCandidate]], limit: int) -> list[SentenceCandidate]:
    """Up to ``limit`` sentences: the first of each list in order, then the second of each, and so on."""
    out: list[SentenceCandidate] = []
    depth = 0
    while len(out) < limit and any(depth < len(sentences) for sentences in per_hit):
        out.extend(sentences[depth] for sentences in per_hit if depth < len(sentences))
        depth += 1
    return out[:limit]


def _as_candidates(found: list[SentenceCandidate]) -> list[Candidate]:
    """What the relevance model reads of each sentence: its title, position, adjacent sentences and where the
    search ranked its passage."""
    where = {(id(c.hit), c.position): i for i, c in enumerate(found)}
    return [
        Candidate(
            text=c.text,
            title=c.hit.title,
            position=c.position,
            neighbours=tuple(
                j for p in (c.position - 1, c.position + 1) if (j := where.get((id(c.hit), p))) is not None
            ),
            passage_vector=c.hit.vector,
            rank=c.rank,
        )
        for c in found
    ]


def _select(
    ctx: Context, question: str, task: RetrieveTask, found: list[SentenceCandidate], stat: BranchStat
) -> list[Evidence]:
    """Evidence = the candidates at or above the template's relevance cut-off (or the sentence naming what a
    kept one's opening pronoun stands for), most relevant first; the best ones below it are kept on the branch
    as the closest passages (for an honest "nothing answers this")."""
    cutoff = ctx.relevance.threshold(ctx.spec.relevance.min_relevance)
    scores = with_antecedents(found, ctx.relevance.score(question, _as_candidates(found)), cutoff)
    ranked = sorted(zip(scores, found, strict=True), key=lambda t: -t[0])
    kept = [
        to_evidence(c, subtask_id=task["subtask"].id, corpus=task["corpus"], relevance=p, score=p)
        for p, c in ranked
        if p >= cutoff
    ]
    below = [(p, c) for p, c in ranked if p < cutoff][:CLOSEST_SHOWN]  # as many as the floor may show
    stat.closest_evidence = [
        to_evidence(c, subtask_id=task["subtask"].id, corpus=task["corpus"], relevance=p, score=p) for p, c in below
    ]
    return kept


def with_antecedents(found: list[SentenceCandidate], scores: list[float], cutoff: float) -> list[float]:
    """``scores`` with each kept sentence that opens with a pronoun lifting the sentence just before it in its
    passage to its own relevance: the reader (and an answer naming who or what) needs the subject the pronoun
    stands for, which the sentence before names and which, read alone, may not look relevant at all."""
    where = {(id(c.hit), c.position): i for i, c in enumerate(found)}
    out = list(scores)
    for i, c in enumerate(found):
        before = where.get((id(c.hit), c.position - 1))
        if scores[i] >= cutoff and before is not None and ANAPHOR.match(c.text):
            out[before] = max(out[before], scores[i])
    return out


async def record_instructions(
    ctx: Context, task: RetrieveTask, addressed: list[tuple[SearchHit, list[SourceInstruction]]]
) -> None:
    """One ``instruction_in_source`` audit entry per source, with every sentence (or title) of it that addresses
    the model: none of them is evidence."""
    by_doc: dict[str, dict[str, Any]] = {}
    for hit, found in addressed:
        entry = by_doc.setdefault(
            hit.doc_id,
            {
                "doc_id": hit.doc_id,
                "title": hit.title,
                "url": hit.url,
                "corpus": task["corpus"],
                "subtask_id": task["subtask"].id,
                "sentences": [],
            },
        )
        entry["sentences"] += [
            {
                "text": f.text[:MAX_AUDIT_CHARS],
                "kind": f.instruction.kind,
                "matched": f.instruction.matched,
                "start": f.start,
                "end": f.end,
            }
            for f in found
        ]
    for doc_id, entry in by_doc.items():
        logger.warning(
            "run %s: %s addresses the model in %d place(s); none is evidence",
            task["run_id"],
            doc_id,
            len(entry["sentences"]),
        )
        await ctx.audit("instruction_in_source", 0, entry)


async def retrieve(task: RetrieveTask, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    subtask = task["subtask"]
    stat = BranchStat(subtask_id=subtask.id, status="done")
    await _progress(ctx, stat, "running")
    sources: list[OpenedSource] = []
    addressed: list[tuple[SearchHit, list[SourceInstruction]]] = []
    try:
        found = await _search_and_read(ctx, task, subtask, stat, sources, addressed)
        # Off the event loop: embedding the sentences is CPU work.
        selected = await asyncio.to_thread(_select, ctx, ctx.about(task["question"]), task, found, stat)
        kept = dedupe_near_identical(selected)[: ctx.limits.evidence_per_subtask]
        stat.evidences = len(kept)
    except (ModelError, LeaseLost, RunCancelled):
        raise  # a model failure is the run's (the floor), not one branch's; so are a lost claim and a cancel
    except (VeracityError, SQLAlchemyError, OSError) as exc:
        # The branch's error reaches the run's events and page: a database failure's SQL stays in the log.
        stat.status, stat.error = "failed", public_error(exc, where=f"run {task['run_id']} branch {subtask.id}")
        logger.warning("run %s branch %s failed: %s", task["run_id"], subtask.id, stat.error)
        kept = []
    await record_instructions(ctx, task, addressed)
    await _progress(ctx, stat, stat.status, sources)
    return {"evidences": kept, "branch_stats": [stat]}
