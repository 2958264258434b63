"""The run room in a real browser: a dropped live stream resumes with nothing missing or doubled, anchor chips open
their quote in its source context, the four exports download (Markdown and JSON agree with the API, PDF and Word
read back), hostile source text stays text, the source filter hides what does not serve a section, the page reads
and works without JavaScript and by keyboard.

Two ``veracity serve`` processes: a slow one (250 ms between events, so a connection can be cut mid-run, reached
through a TCP proxy in this file that can abort every open connection) and a fast one for finished runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import os
import re
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import docx
import httpx
import pytest
from playwright.async_api import Browser, Page
from playwright.async_api import TimeoutError as PlaywrightTimeout
from pypdf import PdfReader

from conftest import TEST_CSRF, form, sqlite_url
from test_browser import (
    ARTIFACTS,
    REPO,
    RUN_TIMEOUT_MS,
    STATE_RANK,
    VERACITY,
    Server,
    new_page,
    serve,
    submit_question,
    timeline,
    topology_history,
    wait_finished,
)
from veracity import messages

pytestmark = pytest.mark.browser

CAR_QUESTION = "What is the outlook for nuclear power?"  # the default corpus answers it (leads only)
ESCALATION = ("legal_research", "My client was charged under section 114 of the Evidence Act. Am I liable?")
FALLBACK = ("market_brief", "Zorblax quuxification of the vemtrian flibber")
XSS_CORPUS = "xss"
XSS_QUESTION = "What is the Zephyr heat pump market?"
SCRIPT = "<script>window.__xss=1</script>"
IMG = '<img src=x onerror="window.__xss=2">'
JS_URL = "javascript:window.__xss=3"

# Anything focused, described as tag#id[name=…]=value, or chip[n] for an anchor chip's summary.
DESCRIBE_FOCUS_JS = """() => {
  const e = document.activeElement;
  if (!e || e === document.body) return 'body';
  const chip = e.tagName === 'SUMMARY' && e.closest('details.anchor');
  if (chip) return `chip[${chip.dataset.ref}]`;
  let d = e.tagName.toLowerCase();
  if (e.id) d += '#' + e.id;
  if (e.name) d += `[name=${e.name}]`;
  if (e.type === 'radio') d += '=' + e.value;
  return d;
}"""


def norm(text: str) -> str:
    return " ".join(text.split())


# ---- runs driven over HTTP -----------------------------------------------------------------------------


def replay_events(base_url: str, run_id: str, timeout: float = 60) -> list[tuple[int, str]]:
    """(seq, name) of every stored event of a run, from the JSON API's replay, up to its terminal event."""
    out: list[tuple[int, str]] = []
    seq: int | None = None
    with httpx.stream("GET", f"{base_url}/v1/research/{run_id}/events", timeout=timeout) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith("id:"):
                seq = int(line[3:].strip())
            elif line.startswith("event:"):
                name = line[6:].strip()
                assert seq is not None
                out.append((seq, name))
                if name in ("complete", "error"):
                    break
    return out


def finish_run(server: Server, question: str, template: str = "market_brief", corpus: str = "") -> str:
    """Start a run through the home page's form endpoint, wait for its last event; return its ID."""
    resp = httpx.post(
        f"{server.base_url}/runs",
        data=form(question=question, template=template, corpus=corpus),
        cookies={"veracity_csrf": TEST_CSRF},  # the cookie a browser holds after opening the home page
        follow_redirects=False,
        timeout=30,
    )
    assert resp.status_code == 303, resp.text
    run_id = resp.headers["location"].rsplit("/", 1)[-1]
    events = replay_events(server.base_url, run_id)
    assert events and events[-1][1] == "complete", events[-3:]
    return run_id


async def api_report(server: Server, run_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=10) as client:
        resp = await client.get(f"{server.base_url}/v1/research/{run_id}")
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


# ---- a TCP proxy that can cut every connection ---------------------------------------------------------


@dataclasses.dataclass
class Request:
    conn: int
    method: str
    target: str
    headers: dict[str, str]

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    def query(self, key: str) -> str | None:
        values = parse_qs(urlsplit(self.target).query).get(key)
        return values[0] if values else None


class _RequestParser:
    """Splits the client-to-server byte stream of one connection into HTTP/1.1 request heads."""

    def __init__(self, conn: int, sink: list[Request]) -> None:
        self.conn, self.sink, self.buf, self.body_left = conn, sink, b"", 0

    def feed(self, data: bytes) -> None:
        self.buf += data
        while True:
            if self.body_left:
                taken = min(self.body_left, len(self.buf))
                self.buf, self.body_left = self.buf[taken:], self.body_left - taken
                if self.body_left:
                    return
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head, self.buf = self.buf[:end].decode("latin-1"), self.buf[end + 4 :]
            line, *header_lines = head.split("\r\n")
            method, target, _ = line.split(" ", 2)
            headers = {}
            for h in header_lines:
                name, _, value = h.partition(":")
                headers[name.strip().lower()] = value.strip()
            self.sink.append(Request(self.conn, method, target, headers))
            self.body_left = int(headers.get("content-length", "0") or 0)


class DropProxy:
    """Forwards 127.0.0.1:<port> to the server; records every request head; ``abort_all()`` cuts every open
    connection (both sides) while new ones are still accepted. With ``cut_after`` set, the first server-to-browser
    message (up to its blank line) that contains those bytes is the last one forwarded before everything is cut."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname or "127.0.0.1", int(parts.port or 80)
        self.requests: list[Request] = []
        self.open: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self.connections = 0
        self.cut_after: bytes | None = None
        self.cut_done = asyncio.Event()
        self.base_url = ""
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.base_url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        self.abort_all()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def abort_all(self) -> int:
        pairs = list(self.open)
        for client, upstream in pairs:
            client.transport.abort()
            upstream.transport.abort()
        self.open.clear()
        return len(pairs)

    async def _handle(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn = self.connections
        try:
            ureader, uwriter = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        except OSError:
            cwriter.transport.abort()
            return
        pair = (cwriter, uwriter)
        self.open.add(pair)
        parser = _RequestParser(conn, self.requests)
        try:
            await asyncio.gather(
                self._pipe(creader, uwriter, record=parser.feed), self._pipe(ureader, cwriter, watch=True)
            )
        finally:
            self.open.discard(pair)
            for w in pair:
                w.transport.abort()

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, record: Any = None, watch: bool = False
    ) -> None:
        seen = b""
        try:
            while data := await reader.read(65536):
                if record is not None:
                    record(data)
                if watch and self.cut_after is not None:
                    start, seen = len(seen), seen + data
                    at = seen.find(self.cut_after)
                    ends = [i + len(sep) for sep in (b"\r\n\r\n", b"\n\n") if (i := seen.find(sep, at)) >= 0]
                    if at >= 0 and ends:
                        writer.write(data[: min(ends) - start])
                        await writer.drain()
                        self.cut_after = None
                        await asyncio.sleep(0.2)  # let the browser take in the last message
                        self.abort_all()
                        self.cut_done.set()
                        return
                writer.write(data)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        except (OSError, RuntimeError):
            pass


@asynccontextmanager
async def drop_proxy(upstream: str) -> AsyncIterator[DropProxy]:
    proxy = DropProxy(upstream)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()


# ---- fixtures ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slow_server(wiki_template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Events 250 ms apart, so a run lasts long enough to cut its stream in the middle."""
    yield from serve(wiki_template_db, tmp_path_factory.mktemp("room-slow"), VERACITY_LIMITS__EVENT_DELAY_MS="250")


@pytest.fixture(scope="module")
def fast_server(wiki_template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """No delay between events: for pages of finished runs."""
    yield from serve(wiki_template_db, tmp_path_factory.mktemp("room-fast"), VERACITY_LIMITS__EVENT_DELAY_MS="0")


@pytest.fixture(scope="module")
def car_run(fast_server: Server) -> str:
    """A finished, shipped market brief over the wiki corpus."""
    run_id = finish_run(fast_server, CAR_QUESTION)
    assert asyncio.run(api_report(fast_server, run_id))["report"]["outcome"] == "shipped"
    return run_id


@pytest.fixture(scope="module")
def xss_corpus(fast_server: Server, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A local corpus whose titles and texts carry script and event-handler payloads, ingested with the CLI into
    the running server's database (the server lists a new corpus without a restart)."""
    folder = tmp_path_factory.mktemp("xss-corpus")
    rows = [
        {
            "id": "zephyr-pumps",
            "title": f"Zephyr pumps {SCRIPT}{IMG}",
            "url": JS_URL,
            "text": (
                f"Zephyr heat pumps were first sold in Norway in 2011. {SCRIPT} Zephyr heat pumps now heat about "
                f"40 percent of new Norwegian homes. {IMG} The Zephyr heat pump market grew by 12 percent in 2023."
            ),
        },
        {
            "id": "zephyr-history",
            "title": "Zephyr history",
            "text": (
                f"The Zephyr company was founded in Bergen in 2008 {IMG} by two engineers. "
                "Zephyr heat pumps use a variable-speed compressor."
            ),
        },
    ]
    (folder / "zephyr.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    (folder / "zephyr-notes.md").write_text(
        f"# Zephyr notes {SCRIPT}\n\nZephyr heat pumps are installed by certified partners {SCRIPT} across "
        f"Scandinavia. Zephyr heat pump prices fell by 8 percent in 2022 {IMG}.\n",
        encoding="utf-8",
    )
    env = {
        "VERACITY_DATABASE__URL": sqlite_url(fast_server.db_path),
        "VERACITY_CORPUS__AUTOLOAD_WIKI": "false",
    }
    done = subprocess.run(
        [str(VERACITY), "ingest", str(folder), "--corpus", XSS_CORPUS],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    corpora = httpx.get(f"{fast_server.base_url}/healthz", timeout=10).json()["corpora"]
    assert corpora.get(XSS_CORPUS) == 3, corpora
    return XSS_CORPUS


# ---- helpers -------------------------------------------------------------------------------------------


async def visible_source_rows(page: Page) -> list[dict[str, Any]]:
    return await page.eval_on_selector_all(
        "#sources tr.opened-row[data-sections], #sources ol.sources li[data-sections]",
        "els => els.map(e => ({sections: e.dataset.sections.split(/\\s+/).filter(Boolean), "
        "visible: e.checkVisibility()}))",
    )


async def tab_until(page: Page, selector: str, limit: int) -> list[str]:
    """Press Tab until ``selector`` has focus (at most ``limit`` times); return what had focus after each press."""
    seen: list[str] = []
    for _ in range(limit):
        await page.keyboard.press("Tab")
        seen.append(await page.evaluate(DESCRIBE_FOCUS_JS))
        if await page.evaluate("s => !!document.activeElement && document.activeElement.matches(s)", selector):
            return seen
    raise AssertionError(f"{selector} not reached in {limit} Tab presses: {seen}")


def unescape_md(text: str) -> str:
    """Undo ``report._md_inline``'s escaping (Markdown punctuation, then HTML entities)."""
    text = re.sub(r"\\([\\`*_\[\]])", r"\1", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


# ---- 1 + 2: a dropped stream resumes -------------------------------------------------------------------


async def test_dropped_connection_resumes_with_nothing_missing_or_doubled(
    slow_server: Server, browser: Browser
) -> None:
    async with drop_proxy(slow_server.base_url) as proxy:
        via_proxy = dataclasses.replace(slow_server, base_url=proxy.base_url)
        page = await new_page(browser, viewport={"width": 1280, "height": 900})
        run_id = await submit_question(page, via_proxy, CAR_QUESTION)
        live_path = f"/runs/{run_id}/live"
        initial_seq = int(await page.get_attribute("#run", "data-seq") or "0")

        # Some rows arrived, the run is not over: cut every connection.
        await page.wait_for_function(
            "() => document.querySelectorAll('#timeline tr[data-seq]').length >= 4", timeout=RUN_TIMEOUT_MS
        )
        after_before_drop = parse_qs(urlsplit(await page.get_attribute("#run", "sse-connect") or "").query)["after"]
        requests_before = len(proxy.requests)
        cut = proxy.abort_all()
        rows_at_drop = await timeline(page)
        seq_at_drop = rows_at_drop[-1][0]
        assert cut >= 1, "no connection was open to cut"
        assert "complete" not in [n for _, n in rows_at_drop], "the run had finished before the drop"
        assert await page.locator("#status .banner[data-status=done]").count() == 0

        # The page finishes by itself.
        assert await wait_finished(page) == "done", await page.inner_text("#status")
        await page.wait_for_timeout(300)  # anything already received is swapped in
        rows = await timeline(page)
        sse_connect = await page.get_attribute("#run", "sse-connect") or ""

    first_live = [r for r in proxy.requests[:requests_before] if r.path == live_path]
    reconnects = [r for r in proxy.requests[requests_before:] if r.path == live_path]
    assert first_live, [r.target for r in proxy.requests]
    initial_after = int(first_live[0].query("after") or "0")
    assert initial_after == initial_seq
    assert reconnects, f"no request for {live_path} after the drop: {[r.target for r in proxy.requests]}"
    resume = reconnects[0]
    # A dropped connection is the browser's own EventSource reconnect: it names the last id it saw.
    assert "last-event-id" in resume.headers, resume.headers
    resume_cursor, how = int(resume.headers["last-event-id"]), "Last-Event-ID"
    stored = await asyncio.to_thread(replay_events, slow_server.base_url, run_id)
    n = len(stored)
    print(
        f"initial after={initial_after}; seq at drop={seq_at_drop} (after= was {after_before_drop[0]}); "
        f"{cut} connection(s) cut; resumed with {how} {resume_cursor} "
        f"({len(reconnects)} reconnecting request(s): {[r.target for r in reconnects]}); "
        f"timeline {len(rows)} rows; API replay {n} events"
    )
    assert initial_after < int(after_before_drop[0]) <= seq_at_drop, "?after= did not follow the messages"
    assert resume_cursor > initial_after
    assert seq_at_drop <= resume_cursor < n

    # Nothing missing, nothing doubled: exactly the stored events, in order.
    seqs = [seq for seq, _ in rows]
    assert seqs == list(range(1, n + 1)), f"timeline seqs have gaps or duplicates: {seqs}"
    assert rows == stored, "the timeline differs from the API's replay"
    assert await page.locator("#report article[data-outcome=shipped]").count() == 1

    # The stream URL followed the page: ?after= ended at the last event applied.
    assert parse_qs(urlsplit(sse_connect).query)["after"] == [str(n)], sse_connect

    # No node ever went backwards, across the drop.
    snapshots = (await page.evaluate("window.__topoRec"))["snapshots"]
    for node, states in topology_history(snapshots).items():
        ranks = [STATE_RANK.get(s, -1) for s in states]
        assert ranks == sorted(ranks), f"node {node} went backwards: {states}"
    assert page.js_errors == []  # type: ignore[attr-defined]
    await page.context.close()


async def test_drop_right_after_the_last_timeline_row_still_delivers_the_report(
    slow_server: Server, browser: Browser
) -> None:
    async with drop_proxy(slow_server.base_url) as proxy:
        proxy.cut_after = b'data-name="complete"'
        via_proxy = dataclasses.replace(slow_server, base_url=proxy.base_url)
        page = await new_page(browser, viewport={"width": 1280, "height": 900})
        run_id = await submit_question(page, via_proxy, "What is the history of coffee production?")
        await asyncio.wait_for(proxy.cut_done.wait(), timeout=RUN_TIMEOUT_MS / 1000)
        requests_at_cut = len(proxy.requests)
        report = page.locator("#report article[data-outcome]")
        try:
            await report.wait_for(state="attached", timeout=10_000)
            shown = True
        except PlaywrightTimeout:
            shown = False
        rows = await timeline(page)
        reconnects = [r for r in proxy.requests[requests_at_cut:] if r.path == f"/runs/{run_id}/live"]
    print(
        f"cut after row {rows[-1]}; {len(reconnects)} reconnect(s) in 10 s with Last-Event-ID "
        f"{[r.headers.get('last-event-id') for r in reconnects]}; report shown: {shown}"
    )
    assert rows[-1][1] == "complete" and reconnects
    # The resume names the terminal event itself: the case the server must answer with that event's messages.
    assert reconnects[0].headers.get("last-event-id") == str(rows[-1][0]), reconnects[0].headers
    await page.context.close()
    assert shown, "the report never arrived after the stream was resumed at the last event"


# ---- 3: anchor chips -----------------------------------------------------------------------------------


async def test_anchor_chip_opens_its_quote_in_context(fast_server: Server, car_run: str, browser: Browser) -> None:
    report = (await api_report(fast_server, car_run))["report"]
    evidence = {ev["id"]: ev for ev in report["evidence"]}
    claims = {c["text"]: c for s in report["sections"] for c in s["claims"]}
    page = await new_page(browser, viewport={"width": 1280, "height": 900})
    await page.goto(f"{fast_server.base_url}/runs/{car_run}")

    chips = page.locator("#report li.claim details.anchor")
    ids = [await chips.nth(i).get_attribute("data-evidence") for i in range(await chips.count())]
    with_context = [i for i, eid in enumerate(ids) if evidence[eid]["context_before"] or evidence[eid]["context_after"]]
    assert with_context, "no cited evidence carries any surrounding text"
    chip = chips.nth(with_context[0])
    eid = ids[with_context[0]]
    ev = evidence[eid]
    assert await chip.get_attribute("open") is None
    quote = chip.locator(".anchor-body mark.quote")
    assert not await quote.is_visible(), "the quote shows before the chip is opened"

    await chip.locator("summary").click()
    assert await chip.get_attribute("open") is not None
    await quote.wait_for(state="visible")
    assert norm(await quote.inner_text()) == norm(ev["quote"])
    in_context = norm(await chip.locator(".in-context").inner_text())
    assert norm(ev["quote"]) in in_context and len(in_context) > len(norm(ev["quote"]))
    for side in (ev["context_before"], ev["context_after"]):
        assert norm(side) in in_context
    # The claim's grounding label and the source.
    claim_text = await chip.evaluate("d => d.closest('li.claim').firstChild.textContent")
    claim = claims[claim_text.strip()]
    assert eid in claim["evidence_ids"]
    assert (await chip.locator(".anchor-body .label").inner_text()).strip() == claim["label"]
    assert await chip.locator(".anchor-body a").get_attribute("href") == ev["url"]
    summary_text = (await chip.locator("summary").inner_text()).strip()
    assert summary_text == f"[{await chip.get_attribute('data-ref')}]"
    await page.screenshot(path=str(ARTIFACTS / "chip-open.png"), full_page=True)

    # By keyboard: another chip's summary takes focus; Enter opens it, Enter again closes it.
    other = chips.nth(next(i for i in range(await chips.count()) if i != with_context[0]))
    await other.locator("summary").focus()
    assert await page.evaluate(DESCRIBE_FOCUS_JS) == f"chip[{await other.get_attribute('data-ref')}]"
    await page.keyboard.press("Enter")
    assert await other.evaluate("d => d.open") is True
    assert await other.locator("mark.quote").is_visible()
    await page.keyboard.press("Enter")
    assert await other.evaluate("d => d.open") is False
    assert page.js_errors == []  # type: ignore[attr-defined]
    await page.context.close()

    # At phone width the open chip stays inside the viewport.
    phone = await new_page(browser, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    await phone.goto(f"{fast_server.base_url}/runs/{car_run}")
    first = phone.locator("#report li.claim details.anchor").first
    await first.locator("summary").tap()
    await first.locator("mark.quote").wait_for(state="visible")
    await first.scroll_into_view_if_needed()
    await phone.screenshot(path=str(ARTIFACTS / "phone-chip.png"))  # the viewport, with the open chip in it
    width = await phone.evaluate("() => document.documentElement.scrollWidth")
    body_right = await first.locator(".anchor-body").evaluate("e => e.getBoundingClientRect().right")
    assert width <= 392 and body_right <= 392, f"page {width} px, open chip's right edge {body_right} px at 390 px"
    await phone.context.close()


# ---- 4: exports ----------------------------------------------------------------------------------------


async def test_both_exports_download_parse_and_agree(fast_server: Server, car_run: str, browser: Browser) -> None:
    report = (await api_report(fast_server, car_run))["report"]
    evidence = {ev["id"]: ev for ev in report["evidence"]}
    all_claims = [c for s in report["sections"] for c in s["claims"]]
    page = await new_page(browser, viewport={"width": 1280, "height": 900}, accept_downloads=True)
    await page.goto(f"{fast_server.base_url}/runs/{car_run}")
    version = await page.get_attribute("#report article", "data-version")
    assert version == "1"
    assert norm(await page.inner_text("#artifact-version")) == "Artifact version 1 of 1 (latest)"
    assert await page.get_attribute("#artifact-version", "data-latest") == "1"

    async with page.expect_download() as md_info:
        await page.click("#export-md")
    md_download = await md_info.value
    assert md_download.suggested_filename == f"veracity-{car_run[:12]}-v1.md"
    md = Path(await md_download.path()).read_text(encoding="utf-8")

    async with page.expect_download() as json_info:
        await page.click("#export-json")
    json_download = await json_info.value
    assert json_download.suggested_filename == f"veracity-{car_run[:12]}-v1.json"
    data = json.loads(Path(await json_download.path()).read_text(encoding="utf-8"))

    # Markdown: every [n] in the body has a References entry whose quote is that evidence's quote.
    body, _, refs_part = md.partition("\n## References\n")
    assert refs_part, "no References section"
    entries: dict[int, str] = {}
    for line in refs_part.strip().splitlines():
        m = re.match(r"^(\d+)\. “(.*)” — .*, characters (\d+)–(\d+).* `(ev[0-9a-f]+)`$", line)
        assert m, f"unparsed References line: {line!r}"
        number, quote, start, end, eid = int(m[1]), m[2], int(m[3]), int(m[4]), m[5]
        assert number not in entries
        entries[number] = eid
        assert unescape_md(quote) == norm(evidence[eid]["quote"])
        assert (start, end) == (evidence[eid]["start"], evidence[eid]["end"])
    assert sorted(entries) == list(range(1, len(entries) + 1))
    md_number = {eid: n for n, eid in entries.items()}
    claim_lines = [line for line in body.splitlines() if line.startswith("- ")]
    assert len(claim_lines) == len(all_claims)
    for line, claim in zip(claim_lines, all_claims, strict=True):
        markers = [int(x) for x in re.findall(r"(?<!\\)\[(\d+)\]", line)]
        assert markers, f"claim without a marker: {line!r}"
        assert all(n in entries for n in markers), f"{line!r}: markers {markers}, references {sorted(entries)}"
        assert markers == [md_number[eid] for eid in claim["evidence_ids"]], line

    # JSON: numbers 1..K, each claim's references are its evidence ids through the same numbering.
    assert data["format"] == "veracity-report/1" and data["version"] == 1
    numbers = [r["number"] for r in data["references"]]
    assert numbers == list(range(1, len(numbers) + 1))
    json_number = {r["id"]: r["number"] for r in data["references"]}
    assert json_number == md_number, "the two exports number the references differently"
    for ref in data["references"]:
        assert ref["quote"] == evidence[ref["id"]]["quote"]
        assert ref["context_before"] == evidence[ref["id"]]["context_before"]
    json_claims = [c for s in data["sections"] for c in s["claims"]]
    assert [c["text"] for c in json_claims] == [c["text"] for c in all_claims]
    for claim in json_claims:
        assert claim["references"] == [json_number[eid] for eid in claim["evidence_ids"]], claim
    # The page's chips carry the same numbers.
    chip_refs = await page.eval_on_selector_all(
        "#report details.anchor", "els => els.map(d => [d.dataset.evidence, d.dataset.ref])"
    )
    assert chip_refs and all(json_number[eid] == int(ref) for eid, ref in chip_refs)

    # The permalink: the same in the page and the export, and it opens the same report.
    permalink = await page.input_value("input#permalink")
    assert permalink == data["permalink"] == f"{fast_server.base_url}/runs/{car_run}?version=1"
    assert f"<{permalink}>" in md
    report_text = await page.inner_text("#report")
    again = await new_page(browser)
    await again.goto(permalink)
    assert await again.inner_text("#report") == report_text

    # An unknown version is a 404 that says so.
    resp = await again.goto(f"{fast_server.base_url}/runs/{car_run}?version=99")
    assert resp is not None and resp.status == 404
    expected = messages.VERSION_UNKNOWN.format(run_id=car_run, version=99, have="1")
    assert expected in await again.inner_text("body")
    async with httpx.AsyncClient(base_url=fast_server.base_url, timeout=10) as client:
        for export in ("report.md", "report.json"):
            r = await client.get(f"/runs/{car_run}/{export}?version=99")
            assert r.status_code == 404 and expected in r.text
    assert page.js_errors == []  # type: ignore[attr-defined]
    await page.context.close()
    await again.context.close()


async def test_pdf_and_word_buttons_download_files_that_read_back(
    fast_server: Server, car_run: str, browser: Browser
) -> None:
    report = (await api_report(fast_server, car_run))["report"]
    claims = [c["text"] for s in report["sections"] for c in s["claims"]]
    page = await new_page(browser, viewport={"width": 1280, "height": 900}, accept_downloads=True)
    await page.goto(f"{fast_server.base_url}/runs/{car_run}")
    files: dict[str, bytes] = {}
    for button, suffix in (("#export-pdf", "pdf"), ("#export-docx", "docx")):
        async with page.expect_download() as info:
            await page.click(button)
        download = await info.value
        assert download.suggested_filename == f"veracity-{car_run[:12]}-v1.{suffix}"
        files[suffix] = Path(await download.path()).read_bytes()
    text = "".join("\n".join(p.extract_text() for p in PdfReader(io.BytesIO(files["pdf"])).pages).split())
    for expected in (report["question"], *claims):
        assert "".join(expected.split()) in text, expected
    paragraphs = docx.Document(io.BytesIO(files["docx"])).paragraphs
    assert paragraphs[0].text == report["question"]
    bullets = [p.text for p in paragraphs if p.style.name == "List Bullet"]
    assert [b.startswith(c) for b, c in zip(bullets, claims, strict=True)] == [True] * len(claims)
    assert page.js_errors == []  # type: ignore[attr-defined]
    await page.context.close()


# ---- 5: hostile source text ----------------------------------------------------------------------------


async def test_script_in_a_source_executes_nothing(fast_server: Server, xss_corpus: str, browser: Browser) -> None:
    page = await new_page(browser, viewport={"width": 1280, "height": 900})
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), asyncio.ensure_future(d.dismiss())))
    stray: list[str] = []  # an <img src=x> that became an element would request /runs/x
    page.on("request", lambda r: stray.append(r.url) if urlsplit(r.url).path.endswith("/x") else None)

    await page.goto(f"{fast_server.base_url}/")
    await page.select_option("select#corpus", xss_corpus)
    run_id = await submit_question(page, fast_server, XSS_QUESTION)
    assert await wait_finished(page) == "done"
    await page.wait_for_timeout(300)
    assert await page.evaluate("typeof window.__xss") == "undefined"

    for how in ("live", "reopened"):
        if how == "reopened":
            await page.goto(f"{fast_server.base_url}/runs/{run_id}")
        assert await page.locator("#report article[data-outcome=shipped]").count() == 1
        chips = page.locator("#report details.anchor")
        count = await chips.count()
        for i in range(count):
            await chips.nth(i).locator("summary").click()
        contexts = [norm(t) for t in await page.locator("#report .anchor-body .in-context").all_inner_texts()]
        assert any(SCRIPT in t for t in contexts) and any(norm(IMG) in t for t in contexts), contexts
        await page.locator("#report mark.quote", has_text=SCRIPT).first.wait_for(state="visible")
        chip_sources = norm(" ".join(await page.locator("#report .anchor-body p.muted").all_inner_texts()))
        assert f"Zephyr pumps {SCRIPT}{norm(IMG)}" in chip_sources
        sources = norm(await page.inner_text("#sources ol.sources"))
        assert f"Zephyr notes {SCRIPT}" in sources and norm(IMG) in sources
        # The payloads are text nodes: no element was made of them.
        assert await page.locator("#report script, #sources script, #report img, #sources img").count() == 0
        assert await page.evaluate("typeof window.__xss") == "undefined", how
    assert dialogs == [] and stray == []
    assert page.js_errors == []  # type: ignore[attr-defined]
    await page.context.close()


async def test_javascript_url_in_a_source_is_not_a_live_link(
    fast_server: Server, xss_corpus: str, browser: Browser
) -> None:
    run_id = await asyncio.to_thread(finish_run, fast_server, XSS_QUESTION, "market_brief", xss_corpus)
    page = await new_page(browser)
    await page.goto(f"{fast_server.base_url}/runs/{run_id}")
    # The one source whose URL is javascript: gave evidence and is listed: named, with no link at all.
    source = page.locator("#sources ol.sources li[data-doc=zephyr-pumps]")
    assert await source.count() == 1, await page.inner_text("#sources")
    assert "Zephyr pumps" in await source.inner_text()
    assert await source.locator("a").count() == 0
    links = page.locator("#sources a, #report a")
    hrefs = [await links.nth(i).get_attribute("href") for i in range(await links.count())]
    # Clicking where the link would have been (the source's title) runs nothing either.
    await source.locator("strong").click()
    executed = await page.evaluate("typeof window.__xss")
    response = await page.goto(f"{fast_server.base_url}/runs/{run_id}")
    csp = (response.headers if response else {}).get("content-security-policy", "")
    await page.context.close()
    assert executed == "undefined", f"a source link ran script; hrefs: {hrefs}"
    assert not any((h or "").strip().lower().startswith("javascript:") for h in hrefs), hrefs
    # Defence in depth: the page allows scripts from its own origin only, so a javascript: URL could not run.
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]


# ---- 6: source filter ----------------------------------------------------------------------------------


async def test_source_filter_shows_one_sections_sources(fast_server: Server, car_run: str, browser: Browser) -> None:
    page = await new_page(browser, viewport={"width": 1280, "height": 900})
    await page.goto(f"{fast_server.base_url}/runs/{car_run}")
    rows = await visible_source_rows(page)
    assert rows and all(r["visible"] for r in rows), "some sources are hidden with all sections chosen"
    assert await page.is_checked("#sf-all")
    radios = await page.eval_on_selector_all(
        "fieldset.source-filter input[name=source-filter]", "els => els.map(e => e.id)"
    )
    sections = [r.removeprefix("sf-") for r in radios if r != "sf-all"]
    # A section served by some sources but not all of them.
    chosen = next(
        (s for s in sections if 0 < sum(s in r["sections"] for r in rows) < len(rows)),
        None,
    )
    assert chosen, f"every section is served by all or none of the sources: {rows}"

    await page.check(f"#sf-{chosen}")
    filtered = await visible_source_rows(page)
    shown = [r for r in filtered if r["visible"]]
    hidden = [r for r in filtered if not r["visible"]]
    print(f"filter {chosen}: {len(shown)} shown, {len(hidden)} hidden of {len(filtered)}")
    assert shown and hidden
    assert all(chosen in r["sections"] for r in shown)
    assert all(chosen not in r["sections"] for r in hidden)

    await page.check("#sf-all")
    assert all(r["visible"] for r in await visible_source_rows(page))
    await page.context.close()


# ---- 7: without JavaScript -----------------------------------------------------------------------------


async def test_readable_and_usable_without_javascript(fast_server: Server, car_run: str, browser: Browser) -> None:
    page = await new_page(browser, viewport={"width": 1280, "height": 900}, java_script_enabled=False)
    await page.goto(f"{fast_server.base_url}/runs/{car_run}")
    assert await page.locator("#report article[data-outcome=shipped]").count() == 1
    assert await page.locator("#report .section-card").count() >= 2
    assert await page.locator("#report li.claim").count() > 0
    summaries = await page.locator("#report details.anchor summary").all_inner_texts()
    assert summaries and all(re.fullmatch(r"\[\d+\]", s.strip()) for s in summaries), summaries
    assert await page.locator("#sources ol.sources li").count() > 0
    assert await page.locator("#timeline tr[data-seq]").count() > 0
    assert await page.locator("button.copy").is_hidden(), "the Copy button shows without the script it needs"
    assert await page.locator("#export-md").is_visible() and await page.locator("#export-json").is_visible()

    chip = page.locator("#report details.anchor").first
    await chip.locator("summary").click()
    await chip.locator("mark.quote").wait_for(state="visible")
    # The source filter is CSS only.
    rows = await visible_source_rows(page)
    radios = await page.eval_on_selector_all("fieldset.source-filter input:not(#sf-all)", "els => els.map(e => e.id)")
    section = next(r for r in radios if 0 < sum(r.removeprefix("sf-") in x["sections"] for x in rows) < len(rows))
    await page.check(f"#{section}")
    rows = await visible_source_rows(page)
    shown = [r for r in rows if r["visible"]]
    hidden = [r for r in rows if not r["visible"]]
    assert shown and hidden, rows
    assert all(section.removeprefix("sf-") in r["sections"] for r in shown)
    assert not any(section.removeprefix("sf-") in r["sections"] for r in hidden)

    # The home page's form posts and redirects to the new run's page.
    await page.goto(f"{fast_server.base_url}/")
    await page.fill("textarea#question", "What is the history of coffee production?")
    async with page.expect_navigation() as nav:
        await page.click("form.ask button[type=submit]")
    response = await nav.value
    assert response is not None and response.status == 200
    assert re.fullmatch(rf"{re.escape(fast_server.base_url)}/runs/[0-9a-f]{{32}}", page.url), page.url
    assert norm(await page.inner_text("h1.question")) == "What is the history of coffee production?"
    assert response.request.redirected_from is not None
    assert response.request.redirected_from.method == "POST"
    await page.context.close()


# ---- 8: keyboard ---------------------------------------------------------------------------------------


async def test_keyboard_reaches_the_form_exports_and_chips(fast_server: Server, car_run: str, browser: Browser) -> None:
    page = await new_page(browser, viewport={"width": 1280, "height": 900})
    await page.goto(f"{fast_server.base_url}/")
    order = await tab_until(page, "input#run_id", 30)
    print(f"home Tab order: {order}")
    wanted = [
        "textarea#question[name=question]",  # the question first
        "input#template-answer[name=template]=answer",  # the checked radio of the group: the default template
        "select#corpus[name=corpus]",
        "button#ask-submit",
        "input#run_id[name=run_id]",
    ]
    positions = [order.index(w) for w in wanted]
    assert positions == sorted(positions), order
    # Arrow keys move within the template radio group.
    await page.focus("input[name=template]:checked")
    await page.keyboard.press("ArrowDown")
    assert await page.evaluate(DESCRIBE_FOCUS_JS) != "input#template-answer[name=template]=answer"
    assert (await page.evaluate(DESCRIBE_FOCUS_JS)).startswith("input#template-")

    await page.goto(f"{fast_server.base_url}/runs/{car_run}")
    order = await tab_until(page, "#report details.anchor summary", 60)
    print(f"run page Tab order: {order}")
    for target in ("a#export-md", "a#export-json", "input#permalink"):
        assert target in order, order
    assert order.index("a#export-md") < order.index("a#export-json") < order.index("input#permalink")
    assert order[-1] == "chip[1]"
    # Enter on the focused export link downloads.
    await page.close()
    page = await new_page(browser, accept_downloads=True)
    await page.goto(f"{fast_server.base_url}/runs/{car_run}")
    await tab_until(page, "#export-md", 60)
    async with page.expect_download() as info:
        await page.keyboard.press("Enter")
    assert (await info.value).suggested_filename.endswith(".md")
    await page.context.close()


# ---- 9: screenshots of the other outcomes --------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "outcome", "template", "question"),
    [("escalation", "escalated", *ESCALATION), ("fallback", "fallback", *FALLBACK)],
    ids=["escalation", "fallback"],
)
async def test_outcome_screenshot(
    fast_server: Server, browser: Browser, name: str, outcome: str, template: str, question: str
) -> None:
    started = time.monotonic()
    run_id = await asyncio.to_thread(finish_run, fast_server, question, template)
    page = await new_page(browser, viewport={"width": 1280, "height": 900})
    await page.goto(f"{fast_server.base_url}/runs/{run_id}")
    assert await page.get_attribute("#report article", "data-outcome") == outcome
    # Nothing is claimed: an escalation shows no sentence; a fallback with nothing relevant shows only its closest
    # passages, unlabelled, in the digest card that says so.
    assert await page.locator("#report .section-card:not([data-section=evidence_digest]) li.claim").count() == 0
    closest = page.locator("#report .section-card[data-section=evidence_digest] li.claim")
    if outcome == "fallback":
        assert 0 < await closest.count() <= 5 and await closest.locator(".label").count() == 0
    else:
        assert await closest.count() == 0
    assert await page.locator("#export-md").is_visible()
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    print(f"{name}: {outcome} in {time.monotonic() - started:.1f} s")
    await page.context.close()
