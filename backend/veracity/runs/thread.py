"""Follow-ups: what a run that follows another is told of it (its question, its report's sections, the passages
it quoted), and the thread a run page shows (the runs it follows, and those that follow it)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from veracity.db import corpus_repo, runs_repo
from veracity.db.models import ResearchRun
from veracity.domain import DIGEST_ID, WEB_SOURCE, Report
from veracity.ports import SearchHit, Thread

MAX_PASSAGES = 24
"""Most of the parent's quoted passages a follow-up may read again."""
MAX_ANCESTORS = 10
"""How far up a thread a run page walks (a thread is a chain; each step is one indexed read)."""


def passages_of(report: Report) -> tuple[SearchHit, ...]:
    """The sentences a report quoted, each located in its document. The quote alone, not the text around it: that
    may start mid-sentence, and a fragment read again would ship beside the whole sentence found anew."""
    return tuple(
        SearchHit(
            doc_id=ev.doc_id,
            title=ev.title,
            text=ev.quote,
            start=ev.start,
            end=ev.end,
            score=0.0,
            url=ev.url,
            published=ev.published,
            key=f"parent:{ev.doc_id}:{ev.start}",
        )
        for ev in report.evidence[:MAX_PASSAGES]
    )


async def load_thread(*, session: AsyncSession, run_id: str) -> Thread | None:
    """The thread a run executes in: its parent's question, sections and quoted passages (None: no parent, or
    the parent was deleted)."""
    run = await runs_repo.get_run(session=session, run_id=run_id)
    if run is None or run.parent_id is None:
        return None
    parent = await runs_repo.get_run(session=session, run_id=run.parent_id)
    if parent is None:
        return None
    artifact = await runs_repo.latest_artifact(session=session, run_id=parent.id)
    if artifact is None:
        return Thread(parent_id=parent.id, question=parent.question)
    report = Report.model_validate(artifact.report)
    # What the report answered: not its evidence digest or closest passages (quotes, not an answer).
    sections = tuple(s.title for s in report.sections if s.claims and s.id != DIGEST_ID)
    passages = passages_of(report)
    if parent.corpus != WEB_SOURCE:  # a document deleted since is not read again (deleting it promised as much)
        kept = await corpus_repo.existing_doc_ids(
            session=session, corpus=parent.corpus, doc_ids={p.doc_id for p in passages}
        )
        passages = tuple(p for p in passages if p.doc_id in kept)
    return Thread(parent_id=parent.id, question=parent.question, sections=sections, passages=passages)


async def ancestors(*, session: AsyncSession, run: ResearchRun) -> list[ResearchRun]:
    """The runs ``run`` follows, oldest first (stops at a deleted one)."""
    chain: list[ResearchRun] = []
    current = run
    while current.parent_id is not None and len(chain) < MAX_ANCESTORS:
        parent = await runs_repo.get_run(session=session, run_id=current.parent_id)
        if parent is None:
            break
        chain.append(parent)
        current = parent
    return chain[::-1]


async def follow_ups(*, session: AsyncSession, run_id: str) -> Sequence[ResearchRun]:
    return await runs_repo.children_of(session=session, run_id=run_id)
