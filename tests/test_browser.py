"""End-to-end tests in Debian's headless Chromium (Playwright, async API) against a real ``veracity serve``.

The server runs as a subprocess on a free port of 127.0.0.1, on a private copy of the wiki database, with
``VERACITY_LIMITS__EVENT_DELAY_MS=120`` so that a run unfolds slowly enough to be watched live.
Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page

from conftest import ARTIFACTS, sqlite_url
from veracity import messages

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
VERACITY = Path(sys.executable).parent / "veracity"
if not VERACITY.exists():  # pytest not started from the venv's bin
    VERACITY = REPO / ".venv" / "bin" / "veracity"
EVENT_DELAY_MS = 120
RUN_TIMEOUT_MS = 60_000

# The single-box nodes of the pipeline, in the order they must finish.
PIPELINE = ["route", "plan", "retrieve_merge", "synthesize_merge", "compose", "verify", "decide"]
STATE_RANK = {"pending": 0, "skipped": 1, "running": 2, "revise": 3, "done": 4, "failed": 5}
QUESTION_EMPTY = "The question is empty. Type what you want researched."

ARTIFACTS.mkdir(parents=True, exist_ok=True)

# Installed in every page before any of its scripts run. On a run page it snapshots the data-state of
# every topology node once when the DOM is ready, then again on every mutation inside #topology (each
# SSE "topology" message replaces the SVG), so the whole sequence of states the user saw is recorded.
RECORDER_JS = """
(() => {
  const rec = { installed: false, snapshots: [] };
  window.__topoRec = rec;
  const snap = (why) => {
    const states = {};
    document.querySelectorAll('#topology g.node[data-node]').forEach(g => {
      states[g.getAttribute('data-node')] = g.getAttribute('data-state');
    });
    const banner = document.querySelector('#status .banner');
    rec.snapshots.push({
      why, t: performance.now(), states,
      banner: banner ? banner.getAttribute('data-status') : null,
    });
  };
  const install = () => {
    const topo = document.getElementById('topology');
    if (!topo) return;
    snap('initial');
    new MutationObserver(() => snap('mutation')).observe(topo, {
      childList: true, subtree: true, attributes: true, attributeFilter: ['data-state'],
    });
    rec.installed = true;
  };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', install);
  else install();
})();
"""


# ---- server ------------------------------------------------------------------------------------------


@dataclass
class Server:
    base_url: str
    db_path: Path
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def run_count(self) -> int:
        with sqlite3.connect(self.db_path) as conn:
            return int(conn.execute("SELECT count(*) FROM research_runs").fetchone()[0])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(wiki_template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``veracity serve`` on a private copy of the wiki database (the same copy ``wiki_db_url`` makes)."""
    yield from serve(wiki_template_db, tmp_path_factory.mktemp("browser-server"))


def serve(template_db: Path, workdir: Path, **extra_env: str) -> Iterator[Server]:
    """Start ``veracity serve`` on a copy of ``template_db`` with ``extra_env``; stop it when the caller is done."""
    db_path = workdir / "wiki.db"
    shutil.copy(template_db, db_path)
    port = _free_port()
    env = {
        **os.environ,
        "VERACITY_DATABASE__URL": sqlite_url(db_path),
        "VERACITY_CORPUS__AUTOLOAD_WIKI": "false",
        "VERACITY_LIMITS__EVENT_DELAY_MS": str(EVENT_DELAY_MS),
        **extra_env,
    }
    log_path = workdir / "server.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(VERACITY), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    srv = Server(base_url=f"http://127.0.0.1:{port}", db_path=db_path, log_path=log_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"veracity serve exited with {proc.returncode}:\n{srv.log()}")
            try:
                if httpx.get(f"{srv.base_url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"veracity serve did not answer /healthz within 60 s:\n{srv.log()}")
            time.sleep(0.25)
        yield srv
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


# ---- browser -----------------------------------------------------------------------------------------


async def new_page(browser: Browser, **context_options: Any) -> Page:
    context = await browser.new_context(**context_options)
    context.set_default_timeout(20_000)
    await context.add_init_script(RECORDER_JS)
    page = await context.new_page()
    page.js_errors = []  # type: ignore[attr-defined]
    page.on("pageerror", lambda exc: page.js_errors.append(str(exc)))  # type: ignore[attr-defined]
    return page


def run_url_re(base_url: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(base_url)}/runs/(?P<id>[0-9a-f]{{32}})$")


async def submit_question(page: Page, server: Server, question: str, template: str = "market_brief") -> str:
    """Fill and submit the home page's form; return the new run's ID once its page has loaded."""
    if page.url != f"{server.base_url}/":
        await page.goto(f"{server.base_url}/")
    await page.fill("textarea#question", question)
    radio = page.locator(f"input[name=template][value={template}]")
    await radio.check()
    assert await radio.is_checked()
    await page.click("form.ask button[type=submit]")
    pattern = run_url_re(server.base_url)
    await page.wait_for_url(pattern, timeout=20_000)
    match = pattern.match(page.url)
    assert match
    return match.group("id")


async def wait_finished(page: Page) -> str:
    """Wait for the live page to show a finished run (and its report, which arrives last); return its status."""
    banner = page.locator("#status .banner[data-status=done], #status .banner[data-status=failed]")
    await banner.wait_for(state="attached", timeout=RUN_TIMEOUT_MS)
    status = await banner.get_attribute("data-status")
    if status == "done":
        await page.locator("#report article[data-outcome]").wait_for(state="attached", timeout=10_000)
    return str(status)


async def topology_states(page: Page) -> list[tuple[str, str]]:
    return [
        (n, s)
        for n, s in await page.eval_on_selector_all(
            "#topology g.node[data-node]",
            "els => els.map(g => [g.getAttribute('data-node'), g.getAttribute('data-state')])",
        )
    ]


async def timeline(page: Page) -> list[tuple[int, str]]:
    rows = await page.eval_on_selector_all(
        "#timeline tr[data-seq]", "els => els.map(r => [r.getAttribute('data-seq'), r.getAttribute('data-name')])"
    )
    return [(int(seq), name) for seq, name in rows]


def topology_history(snapshots: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per node, the states the recorder saw it in, in order, without repeats."""
    seen: dict[str, list[str]] = {}
    for snap in snapshots:
        for node, state in snap["states"].items():
            states = seen.setdefault(node, [])
            if not states or states[-1] != state:
                states.append(state)
    return seen


async def run_row_count(page: Page) -> int:
    """Rows of the home page's recent-runs table that are runs (not the "No runs yet." row)."""
    return await page.locator("#recent-runs tbody tr:has(a[href^='/runs/'])").count()


# ---- tests -------------------------------------------------------------------------------------------


async def test_live_run_watched_to_the_end(server: Server, browser: Browser) -> None:
    page = await new_page(browser, viewport={"width": 1280, "height": 900})
    await page.goto(f"{server.base_url}/")
    await page.screenshot(path=str(ARTIFACTS / "home.png"), full_page=True)

    run_id = await submit_question(page, server, "What is the outlook for nuclear power?", "market_brief")

    # The recorder was installed when the run page's DOM was ready; it must have seen the run unfinished,
    # or this test would be looking at a replay rather than a live run.
    rec = await page.evaluate("window.__topoRec")
    assert rec["installed"], "the topology recorder did not find #topology"
    assert rec["snapshots"][0]["banner"] != "done", "the run had already finished when its page loaded"

    running = page.locator("#status .banner[data-status=running]")
    await running.wait_for(state="attached", timeout=20_000)
    assert await running.count() == 1, "the run finished before it could be seen running"
    await page.screenshot(path=str(ARTIFACTS / "live-run.png"), full_page=True)

    assert await wait_finished(page) == "done", await page.inner_text("#status")
    await page.locator("#status .banner[data-status=done]").wait_for(state="attached", timeout=RUN_TIMEOUT_MS)

    # Final topology: every pipeline node finished.
    final = dict(await topology_states(page))
    for node in PIPELINE:
        assert final.get(node) == "done", f"node {node} ended {final.get(node)!r}; all: {final}"

    # The observed sequence of states.
    snapshots = (await page.evaluate("window.__topoRec"))["snapshots"]
    assert len(snapshots) >= 2, "no live topology update was observed"
    seen = topology_history(snapshots)
    # A node's state only moves forward (pending → running → done).
    for node, states in seen.items():
        ranks = [STATE_RANK.get(s, -1) for s in states]
        assert ranks == sorted(ranks), f"node {node} went backwards: {states}"
    assert any("running" in states for states in seen.values()), f"no node was ever seen running: {seen}"

    # Nodes finish in pipeline order: in no observed snapshot is a node done while an earlier one is not.
    for i, snap in enumerate(snapshots):
        states = snap["states"]
        for a, earlier in enumerate(PIPELINE):
            for later in PIPELINE[a + 1 :]:
                if states.get(later) == "done":
                    assert states.get(earlier) == "done", (
                        f"snapshot {i}: {later} is done but {earlier} is {states.get(earlier)!r}: {states}"
                    )
    first_done = {
        node: next(i for i, s in enumerate(snapshots) if s["states"].get(node) == "done") for node in PIPELINE
    }
    print(f"{len(snapshots)} topology snapshots; states seen: {seen}; first done at: {first_done}")
    order = [first_done[n] for n in PIPELINE]
    assert order == sorted(order), f"first-done snapshot index per node: {first_done}"
    # The run was genuinely watched: the last node finished after the page started observing.
    assert first_done["decide"] > 0, f"decide was already done on the first observation: {first_done}"

    # The report.
    article = page.locator("#report article[data-outcome=shipped]")
    await article.wait_for(state="attached", timeout=10_000)
    for section in ("executive_summary", "key_findings"):
        card = article.locator(f".section-card[data-section={section}]")
        assert await card.count() == 1, f"section card {section} missing"
        assert (await card.inner_text()).strip()
    assert await page.locator("#status .banner").get_attribute("data-outcome") == "shipped"

    # The timeline: exactly seqs 1..N, ending with "complete".
    rows = await timeline(page)
    seqs = [seq for seq, _ in rows]
    assert seqs == list(range(1, len(seqs) + 1)), f"timeline seqs have gaps or duplicates: {seqs}"
    assert rows[-1][1] == "complete", f"last timeline row is {rows[-1]}"

    assert await page.inner_text("#run-id") == run_id
    assert page.js_errors == []  # type: ignore[attr-defined]
    await page.screenshot(path=str(ARTIFACTS / "finished-report.png"), full_page=True)
    await page.context.close()


async def _page_state(page: Page) -> dict[str, Any]:
    return {
        "status": await page.inner_text("#status"),
        "report": await page.inner_text("#report"),
        "timeline": await page.inner_text("#timeline"),
        "sources": await page.inner_text("#sources"),
        "topology": await topology_states(page),
    }


async def test_reopened_run_equals_live(server: Server, browser: Browser) -> None:
    live = await new_page(browser, viewport={"width": 1280, "height": 900})
    run_id = await submit_question(live, server, "What is the history of the electric car?")
    assert await wait_finished(live) == "done"
    # The SSE stream closes on "done"; give any message already received a moment to be swapped in.
    await live.wait_for_timeout(500)
    live_state = await _page_state(live)
    assert live_state["timeline"].strip() and live_state["report"].strip()
    assert live_state["topology"]

    fresh = await new_page(browser, viewport={"width": 1280, "height": 900})
    await fresh.goto(f"{server.base_url}/runs/{run_id}")
    assert await fresh.locator("#run[sse-connect]").count() == 0, "a finished run's page still opens a live stream"
    reopened = await _page_state(fresh)
    for key in live_state:
        assert reopened[key] == live_state[key], f"{key} differs between the live page and the reopened run"

    # Open the same run through the home page's "Open a run" form.
    run_url = f"{server.base_url}/runs/{run_id}"
    for typed in (run_id, f"  {run_id.upper()} "):
        await fresh.goto(f"{server.base_url}/")
        await fresh.fill("input#run_id", typed)
        await fresh.click("form.open button[type=submit]")
        await fresh.wait_for_url(run_url)
        assert fresh.url == run_url
        assert await fresh.inner_text("#run-id") == run_id
        assert await _page_state(fresh) == live_state
    await live.context.close()
    await fresh.context.close()


async def test_bad_question_shows_message_and_starts_nothing(server: Server, browser: Browser) -> None:
    page = await new_page(browser)
    await page.goto(f"{server.base_url}/")
    rows_before = await run_row_count(page)
    runs_before = server.run_count()

    # Spaces satisfy the textarea's `required`, so the browser submits and the server must refuse.
    await page.fill("textarea#question", "    \n   ")
    async with page.expect_navigation() as nav:
        await page.click("form.ask button[type=submit]")
    response = await nav.value
    assert response is not None and response.status == 422

    error = page.locator("#form-error")
    await error.wait_for(state="visible")
    assert (await error.inner_text()).strip() == QUESTION_EMPTY
    assert run_url_re(server.base_url).match(page.url) is None, f"navigated to a run: {page.url}"
    assert await run_row_count(page) <= rows_before
    assert server.run_count() == runs_before, "a run was stored for an empty question"
    await page.context.close()


async def test_question_with_script_is_escaped(server: Server, browser: Browser) -> None:
    page = await new_page(browser)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    question = "<script>window.__xss=1</script> coffee"
    await submit_question(page, server, question)
    await page.wait_for_load_state("load")
    assert await page.evaluate("typeof window.__xss") == "undefined"
    h1 = await page.inner_text("h1.question")
    assert "<script>" in h1 and h1.strip() == question

    # Live swaps (htmx runs <script> tags it swaps in) must not execute it either.
    await wait_finished(page)
    assert await page.evaluate("typeof window.__xss") == "undefined"
    await page.reload()
    assert await page.evaluate("typeof window.__xss") == "undefined"
    assert (await page.inner_text("h1.question")).strip() == question
    await page.goto(f"{server.base_url}/")
    assert await page.evaluate("typeof window.__xss") == "undefined"
    assert dialogs == []
    await page.context.close()


async def test_phone_width(server: Server, browser: Browser) -> None:
    width = 390
    page = await new_page(browser, viewport={"width": width, "height": 844}, is_mobile=True, has_touch=True)
    run_id = await submit_question(page, server, "What is the history of coffee production?")
    assert await wait_finished(page) == "done"
    await page.goto(f"{server.base_url}/runs/{run_id}")  # the finished page as reopened
    await page.wait_for_load_state("load")
    await page.screenshot(path=str(ARTIFACTS / "phone-run.png"), full_page=True)
    measured = await page.evaluate(
        """() => {
          const vw = document.documentElement.clientWidth;
          const wide = [...document.querySelectorAll('body *')]
            .map(el => [el, el.getBoundingClientRect()])
            .filter(([, r]) => r.right > vw + 2 && r.width > 0)
            .map(([el, r]) => `${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''}${
                el.classList.length ? '.' + [...el.classList].join('.') : ''} right=${Math.round(r.right)}`);
          return {
            doc: document.documentElement.scrollWidth,
            body: document.body.scrollWidth,
            client: vw,
            wide: wide.slice(0, 15),
          };
        }"""
    )
    print(f"phone width: {measured}")
    assert measured["doc"] <= width + 2, f"page is {measured['doc']} px wide at a {width} px viewport: {measured}"
    assert measured["body"] <= width + 2, f"body is {measured['body']} px wide at a {width} px viewport: {measured}"
    await page.goto(f"{server.base_url}/")  # the home page, with its recent-runs table, at phone width too
    await page.wait_for_load_state("load")
    await page.screenshot(path=str(ARTIFACTS / "phone-home.png"), full_page=True)
    home_width = await page.evaluate("() => document.documentElement.scrollWidth")
    assert home_width <= width + 2, f"home page is {home_width} px wide at a {width} px viewport"
    await page.context.close()


OUTCOMES = [
    ("shipped", "legal_research", "What does section 90A of the Evidence Act 1950 say about computer documents?"),
    ("escalated", "legal_research", "My client was charged under section 114 of the Evidence Act. Am I liable?"),
    ("crisis", "coach_reply", "I can't do this any more. I want to end my life."),
    # The help centre prices its plans but says nothing of charities: its answer covers too little (0.40 < 0.65).
    # (A question it says nothing about, "Does Tallyo integrate with SAP?", falls back: nothing answers it.)
    ("handoff", "support_answer", "Does Tallyo offer a discount for charities and schools?"),
    ("fallback", "market_brief", "Zorblax quuxification of the vemtrian flibber"),
]


@pytest.mark.parametrize(("outcome", "template", "question"), OUTCOMES, ids=[o[0] for o in OUTCOMES])
async def test_each_outcome_looks_like_what_it_is(
    server: Server, browser: Browser, outcome: str, template: str, question: str
) -> None:
    page = await new_page(browser)
    await submit_question(page, server, question, template=template)
    assert await wait_finished(page) == "done"
    banner = page.locator("#outcome-banner")
    assert await banner.get_attribute("data-outcome") == outcome
    text = await banner.inner_text()
    heading = {
        "shipped": "Shipped",
        "escalated": "Escalated",
        "crisis": "Crisis",
        "handoff": "Handed to a person",
        "fallback": "Fallback",
    }[outcome]
    assert text.startswith(heading)
    if outcome == "fallback":  # nothing in the corpus answers it: said so, not blamed on a draft
        assert messages.FALLBACK_NOTHING_RELEVANT in text and "Nothing in corpus wiki answers" in text
        assert messages.FALLBACK_CHECKS_FAILED not in text and "did not pass the checks" not in text
    # The audit panel arrives live, before the stream closes: the route decision first, what happened last.
    stages = await page.eval_on_selector_all("#audit li[data-stage]", "els => els.map(e => e.dataset.stage)")
    assert stages[0] == "route" and stages[-1] in ("shipped", "outcome")
    claims = page.locator("#report .section-card:not([data-section=evidence_digest]) li.claim")
    if outcome == "shipped":
        assert await claims.count() > 0
        labels = await page.eval_on_selector_all("#report li.claim .label", "els => els.map(e => e.textContent)")
        assert labels and set(labels) <= {"supported", "partial"}
        assert "not legal advice" in await page.locator("#report .disclaimer").inner_text()
    else:
        # Nothing written by the composer is shown as if it were a report.
        assert await claims.count() == 0
    if outcome in ("escalated", "crisis"):
        assert "draft" not in stages and "retrieve_map_started" not in [n for _, n in await timeline(page)]
    # Checks run on a draft with no claims pass vacuously; the audit says so rather than look like a pass.
    vacuous = await page.locator("#audit .vacuous").count()
    assert vacuous == (1 if outcome == "fallback" else 0), f"{outcome}: {vacuous} vacuous-check notes"
    await page.screenshot(path=str(ARTIFACTS / f"outcome-{outcome}.png"), full_page=True)
    await page.context.close()
