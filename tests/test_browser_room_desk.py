"""The home page and the run room in Debian's Chromium at a laptop's size (1366×768) and a phone's (390×844), issue 18
items 5 and 6: the question, the template and the corpus above the fold; a question too long counted and never
cut; the run's time while it runs; one outcome statement; each fallback's own cause; the report before the
diagram on a phone; event names that never break inside a word; the attribution of the run's corpus; a pasted
permalink opens its run; a bad ``?version=`` gets the error page. Screenshots go to ``test-artifacts/``.

Two ``veracity serve`` processes: the desk (offline composer, 400 ms between events so a run can be watched, web
search pointed at a port nothing listens on: an unreachable search) and one drafting with the scripted model, whose
drafts cite evidence never retrieved (a draft that fails the checks).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page

from test_browser import ARTIFACTS, Server, _free_port, new_page, serve, submit_question, wait_finished
from test_browser_room import finish_run
from test_model_runs import FABRICATED, QUESTION, REVIEW_OK
from veracity import messages
from veracity.evals.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1366, "height": 768}
PHONE = {"width": 390, "height": 844}
SIZES = {"desktop": {"viewport": DESKTOP}, "phone": {"viewport": PHONE, "is_mobile": True, "has_touch": True}}
WATCHED = "What is the outlook for nuclear power?"  # the default corpus answers it
LIMIT = 2000  # VERACITY_LIMITS__MAX_QUESTION_CHARS's default
CAUSES = [
    messages.FALLBACK_NOTHING_RELEVANT,
    messages.FALLBACK_SEARCH_UNREACHABLE,
    messages.FALLBACK_MODEL_FAILED,
    messages.FALLBACK_CHECKS_FAILED,
]


@pytest.fixture(scope="module")
def desk_server(wiki_template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve(
        wiki_template_db,
        tmp_path_factory.mktemp("desk"),
        VERACITY_LIMITS__EVENT_DELAY_MS="400",
        VERACITY_SEARCH__WEB_BACKEND="searxng",
        VERACITY_SEARCH__SEARXNG_URL=f"http://127.0.0.1:{_free_port()}",  # nothing listens there
    )


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as server:
        yield server


@pytest.fixture(scope="module")
def model_server(
    wiki_template_db: Path, tmp_path_factory: pytest.TempPathFactory, llm: ScriptedOpenAI
) -> Iterator[Server]:
    yield from serve(
        wiki_template_db,
        tmp_path_factory.mktemp("desk-model"),
        VERACITY_MODEL__PROVIDER="openai",
        VERACITY_MODEL__BASE_URL=llm.base_url_v1,
        VERACITY_MODEL__PLANNER_MODEL="planner",
        VERACITY_MODEL__COMPOSER_MODEL="composer",
        VERACITY_MODEL__JUDGE_MODEL="judge",
        VERACITY_MODEL__REVIEWER_MODEL="reviewer",
        VERACITY_MODEL__MAX_RETRIES="0",
        VERACITY_LIMITS__EVENT_DELAY_MS="0",
    )


@pytest.fixture(scope="module")
def shipped_run(desk_server: Server) -> str:
    return finish_run(desk_server, WATCHED)


async def box(page: Page, selector: str) -> dict[str, float]:
    found = await page.locator(selector).first.bounding_box()
    assert found, f"{selector} is not rendered"
    return found


async def names_on_one_line(page: Page) -> None:
    """At a laptop's width every timeline event name is on one line, and none may break inside a word."""
    names = await page.eval_on_selector_all(
        "#timeline td:nth-child(4) code",
        """els => els.map(c => {
          const s = getComputedStyle(c);
          // A box per piece between <wbr>s; one distinct top per line.
          const tops = new Set([...c.getClientRects()].map((r) => Math.round(r.top)));
          return {name: c.textContent, lines: tops.size, wordBreak: s.wordBreak, wrap: s.overflowWrap};
        })""",
    )
    assert names and all(n["lines"] == 1 for n in names), [n for n in names if n["lines"] != 1]
    assert {n["wordBreak"] for n in names} == {"normal"} and {n["wrap"] for n in names} == {"normal"}


# ---- the home page -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
async def test_the_home_page_leads_with_the_question(desk_server: Server, browser: Browser, size: str) -> None:
    page = await new_page(browser, **SIZES[size])
    await page.goto(f"{desk_server.base_url}/")
    height, width = page.viewport_size["height"], page.viewport_size["width"]  # type: ignore[index]
    await page.screenshot(path=str(ARTIFACTS / f"desk-home-{size}.png"))
    await page.screenshot(path=str(ARTIFACTS / f"desk-home-{size}-full.png"), full_page=True)
    parts = {
        "question": await box(page, "textarea#question"),
        "template": await box(page, "fieldset#template-choice"),
        "corpus": await box(page, "select#corpus"),
        "submit": await box(page, "button#ask-submit"),
    }
    print(f"{size}: " + ", ".join(f"{k} {v['y']:.0f}–{v['y'] + v['height']:.0f}" for k, v in parts.items()))
    for name, b in parts.items():
        assert 0 <= b["y"] and b["y"] + b["height"] < height, f"{name} is not above the fold at {size}: {b}"
        assert b["x"] >= 0 and b["x"] + b["width"] <= width, f"{name} is cut off at the side at {size}: {b}"
    assert parts["question"]["y"] < parts["template"]["y"] < parts["submit"]["y"], "the question does not lead"
    # The six templates are a choice above the fold; their cards, below it, name each one's corpus.
    assert await page.locator("fieldset#template-choice input[name=template]").count() == 6
    assert await page.locator("input[name=template][value=answer]").is_checked()
    cards = page.locator(".template-card")
    assert await cards.count() == 6
    assert (await box(page, ".template-card"))["y"] > parts["submit"]["y"] + parts["submit"]["height"]
    for line in await page.locator(".template-card .corpus-line").all_inner_texts():
        assert re.fullmatch(r"Searches by default: (\S+|the open web)( \(.+\))?", " ".join(line.split())), line
    answer_card = " ".join((await page.locator("#card-answer .corpus-line").inner_text()).split())
    assert answer_card == "Searches by default: wiki (10,033 documents)"
    # The chosen corpus reads whole in its box (it was cut off on a phone).
    fits = await page.evaluate(
        """() => {
          const s = document.getElementById('corpus');
          const text = s.options[s.selectedIndex].text;
          const ctx = document.createElement('canvas').getContext('2d');
          const st = getComputedStyle(s);
          ctx.font = `${st.fontSize} ${st.fontFamily}`;
          const room = s.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight) - 20;
          return {text, need: ctx.measureText(text).width, room};
        }"""
    )
    assert fits["need"] <= fits["room"], f"the corpus choice is cut off at {size}: {fits}"
    assert await page.evaluate("document.documentElement.scrollWidth") <= width + 2
    assert page.js_errors == []  # type: ignore[attr-defined]
    await page.context.close()


async def test_a_question_too_long_is_counted_refused_and_never_cut(desk_server: Server, browser: Browser) -> None:
    page = await new_page(browser, viewport=DESKTOP)
    await page.goto(f"{desk_server.base_url}/")
    counter = page.locator("#question-count")
    assert (await counter.inner_text()).strip() == f"0 / {LIMIT:,} characters"
    runs_before = desk_server.run_count()
    pasted = ("What is the history of the electric car in Norway? " * 100)[:5000]
    await page.fill("textarea#question", pasted)  # as a paste: the whole value at once
    assert len(await page.input_value("textarea#question")) == 5000, "the question was cut"
    over = f"5,000 / {LIMIT:,} characters: 3,000 over the limit. Shorten the question to submit it."
    assert (await counter.inner_text()).strip() == over
    assert "over" in (await counter.get_attribute("class") or "")
    # Submitting is refused on the page, with the same words; nothing is started, nothing is cut.
    await page.click("button#ask-submit")
    await page.wait_for_timeout(500)
    assert page.url == f"{desk_server.base_url}/"
    assert await page.eval_on_selector("textarea#question", "t => t.validationMessage") == over
    assert len(await page.input_value("textarea#question")) == 5000
    assert desk_server.run_count() == runs_before
    await page.screenshot(path=str(ARTIFACTS / "desk-question-too-long.png"))
    await page.fill("textarea#question", pasted[:1990])
    assert (await counter.inner_text()).strip() == f"1,990 / {LIMIT:,} characters"
    assert await page.eval_on_selector("textarea#question", "t => t.validationMessage") == ""
    await page.context.close()

    # Without the script the server refuses it, says why, and gives the whole question back.
    page = await new_page(browser, viewport=DESKTOP, java_script_enabled=False)
    await page.goto(f"{desk_server.base_url}/")
    await page.fill("textarea#question", pasted)
    async with page.expect_navigation() as nav:
        await page.click("button#ask-submit")
    response = await nav.value
    assert response is not None and response.status == 422
    assert (await page.inner_text("#form-error")).strip() == messages.QUESTION_TOO_LONG.format(
        length=len(pasted.strip()), limit=LIMIT
    )
    assert await page.input_value("textarea#question") == pasted
    assert desk_server.run_count() == runs_before
    await page.context.close()


async def test_a_long_question_is_clamped_in_the_run_title_and_shown_whole_on_request(
    desk_server: Server, browser: Browser
) -> None:
    page = await new_page(browser, viewport=DESKTOP)
    question = ("How did the electric car develop between 1880 and 2020, and why did it fade? " * 25)[:1990].strip()
    await submit_question(page, desk_server, question, template="answer")
    title = page.locator("h1.question")
    assert " ".join((await title.inner_text()).split()) == " ".join(question.split())  # the text is all there
    lines = await title.evaluate("h => h.getBoundingClientRect().height / parseFloat(getComputedStyle(h).lineHeight)")
    assert lines <= 3.1, f"the title takes {lines:.1f} lines"
    whole = page.locator("details#whole-question")
    assert await whole.is_visible()
    await whole.locator("summary").click()
    shown = whole.locator("p")
    assert await shown.is_visible() and await shown.inner_text() == question
    assert len(await page.title()) <= 100
    await page.screenshot(path=str(ARTIFACTS / "desk-long-question.png"))
    await page.click("#cancel-form button")  # no need to research it
    await page.context.close()


# ---- the run room ------------------------------------------------------------------------------------------------


def seconds(text: str) -> int:
    m = re.fullmatch(r"(?:(\d+) min )?(\d+) s", text.strip())
    assert m, text
    return int(m.group(1) or 0) * 60 + int(m.group(2))


async def test_the_run_room_at_a_laptops_size(desk_server: Server, browser: Browser) -> None:
    page = await new_page(browser, viewport=DESKTOP)
    run_id = await submit_question(page, desk_server, WATCHED, template="market_brief")
    running = page.locator("#status .banner[data-status=running]")
    await running.wait_for(state="attached", timeout=20_000)
    banner = " ".join((await running.inner_text()).split())
    assert re.match(r"Running for \d+ s · \d+ events? so far", banner), banner
    first = seconds(await page.inner_text("#elapsed"))
    await page.screenshot(path=str(ARTIFACTS / "desk-run-running-desktop.png"))
    await page.wait_for_timeout(2500)
    assert await running.count() == 1, "the run finished before its time could be seen moving"
    later = seconds(await page.inner_text("#elapsed"))
    assert later >= first + 2, f"the elapsed time went from {first} s to {later} s in 2.5 s"

    assert await wait_finished(page) == "done"
    await page.wait_for_timeout(300)
    # One outcome statement: the report's. The status line says how long it took and nothing of the outcome.
    status = " ".join((await page.inner_text("#status .banner")).split())
    assert re.fullmatch(r"Finished in \d+\.\d s · \d+ events\.", status), status
    assert await page.locator("#outcome-banner").count() == 1
    statement = await page.inner_text("#outcome-banner")
    assert statement.startswith("Shipped — every sentence below")
    assert (await page.inner_text("#run")).count("Shipped") == 1

    # Event names on one line each, and nothing in the timeline breaks a word anywhere.
    await names_on_one_line(page)
    detail = await page.eval_on_selector("#timeline td:nth-child(5)", "td => getComputedStyle(td).wordBreak")
    assert detail == "normal"

    # The attribution of the corpus searched.
    foot = await page.inner_text("footer#attribution")
    assert "English Wikipedia" in foot and "CC BY-SA 4.0" in foot
    await page.screenshot(path=str(ARTIFACTS / "desk-run-desktop.png"))
    await page.screenshot(path=str(ARTIFACTS / "desk-run-desktop-full.png"), full_page=True)

    # A pasted permalink opens the run at its version.
    permalink = await page.input_value("input#permalink")
    assert permalink == f"{desk_server.base_url}/runs/{run_id}?version=1"
    await page.goto(f"{desk_server.base_url}/")
    await page.fill("input#run_id", f"  {permalink} ")
    await page.click("form.open button[type=submit]")
    await page.wait_for_url(permalink)
    assert await page.inner_text("#run-id") == run_id
    assert await page.get_attribute("#artifact-version", "data-version") == "1"

    # A version that is not a number: the site's own error page, not raw JSON or text.
    response = await page.goto(f"{desk_server.base_url}/runs/{run_id}?version=abc")
    assert response is not None and response.status == 422
    assert response.headers["content-type"].startswith("text/html")
    assert (await page.inner_text("main h1")).strip() == "Error 422"
    said = await page.inner_text("main .error")
    assert said.startswith(messages.REQUEST_INVALID.format(details="version: ")), said
    assert await page.locator("header.top a.brand").count() == 1
    await page.screenshot(path=str(ARTIFACTS / "desk-bad-version.png"))
    assert page.js_errors == []  # type: ignore[attr-defined]
    await page.context.close()


async def test_the_run_room_on_a_phone(desk_server: Server, shipped_run: str, browser: Browser) -> None:
    page = await new_page(browser, **SIZES["phone"])
    await page.goto(f"{desk_server.base_url}/runs/{shipped_run}")
    await page.screenshot(path=str(ARTIFACTS / "desk-run-phone.png"))
    await page.screenshot(path=str(ARTIFACTS / "desk-run-phone-full.png"), full_page=True)
    report, diagram = await box(page, "#report"), await box(page, "#topology")
    assert report["y"] < diagram["y"], f"the diagram comes before the report: {report} {diagram}"
    assert (await box(page, "#outcome-banner"))["y"] < PHONE["height"], "the outcome is not on the first screen"
    assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"] + 2
    # A name may wrap only where it has a <wbr> (after an underscore): each piece between them stays on one line.
    pieces = await page.eval_on_selector_all(
        "#timeline td:nth-child(4) code",
        """els => els.flatMap(c => [...c.childNodes].filter(n => n.nodeType === 3).map(n => {
          const r = document.createRange(); r.selectNodeContents(n);
          const s = getComputedStyle(c);
          return {text: n.textContent, lines: r.getClientRects().length, wordBreak: s.wordBreak, wrap: s.overflowWrap};
        }))""",
    )
    assert pieces and all(p["lines"] == 1 for p in pieces), [p for p in pieces if p["lines"] != 1]
    assert {p["wordBreak"] for p in pieces} == {"normal"} and {p["wrap"] for p in pieces} == {"normal"}
    assert any(p["text"].endswith("_") for p in pieces)
    await page.context.close()


# ---- each fallback says its cause --------------------------------------------------------------------------------

FALLBACKS = {
    "nothing-relevant": ("desk_server", "market_brief", "Zorblax quuxification of the vemtrian flibber", ""),
    "search-unreachable": ("desk_server", "answer", "What is the history of the electric car?", "web"),
    "checks-failed": ("model_server", "legal_research", QUESTION, ""),
}
EXPECTED = {
    "nothing-relevant": messages.FALLBACK_NOTHING_RELEVANT,
    "search-unreachable": messages.FALLBACK_SEARCH_UNREACHABLE,
    "checks-failed": messages.FALLBACK_CHECKS_FAILED,
}


@pytest.mark.parametrize("cause", FALLBACKS)
async def test_each_fallback_says_its_own_cause_and_what_was_found(
    request: pytest.FixtureRequest, browser: Browser, llm: ScriptedOpenAI, cause: str
) -> None:
    fixture, template, question, corpus = FALLBACKS[cause]
    server: Server = request.getfixturevalue(fixture)
    if fixture == "model_server":  # every draft cites evidence that was never retrieved: the checks fail it twice
        llm.play(
            {
                "planner": [{"content": "not a plan"}],
                "composer": [{"content": FABRICATED}],
                "judge": [{"judge": "echo"}],
                "reviewer": [{"content": REVIEW_OK}],
            }
        )
    run_id = await asyncio.to_thread(finish_run, server, question, template, corpus)
    page = await new_page(browser, viewport=DESKTOP)
    await page.goto(f"{server.base_url}/runs/{run_id}")
    assert await wait_finished(page) == "done"
    statement = page.locator("#outcome-banner[data-outcome=fallback]")
    assert await statement.count() == 1
    assert (await statement.locator(".cause").inner_text()).strip() == EXPECTED[cause]
    text = await page.inner_text("#run")
    assert [c for c in CAUSES if c in text] == [EXPECTED[cause]], "another cause is named too"
    assert "shows what it found instead" not in text and "Fallback" not in await page.inner_text("#status")
    reason = (await statement.locator(".reason").inner_text()).strip()
    found = (await page.inner_text("#found")).strip()
    digest = await page.locator("#report .section-card[data-section=evidence_digest] li.claim").count()
    sources = await page.eval_on_selector_all(
        "#report .section-card[data-section=evidence_digest] details.anchor", "els => els.length"
    )
    print(f"{cause}: {reason} | {found} | {digest} digest sentence(s)")
    if cause == "checks-failed":
        assert reason.startswith("Reason: drafting attempts exhausted (2) with failed checks: unknown_anchor")
        assert digest > 0 and sources == digest
        counted = re.fullmatch(
            r"What was found: (\d+) sentences? from \d+ sources?, quoted below as retrieved .*", found
        )
        assert counted and int(counted.group(1)) == digest, found
    elif cause == "nothing-relevant":
        assert reason.startswith("Reason: Nothing in corpus wiki answers this question")
        # What came closest, below the cut-off: shown as such, each quote openable, none labelled as if judged.
        card = page.locator("#report .section-card[data-section=evidence_digest]")
        assert await card.get_attribute("data-status") == "not_found"
        assert (await card.locator("h3").inner_text()).startswith("Closest passages")
        assert "not checked as an answer" in await card.inner_text()
        assert 0 < digest <= 5 and sources == digest
        assert await card.locator("li.claim .label").count() == 0
        shown = [float(t.split()[1]) for t in await card.locator("li.claim .relevance").all_inner_texts()]
        assert len(shown) == digest and shown == sorted(shown, reverse=True) and max(shown) < 0.5
        counted = re.fullmatch(
            r"Nothing answered it; the closest: (\d+) sentences? from \d+ sources?, quoted .*", found
        )
        assert counted and int(counted.group(1)) == digest, found
    else:
        assert found == messages.FALLBACK_FOUND_NOTHING and digest == 0
        assert reason.startswith("Reason: the search failed on ")
        assert "SearXNG search failed" in reason
        assert messages.FALLBACK_CHECKS_FAILED not in text and "did not pass the checks" not in text
    await names_on_one_line(page)  # failure rows' long details leave the names the least room
    # The empty sections are named once, not each with the statement again.
    unwritten = (await page.inner_text("#not-written")).strip()
    assert unwritten.startswith("Sections not shipped: ") and "Not written:" not in text
    await page.screenshot(path=str(ARTIFACTS / f"desk-fallback-{cause}.png"), full_page=True)
    assert page.js_errors == []  # type: ignore[attr-defined]
    await page.context.close()
