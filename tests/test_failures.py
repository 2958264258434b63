"""Honest failure: a database error reaches a user as one sentence from ``messages`` — never its SQL or
parameters, which go to the log — in a run's branch, and in the 500 every unhandled API or page error answers."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy.exc import OperationalError

from conftest import make_settings
from test_graph import FakeSearch, run_graph
from veracity import messages
from veracity.db import runs_repo
from veracity.db.failures import PUBLIC_LIMIT, public_error
from veracity.errors import NotFound
from veracity.ports import SearchHit

SECRET_SQL = "SELECT chunks.text FROM chunks WHERE chunks.corpus = ? AND chunks_fts MATCH ?"
SECRET_PARAM = "the-user's-private-question-" + "x" * 1800  # the measured case: 1.8 KB of parameters


def database_locked() -> OperationalError:
    return OperationalError(SECRET_SQL, ("small", SECRET_PARAM), sqlite3.OperationalError("database is locked"))


def test_a_database_error_is_shown_as_the_database_sentence_and_logged_in_full(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="veracity.db.failures"):
        shown = public_error(database_locked(), where="run abc")
    assert shown == "the database could not be read or written (the details are in the server log)"
    assert shown == messages.DATABASE_FAILED
    assert "run abc" in caplog.text and SECRET_SQL in caplog.text and "database is locked" in caplog.text


def test_an_error_raised_from_a_database_error_is_a_database_failure() -> None:
    try:
        try:
            raise database_locked()
        except OperationalError as exc:
            raise RuntimeError(f"could not store the event: {exc}") from exc
    except RuntimeError as outer:
        assert public_error(outer) == messages.DATABASE_FAILED


def test_other_errors_keep_their_text_within_a_bound() -> None:
    # As the run's error and a branch's error always read: the type, then the text.
    assert public_error(NotFound("No run with ID 'x'.")) == "NotFound: No run with ID 'x'."
    assert public_error(ValueError("boom")) == "ValueError: boom"
    assert public_error(KeyError()) == "KeyError"
    long = public_error(ValueError("y" * 5000))
    assert len(long) == PUBLIC_LIMIT and long.startswith("ValueError: yyy") and long.endswith("…")


async def test_a_branch_whose_search_hits_a_locked_database_shows_the_sentence_not_the_sql() -> None:
    class LockedSearch(FakeSearch):
        async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]:
            if "industry" in query:
                raise database_locked()
            return await super().search(query=query, corpus=corpus, k=k)

    state, rec = await run_graph(search=LockedSearch())
    failed = [s for s in state["branch_stats"] if s.status == "failed"]
    assert [s.error for s in failed] == [messages.DATABASE_FAILED]
    stored = str(rec.events)
    assert "SELECT" not in stored and "the-user's-private-question" not in stored


def _raise(exc: BaseException) -> Callable[..., Awaitable[None]]:
    """A stand-in for a repository function that fails with ``exc``."""

    async def fail(**_: object) -> None:
        raise exc

    return fail


async def test_an_unhandled_database_error_under_v1_answers_json_500_without_sql(
    client_for, small_db_url, monkeypatch, caplog
) -> None:
    client = await client_for(make_settings(small_db_url))
    monkeypatch.setattr(runs_repo, "get_run", _raise(database_locked()))
    with caplog.at_level(logging.ERROR, logger="veracity.web.errors"):
        response = await client.get(f"/v1/research/{'a' * 32}")
    assert response.status_code == 500
    assert response.json() == {
        "error": {
            "code": "internal",
            "message": "The server could not answer this request: the database could not be read or written "
            "(the details are in the server log).",
        }
    }
    assert "SELECT" not in response.text and "private-question" not in response.text
    # The log has it all, traceback included.
    [record] = [r for r in caplog.records if r.name == "veracity.web.errors"]
    assert record.exc_info is not None and f"GET /v1/research/{'a' * 32}" in record.getMessage()
    assert SECRET_SQL in caplog.text


async def test_an_unexpected_error_answers_json_500_that_says_nothing_of_it(
    client_for, small_db_url, monkeypatch
) -> None:
    client = await client_for(make_settings(small_db_url))
    monkeypatch.setattr(runs_repo, "artifact_versions", _raise(RuntimeError("internal detail 0xdeadbeef")))
    run_id = "b" * 32
    async with client.app.state.sessionmaker() as session, session.begin():
        await runs_repo.create_run(
            session=session, run_id=run_id, template_id="answer", question="q", corpus="small", budgets={}
        )
    response = await client.get(f"/v1/research/{run_id}/versions")
    assert response.status_code == 500
    assert response.json()["error"] == {
        "code": "internal",
        "message": messages.REQUEST_FAILED.format(reason=messages.UNEXPECTED_FAILURE),
    }
    assert "deadbeef" not in response.text and "RuntimeError" not in response.text


@pytest.mark.parametrize("accept", ["text/html,application/xhtml+xml", "application/json"])
async def test_a_page_that_fails_on_the_database_shows_the_error_page_to_a_browser(
    client_for, small_db_url, monkeypatch, accept
) -> None:
    client = await client_for(make_settings(small_db_url))
    monkeypatch.setattr(runs_repo, "get_run", _raise(database_locked()))
    response = await client.get(f"/runs/{'c' * 32}", headers={"accept": accept})
    assert response.status_code == 500
    assert "SELECT" not in response.text and "private-question" not in response.text
    if accept.startswith("text/html"):
        assert response.headers["content-type"].startswith("text/html")
        assert "Error 500" in response.text and "the database could not be read or written" in response.text
        assert "content-security-policy" in response.headers  # the security headers apply to the error page too
    else:
        assert response.json()["error"]["code"] == "internal"
