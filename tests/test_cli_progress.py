"""Progress of ``veracity ask`` and ``veracity ingest`` on stderr: a bar on a terminal, plain lines when piped.

The real console script runs as a subprocess; "a terminal" is a real pseudo-terminal (``pty.openpty``) given as
its stderr, so the CLI decides by itself (``isatty``) what to draw. ``screen`` replays what a terminal would
show from the bytes written (carriage returns overwrite, newlines keep), so a line that was overwritten by the
bar cannot pass for one that stayed.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from conftest import sqlite_url, write_jsonl
from veracity.progress import AskProgress, IngestProgress, field, resolve_mode

VERACITY = str(Path(sys.executable).parent / "veracity")
SGR = re.compile(r"\x1b\[[0-9;]*m")
REDRAW = re.compile(r"\r(?!\n)")  # a carriage return that is not the terminal's own end of line
PLAIN_EVENT = re.compile(r"^\[\s*(\d+)\] ([a-z_]+)(?: (.*))?$")
QUESTION = "Which countries produce the most coffee?"


def _env(url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM") and "proxy" not in k.lower()}
    return {**env, "VERACITY_DATABASE__URL": url, "VERACITY_CORPUS__AUTOLOAD_WIKI": "false", **extra}


def piped(args: list[str], url: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [VERACITY, *args], env=_env(url, **extra), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


def in_terminal(
    args: list[str],
    url: str,
    *,
    interrupt_when: str | None = None,
    size: tuple[int, int] = (40, 160),
    timeout: float = 120.0,
    **extra: str,
) -> tuple[int, str, str]:
    """(exit code, stdout, everything written to the terminal); stderr is a pty of ``size`` (rows, columns).

    The terminal is read with ``select`` under one overall deadline (the child is killed when it passes) and
    stdout is drained by a thread meanwhile, so a child that fills either never hangs the test."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *size, 0, 0))
    env = _env(url, **{"TERM": "xterm", **extra})
    deadline = time.monotonic() + timeout
    with subprocess.Popen(
        [VERACITY, *args], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave
    ) as proc:
        os.close(slave)
        assert proc.stdout is not None
        stdout = proc.stdout
        out_chunks: list[bytes] = []
        drain = threading.Thread(target=lambda: out_chunks.append(stdout.read()), daemon=True)
        drain.start()
        raw = b""
        interrupted = False
        timed_out = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                proc.kill()
                break
            ready, _, _ = select.select([master], [], [], min(left, 1.0))
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            raw += chunk
            if interrupt_when and not interrupted and interrupt_when.encode() in raw:
                proc.send_signal(signal.SIGINT)
                interrupted = True
        code = proc.wait(timeout=max(deadline - time.monotonic(), 5.0))
        drain.join(timeout=10)
    os.close(master)
    assert not timed_out, f"killed after {timeout:.0f} s: {raw!r}"
    if interrupt_when:
        assert interrupted, f"never saw {interrupt_when!r}: {raw!r}"
    return code, b"".join(out_chunks).decode(), raw.decode()


def screen(raw: str) -> list[str]:
    """The lines a terminal shows after ``raw``: ``\\r`` returns to the line's start and overwrites, colours go."""
    lines: list[str] = []
    line: list[str] = []
    col = 0
    for ch in SGR.sub("", raw):
        if ch == "\n":
            lines.append("".join(line).rstrip())
            line, col = [], 0
        elif ch == "\r":
            col = 0
        else:
            if col < len(line):
                line[col] = ch
            else:
                line.append(ch)
            col += 1
    if line:
        lines.append("".join(line).rstrip())
    return [x for x in lines if x]


def assert_plain(stderr: str) -> None:
    assert "\r" not in stderr and "\x1b[" not in stderr, repr(stderr)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- veracity ask -----------------------------------------------------------------------------------------


def test_ask_piped_writes_one_plain_line_per_event_and_only_the_report_to_stdout(small_db_url: str) -> None:
    out = piped(["ask", QUESTION, "--corpus", "small", "--json"], small_db_url)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)  # stdout is the report and nothing else
    assert report["outcome"] == "shipped"
    assert_plain(out.stderr)
    lines = out.stderr.splitlines()
    assert lines[0] == f"run {report['run_id']} started"
    events = [PLAIN_EVENT.match(line) for line in lines[1:]]
    assert all(events), lines
    seqs = [int(m.group(1)) for m in events if m]
    assert seqs == list(range(1, len(seqs) + 1))
    names = [m.group(2) for m in events if m]
    assert names[0] == "run_started" and names[-1] == "complete" and "planner_complete" in names
    assert lines[1].endswith("run_started template=answer corpus=small")  # the default template
    assert lines[-1].endswith("complete outcome=shipped")
    branch = [line for line in lines if "retrieve_map_progress" in line and " done " in line]
    assert branch and all(
        re.search(r"retrieve_map_progress \S+ done queries=\d+ pages=\d+ evidences=\d+$", line) for line in branch
    )
    assert any(re.search(r"self_check_complete attempt=1 verdict=ok claims=\d+$", line) for line in lines)


def test_ask_in_a_terminal_draws_a_bar_over_the_stages_and_ends_on_the_outcome(small_db_url: str) -> None:
    code, out, raw = in_terminal(["ask", QUESTION, "--corpus", "small"], small_db_url)
    assert code == 0, raw
    assert len(REDRAW.findall(raw)) >= 5, raw  # redrawn in place, stage after stage
    assert "run_started" not in raw  # no plain event lines on a terminal
    shown = screen(raw)
    started = re.fullmatch(r"run ([0-9a-f]{32}) started", shown[0])
    assert started, shown
    assert len(shown) == 2, shown  # the run line, then the bar's final frame: nothing else was left behind
    # stdout is the Markdown report, untouched by the bar
    assert out.startswith(f"# {QUESTION}\n") and started.group(1) in out
    assert "\r" not in out and "%|" not in out and "stages" not in out
    final = shown[-1]
    assert re.search(r"^ask 100%\|.*\| 11/11 stages \[", final), final
    assert "complete: shipped" in final and "draft 1" in final and "verdict ok" in final
    assert re.search(r"branches (\d+)/\1, queries \d+, pages \d+, evidences [1-9]", final), final
    # The description followed the run on its way (whatever the elapsed time was by then).
    assert re.search(r"stages \[\d{2}:\d{2}\] retrieving, branches 0/", raw), raw
    assert raw.endswith("\n")


def test_a_terminal_that_reports_no_size_still_gets_a_bar(small_db_url: str) -> None:
    # A bare pseudo-terminal (0 rows, 0 columns): tqdm would hide the bar entirely; a fixed width is used.
    code, _, raw = in_terminal(["ask", QUESTION, "--corpus", "small"], small_db_url, size=(0, 0))
    assert code == 0, raw
    assert re.search(r"ask 100%\|.*\| 11/11 stages \[.*complete: shipped", screen(raw)[-1]), raw


def dead_searxng() -> dict[str, str]:
    """A SearXNG that is not there: every branch's search fails at once, offline, and the run ends on the floor."""
    return {
        "VERACITY_SEARCH__WEB_BACKEND": "searxng",
        "VERACITY_SEARCH__SEARXNG_URL": f"http://127.0.0.1:{free_port()}",
    }


MARS = ["ask", "moons of Mars", "--corpus", "web", "--template", "market_brief", "--json"]  # three branches


def test_ask_failures_stay_above_the_bar(db_url: str) -> None:
    code, out, raw = in_terminal(MARS, db_url, **dead_searxng())
    assert code == 0, raw
    assert json.loads(out)["outcome"] == "fallback"
    shown = screen(raw)
    failed = [line for line in shown if re.match(r"^branch \S+ failed: SearchFailed: ", line)]
    assert len(failed) == 3, shown  # one kept line per failed branch, not overwritten by the bar
    assert not any("%|" in line or "stages" in line for line in failed), failed  # nor overwriting it
    assert "\x1b[31mbranch " in raw  # in red (NO_COLOR is unset)
    assert "complete: fallback, branches 3/3 (3 failed)" in shown[-1] and "11/11" in shown[-1]


def test_ask_failures_piped_are_plain_lines_with_the_error(db_url: str) -> None:
    piped_out = piped(MARS, db_url, **dead_searxng())
    assert piped_out.returncode == 0 and json.loads(piped_out.stdout)["outcome"] == "fallback"
    assert_plain(piped_out.stderr)
    assert len(re.findall(r"retrieve_map_progress \S+ failed .* error=\"SearchFailed: ", piped_out.stderr)) == 3
    assert "retrieve_complete evidences=0 pages=0 failed_branches=3" in piped_out.stderr


def test_ctrl_c_closes_the_bar_and_leaves_a_clean_line(small_db_url: str) -> None:
    code, out, raw = in_terminal(
        ["ask", QUESTION, "--corpus", "small"],
        small_db_url,
        interrupt_when="retrieving",
        VERACITY_LIMITS__EVENT_DELAY_MS="300",  # the run is still going when Ctrl-C arrives
    )
    assert code == 130 and out == ""
    assert raw.endswith("\n")  # the cursor is back at the start of a fresh line
    final = screen(raw)[-1]
    assert final.startswith("ask ") and "interrupted" in final and "11/11" not in final


def test_error_and_gate_rejection_events_are_lines_that_stay() -> None:
    events = [
        (1, "run_started", {"template": "t", "corpus": "c"}),
        (2, "gate_rejected", {"outcome": "shipped", "rejection": 1, "problems": ["a [placeholder] left"]}),
        (3, "error", {"message": "the run failed: boom"}),
    ]
    stream = io.StringIO()
    with AskProgress("bar", stream=stream, environ={"NO_COLOR": "1"}) as progress:
        progress.started("r1")
        for event in events:
            progress.event(*event)
    raw = stream.getvalue()
    assert "\x1b[" not in raw  # NO_COLOR: the failure lines are not red
    shown = screen(raw)
    assert shown[:3] == [
        "run r1 started",
        "gate rejected the shipped report (1): a [placeholder] left",
        "run failed: the run failed: boom",
    ]
    assert len(shown) == 4 and shown[-1].startswith("ask   9%|") and shown[-1].endswith("failed")

    stream = io.StringIO()
    with AskProgress("plain", stream=stream) as progress:
        for event in events:
            progress.event(*event)
    assert stream.getvalue().splitlines() == [
        "[  1] run_started template=t corpus=c",
        '[  2] gate_rejected outcome=shipped rejection=1 problems="a [placeholder] left"',
        '[  3] error message="the run failed: boom"',
    ]


def test_a_loop_abort_shows_its_detail_not_just_its_code() -> None:
    detail = "The pre-persistence gate rejected 3 reports in a row (last: report prose is 90 characters)."
    event = (4, "error", {"message": "store_artifact_loop_abort", "detail": detail})
    stream = io.StringIO()
    with AskProgress("bar", stream=stream, environ={"NO_COLOR": "1"}) as progress:
        progress.started("r1")
        progress.event(*event)
    shown = screen(stream.getvalue())
    assert shown[1] == f"run failed: store_artifact_loop_abort: {detail}"
    assert progress.failure == f"store_artifact_loop_abort: {detail}"  # what the CLI's failure message says

    stream = io.StringIO()
    with AskProgress("plain", stream=stream) as progress:
        progress.event(*event)
    assert stream.getvalue().splitlines() == [
        f"[  4] error message=store_artifact_loop_abort detail={json.dumps(detail)}"
    ]


def test_auto_mode_and_field_quoting() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert resolve_mode("auto", Tty(), {"TERM": "xterm"}) == "bar"
    assert resolve_mode("auto", Tty(), {"TERM": "dumb"}) == "plain"
    assert resolve_mode("auto", io.StringIO(), {"TERM": "xterm"}) == "plain"
    assert resolve_mode("bar", io.StringIO(), {"TERM": "dumb"}) == "bar"  # asked for explicitly
    assert field("k", "a b") == 'k="a b"' and field("k", "line\nbreak") == 'k="line\\nbreak"'
    assert field("k", 3) == "k=3" and field("k", True) == "k=true" and field("k", "") == 'k=""'


# ---- veracity ingest --------------------------------------------------------------------------------------


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bad.pdf").write_text("not a pdf")
    (docs / "earth.md").write_text("# Earth\n\nEarth is the third planet from the Sun. Earth has one moon.\n")
    write_jsonl(
        docs / "kb.jsonl",
        [
            {"_id": "mars", "title": "Mars", "text": "Mars is the fourth planet from the Sun. It has two moons."},
            {"_id": "venus", "title": "Venus", "text": "Venus is the second planet from the Sun."},
        ],
    )
    return docs


SUMMARY = "corpus planets: 2 file(s), 3 added, 0 updated, 0 unchanged, 1 failed\n"


def test_ingest_piped_writes_one_plain_line_per_file(folder: Path, tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "ingest.db")
    out = piped(["ingest", str(folder), "--corpus", "planets"], url)
    assert out.returncode == 1 and out.stdout == SUMMARY
    assert_plain(out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.startswith("[")]
    assert len(lines) == 3
    assert lines[0].startswith(f"[1/3] {folder / 'bad.pdf'}: failed: Could not read {folder / 'bad.pdf'}: not a")
    assert lines[1:] == [f"[2/3] {folder / 'earth.md'}: 1 document(s)", f"[3/3] {folder / 'kb.jsonl'}: 2 document(s)"]
    assert f"veracity: Could not read {folder / 'bad.pdf'}" in out.stderr  # the error contract is unchanged

    again = piped(["ingest", str(folder), "--corpus", "planets", "--progress", "none", "--json"], url)
    assert again.returncode == 1 and not re.search(r"^\[\d", again.stderr, re.M)
    assert json.loads(again.stdout)["unchanged"] == 3 and "veracity: Could not read" in again.stderr


@pytest.mark.parametrize(
    ("extra", "args", "expect"),
    [
        ({}, [], "bar+colour"),
        ({"NO_COLOR": "1"}, [], "bar"),
        ({"TERM": "dumb"}, [], "plain"),
        ({}, ["--progress", "plain"], "plain"),
    ],
    ids=["terminal", "no-color", "dumb-terminal", "plain-asked"],
)
def test_ingest_in_a_terminal(
    folder: Path, tmp_path: Path, extra: dict[str, str], args: list[str], expect: str
) -> None:
    url = sqlite_url(tmp_path / "ingest.db")
    code, out, raw = in_terminal(["ingest", str(folder), "--corpus", "planets", *args], url, **extra)
    assert code == 1 and out == SUMMARY  # the summary is the same whatever stderr shows
    shown = screen(raw)
    failure = next(line for line in shown if "bad.pdf: failed: Could not read" in line)
    assert failure.startswith(f"[1/3] {folder / 'bad.pdf'}: failed: ")  # a whole line that stayed
    if expect == "plain":
        assert not REDRAW.search(raw) and "\x1b[" not in raw and "%|" not in raw
        assert f"[3/3] {folder / 'kb.jsonl'}: 2 document(s)" in shown
        return
    assert REDRAW.search(raw)
    bar = next(line for line in reversed(shown) if line.startswith("ingest "))
    assert re.search(r"^ingest 100%\|.*\| 3/3 files \[", bar), bar
    assert bar.endswith("added 3, updated 0, unchanged 0, failed 1")
    assert shown.index(failure) < shown.index(bar)
    assert ("\x1b[31m[1/3]" in raw) == (expect == "bar+colour")
    if expect == "bar":
        assert "\x1b[" not in raw


async def test_ingest_path_tells_its_listener_the_total_first_then_each_batch_and_file(
    folder: Path, db_url: str
) -> None:
    from veracity.corpus.ingest import IngestStep, ingest_path
    from veracity.db.engine import make_engine, make_sessionmaker

    heard: list[tuple[object, ...]] = []

    class Listener:
        def files_found(self, total: int) -> None:
            heard.append(("found", total))

        def documents_stored(self, file: Path, stored: int, documents: int) -> None:
            heard.append(("stored", file.name, stored, documents))

        def file_done(self, step: IngestStep) -> None:
            heard.append(("done", step.file.name, step.done, step.total, step.documents, step.error is None))

    engine = make_engine(db_url)
    try:
        report = await ingest_path(
            sessionmaker=make_sessionmaker(engine), path=folder, corpus="planets", chunk_chars=500, progress=Listener()
        )
    finally:
        await engine.dispose()
    assert report.added == 3 and len(report.errors) == 1
    assert heard == [
        ("found", 3),
        ("done", "bad.pdf", 1, 3, 0, False),
        ("stored", "earth.md", 1, 1),
        ("done", "earth.md", 2, 3, 1, True),
        ("stored", "kb.jsonl", 2, 2),
        ("done", "kb.jsonl", 3, 3, 2, True),
    ]

    stream = io.StringIO()
    with IngestProgress("bar", stream=stream, environ={}) as progress:
        progress.files_found(1)
        progress.documents_stored(folder / "kb.jsonl", 1000, 2500)
    assert "kb.jsonl 1000/2500 docs" in stream.getvalue()  # a large file shows its documents as they are stored
