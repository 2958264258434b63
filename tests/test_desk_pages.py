"""The home page and the run room over HTTP and at the seams behind them (issue 18, items 5 and 6): a question too
long is refused whole, the open box takes a pasted address, a bad ``?version=`` gets the error page, a fallback
says its real cause, the attribution follows the corpus, one document is listed once. The same pages in a real
browser: tests/test_browser_desk.py."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import form, make_settings
from veracity import messages
from veracity.corpus.wiki import WIKI_ATTRIBUTION, attribution_for
from veracity.domain import BranchStat
from veracity.errors import NotFound
from veracity.events import OpenedSource
from veracity.graph.nodes.decide import _decision, no_evidence_reason
from veracity.runs.floor import fallback_kind, floor_report
from veracity.runs.view import InspectorRow, RunView
from veracity.specs.registry import SpecRegistry
from veracity.web.lookup import run_address
from veracity.web.view import breakable, duration, fallback_cause, found_statement, seconds_since

RUN = "0123456789abcdef0123456789abcdef"
NOTHING = messages.NOTHING_RELEVANT.format(where="corpus wiki")
SEARCH_DOWN = messages.SEARCH_FAILED.format(failed=2, branches=2, errors="SearchFailed: web search failed: DNSError")
PAGES_DOWN = messages.PAGES_UNREACHABLE.format(failed=3, errors="https://a.example/: network: DNS")
MODEL_DOWN = messages.COMPOSER_FAILED.format(error="connection refused")
CHECKS = "drafting attempts exhausted (2) with failed checks: unknown_anchor"


# ---- the open box ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        (RUN, (RUN, None)),
        (f"  {RUN.upper()}\n", (RUN, None)),
        (f"http://127.0.0.1:8000/runs/{RUN}", (RUN, None)),
        (f"http://127.0.0.1:8000/runs/{RUN}?version=2", (RUN, 2)),
        (f"https://desk.example.org/runs/{RUN.upper()}?version=3#section-answer", (RUN, 3)),
        (f"/runs/{RUN}/report.md?version=1", (RUN, 1)),
        (f"http://127.0.0.1:8000/v1/research/{RUN}", (RUN, None)),
        (f"http://127.0.0.1:8000/runs/{RUN}?version=abc", (RUN, None)),  # a bad version is dropped, not the run
        (f"127.0.0.1:8000/runs/{RUN}?version=0", (RUN, None)),
    ],
)
def test_the_open_box_takes_a_run_id_or_a_pasted_address(typed: str, expected: tuple[str, int | None]) -> None:
    assert run_address(typed) == expected


@pytest.mark.parametrize(
    "typed", ["", "nope", "g" * 32, RUN[:-1], f"http://h/runs/{RUN}x", f"/runs/{RUN}/then/{'f' * 32}", "http://[::1"]
)
def test_the_open_box_says_what_it_takes_when_it_finds_no_run(typed: str) -> None:
    with pytest.raises(NotFound) as caught:
        run_address(typed)
    assert caught.value.message == messages.OPEN_RUN_UNREADABLE.format(text=typed.strip()[:80])


async def _finished_run(client: Any) -> str:
    started = await client.post("/runs", data=form(question="coffee market", template="market_brief", corpus="small"))
    assert started.status_code == 303, started.text
    run_id = started.headers["location"].rsplit("/", 1)[1]
    await client.app.state.service.wait(run_id)
    return str(run_id)


async def test_a_pasted_permalink_opens_its_run_at_its_version(client_for: Any, small_db_url: str) -> None:
    client = await client_for(make_settings(small_db_url))
    run_id = await _finished_run(client)
    permalink = f"http://testserver/runs/{run_id}?version=1"
    opened = await client.get("/runs/open", params={"run_id": f" {permalink} "})
    assert opened.status_code == 303 and opened.headers["location"] == f"/runs/{run_id}?version=1"
    api = await client.get("/runs/open", params={"run_id": f"http://testserver/v1/research/{run_id}"})
    assert api.status_code == 303 and api.headers["location"] == f"/runs/{run_id}"
    unknown = await client.get("/runs/open", params={"run_id": f"http://testserver/runs/{'0' * 32}"})
    assert unknown.status_code == 404
    assert messages.RUN_UNKNOWN.format(run_id="0" * 32) in html.unescape(unknown.text)


# ---- a bad ?version= ---------------------------------------------------------------------------------------------


async def test_a_malformed_version_on_the_run_page_is_the_error_page(client_for: Any, small_db_url: str) -> None:
    client = await client_for(make_settings(small_db_url))
    run_id = await _finished_run(client)
    for version in ("abc", "0", "1.5"):
        page = await client.get(f"/runs/{run_id}", params={"version": version}, headers={"accept": "text/html"})
        assert page.status_code == 422 and page.headers["content-type"].startswith("text/html")
        text = html.unescape(page.text)
        assert "<h1>Error 422</h1>" in text and '<header class="top">' in text  # the site's own page
        assert messages.REQUEST_INVALID.format(details="version: ") in text
        assert not text.lstrip().startswith("{")
    # A client that does not ask for HTML still gets the documented JSON.
    api = await client.get(f"/runs/{run_id}", params={"version": "abc"}, headers={"accept": "application/json"})
    assert api.status_code == 422 and api.json()["error"]["code"] == "bad_input"
    assert api.json()["error"]["message"].startswith(messages.REQUEST_INVALID.format(details="version: "))


# ---- a question too long -----------------------------------------------------------------------------------------


async def test_a_question_too_long_is_refused_whole_never_cut(client_for: Any, small_db_url: str) -> None:
    client = await client_for(make_settings(small_db_url))
    home = (await client.get("/")).text
    box = re.search(r"<textarea[^>]*>", home)
    assert box and "maxlength" not in box.group(0), "a maxlength makes a browser cut a pasted question silently"
    assert 'id="question-count"' in home and 'data-limit="2000"' in home
    question = "Why " + "is coffee grown in Brazil " * 190  # 4,944 characters
    refused = await client.post("/runs", data=form(question=question, template="answer", corpus="small"))
    assert refused.status_code == 422
    page = html.unescape(refused.text)
    assert messages.QUESTION_TOO_LONG.format(length=len(question.strip()), limit=2000) in page
    kept = re.search(r'<textarea[^>]*id="question"[^>]*>(.*?)</textarea>', page, re.S)
    assert kept and kept.group(1) == question, "the question given back is not the one typed"


async def test_each_template_card_names_its_default_corpus(client_for: Any, small_db_url: str) -> None:
    client = await client_for(make_settings(small_db_url))
    page = html.unescape((await client.get("/")).text)
    for spec in SpecRegistry.load().all():
        source = spec.default_source
        named = "the open web" if source.kind == "web" else source.corpus
        card = re.search(rf'<article class="template-card" id="card-{spec.id}".*?</article>', page, re.S)
        assert card, spec.id
        found = re.search(r'class="corpus-line"[^>]*>(.*?)</p>', card.group(0), re.S)
        assert found, spec.id
        line = " ".join(re.sub(r"<[^>]+>", " ", found.group(1)).split())
        assert re.fullmatch(rf"Searches by default: {re.escape(named)}( \(.*\))?", line), line


# ---- attribution -------------------------------------------------------------------------------------------------


def test_attribution_is_owed_only_to_the_corpus_that_asks_for_it() -> None:
    assert attribution_for("wiki") == WIKI_ATTRIBUTION and WIKI_ATTRIBUTION.license == "CC BY-SA 4.0"
    assert attribution_for("small") is None and attribution_for("web") is None and attribution_for(None) is None


async def test_a_run_on_another_corpus_does_not_credit_wikipedia(client_for: Any, small_db_url: str) -> None:
    client = await client_for(make_settings(small_db_url))
    run_id = await _finished_run(client)
    for path in (f"/runs/{run_id}", "/"):  # the home page credits the default corpus only when it is loaded
        page = (await client.get(path)).text
        assert "Wikipedia" not in page and "CC BY-SA" not in page and 'id="attribution"' not in page, path


# ---- why a fallback has nothing written --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "kind", "cause"),
    [
        (NOTHING, "nothing_relevant", messages.FALLBACK_NOTHING_RELEVANT),
        (SEARCH_DOWN, "search_failed", messages.FALLBACK_SEARCH_UNREACHABLE),
        (PAGES_DOWN, "search_failed", messages.FALLBACK_SEARCH_UNREACHABLE),
        (MODEL_DOWN, "model_failed", messages.FALLBACK_MODEL_FAILED),
        (CHECKS, "not_verified", messages.FALLBACK_CHECKS_FAILED),
    ],
)
def test_each_fallback_cause_has_its_own_sentence(reason: str, kind: str, cause: str) -> None:
    assert fallback_kind(reason) == kind
    assert fallback_cause(reason) == cause
    spec = SpecRegistry.load().get("market_brief")
    report = floor_report(run_id="r", spec=spec, question="q", corpus="wiki", evidence=[], reason=reason).model_dump()
    (note,) = report["notes"]
    # The floor's own note never claims to show what it found when nothing was found.
    assert "shows what it found instead" not in note or note.endswith("Nothing was found to show.")
    assert found_statement(report) == messages.FALLBACK_FOUND_NOTHING


def test_what_was_found_counts_sentences_and_sources() -> None:
    evidence = [{"id": "e1", "doc_id": "a"}, {"id": "e2", "doc_id": "a"}, {"id": "e3", "doc_id": "b"}]
    said = found_statement({"evidence": evidence})
    assert said == messages.FALLBACK_FOUND.format(sentences="3 sentences", sources="2 sources")
    one = found_statement({"evidence": evidence[:1]})
    assert one == messages.FALLBACK_FOUND.format(sentences="1 sentence", sources="1 source")


def _stat(**fields: Any) -> BranchStat:
    return BranchStat(subtask_id=fields.pop("subtask_id", "st1"), status=fields.pop("status", "done"), **fields)


def test_no_page_opened_is_an_unreachable_web_not_an_empty_one() -> None:
    down = [
        _stat(pages=2, page_errors=["https://a.example/x: network: DNS", "https://b.example/y: network: DNS"]),
        _stat(subtask_id="st2", pages=1, page_errors=["https://c.example/z: timeout: 10 s"]),
    ]
    reason = no_evidence_reason({"branch_stats": down, "evidence": [], "corpus": "web"})
    assert reason.startswith(messages.PAGES_UNREACHABLE.format(failed=3, errors="https://a.example/x"))
    # One page read and nothing in it relevant: that is an answer the web did not hold, said as such.
    read = [_stat(pages=2, pages_read=1, page_errors=["https://a.example/x: network: DNS"])]
    assert no_evidence_reason({"branch_stats": read, "evidence": [], "corpus": "web"}) == NOTHING.replace("wiki", "web")


def test_a_model_that_fails_with_no_evidence_is_not_the_cause() -> None:
    spec = SpecRegistry.load().get("answer")
    state: dict[str, Any] = {
        "failure": MODEL_DOWN,
        "evidence": [],
        "branch_stats": [_stat(status="failed", error="SearchFailed: web search failed: DNSError")],
        "verdict": "revise",
        "draft": [],
    }
    decision, reason, _ = _decision(state, SimpleNamespace(spec=spec))  # type: ignore[arg-type]
    assert decision == "fail_safe" and fallback_kind(reason) == "search_failed", reason
    state["evidence"] = ["an evidence"]  # with something to write from, the model's failure is the cause
    assert _decision(state, SimpleNamespace(spec=spec))[1] == MODEL_DOWN  # type: ignore[arg-type]


# ---- the status line's time, the timeline's words, the source inspector -----------------------------------------


def test_durations_read_as_the_page_ticks_them() -> None:
    assert [duration(s) for s in (0, 12.9, 59.99, 60, 185, 3600, 3725)] == [
        "0 s",
        "12 s",
        "59 s",
        "1 min 00 s",
        "3 min 05 s",
        "1 h 00 min",
        "1 h 02 min",
    ]
    assert duration(4.25, tenths=True) == "4.2 s"
    now = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
    naive = datetime(2026, 1, 1, 12, 0, 0)  # as SQLite hands it back: UTC
    assert seconds_since(naive, now) == 30.0 and seconds_since(None, now) == 0.0
    assert seconds_since(now + timedelta(seconds=5), now) == 0.0


def test_names_break_only_between_words_and_stay_escaped() -> None:
    assert str(breakable("retrieve_map_progress")) == "retrieve_<wbr>map_<wbr>progress"
    assert str(breakable("https://a.example/x?q=1&r=<b>")) == (
        "https://<wbr>a.example/<wbr>x?<wbr>q=<wbr>1&amp;<wbr>r=&lt;b&gt;"
    )


def _opened(order: int, doc_id: str, kind: str = "local", subtask: str = "st1", size: int = 100) -> InspectorRow:
    row = OpenedSource(order=order, kind=kind, doc_id=doc_id, title=doc_id, bytes=size)  # type: ignore[arg-type]
    return InspectorRow(**row.model_dump(), subtasks=[subtask])


def test_a_document_opened_by_two_passages_is_listed_once() -> None:
    view = RunView(run_id="r")
    view.opened = {
        1: _opened(1, "Coffee"),
        2: _opened(2, "Tea"),
        3: _opened(3, "Coffee", subtask="st2", size=50),
        4: _opened(4, "https://a.example/", kind="web"),
        5: _opened(5, "https://a.example/", kind="web", subtask="st2"),
    }
    rows = view.opened_in_order
    assert [(r.order, r.doc_id, r.passages, r.bytes, r.subtasks) for r in rows] == [
        (1, "Coffee", 2, 150, ["st1", "st2"]),
        (2, "Tea", 1, 100, ["st1"]),
        (4, "https://a.example/", 1, 100, ["st1"]),  # only a local document's passages are folded together
        (5, "https://a.example/", 1, 100, ["st2"]),
    ]
    assert view.opened[1].passages == 1 and view.opened[1].bytes == 100, "reading the rows changed the view"
    assert len(view.opened_in_order) == 4  # and reading them again gives the same
