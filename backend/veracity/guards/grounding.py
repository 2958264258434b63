"""L2, the grounding judge applied to a draft: every claim is judged against the evidence it cites and gets a
label, a score and its supporting span. Only ``unsupported`` blocks; ``partial`` passes and is shown.

Claims are judged concurrently, at most the judge's ``concurrency`` at once (each model call still counts against
the run's budget when it is sent, so calls in flight cannot overshoot it). An answer the judge model writes that
cannot be read costs that claim one informed retry (inside the model judge); a second unreadable answer leaves
that claim ``unsupported`` (unverified, so it cannot ship) — never the whole run. A judge that cannot be reached,
times out or runs out of budget (``ModelError``) still ends the draft: nothing it did not check may ship."""

from __future__ import annotations

import asyncio

from veracity.domain import Claim, Evidence, SectionDraft, SupportSpan, Violation
from veracity.errors import MalformedOutput
from veracity.ports import GroundingJudge, Judgement, Source
from veracity.settings import JUDGE_CONCURRENCY

UNREADABLE = "the judge's answer could not be read, twice ({problems}); the claim is unverified"


async def _verdict(judge: GroundingJudge, text: str, sources: list[Source]) -> Judgement:
    try:
        return await judge.judge(text, sources)
    except MalformedOutput as unreadable:  # the model judge already retried once
        return Judgement("unsupported", 0.0, [], UNREADABLE.format(problems="; ".join(unreadable.problems)[:200]))


async def judge_claim(judge: GroundingJudge, claim: Claim, by_id: dict[str, Evidence]) -> Claim:
    cited = [by_id[eid] for eid in claim.evidence_ids if eid in by_id]
    sources = [Source(id=ev.id, text=ev.quote) for ev in cited]
    verdict = await _verdict(judge, claim.text, sources)
    offsets = {ev.id: ev.start for ev in cited}
    support = [
        SupportSpan(
            evidence_id=span.source_id,
            start=offsets[span.source_id] + span.start,
            end=offsets[span.source_id] + span.end,
        )
        for span in verdict.evidence
        if span.source_id in offsets
    ]
    return claim.model_copy(
        update={"label": verdict.label, "score": round(verdict.score, 3), "support": support, "reason": verdict.reason}
    )


async def ground(
    judge: GroundingJudge, draft: list[SectionDraft], evidence: list[Evidence]
) -> tuple[list[SectionDraft], list[Violation]]:
    by_id = {ev.id: ev for ev in evidence}
    gate = asyncio.Semaphore(max(1, int(getattr(judge, "concurrency", JUDGE_CONCURRENCY))))

    async def one(claim: Claim) -> Claim:
        async with gate:
            return await judge_claim(judge, claim, by_id)

    try:
        async with asyncio.TaskGroup() as group:  # the first ModelError cancels the claims still being judged
            tasks = [[group.create_task(one(claim)) for claim in section.claims] for section in draft]
    except ExceptionGroup as failed:
        raise failed.exceptions[0] from None
    labelled: list[SectionDraft] = []
    violations: list[Violation] = []
    for section, section_tasks in zip(draft, tasks, strict=True):
        claims = [task.result() for task in section_tasks]
        for index, claim in enumerate(claims):
            if claim.label == "unsupported":
                violations.append(
                    Violation(
                        check="unsupported_claim",
                        layer="l2",
                        section_id=section.id,
                        claim_index=index,
                        claim=claim.text[:1000],
                        detail=f"the cited evidence does not support the claim ({claim.reason})",
                    )
                )
        labelled.append(section.model_copy(update={"claims": claims}))
    return labelled, violations
