"""The line formats of ``veracity verify`` / ``POST /v1/verify`` and ``veracity screen`` (DESIGN.md), validated
so a bad line is a clear error naming the line, never a crash or a partial result."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from veracity import messages
from veracity.errors import BadInput
from veracity.guards.judge.claims import judge_input
from veracity.guards.router import screen
from veracity.guards.screen_model import LearnedScreen
from veracity.inputs import loads_json
from veracity.ports import GroundingJudge, Source, Span
from veracity.specs.models import Policy

MAX_CLAIM_CHARS = 4_000
MAX_SOURCE_CHARS = 200_000


class VerifySource(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=200)
    text: str = Field(max_length=MAX_SOURCE_CHARS)


class VerifyItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=200)
    claim: str = Field(min_length=1, max_length=MAX_CLAIM_CHARS)
    sources: list[VerifySource] = Field(max_length=100)


class ScreenItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=200)
    text: str = Field(max_length=20_000)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "line"
    return f"{where}: {err['msg']}"


def parse_lines(lines: Iterable[str], model: type[BaseModel], source: str) -> list[Any]:
    """Every line parsed before any is answered: one bad line rejects the whole input."""
    items: list[Any] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            items.append(model.model_validate(loads_json(line)))
        except ValidationError as exc:  # a ValueError too: caught first
            reason = _first_error(exc)
        except ValueError as exc:
            reason = str(exc)
        else:
            continue
        raise BadInput(messages.JSONL_BAD_LINE.format(path=source, line=number, reason=reason))
    return items


def _spans(spans: list[Span]) -> list[dict[str, Any]]:
    return [{"source_id": s.source_id, "start": s.start, "end": s.end} for s in spans]


async def verify_items(items: list[VerifyItem], judge: GroundingJudge) -> list[dict[str, Any]]:
    """Each item judged claim by claim (one claim a sentence): its worst claim's label, and every claim's."""
    out = []
    for item in items:
        judged = await judge_input(judge, item.claim, [Source(id=s.id, text=s.text) for s in item.sources])
        verdict = judged.judgement
        out.append(
            {
                "id": item.id,
                "label": verdict.label,
                "evidence": _spans(verdict.evidence),
                "score": round(verdict.score, 4),
                "reason": verdict.reason,
                "claims": [
                    {
                        "text": c.text,
                        "label": c.judgement.label,
                        "score": round(c.judgement.score, 4),
                        "evidence": _spans(c.judgement.evidence),
                        "reason": c.judgement.reason,
                    }
                    for c in judged.claims
                ],
            }
        )
    return out


def screen_items(
    items: list[ScreenItem], policy: Policy, screener: LearnedScreen | None = None
) -> list[dict[str, Any]]:
    """Each message's route with its explanation: the layer, the score, every class's probability and the
    training examples nearest in meaning."""
    out = []
    for item in items:
        decision = screen(item.text, policy, screener)
        out.append(
            {
                "id": item.id,
                "route": decision.route,
                "reason": decision.reason,
                "matched": decision.matched,
                "layer": decision.layer,
                "score": decision.score,
                "domain": decision.domain,
                "mode": decision.mode,
                "probabilities": decision.probabilities,
                "nearest": [{"label": e.label, "similarity": e.similarity, "text": e.text} for e in decision.nearest],
            }
        )
    return out
