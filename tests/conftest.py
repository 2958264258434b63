"""Shared fixtures: migrated databases (SQLite files and real PostgreSQL databases), small corpora, the app."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock
from httpx import ASGITransport, AsyncClient
from playwright.async_api import Browser

from veracity.corpus.wiki import ensure_wiki_corpus
from veracity.db.corpus_repo import DocumentIn
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.migrate import upgrade
from veracity.semantic.model import process_semantics
from veracity.semantic.vectors import ensure_vectors
from veracity.settings import Settings

PG_ADMIN_DSN = os.environ.get("VERACITY_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

# A small corpus written for these tests (facts about beverages and vehicles).
SMALL_CORPUS = [
    DocumentIn(
        doc_id="coffee",
        title="Coffee",
        text=(
            "Coffee is a beverage brewed from roasted coffee beans. Coffee production is concentrated in "
            "Brazil, Vietnam and Colombia, which together grow more than half of the world's coffee. "
            "The coffee market was worth about 200 billion dollars in 2020. Coffee trade depends on "
            "commodity exchanges in New York and London."
        ),
        url="https://example.org/coffee",
    ),
    DocumentIn(
        doc_id="tea",
        title="Tea",
        text=(
            "Tea is an aromatic beverage prepared by pouring hot water over cured leaves. China and India "
            "are the largest tea producers in the world. Tea companies compete with coffee companies for "
            "the hot drinks market."
        ),
    ),
    DocumentIn(
        doc_id="electric-car",
        title="Electric car",
        text=(
            "An electric car is a passenger automobile propelled by electric traction motors. Electric "
            "cars were popular in the late 19th century before internal combustion engines dominated. "
            "About 14 million electric cars were sold worldwide in 2023, 18 percent of all car sales."
        ),
    ),
]


TEST_CSRF = "csrf-secret-of-the-test-browser-0123456789"
"""The CSRF cookie ``client_for``'s clients hold; a form posted by them carries it as ``csrf_token``."""


def form(**fields: str) -> dict[str, str]:
    """A page form's fields as the page sends them: with the CSRF field."""
    return {**fields, "csrf_token": TEST_CSRF}


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def make_settings(url: str, **limits: object) -> Settings:
    return Settings(database={"url": url}, corpus={"autoload_wiki": False}, limits=limits)


async def load_docs(url: str, corpus: str, docs: list[DocumentIn]) -> None:
    from veracity.corpus.ingest import IngestReport, ingest_documents

    engine = make_engine(url)
    try:
        await ingest_documents(
            sessionmaker=make_sessionmaker(engine),
            corpus=corpus,
            docs=docs,
            chunk_chars=1200,
            report=IngestReport(),
        )
    finally:
        await engine.dispose()


@asynccontextmanager
async def service_with_docs(url: str, corpus: str, docs: list[DocumentIn]) -> AsyncIterator[tuple[Any, Any]]:
    """A run service built as ``serve`` builds it, over a database holding ``docs`` in ``corpus``; yields the
    service and its sessionmaker."""
    await load_docs(url, corpus, docs)
    async with service_on(url) as built:
        yield built


@asynccontextmanager
async def service_on(url: str) -> AsyncIterator[tuple[Any, Any]]:
    """A run service built as ``serve`` builds it, over the database at ``url``; yields it and its sessionmaker."""
    from veracity.runs.service import RunService

    engine = make_engine(url)
    sessionmaker = make_sessionmaker(engine)
    try:
        yield RunService.from_settings(make_settings(url), sessionmaker), sessionmaker
    finally:
        await engine.dispose()


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """A migrated, empty SQLite database."""
    url = sqlite_url(tmp_path / "veracity.db")
    upgrade(url)
    return url


@pytest.fixture
def small_db_url(db_url: str) -> str:
    """A migrated SQLite database with the small test corpus in corpus ``small``."""
    asyncio.run(load_docs(db_url, "small", SMALL_CORPUS))
    return db_url


@pytest.fixture(scope="session")
def wiki_template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file with the default Wikipedia corpus, built once per test session: with ``make test``'s
    two workers (pytest-xdist), the first one builds it under a file lock and the others copy from it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by every worker of this session
    path = root / "wiki-template" / "wiki.db"
    path.parent.mkdir(exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if not path.exists():
            building = path.with_suffix(".building")
            building.unlink(missing_ok=True)  # a worker that failed half-way leaves no base to build on
            _build_wiki_db(building)
            building.rename(path)  # whole or absent: a worker never copies a half-built file
    return path


def _build_wiki_db(path: Path) -> None:
    url = sqlite_url(path)
    upgrade(url)

    async def load() -> None:
        engine = make_engine(url)
        sessionmaker = make_sessionmaker(engine)
        await ensure_wiki_corpus(sessionmaker=sessionmaker, chunk_chars=1200)
        # Passage vectors once per session, as `make run` does, not at each copy's first search.
        model = process_semantics(True).model
        assert model is not None, process_semantics(True).reason
        await ensure_vectors(sessionmaker=sessionmaker, model=model, corpus="wiki")
        await engine.dispose()

    asyncio.run(load())


@pytest.fixture
def wiki_db_url(wiki_template_db: Path, tmp_path: Path) -> str:
    """A private copy of the wiki database for one test."""
    path = tmp_path / "wiki.db"
    shutil.copy(wiki_template_db, path)
    return sqlite_url(path)


def _pg_available() -> bool:
    import asyncpg

    async def probe() -> bool:
        try:
            conn = await asyncpg.connect(PG_ADMIN_DSN, timeout=5)
        except (OSError, asyncpg.PostgresError):
            return False
        await conn.close()
        return True

    return asyncio.run(probe())


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database on the local server (created and dropped around the test)."""
    import asyncpg

    if not _pg_available():
        # PostgreSQL runs on every development and CI machine; a missing server is a failure, never a skip.
        pytest.fail(f"PostgreSQL is not reachable at {PG_ADMIN_DSN}; start it (see README) and rerun")
    name = f"veracity_test_{uuid.uuid4().hex[:12]}"

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(PG_ADMIN_DSN)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    base = PG_ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
    try:
        yield f"{base}/{name}"
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
async def client_for() -> AsyncIterator[object]:
    """``await client_for(settings)`` → an httpx client on a started app (lifespan run, migrations applied)."""
    from veracity.web.app import create_app

    stack: list[tuple[object, AsyncClient]] = []

    async def make(settings: Settings) -> AsyncClient:
        app = create_app(settings)
        ctx = app.router.lifespan_context(app)
        await ctx.__aenter__()
        client = AsyncClient(transport=ASGITransport(app=app), base_url="http://testserver")
        client.cookies.set("veracity_csrf", TEST_CSRF)  # what a browser holds after opening any page
        client.app = app  # type: ignore[attr-defined]
        stack.append((ctx, client))
        return client

    yield make
    for ctx, client in reversed(stack):
        await client.aclose()
        await ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """Debian's headless Chromium driven by Playwright (never a downloaded browser)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            await b.close()
