"""L2, the grounding judge applied to a draft: every claim is judged against the evidence it cites and gets a
label, a score and its supporting span. Only ``unsupported`` blocks; ``partial`` passes and is shown."""

from __future__ import annotations

from veracity.domain import Claim, Evidence, SectionDraft, SupportSpan, Violation
from veracity.guards.judge import GroundingJudge, Source


async def judge_claim(judge: GroundingJudge, claim: Claim, by_id: dict[str, Evidence]) -> Claim:
    cited = [by_id[eid] for eid in claim.evidence_ids if eid in by_id]
    sources = [Source(id=ev.id, text=ev.quote) for ev in cited]
    verdict = await judge.judge(claim.text, sources)
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
    labelled: list[SectionDraft] = []
    violations: list[Violation] = []
    for section in draft:
        claims = [await judge_claim(judge, claim, by_id) for claim in section.claims]
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
