"""What each event says: its timeline row, the CLI's ``key=value`` fields and the lines worth keeping above a
progress bar — one case per event model, read against the view before the event is applied."""

from __future__ import annotations

from dataclasses import dataclass, field

from veracity.events import (
    Complete,
    DraftComposed,
    Event,
    GateRejected,
    ModelCall,
    PlannerComplete,
    RetrieveComplete,
    RetrieveMapProgress,
    RetrieveMapStarted,
    RetrieveMergeComplete,
    ReviseRequested,
    RouteDecided,
    RunFailed,
    RunStarted,
    SelfCheckComplete,
    SynthesizeComplete,
    SynthesizeMapProgress,
    SynthesizeMergeComplete,
    Unrecognised,
)
from veracity.runs.view import RunView


@dataclass(frozen=True)
class Line:
    """What one event says: the timeline's one-line summary and kind, the CLI's ``key=value`` fields, and the
    lines worth keeping above a progress bar (text, is_failure)."""

    summary: str
    kind: str
    fields: list[tuple[str, object]] = field(default_factory=list)
    notes: list[tuple[str, bool]] = field(default_factory=list)
    subject: str = ""
    """Which branch, and its status, for a branch's event (``s1 done``)."""


def _branch_line(view: RunView, e: RetrieveMapProgress) -> Line:
    kind = "failure" if e.status == "failed" else "progress"
    text = f"{e.subtask_id} {e.status}: {e.queries} queries, {e.pages} pages, {e.evidences} evidences"
    fields: list[tuple[str, object]] = [("queries", e.queries), ("pages", e.pages), ("evidences", e.evidences)]
    if e.error:
        text += f" — {e.error}"
    page_errors = e.page_errors or []
    if page_errors:
        text += f" — {len(page_errors)} page(s) failed: {'; '.join(page_errors[:3])}"
        kind = "failure"
        fields.append(("page_errors", len(page_errors)))
    if e.error:
        fields.append(("error", e.error))
    before = view.branches.get(e.subtask_id)
    seen = len(before.page_errors) if before else 0
    notes = [(f"branch {e.subtask_id}: page failed: {err}", True) for err in page_errors[seen:]]
    if e.status == "failed" and (before is None or before.retrieve != "failed"):
        notes.append((f"branch {e.subtask_id} failed: {e.error or 'no reason given'}", True))
    return Line(text, kind, fields, notes, subject=f"{e.subtask_id} {e.status}")


def _model_line(e: ModelCall) -> Line:
    t = e.totals
    fields: list[tuple[str, object]] = [
        ("role", e.role),
        ("model", e.model),
        ("prompt_tokens", e.prompt_tokens),
        ("completion_tokens", e.completion_tokens),
        ("ms", e.ms),
        ("error", e.error),
    ]
    if e.error:
        text = f"{e.role} call to {e.model} {e.error} after {e.ms} ms (run: {t.calls} calls, {t.failed} failed)"
        return Line(text, "failure", fields)
    cut = e.finish_reason == "length"
    if cut:
        fields.append(("finish_reason", "length"))
    cost = f", ${e.cost_usd:.4f}" if e.cost_usd is not None else ""
    text = (
        f"{e.role} call to {e.model}: {e.prompt_tokens} prompt + {e.completion_tokens} completion tokens in "
        f"{e.ms} ms{cost} (run: {t.calls} calls, {t.prompt_tokens} + {t.completion_tokens} tokens)"
        + (" — cut off at the token cap" if cut else "")
    )
    return Line(text, "guard" if cut else "info", fields)


def describe(view: RunView, event: Event | Unrecognised) -> Line:
    """What ``event`` says, read against the view before it is applied (for what is new since)."""
    match event:
        case RunStarted():
            return Line(
                f"template {event.template} on corpus {event.corpus}",
                "info",
                [("template", event.template), ("corpus", event.corpus)],
            )
        case RouteDecided():
            proceed = event.route == "proceed"
            fields: list[tuple[str, object]] = [("route", event.route)]
            if not proceed:
                fields.append(("reason", event.reason))
            notes = [] if proceed else [(f"routed: {event.route} ({event.reason})", False)]
            return Line(f"route {event.route}: {event.reason}", "info" if proceed else "guard", fields, notes)
        case PlannerComplete():
            fields = [("subtasks", len(event.subtasks)), ("planner", event.planner or None)]
            return Line(f"{len(event.subtasks)} subtasks planned", "info", fields)
        case RetrieveMapStarted():
            n = len(event.subtasks)
            return Line(f"{n} retrieve branches started", "info", [("branches", n)])
        case RetrieveMapProgress():
            return _branch_line(view, event)
        case RetrieveMergeComplete():
            text = f"{event.evidences_after} evidences after removing {event.duplicates_removed} duplicates"
            fields = [("evidences_before", event.evidences_before), ("evidences_after", event.evidences_after)]
            if event.answered is None or event.answered_cutoff is None:  # a web run, or one recorded before
                return Line(text, "info", fields)
            fields += [("answered", event.answered), ("answered_cutoff", event.answered_cutoff)]
            judged = f"{event.answered:.2f}, cut-off {event.answered_cutoff:.2f}"
            if event.withheld:
                fields.append(("withheld", event.withheld))
                return Line(f"{text}; withheld: together they do not answer the question ({judged})", "guard", fields)
            if not event.evidences_after:
                return Line(f"{text}; nothing reached the relevance cut-off ({judged})", "info", fields)
            return Line(f"{text}; together they answer the question ({judged})", "info", fields)
        case RetrieveComplete():
            text = f"{event.evidences} evidences from {len(event.sources)} sources"
            fields = [
                ("evidences", event.evidences),
                ("pages", event.pages),
                ("failed_branches", len(event.failed_branches)),
            ]
            if event.failed_branches:
                return Line(text + f"; failed branches: {', '.join(event.failed_branches)}", "failure", fields)
            return Line(text, "info", fields)
        case SynthesizeMapProgress():
            return Line(
                f"{event.subtask_id} {event.status}: {event.evidences} evidences",
                "failure" if event.status == "failed" else "progress",
                [("evidences", event.evidences)],
                subject=f"{event.subtask_id} {event.status}",
            )
        case SynthesizeMergeComplete():
            routed = ", ".join(f"{k}: {v}" for k, v in event.sections.items())
            took = "".join(f"; {sid} took the {len(ids)} most relevant" for sid, ids in event.answers.items() if ids)
            return Line(
                f"evidence per section — {routed or 'none routed'}{took}",
                "info",
                [("backfilled", len(event.backfilled))],
            )
        case DraftComposed():
            fields = [("attempt", event.attempt), ("claims", event.claims)]
            if event.malformed:
                fields.append(("malformed", True))
            if event.failure:
                fields.append(("failure", event.failure))
                failed = [(f"draft {event.attempt} failed: {event.failure}", True)]
                return Line(f"attempt {event.attempt}: {event.failure}", "failure", fields, failed)
            told = f", told {event.told} violation(s) of the last attempt" if event.told else ""
            shape = "malformed output" if event.malformed else f"{event.claims} claims"
            kind = "guard" if event.malformed else ("retry" if event.attempt > 1 else "info")
            notes = [(f"draft {event.attempt} was malformed", True)] if event.malformed else []
            return Line(f"attempt {event.attempt} by {event.composer}: {shape}{told}", kind, fields, notes)
        case SelfCheckComplete():
            n = len(event.violations)
            layers = ", ".join(f"{k.upper()} {v}" for k, v in event.layers.items())
            reviewer = event.review.verdict if event.review else "-"
            return Line(
                f"attempt {event.attempt}: {layers}; reviewer {reviewer}; verdict {event.verdict}, {n} violation(s)",
                "guard" if n or event.verdict != "ok" else "info",
                [("attempt", event.attempt), ("verdict", event.verdict), ("claims", event.claims)],
            )
        case ReviseRequested():
            return Line(
                f"revise: {event.reason}",
                "retry",
                [("attempt", event.attempt), ("reason", event.reason)],
                [(f"draft {event.attempt} sent back: {event.reason}", False)],
            )
        case GateRejected():
            problems = "; ".join(event.problems)
            return Line(
                f"gate rejected the {event.outcome} report: {problems}",
                "failure",
                [("outcome", event.outcome), ("rejection", event.rejection), ("problems", problems)],
                [(f"gate rejected the {event.outcome} report ({event.rejection}): {problems}", True)],
            )
        case SynthesizeComplete():
            return Line(
                f"decision {event.decision}: {event.reason}",
                "info",
                [("decision", event.decision), ("attempts", event.attempts)],
            )
        case ModelCall():
            return _model_line(event)
        case Complete():
            return Line(f"outcome {event.outcome} (artifact v{event.version})", "done", [("outcome", event.outcome)])
        case RunFailed():
            said = failure_text(event.message, event.detail)
            return Line(
                event.message + (f" — {event.detail}" if event.detail else ""),
                "failure",
                [("message", event.message), ("detail", event.detail)],
                [(f"run failed: {said}", True)],
            )
        case Unrecognised():
            return Line(f"{event.name} (not read by this version)", "info")
    raise AssertionError(f"no description for {type(event).__name__}")  # pragma: no cover — every event has a case


def failure_text(message: str, detail: str | None) -> str:
    """What an ``error`` event says: its message (a stable code or a sentence), then the ``detail`` a reader needs
    to understand it when there is one (``store_artifact_loop_abort: The pre-persistence gate rejected …``)."""
    return f"{message}: {detail}" if detail else message
