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
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self, TextIO, cast

from veracity.events import PIPELINE_EVENTS, Complete
from veracity.runs.reducer import Line, RunView, apply, failure_text

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


class AskProgress(_Progress):
    """Follows a run's events through the run page's own reducer: a bar over the pipeline's stages, or one plain
    line per event.

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
        self.view = RunView(run_id="")

    @property
    def failure(self) -> str | None:
        """The run's ``error`` event as one sentence, once seen."""
        view = self.view
        return failure_text(view.error or "", view.error_detail) if view.status == "failed" else None

    def started(self, run_id: str) -> None:
        """The run's ID on a line of its own (to open it in the browser later), then the bar."""
        self.view.run_id = run_id
        self.display.line(f"run {run_id} started")
        self.display.open_bar(self.total)

    # ---- the counters ------------------------------------------------------------------------------
    def description(self, ending: str | None = None) -> str:
        view = self.view
        if ending is not None:
            stage = ending
        elif view.outcome is not None:
            stage = f"complete: {view.outcome}"
        elif view.status == "failed":
            stage = "failed"
        elif self.stage == "decided" and view.decision:
            stage = f"decided: {view.decision}"
        else:
            stage = self.stage
        parts = [stage]
        branches = list(view.branches.values())
        if branches:
            done = sum(1 for b in branches if b.retrieve in ("done", "failed"))
            failed = sum(1 for b in branches if b.retrieve == "failed")
            parts.append(f"branches {done}/{len(branches)}" + (f" ({failed} failed)" if failed else ""))
            parts += [
                f"queries {sum(b.queries for b in branches)}",
                f"pages {sum(b.pages for b in branches)}",
                f"evidences {sum(b.evidences for b in branches)}",
            ]
        if view.attempt:
            parts.append(f"draft {view.attempt}")
        if view.verdict:
            parts.append(f"verdict {view.verdict}")
        if view.model_calls:
            parts.append(f"model calls {view.model_calls}")
        return ", ".join(parts)

    def event(self, seq: int, name: str, payload: dict[str, Any], created_at: datetime | None = None) -> None:
        """One stored event of the run, in order."""
        line = apply(self.view, seq, name, payload, created_at or datetime.now(UTC))
        if line is None:
            return  # late or repeated
        self.stage = _STAGES.get(name, self.stage)
        if name in PIPELINE_EVENTS:
            self.position = max(self.position, PIPELINE_EVENTS.index(name) + 1)
        if name == Complete.name:
            self.position = self.total
        if self.display.mode == "plain":
            self.display.line(self.plain_line(seq, name, line))
            return
        self.display.open_bar(self.total)
        for text, failure in line.notes:
            self.display.line(text, failure=failure)
        self.display.show(self.position, self.description())

    @staticmethod
    def plain_line(seq: int, name: str, line: Line) -> str:
        head = f"[{seq:>3}] {name}" + (f" {line.subject}" if line.subject else "")
        rest = " ".join(field(k, v) for k, v in line.fields if v is not None)
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
