"""Accounts over a real app (lifespan, migrations, SQLite): sign-up/in/out, private runs (another user's run is a
404 on every route that names it: page, API, audit, stream, exports, delete), API tokens (made, used, revoked,
stored hashed), the cross-site and CSRF checks, per-user limits (429 with Retry-After), size limits, deletion,
the security log, and single-user mode bound to loopback only."""

from __future__ import annotations

import io
from typing import Any

from httpx import ASGITransport, AsyncClient
from sqlalchemy import func, select

from conftest import TEST_CSRF, form
from veracity.accounts import LOCAL
from veracity.cli import is_loopback, main
from veracity.db.engine import make_engine
from veracity.db.models import ApiToken, ArtifactVersion, AuditEntry, ResearchRun, RunEvent, SecurityEvent, UserSession
from veracity.settings import Settings

QUESTION = {"question": "coffee production and the coffee market", "template": "market_brief", "corpus": "small"}
PASSWORD = "correct horse battery"


def auth_settings(url: str, **auth: Any) -> Settings:
    limits = auth.pop("limits", {})
    return Settings(
        database={"url": url}, corpus={"autoload_wiki": False}, limits=limits, auth={"enabled": True, **auth}
    )


def browser_of(client: AsyncClient) -> AsyncClient:
    """Another browser on the same server: its own cookies (and its own CSRF cookie)."""
    other = AsyncClient(transport=ASGITransport(app=client.app), base_url="http://testserver")  # type: ignore[attr-defined]
    other.cookies.set("veracity_csrf", TEST_CSRF)
    other.app = client.app  # type: ignore[attr-defined]
    return other


async def signup(client: AsyncClient, name: str) -> Any:
    return await client.post("/signup", data=form(username=name, password=PASSWORD, confirm=PASSWORD))


async def rows(url: str, table: Any, *where: Any) -> int:
    engine = make_engine(url)
    async with engine.connect() as conn:
        count = await conn.scalar(select(func.count()).select_from(table).where(*where))
    await engine.dispose()
    return int(count or 0)


async def start(client: AsyncClient, **headers: str) -> str:
    response = await client.post("/runs", data=form(**QUESTION), headers=headers)
    assert response.status_code == 303, response.text
    run_id = response.headers["location"].rsplit("/", 1)[1]
    await client.app.state.service.wait(run_id)  # type: ignore[attr-defined]
    return run_id


async def test_signed_out_browsers_go_to_signin_and_scripts_get_401(client_for, small_db_url) -> None:
    client = await client_for(auth_settings(small_db_url))
    page = await client.get("/runs/" + "a" * 32, headers={"accept": "text/html"})
    assert page.status_code == 303 and page.headers["location"] == "/signin?next=%2Fruns%2F" + "a" * 32
    for method, url in [
        ("GET", "/v1/research"),
        ("GET", "/v1/templates"),
        ("POST", "/v1/research/stream"),
        ("GET", "/openapi.json"),
        ("GET", "/docs"),
        ("GET", f"/v1/research/{'a' * 32}/audit"),
    ]:
        response = await client.request(method, url, json=QUESTION if method == "POST" else None)
        assert response.status_code == 401, (url, response.text)
        assert response.json()["error"]["code"] == "unauthorized"
        assert response.headers["www-authenticate"] == "Bearer"
    assert await rows(small_db_url, ResearchRun) == 0
    health = (await client.get("/healthz")).json()
    assert health["status"] == "ok" and "corpora" not in health  # what is stored is for admins


async def test_first_signup_is_the_admin_and_later_ones_need_an_admin(client_for, small_db_url) -> None:
    client = await client_for(auth_settings(small_db_url))
    assert "create the first one" in (await client.get("/signin")).text
    response = await signup(client, "ada")
    assert response.status_code == 303 and "veracity_session" in response.cookies
    home = await client.get("/")
    assert "ada (admin)" in home.text and "Your runs" in home.text
    other = browser_of(client)
    closed = await signup(other, "bob")
    assert closed.status_code == 403 and "made by an admin" in closed.text
    # The admin adds bob on the account page; bob signs in.
    added = await client.post("/account/users", data=form(username="bob", password=PASSWORD))
    assert added.status_code == 303
    wrong = await other.post("/signin", data=form(username="bob", password="not his password at all"))
    assert wrong.status_code == 401 and "do not match" in wrong.text
    right = await other.post("/signin", data=form(username="bob", password=PASSWORD, next="//evil.example/x"))
    assert right.status_code == 303 and right.headers["location"] == "/"  # never off-site after sign-in
    assert "bob" in (await other.get("/")).text and "(admin)" not in (await other.get("/")).text
    out = await other.post("/signout", data=form())
    assert out.status_code == 303
    assert (await other.get("/", headers={"accept": "text/html"})).status_code == 303  # signed out for real
    assert await rows(small_db_url, UserSession) == 1  # ada's only: bob's session row is gone
    actions = [a for (a,) in await _log(small_db_url)]
    assert actions == ["signup", "user_added", "signin_failed", "signin", "signout"]
    await other.aclose()


async def _log(url: str) -> list[tuple[str]]:
    engine = make_engine(url)
    async with engine.connect() as conn:
        found = (await conn.execute(select(SecurityEvent.action).order_by(SecurityEvent.id))).all()
    await engine.dispose()
    return [tuple(r) for r in found]


async def test_a_users_run_is_a_404_to_everyone_else_on_every_route(client_for, small_db_url) -> None:
    client = await client_for(auth_settings(small_db_url, open_signup=True))
    await signup(client, "ada")  # the admin
    alice, bob = browser_of(client), browser_of(client)
    await signup(alice, "alice")
    await signup(bob, "bob")
    run_id = await start(alice)
    assert (await alice.get(f"/runs/{run_id}")).status_code == 200
    for url in [
        f"/runs/{run_id}",
        f"/v1/research/{run_id}",
        f"/v1/research/{run_id}/audit",
        f"/v1/research/{run_id}/versions",
        f"/runs/{run_id}/report.md",
        f"/runs/{run_id}/report.json",
        f"/runs/{run_id}/report.pdf",
        f"/runs/{run_id}/report.docx",
        f"/v1/research/{run_id}/events",
        f"/runs/{run_id}/live",
        f"/runs/{run_id}/delete",
    ]:
        response = await bob.get(url)
        assert response.status_code == 404, (url, response.status_code)
        assert run_id not in response.text or "No run with ID" in response.text
        assert (await client.get(url)).status_code == 200, url  # the admin sees every run
    for url in [f"/v1/research/{run_id}/cancel", f"/v1/research/{run_id}/rerun"]:
        assert (await bob.post(url)).status_code == 404
    assert (await bob.delete(f"/v1/research/{run_id}")).status_code == 404
    assert (await bob.post(f"/runs/{run_id}/delete", data=form())).status_code == 404
    assert (await bob.get(f"/runs/open?run_id={run_id}")).status_code == 404
    # Lists: each user their own; the admin everyone's.
    assert run_id in (await alice.get("/")).text and run_id not in (await bob.get("/")).text
    assert [r["run_id"] for r in (await bob.get("/v1/research")).json()["runs"]] == []
    assert [r["run_id"] for r in (await client.get("/v1/research")).json()["runs"]] == [run_id]
    assert await rows(small_db_url, ResearchRun) == 1
    await alice.aclose()
    await bob.aclose()


async def test_search_and_pages_of_your_runs(client_for, small_db_url) -> None:
    client = await client_for(auth_settings(small_db_url, limits={"runs_per_minute": 100}))
    await signup(client, "ada")
    ids = []
    for i in range(22):
        q = {**QUESTION, "question": f"coffee market question {i}" if i % 2 else f"tea 100% trade question {i}"}
        response = await client.post("/runs", data=form(**q))
        ids.append(response.headers["location"].rsplit("/", 1)[1])
        await client.app.state.service.wait(ids[-1])
    first = (await client.get("/")).text
    assert ids[-1] in first and ids[1] not in first and 'id="runs-next"' in first
    second = (await client.get("/?page=2")).text
    assert ids[1] in second and ids[0] in second and ids[-1] not in second and 'id="runs-prev"' in second
    found = (await client.get("/v1/research", params={"q": "100%"})).json()["runs"]
    assert len(found) == 11 and all("100%" in r["question"] for r in found)
    assert (await client.get("/v1/research", params={"q": "_"})).json()["runs"] == []  # LIKE wildcards are literal
    assert "No run of yours asks that." in (await client.get("/?q=nothing+like+this")).text


async def test_api_tokens_are_shown_once_stored_hashed_and_revocable(client_for, small_db_url) -> None:
    client = await client_for(auth_settings(small_db_url))
    await signup(client, "ada")
    made = await client.post("/v1/tokens", json={"name": "nightly brief"})
    assert made.status_code == 201
    secret, token_id = made.json()["token"], made.json()["id"]
    assert secret.startswith("vrc_") and len(secret) > 40
    script = AsyncClient(transport=ASGITransport(app=client.app), base_url="http://testserver")  # no cookies at all
    headers = {"Authorization": f"Bearer {secret}"}
    started = await script.post("/v1/research/stream", json=QUESTION, headers=headers)
    assert started.status_code == 200 and "event: complete" in started.text
    listed = (await client.get("/v1/tokens")).json()["tokens"]
    assert [t["name"] for t in listed] == ["nightly brief"] and "token" not in listed[0]
    engine = make_engine(small_db_url)
    async with engine.connect() as conn:
        stored = (await conn.execute(select(ApiToken.token_hash, ApiToken.prefix))).one()
        log_text = str((await conn.execute(select(SecurityEvent.detail, SecurityEvent.target))).all())
    await engine.dispose()
    assert secret not in stored[0] and stored[1] == secret[:10] and secret not in log_text
    assert (await client.delete(f"/v1/tokens/{token_id}")).status_code == 204
    refused = await script.get("/v1/research", headers=headers)
    assert refused.status_code == 401 and "revoked" in refused.json()["error"]["message"]
    assert (await client.delete(f"/v1/tokens/{token_id}")).status_code == 404  # already revoked
    actions = [a for (a,) in await _log(small_db_url)]
    assert actions == ["signup", "token_created", "token_used", "token_revoked", "token_refused"]
    await script.aclose()


async def test_cross_site_and_csrf_less_state_changes_are_refused_and_change_nothing(client_for, small_db_url) -> None:
    client = await client_for(Settings(database={"url": small_db_url}, corpus={"autoload_wiki": False}))
    attempts = [
        ("/runs", {"data": QUESTION}),  # a form without the CSRF field
        ("/runs", {"data": {**QUESTION, "csrf_token": "guessed-" + "x" * 30}}),
        ("/runs", {"data": form(**QUESTION), "headers": {"origin": "http://attacker.test"}}),
        ("/runs", {"data": form(**QUESTION), "headers": {"origin": "null"}}),
        ("/runs", {"data": form(**QUESTION), "headers": {"sec-fetch-site": "cross-site"}}),
        ("/runs", {"data": form(**QUESTION), "headers": {"origin": "http://testserver:8001"}}),  # another port
        ("/v1/research/stream", {"json": QUESTION, "headers": {"origin": "http://attacker.test"}}),
        ("/v1/research/stream", {"content": '{"question": "coffee"}', "headers": {"sec-fetch-site": "same-site"}}),
    ]
    for url, kwargs in attempts:
        response = await client.post(url, **kwargs)
        assert response.status_code == 403, (url, kwargs, response.status_code)
    assert await rows(small_db_url, ResearchRun) == 0
    # The same form from this site's own page goes through.
    ok = await client.post("/runs", data=form(**QUESTION), headers={"origin": "http://testserver"})
    assert ok.status_code == 303


async def test_per_user_limits_answer_429_with_retry_after(client_for, small_db_url) -> None:
    client = await client_for(auth_settings(small_db_url, limits={"runs_per_minute": 2}))
    await signup(client, "ada")
    await start(client)
    await start(client)
    refused = await client.post("/v1/research/stream", json=QUESTION)
    assert refused.status_code == 429 and 1 <= int(refused.headers["retry-after"]) <= 61
    assert "2 runs in the last minute" in refused.json()["error"]["message"]
    page = await client.post("/runs", data=form(**QUESTION))
    assert page.status_code == 429 and "Retry-After" in page.headers and "limit is 2" in page.text
    assert await rows(small_db_url, ResearchRun) == 2


async def test_runs_at_once_and_streams_per_user(client_for, small_db_url) -> None:
    settings = Settings(
        database={"url": small_db_url},
        corpus={"autoload_wiki": False},
        limits={"concurrent_runs": 1, "streams_per_user": 1, "event_delay_ms": 200},
    )
    client = await client_for(settings)
    first = await client.post("/runs", data=form(**QUESTION))
    run_id = first.headers["location"].rsplit("/", 1)[1]
    second = await client.post("/v1/research/stream", json=QUESTION)
    assert second.status_code == 429 and "1 runs queued or running" in second.json()["error"]["message"]
    # One live view is open (httpx's in-process transport cannot hold a stream open, so the slot is taken as the
    # stream route takes it): the next one is refused until it is given back.
    slots = client.app.state.streams
    slot = slots.take(LOCAL)
    extra = await client.get(f"/runs/{run_id}/live")
    assert extra.status_code == 429 and "live views" in extra.json()["error"]["message"]
    assert (await client.get(f"/v1/research/{run_id}/events")).status_code == 429
    slots.give(slot)
    assert (await client.get(f"/v1/research/{run_id}/events")).status_code == 200  # the slot was given back
    assert slots.open == {}  # and the finished stream gave its own back


async def test_request_size_limits(client_for, small_db_url) -> None:
    client = await client_for(Settings(database={"url": small_db_url}, corpus={"autoload_wiki": False}))
    big = await client.post(
        "/v1/verify", content=b"{" + b" " * 1_100_000 + b"}", headers={"content-type": "application/json"}
    )
    assert big.status_code == 413 and big.json()["error"]["code"] == "body_too_large"

    async def chunks() -> Any:
        for _ in range(30):
            yield b" " * 50_000

    streamed = await client.post("/v1/research/stream", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413
    many = await client.get("/v1/templates", headers={f"x-h{i}": "1" for i in range(150)})
    assert many.status_code == 431
    wide = await client.get("/v1/templates", headers={"x-big": "a" * 20_000})
    assert wide.status_code == 431
    assert await rows(small_db_url, ResearchRun) == 0


async def test_delete_removes_the_run_its_events_audit_and_reports(client_for, small_db_url) -> None:
    settings = Settings(database={"url": small_db_url}, corpus={"autoload_wiki": False})
    client = await client_for(settings)
    run_id = await start(client)
    keep = await start(client)
    confirm = await client.get(f"/runs/{run_id}/delete")
    assert confirm.status_code == 200 and "cannot be undone" in confirm.text and QUESTION["question"] in confirm.text
    for table in (RunEvent, AuditEntry, ArtifactVersion):
        assert await rows(small_db_url, table, table.run_id == run_id) > 0
    gone = await client.post(f"/runs/{run_id}/delete", data=form())
    assert gone.status_code == 303
    for table in (RunEvent, AuditEntry, ArtifactVersion):
        assert await rows(small_db_url, table, table.run_id == run_id) == 0
        assert await rows(small_db_url, table, table.run_id == keep) > 0
    assert await rows(small_db_url, ResearchRun) == 1
    assert (await client.get(f"/v1/research/{run_id}")).status_code == 404
    assert (await client.delete(f"/v1/research/{keep}")).status_code == 204
    assert await rows(small_db_url, ResearchRun) == 0
    assert [a for (a,) in await _log(small_db_url)] == ["run_deleted", "run_deleted"]


async def test_an_active_run_is_not_deleted(client_for, small_db_url) -> None:
    client = await client_for(
        Settings(database={"url": small_db_url}, corpus={"autoload_wiki": False}, limits={"event_delay_ms": 300})
    )
    response = await client.post("/runs", data=form(**QUESTION))
    run_id = response.headers["location"].rsplit("/", 1)[1]
    refused = await client.delete(f"/v1/research/{run_id}")
    assert refused.status_code == 409 and "cancel it" in refused.json()["error"]["message"]
    assert await rows(small_db_url, ResearchRun) == 1
    await client.post(f"/v1/research/{run_id}/cancel")
    await client.app.state.service.wait(run_id)
    assert (await client.delete(f"/v1/research/{run_id}")).status_code == 204


def test_serve_refuses_a_network_address_without_accounts(monkeypatch, capsys) -> None:
    monkeypatch.delenv("VERACITY_AUTH__ENABLED", raising=False)
    from veracity.settings import get_settings

    get_settings.cache_clear()
    assert main(["serve", "--host", "0.0.0.0", "--port", "1"]) == 2
    assert "VERACITY_AUTH__ENABLED=true" in capsys.readouterr().err
    get_settings.cache_clear()
    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "[::1]", "localhost", "127.8.9.1")] == [True] * 5
    assert [is_loopback(h) for h in ("0.0.0.0", "192.168.1.5", "::", "example.org")] == [False] * 4


def test_cli_users_tokens_and_the_security_log(monkeypatch, capsys, db_url) -> None:
    from veracity.settings import get_settings

    monkeypatch.setenv("VERACITY_DATABASE__URL", db_url)
    get_settings.cache_clear()
    try:
        monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
        assert main(["user", "add", "ada", "--admin", "--password-stdin"]) == 0
        monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
        assert main(["user", "add", "ada", "--password-stdin"]) == 2  # taken: bad input
        monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
        assert main(["user", "add", "bob", "--password-stdin"]) == 2
        monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
        assert main(["user", "add", "bad name!", "--password-stdin"]) == 2
        assert main(["token", "create", "ada", "--name", "cron"]) == 0
        out = capsys.readouterr()
        secret = out.out.strip().splitlines()[-1]
        assert secret.startswith("vrc_")
        assert "taken" in out.err and "10–256 characters" in out.err and "A user name is" in out.err
        assert main(["token", "create", "nobody", "--name", "x"]) == 1
        assert main(["token", "revoke", "1"]) == 0 and main(["token", "revoke", "1"]) == 1
        assert main(["user", "list"]) == 0 and "ada\tadmin" in capsys.readouterr().out
        assert main(["security-log"]) == 0
        log = capsys.readouterr().out
        assert '"action": "user_added"' in log and '"action": "token_revoked"' in log and secret not in log
    finally:
        get_settings.cache_clear()


async def test_the_api_docs_are_open_in_single_user_mode_and_declare_the_account_errors(
    client_for, small_db_url
) -> None:
    client = await client_for(Settings(database={"url": small_db_url}, corpus={"autoload_wiki": False}))
    docs = await client.get("/docs")
    assert docs.status_code == 200 and "/openapi.json" in docs.text
    schema = (await client.get("/openapi.json")).json()
    stream = schema["paths"]["/v1/research/stream"]["post"]["responses"]
    assert {"401", "403", "413", "429", "431"} <= set(stream)  # what a caller may meet before the run starts
    assert "/signin" not in schema["paths"] and "/openapi.json" not in schema["paths"]  # pages are not the API
