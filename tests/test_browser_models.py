"""A model-backed run in a real browser: ``veracity serve`` pointed at the scripted OpenAI-compatible server; the
run page shows the model calls, tokens and time per role, and the timeline has a row per call."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.async_api import Browser

from test_browser import ARTIFACTS, Server, new_page, serve, submit_question, wait_finished
from test_model_runs import FABRICATED, GOOD, QUESTION, REVIEW_OK
from veracity.evals.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.browser


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
        tmp_path_factory.mktemp("model-server"),
        VERACITY_MODEL__PROVIDER="openai",
        VERACITY_MODEL__BASE_URL=llm.base_url_v1,
        VERACITY_MODEL__PLANNER_MODEL="planner",
        VERACITY_MODEL__COMPOSER_MODEL="composer",
        VERACITY_MODEL__JUDGE_MODEL="judge",
        VERACITY_MODEL__REVIEWER_MODEL="reviewer",
        VERACITY_MODEL__MAX_RETRIES="0",
        VERACITY_LIMITS__EVENT_DELAY_MS="0",
    )


async def test_the_run_page_shows_model_usage_per_role(
    model_server: Server, llm: ScriptedOpenAI, browser: Browser
) -> None:
    llm.play(
        {
            "planner": [{"content": "not a plan"}],  # the heuristic plan takes over, and the page says so
            "composer": [{"content": GOOD}],
            "judge": [{"judge": "echo"}],
            "reviewer": [{"content": REVIEW_OK}],
        }
    )
    page = await new_page(browser, viewport={"width": 1280, "height": 900})
    await submit_question(page, model_server, QUESTION, template="legal_research")
    assert await wait_finished(page) == "done"
    assert await page.locator("#report article[data-outcome=shipped]").count() == 1
    usage = page.locator("#status .usage")
    calls = int(await usage.get_attribute("data-calls") or 0)
    assert calls == len(llm.requests) >= 3
    text = await usage.inner_text()
    assert "prompt +" in text and "completion tokens" in text and "cost not known for this model" in text
    assert "composer 1×" in text and "judge" in text and "reviewer 1×" in text
    rows = await page.eval_on_selector_all("#timeline tr[data-name=model_call]", "els => els.length")
    assert rows == calls
    await page.screenshot(path=str(ARTIFACTS / "model-run.png"), full_page=True)
    assert not page.js_errors  # type: ignore[attr-defined]


async def test_a_revise_loop_is_drawn_as_taken_and_the_retry_stands_out(
    model_server: Server, llm: ScriptedOpenAI, browser: Browser
) -> None:
    """The composer's first draft cites evidence that was never retrieved; the checks send it back once, the
    second draft ships. The page shows the loop as taken (live and reopened), the retry rows, both drafts."""
    llm.play(  # each model's script starts from its first reply again, requests counted afresh
        {
            "planner": [{"content": "not a plan"}],
            "composer": [{"content": FABRICATED}, {"content": GOOD}],
            "judge": [{"judge": "echo"}],
            "reviewer": [{"content": REVIEW_OK}],
        }
    )
    page = await new_page(browser, viewport={"width": 1280, "height": 900})
    run_id = await submit_question(page, model_server, QUESTION, template="legal_research")
    assert await wait_finished(page) == "done"
    await page.locator("#audit li[data-stage]").first.wait_for(state="attached")
    for view in ("live", "reopened"):
        if view == "reopened":
            await page.goto(f"{model_server.base_url}/runs/{run_id}")
        assert await page.locator("#report article[data-outcome=shipped]").count() == 1, view
        loop = page.locator("#topology path.edge.loop.active")
        assert await loop.count() >= 1, f"{view}: the revise loop is not drawn as taken"
        assert (await page.locator("#topology text.loop-label").text_content() or "").strip() == "revised ×1"
        retries = await page.eval_on_selector_all(
            "#timeline tr.retry", "els => els.map(r => [r.dataset.name, r.innerText])"
        )
        assert [name for name, _ in retries] == ["revise_requested", "draft_composed"], retries
        assert all("↻ retry" in text for _, text in retries)
        drafts = await page.eval_on_selector_all(
            "#audit li[data-stage=draft]", "els => els.map(e => e.dataset.attempt)"
        )
        assert drafts == ["1", "2"], drafts
        assert "unknown_anchor" in await page.inner_text("#audit")
    await page.screenshot(path=str(ARTIFACTS / "revise-loop.png"), full_page=True)
    assert not page.js_errors  # type: ignore[attr-defined]
