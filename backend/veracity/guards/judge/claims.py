"""An input of several sentences, judged claim by claim (``veracity verify``, ``POST /v1/verify``).

Each sentence is a claim and is judged on its own against all the sources; the input takes its worst claim's
label (one invented sentence makes a summary ``unsupported``, however true the rest), its lowest score, every
claim's evidence, and the reason of its first worst claim. A piece with no content word ("Yes.") is not a claim.
"""

from __future__ import annotations

from dataclasses import dataclass

from veracity.guards.judge.lexical import snippet
from veracity.guards.judge.words import CONTENT, NUMBER, tokens_of
from veracity.ports import LABEL_ORDER, GroundingJudge, Judgement, Source
from veracity.text import sentence_spans


@dataclass(frozen=True)
class ClaimJudgement:
    text: str
    judgement: Judgement


@dataclass(frozen=True)
class InputJudgement:
    judgement: Judgement  # the input as a whole
    claims: list[ClaimJudgement]


def split_claims(text: str) -> list[str]:
    """The input's sentences that state something (hold a content word or a number)."""
    sentences = [text[s:e] for s, e in sentence_spans(text)]
    claims = [s for s in sentences if any(kind in (CONTENT, NUMBER) for _, kind in tokens_of(s))]
    return claims or [text]


async def judge_input(judge: GroundingJudge, text: str, sources: list[Source]) -> InputJudgement:
    claims = [ClaimJudgement(claim, await judge.judge(claim, sources)) for claim in split_claims(text)]
    return InputJudgement(combine(claims), claims)


def combine(claims: list[ClaimJudgement]) -> Judgement:
    worst = max(claims, key=lambda c: LABEL_ORDER.index(c.judgement.label))
    label = worst.judgement.label
    evidence = list(dict.fromkeys(span for c in claims for span in c.judgement.evidence))
    score = min(c.judgement.score for c in claims)
    if len(claims) == 1:
        reason = worst.judgement.reason
    elif label == "supported":
        reason = f"all {len(claims)} claims are supported"
    else:
        k = claims.index(worst) + 1
        reason = f"claim {k} of {len(claims)} is {label} (“{snippet(worst.text)}”): {worst.judgement.reason}"
    return Judgement(label, score, evidence, reason)
