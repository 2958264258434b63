"""Accounts in a real browser (Debian's Chromium) against a real ``veracity serve`` with accounts on: sign up, out
and in; another user's run is a 404 by URL, API, stream and export; a page on another origin cannot start a run
(auto-submitted form, no-cors fetch) even in a signed-in browser; the per-minute limit answers 429; delete, after
its confirmation page, removes the run and everything of it. Screenshots go to test-artifacts/."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page

from conftest import ARTIFACTS
from test_browser import Server, _free_port, new_page, serve

PASSWORD = "correct horse battery"
QUESTION = "What is the aurora borealis?"


@pytest.fixture(scope="module")
def accounts_server(wiki_template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve(
        wiki_template_db,
        tmp_path_factory.mktemp("accounts-server"),
        VERACITY_AUTH__ENABLED="true",
        VERACITY_AUTH__OPEN_SIGNUP="true",
        VERACITY_LIMITS__RUNS_PER_MINUTE="3",
        VERACITY_LIMITS__EVENT_DELAY_MS="0",
    )


@pytest.fixture(scope="module")
def attacker(accounts_server: Server) -> Iterator[str]:
    """A page on another origin (another port of 127.0.0.1) that tries to start a run on the server two ways."""
    target = accounts_server.base_url
    page = f"""<!doctype html><html><body>
<form id="f" method="post" action="{target}/runs">
  <input name="question" value="forged question from another site"><input name="template" value="answer">
  <input name="csrf_token" value="guessed">
</form>
<script>
fetch("{target}/v1/research/stream", {{method: "POST", mode: "no-cors", credentials: "include",
  headers: {{"content-type": "text/plain"}}, body: JSON.stringify({{question: "forged by fetch"}})}})
  .finally(() => document.getElementById("f").submit());
</script></body></html>""".encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 — http.server's name
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", _free_port()), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()


def runs_of(server: Server) -> list[tuple[str, str, int | None]]:
    with sqlite3.connect(server.db_path) as conn:
        return [tuple(r) for r in conn.execute("SELECT id, question, user_id FROM research_runs ORDER BY created_at")]


def table_count(server: Server, table: str, run_id: str) -> int:
    with sqlite3.connect(server.db_path) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table} WHERE run_id = ?", (run_id,)).fetchone()[0])


async def sign_up(page: Page, server: Server, name: str) -> None:
    await page.goto(server.base_url + "/signup")
    await page.fill("#username", name)
    await page.fill("#password", PASSWORD)
    await page.fill("#confirm", PASSWORD)
    await page.click("#signup-form button[type=submit]")
    await page.wait_for_selector("#account-link")


async def ask(page: Page, server: Server, question: str = QUESTION) -> str:
    await page.goto(server.base_url + "/")
    await page.fill("#question", question)
    await page.click("form.ask button[type=submit]")
    await page.wait_for_url("**/runs/**")
    await page.wait_for_selector("#status [data-status=done]", timeout=60_000)
    return page.url.rsplit("/", 1)[1]


@pytest.mark.browser
async def test_accounts_privacy_csrf_limits_and_delete_in_a_browser(
    browser: Browser, accounts_server: Server, attacker: str
) -> None:
    server = accounts_server
    ada = await new_page(browser)
    await ada.goto(server.base_url + "/")
    assert "/signin" in ada.url  # signed out: the desk asks for a sign-in first
    assert await ada.locator("#first-account").count() == 1
    await sign_up(ada, server, "ada")
    assert await ada.inner_text("#account-link") == "ada (admin)"
    await ada.screenshot(path=str(ARTIFACTS / "accounts-home-admin.png"), full_page=False)

    # Sign out, then in again.
    await ada.click("#signout-form button")
    await ada.wait_for_url("**/signin")
    await ada.fill("#username", "ada")
    await ada.fill("#password", "wrong password here")
    await ada.click("#signin-form button[type=submit]")
    assert "do not match" in await ada.inner_text("#form-error")
    await ada.fill("#password", PASSWORD)
    await ada.click("#signin-form button[type=submit]")
    await ada.wait_for_selector("#account-link")
    run_id = await ask(ada, server)
    assert [(r[0], r[1]) for r in runs_of(server)] == [(run_id, QUESTION)] and runs_of(server)[0][2] is not None

    # Bob, in another browser, cannot see ada's run by any route; his home page does not list it.
    bob = await new_page(browser)
    await sign_up(bob, server, "bob")
    assert run_id not in await bob.content()
    for path in (
        f"/runs/{run_id}",
        f"/runs/{run_id}/report.md",
        f"/v1/research/{run_id}",
        f"/v1/research/{run_id}/events",
        f"/runs/{run_id}/live",
        f"/v1/research/{run_id}/audit",
    ):
        response = await bob.request.get(server.base_url + path)
        assert response.status == 404, path
    shown = await bob.goto(f"{server.base_url}/runs/{run_id}")
    assert shown is not None and shown.status == 404 and "No run with ID" in await bob.inner_text("main")
    assert QUESTION not in await bob.content()
    await bob.screenshot(path=str(ARTIFACTS / "accounts-other-users-run-404.png"))

    # A page on another origin, opened in ada's signed-in browser, cannot start a run either way.
    before = runs_of(server)
    forged = await ada.context.new_page()
    refused = []
    forged.on("response", lambda r: refused.append(r.status) if r.url.startswith(server.base_url) else None)
    await forged.goto(attacker)
    await forged.wait_for_load_state("networkidle")
    await forged.wait_for_timeout(500)
    assert runs_of(server) == before
    assert 403 in refused and "refused a cross-site POST /runs" in server.log()
    await forged.close()

    # The per-minute limit (3 here): ada has started 1; two more pass, the fourth is refused with Retry-After.
    await ask(ada, server, "What is a glacier?")
    await ask(ada, server, "What is a volcano?")
    await ada.goto(server.base_url + "/")
    await ada.fill("#question", "What is a fjord?")
    async with ada.expect_response(lambda r: r.url.endswith("/runs") and r.request.method == "POST") as info:
        await ada.click("form.ask button[type=submit]")
    response = await info.value
    assert response.status == 429 and 1 <= int(response.headers["retry-after"]) <= 61
    assert "limit is 3" in await ada.inner_text("#form-error")
    assert len(runs_of(server)) == 3

    # Delete the first run after its confirmation page: the run, its events, audit trail and reports go.
    await ada.goto(f"{server.base_url}/runs/{run_id}")
    await ada.click("#delete-link")
    await ada.wait_for_selector("#delete-form")
    await ada.screenshot(path=str(ARTIFACTS / "accounts-delete-confirm.png"))
    assert table_count(server, "run_events", run_id) > 0 and table_count(server, "artifact_versions", run_id) == 1
    await ada.click("#delete-form button[type=submit]")
    await ada.wait_for_url(server.base_url + "/?deleted=1")
    assert run_id not in {r[0] for r in runs_of(server)}
    for table in ("run_events", "audit_entries", "artifact_versions"):
        assert table_count(server, table, run_id) == 0, table
    assert (await ada.request.get(f"{server.base_url}/v1/research/{run_id}")).status == 404
    assert ada.js_errors == [] and bob.js_errors == []  # type: ignore[attr-defined]
    with sqlite3.connect(server.db_path) as conn:
        actions = [a for (a,) in conn.execute("SELECT action FROM security_log ORDER BY id")]
    assert actions == ["signup", "signout", "signin_failed", "signin", "signup", "run_deleted"]
    await ada.context.close()
    await bob.context.close()
