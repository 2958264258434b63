"""Every bad input over HTTP gets a clear error and changes nothing (issue 17, item 6).

One app over one SQLite database serves the whole module (a started app costs a second; these are hundreds of
requests). Each case sends one distinct bad input and asserts the status, the message (a substring, from
``veracity.messages`` where one applies), the documented body ``{"error": {"code", "message"}}`` (or the error
page for a browser form) and that ``research_runs``, ``run_events``, ``documents`` and ``chunks`` hold exactly
the rows they held before.
"""

from __future__ import annotations

import asyncio
import html
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from conftest import SMALL_CORPUS, TEST_CSRF, form, load_docs, make_settings, sqlite_url
from veracity import messages
from veracity.db.migrate import upgrade
from veracity.inputs import MAX_CURSOR
from veracity.web.app import create_app

TABLES = ("research_runs", "run_events", "documents", "chunks")
UNKNOWN_RUN = "0" * 32
LIMIT = 2000  # VERACITY_LIMITS__MAX_QUESTION_CHARS's default
SAYS_NOTHING = messages.QUESTION_SAYS_NOTHING
EMPTY = messages.QUESTION_EMPTY
NUL = "a NUL character"
SURROGATE = "a lone surrogate"


class Desk:
    """The module's app, its database file and one finished run."""

    def __init__(self, client: TestClient, db: Path, run_id: str) -> None:
        self.client, self.db, self.run_id = client, db, run_id

    def counts(self) -> dict[str, int]:
        with sqlite3.connect(self.db) as conn:
            return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}  # noqa: S608

    def send(self, method: str, url: str, **kwargs: Any) -> Any:
        """The response to one request, which must have changed no table."""
        before = self.counts()
        if isinstance(kwargs.get("data"), dict):  # a page's form carries the CSRF field, as the page sends it
            kwargs["data"] = {**kwargs["data"], "csrf_token": TEST_CSRF}
        response = self.client.request(method, url, **kwargs)
        assert self.counts() == before, f"{method} {url} changed the tables"
        return response


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desk]:
    db = tmp_path_factory.mktemp("bad-input") / "desk.db"
    url = sqlite_url(db)
    upgrade(url)
    asyncio.run(load_docs(url, "small", SMALL_CORPUS))
    with TestClient(create_app(make_settings(url)), raise_server_exceptions=False, follow_redirects=False) as client:
        client.cookies.set("veracity_csrf", TEST_CSRF)
        started = client.post("/runs", data=form(question="coffee market", template="answer", corpus="small"))
        assert started.status_code == 303, started.text
        run_id = started.headers["location"].rsplit("/", 1)[1]
        deadline = time.monotonic() + 60
        while client.get(f"/v1/research/{run_id}").status_code != 200:
            assert time.monotonic() < deadline, "the fixture run did not finish"
            time.sleep(0.1)
        yield Desk(client, db, run_id)


def json_error(response: Any, status: int, code: str, message: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) >= {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code
    assert message in body["error"]["message"], body["error"]["message"]


def page_error(response: Any, status: int, message: str) -> None:
    assert response.status_code == status, response.text[:300]
    assert response.headers["content-type"].startswith("text/html")
    assert message in html.unescape(response.text)


# ---- questions: effectively empty, unstorable, too long --------------------------------------------------------

EMPTY_QUESTIONS = ["", " ", "\t\n", "\u00a0", "\u3000", "\r\n\r\n", "\x1c\x1d\x1e\x1f", "\x85", "\u2028\u2029"]
NOTHING_QUESTIONS = [
    "\u200b",  # zero-width space
    "\u200b\u200c\u200d",  # zero-width space, non-joiner, joiner
    "\ufeff",  # byte-order mark
    "\u2060",  # word joiner
    "\u00ad",  # soft hyphen
    "\u202e",  # right-to-left override
    "\u200e\u200f",  # direction marks
    "\U000e0001",  # language tag
    "\x01\x02\x03",  # control characters
    "\x7f",  # delete
    "\x1b[",  # an escape sequence's start
    "???",
    "...",
    "!!!",
    "-- --",
    "()[]{}",
    "\"'`",
    "#$%&*",
    "\u3002",  # ideographic full stop
    "\U0001f642",  # an emoji alone
    "\u0300\u0301",  # combining accents alone
    "\u200b \u200b\t\u2060",  # invisible characters and spaces mixed
]
UNSTORABLE_QUESTIONS = [
    ("\x00", NUL),
    ("coffee\x00", NUL),
    ("\x00coffee market", NUL),
    ("coffee\x00\x00market", NUL),
    ("\ud800", SURROGATE),
    ("coffee \udfff", SURROGATE),
    ("\udc80\udc81", SURROGATE),
    ("tea a\ud83d", SURROGATE),  # half an emoji
]
LONG_QUESTIONS = ["x" * (LIMIT + 1), "coffee " * 1000, "q" * 500_000]  # a body over 1 MB is a 413 (test_accounts)


def question_cases() -> list[tuple[str, str]]:
    return (
        [(q, EMPTY) for q in EMPTY_QUESTIONS]
        + [(q, SAYS_NOTHING) for q in NOTHING_QUESTIONS]
        + list(UNSTORABLE_QUESTIONS)
        + [(q, f"characters long; the limit is {LIMIT}") for q in LONG_QUESTIONS]
    )


def raw_json(body: dict[str, Any]) -> bytes:
    """JSON with lone surrogates kept as their escapes, as any client can send them."""
    return json.dumps(body).encode()


@pytest.mark.parametrize(("question", "message"), question_cases(), ids=repr)
def test_api_refuses_a_bad_question(desk: Desk, question: str, message: str) -> None:
    body = raw_json({"question": question, "corpus": "small"})
    response = desk.send("POST", "/v1/research/stream", content=body, headers={"content-type": "application/json"})
    json_error(response, 422, "bad_input", message)


@pytest.mark.parametrize(("question", "message"), [c for c in question_cases() if SURROGATE not in c[1]], ids=repr)
def test_form_refuses_a_bad_question_on_the_home_page(desk: Desk, question: str, message: str) -> None:
    """A form cannot carry a lone surrogate (its bytes are decoded with replacement); everything else it can."""
    response = desk.send("POST", "/runs", data={"question": question, "template": "answer", "corpus": "small"})
    page_error(response, 422, message)


# ---- templates and corpora -------------------------------------------------------------------------------------

BAD_TEMPLATES = [
    ("nope", "Unknown template 'nope'"),
    ("../etc/passwd", "Unknown template '../etc/passwd'"),
    ("ANSWER", "Unknown template 'ANSWER'"),
    ("answer ", "Unknown template 'answer '"),
    ("", "Unknown template ''"),
    ("x" * 300, "Unknown template"),
    ("answer\x00", "The template name cannot be stored: it holds a NUL character"),
    ("\ud800", "The template name cannot be stored: it holds a lone surrogate"),
    ("answer\udfff", "The template name cannot be stored: it holds a lone surrogate"),
]
BAD_CORPORA = [
    ("nope", "Unknown corpus 'nope'. Known corpora:"),
    ("../small", "Unknown corpus '../small'"),
    ("SMALL", "Unknown corpus 'SMALL'"),
    ("small\x00", "The corpus name cannot be stored: it holds a NUL character"),
    ("\x00", "The corpus name cannot be stored: it holds a NUL character"),
    ("\ud800", "The corpus name cannot be stored: it holds a lone surrogate"),
    ("sm\udc00all", "The corpus name cannot be stored: it holds a lone surrogate"),
    ("x" * 5000, "Unknown corpus"),
]


@pytest.mark.parametrize(("template", "message"), BAD_TEMPLATES, ids=repr)
def test_api_refuses_a_bad_template(desk: Desk, template: str, message: str) -> None:
    body = raw_json({"question": "coffee market", "template": template, "corpus": "small"})
    response = desk.send("POST", "/v1/research/stream", content=body, headers={"content-type": "application/json"})
    json_error(response, 422, "bad_input", message)


@pytest.mark.parametrize(("corpus", "message"), BAD_CORPORA, ids=repr)
def test_api_refuses_a_bad_corpus(desk: Desk, corpus: str, message: str) -> None:
    body = raw_json({"question": "coffee market", "corpus": corpus})
    response = desk.send("POST", "/v1/research/stream", content=body, headers={"content-type": "application/json"})
    json_error(response, 422, "bad_input", message)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    # An empty form field is an absent one (the default template, the template's corpus): not bad input.
    [("template", t, m) for t, m in BAD_TEMPLATES if t and "\ud800" not in t and "\udfff" not in t]
    + [("corpus", c, m) for c, m in BAD_CORPORA if c and not any("\ud800" <= ch <= "\udfff" for ch in c)],
    ids=repr,
)
def test_form_refuses_a_bad_template_or_corpus(desk: Desk, field: str, value: str, message: str) -> None:
    form = {"question": "coffee market", "template": "answer", "corpus": "small", field: value}
    response = desk.send("POST", "/runs", data=form)
    page_error(response, 422, message)


# ---- bodies that are not the documented shape ------------------------------------------------------------------

UNREADABLE = messages.BODY_UNREADABLE
NOT_VALID = "The request is not valid:"
BAD_BODIES = [
    (b"{", 422, "JSON decode error"),
    (b"", 422, NOT_VALID),
    (b"null", 422, NOT_VALID),
    (b"[]", 422, NOT_VALID),
    (b'"coffee"', 422, NOT_VALID),
    (b"{}", 422, "question: Field required"),
    (b'{"question": 7}', 422, "question: Input should be a valid string"),
    (b'{"question": null}', 422, "question: Input should be a valid string"),
    (b'{"question": ["coffee"]}', 422, "question: Input should be a valid string"),
    (b'{"question": {"text": "coffee"}}', 422, "question: Input should be a valid string"),
    (b'{"question": "coffee", "template": ["answer"]}', 422, "template: Input should be a valid string"),
    (b'{"question": "coffee", "corpus": 5}', 422, "corpus: Input should be a valid string"),
    (b'{"question": true}', 422, "question: Input should be a valid string"),
    (b"\xff\xfe{}", 422, NOT_VALID),
    (b'{"question": "caf\xe9"}', 400, UNREADABLE),  # Latin-1, not UTF-8
    (b"[" * 100_000, 400, UNREADABLE),
    (b'{"question": ' + b"[" * 5000 + b"]" * 5000 + b"}", 400, UNREADABLE),
    (b'{"a":' * 3000 + b"1" + b"}" * 3000, 400, UNREADABLE),
    (b'{"question": "coffee", "n": ' + b"9" * 5000 + b"}", 400, UNREADABLE),  # int()'s digit limit
]


@pytest.mark.parametrize(("body", "status", "message"), BAD_BODIES, ids=lambda v: repr(v)[:60])
def test_api_refuses_a_body_of_the_wrong_shape(desk: Desk, body: bytes, status: int, message: str) -> None:
    response = desk.send("POST", "/v1/research/stream", content=body, headers={"content-type": "application/json"})
    json_error(response, status, "bad_input", message)


@pytest.mark.parametrize(("body", "status", "message"), BAD_BODIES[-4:], ids=lambda v: repr(v)[:60])
def test_verify_refuses_a_body_it_cannot_read(desk: Desk, body: bytes, status: int, message: str) -> None:
    response = desk.send("POST", "/v1/verify", content=body, headers={"content-type": "application/json"})
    json_error(response, status, "bad_input", message)


# ---- /v1/verify ------------------------------------------------------------------------------------------------

ITEM = {"id": "a", "claim": "Coffee grows in Brazil.", "sources": [{"id": "s", "text": "Brazil grows coffee."}]}
BAD_VERIFY = [
    ({"items": []}, "items: List should have at least 1 item"),
    ({"items": [ITEM] * 201}, "items: List should have at most 200 items"),
    ({}, "items: Field required"),
    ({"items": ITEM}, "items: Input should be a valid list"),
    ({"items": [{**ITEM, "claim": ""}]}, "items.0.claim: String should have at least 1 character"),
    ({"items": [{**ITEM, "claim": "x" * 4001}]}, "items.0.claim: String should have at most 4000 characters"),
    ({"items": [{**ITEM, "id": ""}]}, "items.0.id: String should have at least 1 character"),
    ({"items": [{**ITEM, "id": "i" * 201}]}, "items.0.id: String should have at most 200 characters"),
    ({"items": [{k: v for k, v in ITEM.items() if k != "claim"}]}, "items.0.claim: Field required"),
    ({"items": [{**ITEM, "extra": 1}]}, "items.0.extra: Extra inputs are not permitted"),
    ({"items": [{**ITEM, "sources": "Brazil"}]}, "items.0.sources: Input should be a valid list"),
    ({"items": [{**ITEM, "sources": [{"id": "s"}]}]}, "items.0.sources.0.text: Field required"),
    (
        {"items": [{**ITEM, "sources": [{"id": "s", "text": "t" * 200_001}]}]},
        "items.0.sources.0.text: String should have at most 200000 characters",
    ),
    ({"items": [{**ITEM, "sources": [ITEM["sources"][0]] * 101}]}, "items.0.sources: List should have at most 100"),
    ({"items": [{**ITEM, "claim": "\ud800 coffee"}]}, "items.0.claim: Input should be a valid string"),
    ({"items": [{**ITEM, "id": "\udfff"}]}, "items.0.id: Input should be a valid string"),
    ({"items": [{**ITEM, "sources": [{"id": "s", "text": "\ud800"}]}]}, "items.0.sources.0.text: Input should be"),
    ({"items": [{**ITEM, "claim": 42}]}, "items.0.claim: Input should be a valid string"),
]


@pytest.mark.parametrize(("body", "message"), BAD_VERIFY, ids=lambda v: repr(v)[:60])
def test_verify_refuses_bad_items(desk: Desk, body: dict[str, Any], message: str) -> None:
    response = desk.send("POST", "/v1/verify", content=raw_json(body), headers={"content-type": "application/json"})
    json_error(response, 422, "bad_input", message)


# ---- resume cursors: Last-Event-ID and ?after= -----------------------------------------------------------------

CURSOR = f"Last-Event-ID (or ?after=) must be a whole number from 0 to {MAX_CURSOR}"
BAD_CURSORS = [
    "abc",
    "-1",
    "1.5",
    "7 8",
    "+1",
    "0x10",
    "1e3",
    "1_000",
    "NaN",
    str(MAX_CURSOR + 1),  # one past the largest event number (run_events.seq is 32-bit)
    str(2**63),  # one past SQLite's largest integer
    "9" * 20,
    "9" * 5000,  # past int()'s digit limit
]
UNICODE_DIGITS = ["\u00b2", "\u00b9\u00b2", "\u00bd", "\u0661\u0662", "\U0001d7cf", "\u2460", "\uff11", "\u0967"]


@pytest.mark.parametrize("value", BAD_CURSORS, ids=repr)
def test_events_refuse_a_bad_last_event_id(desk: Desk, value: str) -> None:
    response = desk.send("GET", f"/v1/research/{desk.run_id}/events", headers={"Last-Event-ID": value})
    json_error(response, 422, "bad_input", CURSOR)


@pytest.mark.parametrize("value", [b"\xb2", b"\xb9", b"\xb3\xb2", b"\xbc", b"1\xb2"], ids=repr)
def test_events_refuse_a_superscript_digit_header(desk: Desk, value: bytes) -> None:
    """Headers are Latin-1: byte B2 is '²', which str.isdigit() accepts and int() refuses."""
    response = desk.send("GET", f"/v1/research/{desk.run_id}/events", headers={"Last-Event-ID": value})
    json_error(response, 422, "bad_input", CURSOR)


@pytest.mark.parametrize("value", BAD_CURSORS + UNICODE_DIGITS, ids=repr)
def test_live_page_refuses_a_bad_after(desk: Desk, value: str) -> None:
    response = desk.send("GET", f"/runs/{desk.run_id}/live", params={"after": value})
    json_error(response, 422, "bad_input", CURSOR)


def test_the_largest_cursor_is_accepted(desk: Desk) -> None:
    """The bound is inclusive: 2**31-1 is a cursor past every event (nothing more to send), not an error."""
    response = desk.send("GET", f"/v1/research/{desk.run_id}/events", headers={"Last-Event-ID": str(MAX_CURSOR)})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")


# ---- run ids and versions --------------------------------------------------------------------------------------

MALFORMED_IDS = ["not-a-run", "0" * 31, "0" * 33, "g" * 32, "A" * 32, "%20" + "0" * 29, "0" * 31 + "%00"]
RUN_ROUTES = [
    ("GET", "/v1/research/{id}"),
    ("GET", "/v1/research/{id}/versions"),
    ("GET", "/v1/research/{id}/audit"),
    ("GET", "/v1/research/{id}/events"),
    ("POST", "/v1/research/{id}/cancel"),
    ("POST", "/v1/research/{id}/rerun"),
    ("GET", "/runs/{id}/report.md"),
    ("GET", "/runs/{id}/report.docx"),
]


@pytest.mark.parametrize("run_id", MALFORMED_IDS, ids=repr)
@pytest.mark.parametrize(("method", "route"), RUN_ROUTES, ids=lambda v: str(v))
def test_a_malformed_run_id_is_404_with_its_reason(desk: Desk, method: str, route: str, run_id: str) -> None:
    response = desk.send(method, route.format(id=run_id))
    json_error(response, 404, "not_found", "is not a run ID (run IDs are 32 hexadecimal characters).")


@pytest.mark.parametrize(("method", "route"), RUN_ROUTES, ids=lambda v: str(v))
def test_an_unknown_run_id_is_404(desk: Desk, method: str, route: str) -> None:
    response = desk.send(method, route.format(id=UNKNOWN_RUN))
    json_error(response, 404, "not_found", messages.RUN_UNKNOWN.format(run_id=UNKNOWN_RUN))


@pytest.mark.parametrize("version", ["0", "-1", "x", "1.5", "9" * 5000, "\u00b2"], ids=repr)
@pytest.mark.parametrize("route", ["/runs/{id}/report.md", "/runs/{id}/report.json", "/runs/{id}/report.pdf"])
def test_a_malformed_version_is_refused(desk: Desk, route: str, version: str) -> None:
    response = desk.send("GET", route.format(id=desk.run_id), params={"version": version})
    json_error(response, 422, "bad_input", "version:")


@pytest.mark.parametrize("version", ["2", "99", str(MAX_CURSOR), str(2**70)])
def test_an_unknown_version_is_404(desk: Desk, version: str) -> None:
    response = desk.send("GET", f"/runs/{desk.run_id}/report.json", params={"version": version})
    json_error(response, 404, "not_found", f"Run '{desk.run_id}' has no artifact version {version} (it has 1).")


@pytest.mark.parametrize("run_id", ["", "nope", "0" * 32, "\x00", "g" * 32], ids=repr)
def test_opening_a_bad_run_id_from_the_home_page_says_why(desk: Desk, run_id: str) -> None:
    response = desk.send("GET", "/runs/open", params={"run_id": run_id})
    assert response.status_code == 404
    assert "run ID" in html.unescape(response.text)


# ---- routes and methods that do not exist ----------------------------------------------------------------------

UNKNOWN_ROUTES = ["/nope", "/v1/nope", "/v1/researches", "/static/nope.css", "/v1", "/runs/x/y/z", "/%00"]


@pytest.mark.parametrize("path", UNKNOWN_ROUTES)
def test_an_unknown_route_is_404_in_the_documented_shape(desk: Desk, path: str) -> None:
    response = desk.send("GET", path)
    json_error(response, 404, "not_found", "There is nothing at ")


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/v1/verify", "POST"),
        ("GET", "/v1/verify", "POST"),
        ("PUT", "/v1/research/{id}", "DELETE, GET"),
        ("POST", "/healthz", "GET"),
        ("PATCH", "/v1/templates", "GET"),
        ("GET", "/runs", "POST"),
        ("PUT", "/runs/{id}/cancel", "POST"),
    ],
)
def test_a_method_not_allowed_is_405_in_the_documented_shape(desk: Desk, method: str, path: str, allowed: str) -> None:
    response = desk.send(method, path.format(id=desk.run_id))
    path = path.format(id=desk.run_id)
    json_error(response, 405, "method_not_allowed", f"{method} is not allowed on {path} (allowed: {allowed}).")
    assert response.headers["allow"] == allowed


def test_a_browser_gets_the_error_page_for_an_unknown_page(desk: Desk) -> None:
    response = desk.send("GET", "/nope", headers={"accept": "text/html"})
    page_error(response, 404, messages.ROUTE_NOT_FOUND.format(path="/nope"))


def test_an_api_client_gets_json_even_when_it_accepts_html(desk: Desk) -> None:
    response = desk.send("GET", "/v1/nope", headers={"accept": "text/html"})
    json_error(response, 404, "not_found", messages.ROUTE_NOT_FOUND.format(path="/v1/nope"))


@pytest.mark.postgres
async def test_the_largest_cursor_reads_on_postgresql(client_for: Any, pg_url: str) -> None:
    """``run_events.seq`` is a 32-bit integer (asyncpg refuses to compare it with 2**31): the bound is the column's,
    the bound itself reads without error on PostgreSQL, and one past it is refused before any query."""
    client = await client_for(make_settings(pg_url))  # migrates the database
    await load_docs(pg_url, "small", SMALL_CORPUS)
    started = await client.post("/runs", data=form(question="coffee market", template="answer", corpus="small"))
    run_id = started.headers["location"].rsplit("/", 1)[1]
    for _ in range(600):
        if (await client.get(f"/v1/research/{run_id}")).status_code == 200:
            break
        await asyncio.sleep(0.1)
    events = f"/v1/research/{run_id}/events"
    last = await client.get(events, headers={"Last-Event-ID": str(MAX_CURSOR)})
    assert last.status_code == 200 and last.text.strip() == ""
    past = await client.get(events, headers={"Last-Event-ID": str(MAX_CURSOR + 1)})
    json_error(past, 422, "bad_input", CURSOR)
