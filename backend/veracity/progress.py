"""Progress of long CLI work (``veracity ask``, ``veracity ingest``) on stderr.

Three ways to show it, picked by ``--progress``:

- ``bar``: a tqdm bar redrawn in place (``\\r``), its description the current stage and running counters.
  Anything that must stay readable — a failed branch or file, a gate rejection, an ``error`` event, a log
  record — is written as a line above the bar, never overwritten. Failure lines are red unless ``NO_COLOR``
  is set; the bar itself has no colour.
- ``plain``: one stable line per step, no ``\\r``, no escape sequences, values with spaces JSON-quoted, so
  the lines can be grepped, diffed and parsed.
- ``none``: nothing (errors still reach stderr the usual way).

``auto`` (the default) is ``bar`` when the stream is a terminal and ``TERM`` is not ``dumb``, else ``plain``.
The bar is always closed, with its final line and a newline, even on Ctrl-C or an error.
"""

from __future__ import annotations

import asyncio
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self, TextIO, cast

from veracity.runs.events import PIPELINE_EVENTS

FALLBACK_COLUMNS = 100


def _columns(stream: TextIO) -> int:
    """The terminal's width in columns, 0 when it does not say."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 0


if TYPE_CHECKING:
    from veracity.corpus.ingest import IngestStep

Mode = Literal["bar", "plain", "none"]
CHOICES = ("auto", "bar", "plain", "none")

RED = "\x1b[31m"
RESET = "\x1b[0m"


def resolve_mode(requested: str, stream: TextIO, environ: Mapping[str, str] | None = None) -> Mode:
    """``bar`` / ``plain`` / ``none`` as asked; ``auto`` → a bar on a terminal that can redraw, else plain lines."""
    if requested in ("bar", "plain", "none"):
        return cast(Mode, requested)
    env = os.environ if environ is None else environ
    if env.get("TERM") == "dumb":
        return "plain"
    isatty = getattr(stream, "isatty", None)
    try:
        return "bar" if isatty is not None and isatty() else "plain"
    except ValueError:  # a closed stream
        return "plain"


def wants_colour(environ: Mapping[str, str] | None = None) -> bool:
    """Colour only when neither ``NO_COLOR`` (any non-empty value, per no-color.org) nor ``TERM=dumb`` says no."""
    env = os.environ if environ is None else environ
    return not env.get("NO_COLOR") and env.get("TERM") != "dumb"


def field(key: str, value: object) -> str:
    """``key=value``; a value with spaces, quotes or newlines is JSON-quoted so one step stays one line."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if not text or any(c.isspace() or c in "\"'=" for c in text) or not text.isprintable():
        text = json.dumps(text, ensure_ascii=False)
    return f"{key}={text}"


class Display:
    """Where progress goes: a bar redrawn in place, one plain line per step, or nowhere."""

    def __init__(
        self,
        mode: Mode,
        *,
        stream: TextIO,
        colour: bool = False,
        label: str,
        unit: str,
        mininterval: float = 0.0,
    ) -> None:
        self.mode = mode
        self.stream = stream
        self.colour = colour and mode == "bar"
        self.label = label
        self.unit = unit
        self.mininterval = mininterval
        self._bar: Any = None
        self._stack = ExitStack()
        self.closed = False

    def open_bar(self, total: int | None) -> None:
        """Draw the bar (bar mode only); from now on log records are written above it instead of through it."""
        if self.mode != "bar" or self._bar is not None or self.closed:
            return
        from tqdm import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        self._stack.enter_context(logging_redirect_tqdm())
        # Follow the terminal's width (a line longer than it is cut, never wrapped). A terminal that reports no
        # size (a bare pseudo-terminal, some serial consoles) would get no bar at all: tqdm hides a bar on a
        # terminal of zero rows.
        width = {"dynamic_ncols": True} if _columns(self.stream) > 0 else {"ncols": FALLBACK_COLUMNS, "nrows": 24}
        self._bar = tqdm(
            total=total,
            file=self.stream,
            **width,
            mininterval=self.mininterval,
            leave=True,
            bar_format=(
                f"{self.label} {{percentage:3.0f}}%|{{bar:20}}| {{n_fmt}}/{{total_fmt}} {self.unit} "
                "[{elapsed}] {desc}"
            ),
        )

    def line(self, text: str, *, failure: bool = False) -> None:
        """A line that stays: above the bar, or on its own in plain mode."""
        if self.mode == "none" or self.closed:
            return
        if self._bar is not None:
            self._bar.write(f"{RED}{text}{RESET}" if failure and self.colour else text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def show(self, n: int, desc: str, *, force: bool = True) -> None:
        """Move the bar to ``n`` with this description (redrawn now when ``force``, else within ``mininterval``)."""
        bar = self._bar
        if bar is None or (max(n, bar.n), desc) == (bar.n, bar.desc):
            return
        bar.set_description_str(desc, refresh=False)
        if force:
            bar.n = max(n, bar.n)
            bar.refresh()
        else:
            bar.update(max(0, n - bar.n))  # redraws only when ``mininterval`` has passed

    def close(self, desc: str | None = None) -> None:
        """The final frame (with ``desc``), then a newline; idempotent."""
        if self.closed:
            return
        self.closed = True
        try:
            if self._bar is not None:
                if desc is not None:
                    self._bar.set_description_str(desc, refresh=False)
                self._bar.close()  # leave=True: redraws the final state and writes the newline
        finally:
            self._stack.close()


def _ending(exc: BaseException | None) -> str | None:
    if exc is None:
        return None
    if isinstance(exc, KeyboardInterrupt | asyncio.CancelledError):
        return "interrupted"
    return f"failed ({type(exc).__name__})"


class _Progress(ABC):
    """What ``AskProgress`` and ``IngestProgress`` share: used as a context manager, the display is always closed
    on its final frame, which says ``interrupted`` / ``failed (…)`` when the work did not end normally (a plain
    line too in plain mode, once there was anything to end)."""

    display: Display

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        ending = _ending(exc)
        if ending is not None and self.display.mode == "plain" and self.begun():
            self.display.line(ending)
        self.display.close(self.description(ending))

    def begun(self) -> bool:
        """Whether a plain line for an interruption would end anything."""
        return True

    @abstractmethod
    def description(self, ending: str | None = None) -> str:
        """The bar's closing line: what was done, and how it ended."""


# ---- veracity ask ---------------------------------------------------------------------------------------

# The bar's description leads with where the run is (``complete`` and ``error`` are handled apart).
_STAGES = {
    "run_started": "started",
    "route_decided": "routed",
    "planner_complete": "planned",
    "retrieve_map_started": "retrieving",
    "retrieve_map_progress": "retrieving",
    "retrieve_merge_complete": "merged",
    "retrieve_complete": "retrieved",
    "synthesize_map_progress": "synthesizing",
    "synthesize_merge_complete": "synthesized",
    "draft_composed": "drafted",
    "self_check_complete": "checked",
    "revise_requested": "revising",
    "gate_rejected": "gate rejected",
    "synthesize_complete": "decided",
}


def run_failure(payload: Mapping[str, Any]) -> str:
    """What an ``error`` event says: its message (a stable code or a sentence), then the ``detail`` a reader needs
    to understand it when there is one (``store_artifact_loop_abort: The pre-persistence gate rejected …``)."""
    message = str(payload.get("message") or "")
    detail = payload.get("detail")
    return f"{message}: {detail}" if detail else message


class AskProgress(_Progress):
    """Follows a run's events: a bar over the pipeline's stages, or one plain line per event.

    Plain lines are ``[SEQ] EVENT`` (then ``SUBTASK STATUS`` for branch events), then ``key=value`` fields:
    ``[  6] retrieve_map_progress s1 done queries=2 pages=5 evidences=7``.
    """

    def __init__(
        self, mode: Mode, *, stream: TextIO, environ: Mapping[str, str] | None = None, total: int | None = None
    ) -> None:
        self.display = Display(mode, stream=stream, colour=wants_colour(environ), label="ask", unit="stages")
        self.total = total or len(PIPELINE_EVENTS)
        self.position = 0
        self.stage = "starting"
        self.branches: dict[str, dict[str, Any]] = {}
        self.branch_total = 0
        self.page_errors_seen: dict[str, int] = {}
        self.attempt = 0
        self.verdict: str | None = None
        self.decision: str | None = None
        self.outcome: str | None = None
        self.failed = False
        self.failure: str | None = None
        """The run's ``error`` event as one sentence (``run_failure``), once seen."""
        self.model_calls = 0

    def started(self, run_id: str) -> None:
        """The run's ID on a line of its own (to open it in the browser later), then the bar."""
        self.display.line(f"run {run_id} started")
        self.display.open_bar(self.total)

    # ---- the counters ------------------------------------------------------------------------------
    def description(self, ending: str | None = None) -> str:
        if ending is not None:
            stage = ending
        elif self.outcome is not None:
            stage = f"complete: {self.outcome}"
        elif self.failed:
            stage = "failed"
        elif self.stage == "decided" and self.decision:
            stage = f"decided: {self.decision}"
        else:
            stage = self.stage
        parts = [stage]
        if self.branch_total:
            done = sum(1 for b in self.branches.values() if b.get("status") in ("done", "failed"))
            failed = sum(1 for b in self.branches.values() if b.get("status") == "failed")
            parts.append(f"branches {done}/{self.branch_total}" + (f" ({failed} failed)" if failed else ""))
            for key in ("queries", "pages", "evidences"):
                parts.append(f"{key} {sum(int(b.get(key) or 0) for b in self.branches.values())}")
        if self.attempt:
            parts.append(f"draft {self.attempt}")
        if self.verdict:
            parts.append(f"verdict {self.verdict}")
        if self.model_calls:
            parts.append(f"model calls {self.model_calls}")
        return ", ".join(parts)

    def event(self, seq: int, name: str, payload: dict[str, Any]) -> None:
        """One stored event of the run, in order."""
        notes = self._track(name, payload)
        if name in PIPELINE_EVENTS:
            self.position = max(self.position, PIPELINE_EVENTS.index(name) + 1)
        if self.display.mode == "plain":
            self.display.line(self.plain_line(seq, name, payload))
            return
        self.display.open_bar(self.total)
        for text, failure in notes:
            self.display.line(text, failure=failure)
        self.display.show(self.position, self.description())

    def _track(self, name: str, p: dict[str, Any]) -> list[tuple[str, bool]]:
        """Update the counters; the lines worth keeping above the bar (text, is_failure)."""
        notes: list[tuple[str, bool]] = []
        self.stage = _STAGES.get(name, self.stage)
        if name == "route_decided" and p.get("route") not in (None, "proceed"):
            notes.append((f"routed: {p.get('route')} ({p.get('reason', '')})", False))
        elif name == "retrieve_map_started":
            subtasks = p.get("subtasks") or []
            self.branch_total = len(subtasks)
            for s in subtasks:
                self.branches.setdefault(str(s.get("subtask_id")), {"status": s.get("status", "pending")})
        elif name == "retrieve_map_progress":
            sid = str(p.get("subtask_id"))
            before = self.branches.get(sid, {}).get("status")
            self.branches[sid] = {k: p.get(k) for k in ("status", "queries", "pages", "evidences")}
            self.branch_total = max(self.branch_total, len(self.branches))
            seen = self.page_errors_seen.get(sid, 0)
            page_errors = p.get("page_errors") or []
            for err in page_errors[seen:]:
                notes.append((f"branch {sid}: page failed: {err}", True))
            self.page_errors_seen[sid] = max(seen, len(page_errors))
            if p.get("status") == "failed" and before != "failed":
                notes.append((f"branch {sid} failed: {p.get('error') or 'no reason given'}", True))
        elif name == "draft_composed":
            self.attempt = int(p.get("attempt") or self.attempt + 1)
            if p.get("failure"):
                notes.append((f"draft {self.attempt} failed: {p['failure']}", True))
            elif p.get("malformed"):
                notes.append((f"draft {self.attempt} was malformed", True))
        elif name == "self_check_complete":
            self.verdict = p.get("verdict")
        elif name == "revise_requested":
            notes.append((f"draft {p.get('attempt', self.attempt)} sent back: {p.get('reason', '')}", False))
        elif name == "gate_rejected":
            problems = "; ".join(str(x) for x in p.get("problems") or [])
            notes.append((f"gate rejected the {p.get('outcome')} report ({p.get('rejection')}): {problems}", True))
        elif name == "synthesize_complete":
            self.decision = p.get("decision")
        elif name == "model_call":
            self.model_calls += 1
        elif name == "complete":
            self.outcome = str(p.get("outcome"))
            self.position = self.total
        elif name == "error":
            self.failed = True
            self.failure = run_failure(p)
            notes.append((f"run failed: {self.failure}", True))
        return notes

    @staticmethod
    def plain_line(seq: int, name: str, p: dict[str, Any]) -> str:
        head = f"[{seq:>3}] {name}"
        if "subtask_id" in p:
            head += f" {p['subtask_id']} {p.get('status', '')}".rstrip()
        fields: list[tuple[str, object]] = []
        if name == "run_started":
            fields = [("template", p.get("template")), ("corpus", p.get("corpus"))]
        elif name == "route_decided":
            fields = [("route", p.get("route"))]
            if p.get("route") != "proceed":
                fields.append(("reason", p.get("reason")))
        elif name == "planner_complete":
            fields = [("subtasks", len(p.get("subtasks") or [])), ("planner", p.get("planner"))]
        elif name == "retrieve_map_started":
            fields = [("branches", len(p.get("subtasks") or []))]
        elif name == "retrieve_map_progress":
            fields = [(k, p.get(k)) for k in ("queries", "pages", "evidences")]
            if p.get("page_errors"):
                fields.append(("page_errors", len(p["page_errors"])))
            if p.get("error"):
                fields.append(("error", p["error"]))
        elif name == "retrieve_merge_complete":
            fields = [("evidences_before", p.get("evidences_before")), ("evidences_after", p.get("evidences_after"))]
        elif name == "retrieve_complete":
            fields = [
                ("evidences", p.get("evidences")),
                ("pages", p.get("pages")),
                ("failed_branches", len(p.get("failed_branches") or [])),
            ]
        elif name == "synthesize_map_progress":
            fields = [("evidences", p.get("evidences"))]
        elif name == "synthesize_merge_complete":
            fields = [("backfilled", len(p.get("backfilled") or []))]
        elif name == "draft_composed":
            fields = [("attempt", p.get("attempt")), ("claims", p.get("claims"))]
            if p.get("malformed"):
                fields.append(("malformed", True))
            if p.get("failure"):
                fields.append(("failure", p["failure"]))
        elif name == "self_check_complete":
            fields = [("attempt", p.get("attempt")), ("verdict", p.get("verdict")), ("claims", p.get("claims"))]
        elif name == "revise_requested":
            fields = [("attempt", p.get("attempt")), ("reason", p.get("reason"))]
        elif name == "gate_rejected":
            fields = [
                ("outcome", p.get("outcome")),
                ("rejection", p.get("rejection")),
                ("problems", "; ".join(str(x) for x in p.get("problems") or [])),
            ]
        elif name == "synthesize_complete":
            fields = [("decision", p.get("decision")), ("attempts", p.get("attempts"))]
        elif name == "model_call":
            fields = [(k, p.get(k)) for k in ("role", "model", "prompt_tokens", "completion_tokens", "ms", "error")]
            if p.get("finish_reason") == "length":
                fields.append(("finish_reason", "length"))
        elif name == "complete":
            fields = [("outcome", p.get("outcome"))]
        elif name == "error":
            fields = [("message", p.get("message")), ("detail", p.get("detail"))]
        rest = " ".join(field(k, v) for k, v in fields if v is not None)
        return f"{head} {rest}" if rest else head


# ---- veracity ingest ------------------------------------------------------------------------------------


class IngestProgress(_Progress):
    """A ``veracity.corpus.ingest.IngestListener``: a bar over the files found, or one plain line per file.

    Plain lines are ``[I/N] PATH: K document(s)``, or ``[I/N] PATH: failed: MESSAGE`` for a file that could not
    be read.
    """

    def __init__(self, mode: Mode, *, stream: TextIO, environ: Mapping[str, str] | None = None) -> None:
        # Many small files go fast: redraw at most ten times a second (the final frame is always drawn).
        self.display = Display(
            mode, stream=stream, colour=wants_colour(environ), label="ingest", unit="files", mininterval=0.1
        )
        self.total = 0
        self.done = 0
        self.current = ""
        self.counts: dict[str, int] = {"added": 0, "updated": 0, "unchanged": 0, "failed": 0}

    def begun(self) -> bool:
        return self.total > 0

    def description(self, ending: str | None = None) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in self.counts.items())
        lead = ending or self.current
        return f"{lead}: {counts}" if lead else counts

    # ---- IngestListener ----------------------------------------------------------------------------
    def files_found(self, total: int) -> None:
        self.total = total
        if total:
            self.display.open_bar(total)

    def documents_stored(self, file: Path, stored: int, documents: int) -> None:
        self.current = f"{file.name} {stored}/{documents} docs"
        self.display.show(self.done, self.description(), force=False)

    def file_done(self, step: IngestStep) -> None:
        self.done = step.done
        report = step.report
        self.counts = {
            "added": report.added,
            "updated": report.updated,
            "unchanged": report.unchanged,
            "failed": len(report.errors),
        }
        where = f"[{step.done:>{len(str(step.total))}}/{step.total}] {step.file}"
        if step.error is not None:
            self.display.line(f"{where}: failed: {step.error}", failure=True)
        elif self.display.mode == "plain":
            self.display.line(f"{where}: {step.documents} document(s)")
        self.current = "" if step.done >= step.total else step.file.name
        self.display.show(self.done, self.description(), force=step.error is not None)
