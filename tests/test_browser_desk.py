"""The desk in a real browser (Debian's Chromium) against a real ``veracity serve``: upload files into a new corpus
(chosen, and dropped on the form) and watch each file's result arrive live; the corpora and corpus pages; remove a
document and delete a corpus after its confirmation page; ask a question of the uploaded corpus, ask a follow-up
(both pages show the thread), then add a document and refresh the report into version 2 and read what changed.
Desktop (1366×768) and phone (390×844); screenshots of each page go to test-artifacts/desk-*.png."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page

from conftest import ARTIFACTS
from test_browser import Server, new_page, serve

DESKTOP = {"width": 1366, "height": 768}
PHONE = {"width": 390, "height": 844}
SOLAR = "# Rooftop solar\n\nThe rooftop array on building 4 produced 38 megawatt-hours of electricity in 2025.\n"
SOLAR_2026 = (
    "# Rooftop solar 2026\n\nThe rooftop array on building 4 produced 41 megawatt-hours of electricity in 2026.\n"
)
QUESTION = "How much electricity did the rooftop array on building 4 produce?"


@pytest.fixture(scope="module")
def desk_server(wiki_template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve(wiki_template_db, tmp_path_factory.mktemp("desk-server"), VERACITY_LIMITS__EVENT_DELAY_MS="0")


@pytest.fixture(scope="module")
def upload_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("upload-files")
    rows = [
        {"id": f"n{i}", "title": f"Plant note {i}", "text": f"Plant {i} generated {100 + i} megawatt-hours last year."}
        for i in range(600)  # enough passages that embedding them takes a moment: the page sees progress live
    ]
    files = {
        "solar.md": SOLAR,
        "plants.jsonl": "\n".join(json.dumps(r) for r in rows) + "\n",
        "photo.png": "not an image a corpus can hold",
        "solar-2026.md": SOLAR_2026,
        "dropped.txt": "A dropped note: the inverter was replaced in March.",
    }
    for name, body in files.items():
        (folder / name).write_text(body, encoding="utf-8")
    return {name: folder / name for name in files}


async def _upload(page: Page, server: Server, paths: list[Path], corpus: str, new: bool) -> str:
    await page.goto(f"{server.base_url}/corpora")
    await page.set_input_files("#files", [str(p) for p in paths])
    if new:
        await page.fill("#new_corpus", corpus)
    else:
        await page.select_option("#corpus", corpus)
    await page.click("#upload-button")
    await page.wait_for_url(re.compile(r".*/uploads/[0-9a-f]{32}$"))
    return page.url.rsplit("/", 1)[1]


async def test_upload_with_live_progress_corpora_pages_and_removal(
    browser: Browser, desk_server: Server, upload_files
) -> None:
    page = await new_page(browser, viewport=DESKTOP)
    await page.goto(f"{desk_server.base_url}/corpora")
    assert await page.locator("#nav-corpora").is_visible()
    await page.screenshot(path=str(ARTIFACTS / "desk-corpora-desktop.png"))
    # Dropping files on the form's zone chooses them (the plain file input works without JavaScript).
    await page.evaluate(
        """() => { const dt = new DataTransfer();
          dt.items.add(new File(['A dropped note.'], 'dropped.txt', {type: 'text/plain'}));
          const drop = new DragEvent('drop', {dataTransfer: dt, bubbles: true});
          document.getElementById('dropzone').dispatchEvent(drop); }"""
    )
    assert "1 chosen: dropped.txt" in await page.locator("#chosen-files").inner_text()
    assert await page.evaluate("document.getElementById('files').files[0].name") == "dropped.txt"

    paths = [upload_files["solar.md"], upload_files["plants.jsonl"], upload_files["photo.png"]]
    await _upload(page, desk_server, paths, "site-notes", new=True)
    # The page was served before the upload ended and follows it live: no reload, the rows arrive over SSE.
    await page.evaluate("window.__samePage = true")
    await page.wait_for_selector("#upload-status [data-state=upload_complete]", timeout=60_000)
    assert await page.evaluate("window.__samePage === true")
    rows = {
        await li.get_attribute("data-name"): await li.get_attribute("data-outcome")
        for li in await page.locator("#upload-files li").all()
    }
    assert rows == {"solar.md": "ingested", "plants.jsonl": "ingested", "photo.png": "refused"}
    assert "Unsupported file type '.png'" in await page.locator("[data-name='photo.png']").inner_text()
    assert "601 added" in await page.locator("#upload-status").inner_text()
    await page.screenshot(path=str(ARTIFACTS / "desk-upload-desktop.png"))

    await page.click("text=See the corpus")
    await page.wait_for_url(f"{desk_server.base_url}/corpora/site-notes")
    assert "601 documents" in await page.locator("#corpus-meta").inner_text()
    await page.screenshot(path=str(ARTIFACTS / "desk-corpus-desktop.png"))
    # Remove one document (a confirmation first).
    row = page.locator("tr", has_text="Plant note 599")
    await row.locator("summary").click()
    await row.locator("button.danger").click()
    await page.wait_for_url(re.compile(r".*/corpora/site-notes\?removed=\d+$"))
    assert "600 documents" in await page.locator("#corpus-meta").inner_text()

    phone = await new_page(browser, viewport=PHONE)
    for path, name in [("/corpora", "corpora"), ("/corpora/site-notes", "corpus")]:
        await phone.goto(f"{desk_server.base_url}{path}")
        width = await phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"] + 1, f"{path} scrolls sideways on a phone ({width} px)"
        await phone.screenshot(path=str(ARTIFACTS / f"desk-{name}-phone.png"), full_page=True)

    # Delete the whole corpus, after its confirmation page.
    await page.click("#delete-corpus")
    assert "Delete corpus" in await page.locator("h1").inner_text()
    await page.click("#delete-corpus-form button.danger")
    await page.wait_for_url(f"{desk_server.base_url}/corpora?deleted=1")
    assert await page.locator("tr[data-corpus='site-notes']").count() == 0
    assert page.js_errors == []  # type: ignore[attr-defined]


async def _ask(page: Page, server: Server, question: str, corpus: str) -> str:
    await page.goto(f"{server.base_url}/")
    await page.fill("#question", question)
    await page.locator("input[name=template][value=answer]").check()
    await page.select_option("#corpus", corpus)
    await page.click("form.ask button[type=submit]")
    await page.wait_for_url(re.compile(r".*/runs/[0-9a-f]{32}$"))
    run_id = page.url.rsplit("/", 1)[1]
    await page.wait_for_selector("#status [data-status=done]", timeout=60_000)
    return run_id


async def test_follow_up_and_refresh_into_version_two_with_what_changed(
    browser: Browser, desk_server: Server, upload_files
) -> None:
    page = await new_page(browser, viewport=DESKTOP)
    await _upload(page, desk_server, [upload_files["solar.md"]], "roof", new=True)
    await page.wait_for_selector("#upload-status [data-state=upload_complete]", timeout=60_000)
    parent = await _ask(page, desk_server, QUESTION, "roof")
    assert "38 megawatt-hours" in await page.locator("#report").inner_text()

    # Follow-up: a new run linked to this one; both pages show the thread.
    await page.fill("#follow-up", "And in which year?")
    await page.click("#follow-up-form button[type=submit]")
    await page.wait_for_url(re.compile(r".*/runs/[0-9a-f]{32}$"))
    child = page.url.rsplit("/", 1)[1]
    assert child != parent
    await page.wait_for_selector("#status [data-status=done]", timeout=60_000)
    await page.reload()
    assert QUESTION in await page.locator("#ancestors").inner_text()
    await page.screenshot(path=str(ARTIFACTS / "desk-follow-up-desktop.png"))
    await page.goto(f"{desk_server.base_url}/runs/{parent}")
    assert "And in which year?" in await page.locator("#follow-ups").inner_text()

    # The corpus gains a document; refresh the report: version 2 of the same run, and what changed.
    await _upload(page, desk_server, [upload_files["solar-2026.md"]], "roof", new=False)
    await page.wait_for_selector("#upload-status [data-state=upload_complete]", timeout=60_000)
    await page.goto(f"{desk_server.base_url}/runs/{parent}")
    await page.click("#refresh-form button")
    await page.wait_for_url(re.compile(r".*/runs/[0-9a-f]{32}$"))
    assert page.url.rsplit("/", 1)[1] != parent
    await page.wait_for_selector("#status [data-status=done]", timeout=60_000)
    await page.reload()
    assert "refreshes" in await page.locator("#refresh-of").inner_text()
    await page.goto(f"{desk_server.base_url}/runs/{parent}")
    assert await page.locator("#artifact-version").get_attribute("data-version") == "2"
    await page.click("#changes-link")
    await page.wait_for_url(re.compile(rf".*/runs/{parent}/changes$"))
    changes = await page.locator("#changes").inner_text()
    assert "from version 1 to version 2" in changes
    assert "41 megawatt-hours" in await page.locator("#claims-added").inner_text()
    assert "Rooftop solar 2026" in await page.locator("#sources-added").inner_text()
    await page.screenshot(path=str(ARTIFACTS / "desk-changes-desktop.png"), full_page=True)
    phone = await new_page(browser, viewport=PHONE)
    await phone.goto(f"{desk_server.base_url}/runs/{parent}/changes")
    assert await phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"] + 1
    await phone.screenshot(path=str(ARTIFACTS / "desk-changes-phone.png"), full_page=True)
    await phone.goto(f"{desk_server.base_url}/runs/{child}")
    await phone.locator("#thread").scroll_into_view_if_needed()
    await phone.screenshot(path=str(ARTIFACTS / "desk-thread-phone.png"))
    assert page.js_errors == [] and phone.js_errors == []  # type: ignore[attr-defined]
