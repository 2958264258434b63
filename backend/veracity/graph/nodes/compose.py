"""``compose``: the composer (extractive offline, or a model) turns per-section evidence into an anchored draft.

On a retry it is told the last attempt's violations — which claim, which check, why (the informed retry).
Output that does not parse (``malformed_output``) or was cut at the token cap (``truncated``) is recorded as a
violation for ``verify`` to pass on; a model error or timeout is recorded as a failure and ``decide`` sends the run
to the floor.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from veracity import messages
from veracity.domain import Draft, SectionDraft, Violation
from veracity.errors import MalformedOutput, ModelError, TruncatedOutput
from veracity.events import DraftComposed
from veracity.graph.context import Context
from veracity.graph.state import RunState
from veracity.ports import ComposeRequest, feedback_lines

RAW_AUDIT_CHARS = 20_000


async def compose(state: RunState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    attempt = state.get("attempt", 0) + 1
    feedback = state.get("violations", []) if attempt > 1 or state.get("violations") else []
    request = ComposeRequest(
        spec=ctx.spec,
        # A follow-up is drafted knowing what it follows (a model composer reads the earlier question too).
        question=ctx.thread.framed(state["question"]) if ctx.thread is not None else state["question"],
        section_evidence=state.get("section_evidence", {}),
        evidence=state.get("evidence", []),
        attempt=attempt,
        per_section=ctx.limits.claims_per_section,
        violations=list(feedback),
        semantic=ctx.semantic,
    )
    failure: str | None = None
    malformed: list[Violation] = []
    try:
        composed = await ctx.composer.compose(request)
    except MalformedOutput as exc:
        # A draft cut at the token cap is its own check (the retry is told to write less), even when what was
        # written before the cut happens to parse.
        check = "truncated" if isinstance(exc, TruncatedOutput) else "malformed_output"
        composed = Draft(raw=exc.raw, sections=[SectionDraft(id=s.id, title=s.title) for s in ctx.spec.sections])
        malformed = [Violation(check=check, layer="compose", detail="; ".join(exc.problems)[:500])]
    except ModelError as exc:
        composed = Draft(raw="", sections=[SectionDraft(id=s.id, title=s.title) for s in ctx.spec.sections])
        failure = messages.COMPOSER_FAILED.format(error=exc)
    claims = sum(len(s.claims) for s in composed.sections)
    await ctx.audit(
        "draft",
        attempt,
        {
            "composer": ctx.composer.name,
            "told": feedback_lines(request.violations),
            "raw": composed.raw[:RAW_AUDIT_CHARS],
            "claims": claims,
            "refine": composed.refine,
            "malformed": [v.detail for v in malformed],
            "truncated": any(v.check == "truncated" for v in malformed),
            "failure": failure,
        },
    )
    await ctx.emit(
        DraftComposed(
            attempt=attempt,
            composer=ctx.composer.name,
            claims=claims,
            told=len(request.violations),
            malformed=bool(malformed),
            failure=failure,
        )
    )
    return {
        "attempt": attempt,
        "composed": composed,
        "draft": composed.sections,
        "compose_violations": malformed,
        "failure": failure,
    }
