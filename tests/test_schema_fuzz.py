"""Schemathesis against the app's own OpenAPI schema, in process (ASGI, lifespan run by Schemathesis): every
operation fuzzed with schema-valid and schema-invalid input, bounded to a few hundred cases in all. No answer may
be a 5xx, and every answer must be one the schema documents: its status code, content type, headers and body.

The SSE endpoints are fuzzed too: Schemathesis cuts an event stream after a few events or its read timeout (5 s), so
a live run's stream cannot hang the test. Every other answer may take up to a minute: that timeout only guards
against a hang (a judged /v1/verify took over 5 s once on two loaded cores), it is not a speed target. The operation
that starts runs gets fewer examples (each starts a real run over the small corpus). The same again with accounts
on, as a signed-in user's API token. About 1,000 cases in all, some 2 min; derandomized, so a failure reproduces."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from conftest import SMALL_CORPUS, load_docs, make_settings, sqlite_url
from veracity import accounts
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.migrate import upgrade
from veracity.web.app import create_app

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
STARTS_RUNS = r"^/v1/research/stream$|^/runs$"


# The schema is the app's, whatever its database: built without starting it.
schema = schemathesis.openapi.from_dict(create_app(make_settings("sqlite+aiosqlite://")).openapi())


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Any]:
    """An app over a fresh database holding the small corpus, one per operation fuzzed (Schemathesis starts its
    lifespan at the first call; its pytest plugin ends it when the test ends)."""
    url = sqlite_url(tmp_path / "fuzz.db")
    upgrade(url)
    asyncio.run(load_docs(url, "small", SMALL_CORPUS))
    yield create_app(make_settings(url))


STREAMS = re.compile(r"/(events|stream|live)$")
"""The event-stream operations, which a read timeout ends."""


def read_timeout(case: Any) -> float:
    """Seconds Schemathesis waits for a read: short for an event stream (how it ends one), long otherwise."""
    return 5.0 if STREAMS.search(case.operation.path) else 60.0


@schema.exclude(path_regex=STARTS_RUNS, method="POST").parametrize()
@settings(max_examples=15, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_every_operation_answers_only_what_its_schema_documents(app: Any, case: Any) -> None:
    case.call_and_validate(app=app, checks=CHECKS, timeout=read_timeout(case))


@schema.include(path_regex=STARTS_RUNS, method="POST").parametrize()
@settings(max_examples=5, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_starting_runs_answers_only_what_its_schema_documents(app: Any, case: Any) -> None:
    case.call_and_validate(app=app, checks=CHECKS, timeout=read_timeout(case))


async def _user_with_token(url: str) -> str:
    """A non-admin user of an accounts-on server and an API token of theirs (its secret)."""
    engine = make_engine(url)
    try:
        async with make_sessionmaker(engine)() as session, session.begin():
            await accounts.add_user(
                session=session, username="admin", password="an admin password", is_admin=True, added_by=None
            )
            user = await accounts.add_user(
                session=session, username="fuzzer", password="a fuzzing password", is_admin=False, added_by="admin"
            )
            _, secret = await accounts.make_token(session=session, user=user, name="fuzz", actor="fuzzer")
    finally:
        await engine.dispose()
    return secret


@pytest.fixture
def accounts_app(tmp_path: Path) -> Iterator[tuple[Any, str]]:
    """The same, with accounts on and the calls made as a signed-in (non-admin) user's API token: the routes'
    own answers are fuzzed, not only their 401."""
    url = sqlite_url(tmp_path / "fuzz.db")
    upgrade(url)
    asyncio.run(load_docs(url, "small", SMALL_CORPUS))
    token = asyncio.run(_user_with_token(url))
    settings_ = make_settings(url).model_copy(deep=True)
    settings_.auth.enabled = True
    yield create_app(settings_), token


@schema.exclude(path_regex=STARTS_RUNS, method="POST").parametrize()
@settings(max_examples=6, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_with_accounts_every_operation_answers_only_what_its_schema_documents(
    accounts_app: tuple[Any, str], case: Any
) -> None:
    app, token = accounts_app
    case.call_and_validate(
        app=app, checks=CHECKS, timeout=read_timeout(case), headers={"Authorization": f"Bearer {token}"}
    )
