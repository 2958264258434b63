"""The model judge and the model reviewer through the real ``openai`` client, against a scripted OpenAI-compatible
server on 127.0.0.1: request shape (temperature 0, json_schema), parsing, the verbatim-quote bookend, the
json_object fallback, client retries, timeouts, and two runs end to end through the service."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import make_settings
from veracity.corpus.bundled import ensure_bundled_corpora
from veracity.db import runs_repo
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.errors import MalformedOutput, ModelError
from veracity.evals.scripted_openai import ScriptedOpenAI
from veracity.graph.builder import build_graph
from veracity.guards.model import QUOTE_NOT_FOUND, QUOTE_TOO_SHORT, ModelJudge, ModelReviewer
from veracity.guards.quotes import locate
from veracity.ports import ReviewRequest, Source
from veracity.runs.model_set import build_models
from veracity.runs.providers import Providers
from veracity.runs.service import RunService
from veracity.search.local import LocalSearch
from veracity.semantic.model import process_semantics
from veracity.settings import JUDGE_CONCURRENCY, Settings
from veracity.specs.registry import SpecRegistry

COFFEE = (
    "Coffee is a beverage brewed from roasted coffee beans.\nCoffee production is concentrated in\n   Brazil, "
    "Vietnam and Colombia, which together grow more than half of the world's coffee."
)
TEA = "Tea is an aromatic beverage prepared by pouring hot water over cured leaves."
CLAIM = "Most coffee is grown in Brazil, Vietnam and Colombia."
SOURCES = [Source("ev-tea", TEA), Source("ev-coffee", COFFEE)]


# ---- the scripted server ----------------------------------------------------------------------------------------


@dataclass
class Status:
    """Answer with an HTTP error instead of a completion."""

    code: int
    retry_after_ms: int | None = None


@dataclass
class Sleep:
    """Answer ``content`` after ``seconds`` (past the client's timeout)."""

    seconds: float
    content: str = "{}"


Step = str | Status | Sleep


def _step(step: Step) -> dict[str, Any]:
    if isinstance(step, Status):
        return {"status": step.code, "retry_after_ms": step.retry_after_ms}
    if isinstance(step, Sleep):
        return {"stall": step.seconds, "content": step.content}
    return {"content": step}


@dataclass
class Script:
    """One answer sequence for whichever model asks, replayed by ``veracity.evals.scripted_openai``."""

    llm: ScriptedOpenAI

    def play(self, *steps: Step, reject_json_schema: bool = False) -> Script:
        # The last step repeats: a model that keeps giving the same answer.
        self.llm.play({"*": [_step(s) for s in steps]}, reject_json_schema=reject_json_schema)
        return self

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.llm.requests

    @property
    def formats(self) -> list[str]:
        return [r.get("response_format", {}).get("type", "") for r in self.requests]


@dataclass
class Server:
    url: str
    script: Script


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with ScriptedOpenAI() as llm:
        yield Server(llm.base_url_v1, Script(llm))


@pytest.fixture
def script(server: Server) -> Script:
    return server.script.play("{}")


@pytest.fixture
async def models(server: Server) -> AsyncIterator[Callable[..., Any]]:
    """``models(ModelJudge, max_retries=0, timeout=0.3)`` → a guard pointed at the scripted server."""
    made: list[ModelJudge | ModelReviewer] = []

    def make(kind: type[ModelJudge] | type[ModelReviewer], **kwargs: Any) -> Any:
        kwargs = {"base_url": server.url, "timeout": 5.0, "max_retries": 0, **kwargs}
        guard = kind("scripted-model", **kwargs)
        made.append(guard)
        return guard

    yield make
    for guard in made:
        await guard.aclose()


def answer(label: str, quote: str = "", source_id: str = "", reason: str = "the passage states it") -> str:
    return json.dumps({"label": label, "quote": quote, "source_id": source_id, "reason": reason})


# ---- the judge --------------------------------------------------------------------------------------------------


async def test_judge_asks_at_temperature_0_with_the_json_schema_and_maps_a_verbatim_quote_to_its_span(
    script: Script, models: Callable[..., Any]
) -> None:
    # The quote's whitespace differs from the source's (a line break and indentation): it still matches.
    quote = "Coffee production is concentrated in Brazil, Vietnam and Colombia"
    script.play(answer("supported", quote, "ev-coffee"))
    judge = models(ModelJudge)
    verdict = await judge.judge(CLAIM, SOURCES)

    assert judge.name == "model:scripted-model"
    assert verdict.label == "supported" and verdict.score == 1.0 and verdict.reason == "the passage states it"
    start = COFFEE.index("Coffee production")
    end = COFFEE.index("Colombia") + len("Colombia")
    assert [(s.source_id, s.start, s.end) for s in verdict.evidence] == [("ev-coffee", start, end)]

    (request,) = script.requests
    assert request["temperature"] == 0 and request["model"] == "scripted-model"
    fmt = request["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "grounding" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["properties"]["label"]["enum"] == ["supported", "partial", "unsupported"]
    assert set(schema["required"]) == {"label", "quote", "source_id", "reason"}
    assert schema["additionalProperties"] is False
    system, user = request["messages"]
    assert system["role"] == "system" and "supported" in system["content"] and "JSON" in system["content"]
    assert CLAIM in user["content"] and "[1] source_id: ev-tea" in user["content"]
    assert "[2] source_id: ev-coffee" in user["content"]


async def test_a_pass_whose_quote_is_not_in_the_sources_is_downgraded_to_unsupported(
    script: Script, models: Callable[..., Any]
) -> None:
    invented = "Brazil, Vietnam and Colombia grow nearly all of the world's coffee"
    script.play(answer("supported", invented, "ev-coffee"))
    verdict = await models(ModelJudge).judge(CLAIM, SOURCES)
    assert verdict.label == "unsupported" and verdict.score == 0.0
    assert verdict.evidence == [] and verdict.reason == QUOTE_NOT_FOUND

    script.play(answer("partial", "", ""))  # a partial with no quote at all is no pass either
    verdict = await models(ModelJudge).judge(CLAIM, SOURCES)
    assert verdict.label == "unsupported" and verdict.reason == QUOTE_NOT_FOUND

    script.play(answer("supported", "Coffee", "ev-coffee"))  # one shared word is not a supported fact
    verdict = await models(ModelJudge).judge(CLAIM, SOURCES)
    assert verdict.label == "unsupported" and verdict.reason == QUOTE_TOO_SHORT


async def test_an_unsupported_label_stays_unsupported_and_no_sources_needs_no_call(
    script: Script, models: Callable[..., Any]
) -> None:
    script.play(answer("unsupported", reason="the passages never say how much coffee each country grows"))
    judge = models(ModelJudge)
    verdict = await judge.judge(CLAIM, SOURCES)
    assert verdict.label == "unsupported" and verdict.evidence == []
    assert verdict.reason == "the passages never say how much coffee each country grows"

    script.play(answer("supported", "Coffee is a beverage", "ev-coffee"))
    verdict = await judge.judge(CLAIM, [])
    assert verdict.label == "unsupported" and script.requests == []


async def test_think_block_and_fenced_json_are_parsed_and_a_numbered_source_is_resolved(
    script: Script, models: Callable[..., Any]
) -> None:
    raw = (
        "<think>The tea passage is off topic; passage 2 names the countries but not the share.</think>\n"
        "```json\n" + answer("partial", "“Brazil, Vietnam and Colombia”", "2", "the share is not stated") + "\n```"
    )
    script.play(raw)
    verdict = await models(ModelJudge).judge(CLAIM, SOURCES)
    assert verdict.label == "partial" and verdict.score == 0.5 and verdict.reason == "the share is not stated"
    start = COFFEE.index("Brazil")
    assert [(s.source_id, s.start, s.end) for s in verdict.evidence] == [
        ("ev-coffee", start, start + len("Brazil, Vietnam and Colombia"))
    ]


def test_locate_prefers_the_named_source_and_falls_back_to_any() -> None:
    sources = [Source("a", "The sky is blue today."), Source("b", "Yes, the sky is blue today.")]
    span = locate("the sky is blue", sources, "b")
    assert span is not None and (span.source_id, span.start, span.end) == ("b", 5, 20)
    span = locate("the sky is blue", sources, "")  # case does not matter: the first source has it too
    assert span is not None and (span.source_id, span.start, span.end) == ("a", 0, 15)
    span = locate("sky is  blue", sources, "b")
    assert span is not None and (span.source_id, span.start, span.end) == ("b", 9, 20)
    span = locate("Yes, the", sources, "a")  # only in "b"
    assert span is not None and span.source_id == "b" and (span.start, span.end) == (0, 8)
    assert locate("the sea is blue", sources, "a") is None and locate("   ", sources) is None


SECTION_90A = (
    "Section 90A(1) of the Evidence Act 1950 provides that, in criminal or civil proceedings, a document produced "
    "by a computer, or a statement contained in it, is admissible as evidence of any fact stated in it."
)


@pytest.mark.parametrize(
    ("quote", "first", "last"),
    [
        ("a document produced by a computer", "a document", "a computer"),  # mid-sentence
        ("A DOCUMENT PRODUCED BY A COMPUTER", "a document", "a computer"),  # case
        ("“a document produced\n by a computer,”", "a document", "a computer"),  # curly quotes, line break, comma
        ("'is admissible as evidence of any fact stated in it.'", "is admissible", "in it"),  # straight quotes
        ("Section 90A(1) of the Evidence Act 1950 provides … is admissible as evidence", "Section", "as evidence"),
        ("in criminal or civil proceedings ... a document produced by a computer", "in criminal", "a computer"),
        ("document produced [...] is admissible", "document produced", "is admissible"),
    ],
    ids=["mid-sentence", "case", "curly-quotes", "straight-quotes", "ellipsis-char", "three-dots", "bracketed"],
)
def test_a_quote_is_found_whatever_its_case_quotation_marks_or_ellipsis(quote: str, first: str, last: str) -> None:
    span = locate(quote, [Source("ev", SECTION_90A)], "ev")
    assert span is not None and span.source_id == "ev"
    assert span.start == SECTION_90A.index(first)
    assert span.end == SECTION_90A.index(last, span.start) + len(last)


@pytest.mark.parametrize(
    "quote",
    [
        "a document produced by a printer",  # a changed word
        "is admissible ... in criminal or civil proceedings",  # the pieces out of order
        "ocument produced by a compute",  # not on word boundaries
        "a document produced by a computer is admissible",  # words skipped without an ellipsis
    ],
    ids=["changed-word", "out-of-order", "mid-word", "skipped-words"],
)
def test_a_tolerant_quote_must_still_lie_in_the_cited_text(quote: str) -> None:
    assert locate(quote, [Source("ev", SECTION_90A)], "ev") is None


async def test_an_ellipsis_quote_supports_with_one_span_per_piece(script: Script, models: Callable[..., Any]) -> None:
    script.play(answer("supported", "Section 90A(1) … is admissible as evidence of any fact", "ev"))
    verdict = await models(ModelJudge).judge("Computer documents are admissible.", [Source("ev", SECTION_90A)])
    assert verdict.label == "supported"
    assert [(s.start, s.end) for s in verdict.evidence] == [
        (0, len("Section 90A(1)")),
        (SECTION_90A.index("is admissible"), SECTION_90A.index("any fact") + len("any fact")),
    ]


@pytest.mark.parametrize(
    "raw",
    [
        "The claim is supported by passage 2.",
        '{"label": "supported", "quote": "Coffee is a beverage"',
        '{"label": "probably", "quote": "", "source_id": "", "reason": "hmm"}',
        '{"label": "supported", "quote": "Coffee is a beverage", "source_id": "ev-coffee"}',
        "",
    ],
    ids=["prose", "truncated", "bad-label", "no-reason", "empty"],
)
async def test_malformed_judge_output_raises_malformed_output(
    raw: str, script: Script, models: Callable[..., Any]
) -> None:
    script.play(raw)
    with pytest.raises(MalformedOutput) as caught:
        await models(ModelJudge).judge(CLAIM, SOURCES)
    assert caught.value.problems


async def test_a_400_on_json_schema_is_retried_with_json_object_and_remembered(
    script: Script, models: Callable[..., Any]
) -> None:
    script.play(answer("supported", "Tea is an aromatic beverage", "ev-tea"), reject_json_schema=True)
    judge = models(ModelJudge)
    first = await judge.judge("Tea is an aromatic beverage.", SOURCES)
    assert first.label == "supported"
    assert script.formats == ["json_schema", "json_object"]
    second = await judge.judge("Tea is an aromatic beverage.", SOURCES)
    assert second.label == "supported"
    assert script.formats == ["json_schema", "json_object", "json_object"]  # no second json_schema attempt
    assert all(r["temperature"] == 0 for r in script.requests)


async def test_a_400_that_is_not_about_the_format_is_a_model_error_and_not_remembered(
    script: Script, models: Callable[..., Any]
) -> None:
    script.play(Status(400))
    judge = models(ModelJudge)
    with pytest.raises(ModelError, match="rejected the request"):
        await judge.judge(CLAIM, SOURCES)
    assert script.formats == ["json_schema", "json_object"]
    script.play(answer("supported", "Tea is an aromatic beverage", "ev-tea"))
    assert (await judge.judge("Tea is an aromatic beverage.", SOURCES)).label == "supported"
    assert script.formats == ["json_schema"]


async def test_a_429_then_success_is_retried_by_the_client(script: Script, models: Callable[..., Any]) -> None:
    script.play(Status(429, retry_after_ms=10), answer("supported", "Tea is an aromatic beverage", "ev-tea"))
    verdict = await models(ModelJudge, max_retries=2).judge("Tea is an aromatic beverage.", SOURCES)
    assert verdict.label == "supported" and len(script.requests) == 2


async def test_server_errors_after_the_retries_and_timeouts_are_model_errors(
    script: Script, models: Callable[..., Any]
) -> None:
    script.play(Status(503, retry_after_ms=10))
    with pytest.raises(ModelError, match="HTTP 503"):
        await models(ModelJudge, max_retries=1).judge(CLAIM, SOURCES)
    assert len(script.requests) == 2

    script.play(Sleep(1.0, answer("supported", "Tea is an aromatic beverage", "ev-tea")))
    started = time.monotonic()
    with pytest.raises(ModelError, match="timed out"):
        await models(ModelJudge, timeout=0.3).judge(CLAIM, SOURCES)
    assert time.monotonic() - started < 1.0


async def test_an_unreachable_server_is_a_model_error(models: Callable[..., Any]) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ModelError, match="could not be reached"):
        await models(ModelJudge, base_url=f"http://127.0.0.1:{port}/v1").judge(CLAIM, SOURCES)


# ---- the reviewer -----------------------------------------------------------------------------------------------


def review_request(question: str = "I am exhausted after four nights up with the baby.") -> ReviewRequest:
    spec = SpecRegistry.load().get("coach_reply")
    return ReviewRequest(spec=spec, question=question, draft_text="Sleep when the baby sleeps.", violations=[])


@pytest.mark.parametrize(
    ("raw", "verdict", "concerns"),
    [
        ('{"verdict": "ok", "reason": "a calm, careful reply", "concerns": []}', "ok", []),
        (
            '{"verdict": "revise", "reason": "dismissive", "concerns": ["acknowledge the exhaustion first"]}',
            "revise",
            ["acknowledge the exhaustion first"],
        ),
        (
            '<think>risk?</think>```json\n{"verdict": "crisis", "reason": "risk to self", "concerns": ["risk"]}\n```',
            "crisis",
            ["risk"],
        ),
    ],
    ids=["ok", "revise", "crisis"],
)
async def test_reviewer_verdicts_are_parsed(
    raw: str, verdict: str, concerns: list[str], script: Script, models: Callable[..., Any]
) -> None:
    script.play(raw)
    reviewer = models(ModelReviewer)
    review = await reviewer.review(review_request())
    assert reviewer.name == "model:scripted-model"
    assert review.verdict == verdict and review.concerns == concerns
    (request,) = script.requests
    assert request["temperature"] == 0
    fmt = request["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "review" and fmt["json_schema"]["strict"]
    assert fmt["json_schema"]["schema"]["properties"]["verdict"]["enum"] == ["ok", "revise", "crisis"]
    user = request["messages"][1]["content"]
    assert "four nights up" in user and "Sleep when the baby sleeps." in user


@pytest.mark.parametrize(
    "raw",
    [
        "This reply looks fine to me, you can send it.",
        '{"verdict": "revise", "reason": "vague", "concerns": []}',
        '{"verdict": "maybe", "reason": "unsure", "concerns": []}',
    ],
    ids=["prose", "revise-without-concerns", "bad-verdict"],
)
async def test_malformed_reviewer_output_raises_malformed_output(
    raw: str, script: Script, models: Callable[..., Any]
) -> None:
    script.play(raw)
    with pytest.raises(MalformedOutput):
        await models(ModelReviewer).review(review_request())


async def test_reviewer_timeout_is_a_model_error(script: Script, models: Callable[..., Any]) -> None:
    script.play(Sleep(1.0, '{"verdict": "ok", "reason": "fine", "concerns": []}'))
    with pytest.raises(ModelError):
        await models(ModelReviewer, timeout=0.3).review(review_request())


# ---- settings and wiring ----------------------------------------------------------------------------------------


async def test_models_follow_the_provider_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    offline = build_models(Settings())
    assert (offline.composer, offline.judge, offline.reviewer, offline.planner) == (None, None, None, None)
    monkeypatch.setenv("VERACITY_MODEL__PROVIDER", "openai")
    monkeypatch.setenv("VERACITY_MODEL__BASE_URL", "")
    monkeypatch.setenv("VERACITY_MODEL__API_KEY", "sk-secret-value")
    monkeypatch.setenv("VERACITY_MODEL__JUDGE_MODEL", "judge-m")
    monkeypatch.setenv("VERACITY_MODEL__REVIEWER_MODEL", "reviewer-m")
    settings = Settings()
    assert settings.model.base_url is None and "sk-secret-value" not in repr(settings)
    models = build_models(settings)
    judge, reviewer = models.judge, models.reviewer
    assert isinstance(judge, ModelJudge) and isinstance(reviewer, ModelReviewer)
    assert (judge.name, reviewer.name) == ("model:judge-m", "model:reviewer-m")
    assert judge.chat.client is reviewer.chat.client  # one connection pool
    await models.aclose()
    monkeypatch.setenv("VERACITY_MODEL__BASE_URL", "127.0.0.1:8080")
    with pytest.raises(ValueError, match="http"):
        Settings()


async def test_verify_endpoint_uses_the_configured_model_judge(
    client_for: Any, db_url: str, server: Server, script: Script
) -> None:
    settings = make_settings(db_url).model_copy(
        update={
            "model": Settings().model.model_copy(
                update={"provider": "openai", "base_url": server.url, "judge_model": "judge-m", "max_retries": 0}
            )
        }
    )
    client = await client_for(settings)
    body = {"items": [{"id": "c1", "claim": "Tea is an aromatic beverage.", "sources": [{"id": "s1", "text": TEA}]}]}
    script.play(answer("supported", "Tea is an aromatic beverage", "s1"))
    response = await client.post("/v1/verify", json=body)
    assert response.status_code == 200, response.text
    (result,) = response.json()["results"]
    assert result["label"] == "supported" and result["evidence"] == [{"source_id": "s1", "start": 0, "end": 27}]
    assert [r["model"] for r in script.requests] == ["judge-m"]

    script.play("no JSON here")
    response = await client.post("/v1/verify", json=body)
    assert response.status_code == 500 and response.json()["error"]["code"] == "pipeline_error"
    assert "grounding judge failed" in response.json()["error"]["message"]


def test_veracity_verify_uses_the_configured_model_judge(tmp_path: Path, server: Server, script: Script) -> None:
    claims = tmp_path / "claims.jsonl"
    claims.write_text(json.dumps({"id": "c1", "claim": CLAIM, "sources": [{"id": "s1", "text": COFFEE}]}) + "\n")
    env = {
        **os.environ,
        "VERACITY_DATABASE__URL": f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}",
        "VERACITY_CORPUS__AUTOLOAD_WIKI": "false",
        "VERACITY_MODEL__PROVIDER": "openai",
        "VERACITY_MODEL__BASE_URL": server.url,
        "VERACITY_MODEL__JUDGE_MODEL": "cli-judge",
        "VERACITY_MODEL__MAX_RETRIES": "0",
    }
    veracity = [str(Path(sys.executable).parent / "veracity"), "verify", str(claims), "--json"]

    script.play(answer("supported", "Vietnam and Colombia, which", "s1"))
    out = subprocess.run(veracity, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["label"] == "supported" and result["evidence"][0]["start"] == COFFEE.index("Vietnam")

    script.play("prose, not JSON")
    out = subprocess.run(veracity, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "grounding judge failed" in out.stderr
    # One informed retry inside the judge, then the failure: both calls went to the configured model.
    assert [r["model"] for r in script.requests] == ["cli-judge", "cli-judge"]
    assert "could not be read" in script.requests[-1]["messages"][1]["content"]


# ---- end to end through the run service -------------------------------------------------------------------------


@pytest.fixture
async def service(db_url: str) -> AsyncIterator[RunService]:
    engine = make_engine(db_url)
    sessionmaker = make_sessionmaker(engine)
    await ensure_bundled_corpora(sessionmaker=sessionmaker, chunk_chars=1200)
    yield RunService(
        sessionmaker=sessionmaker,
        registry=SpecRegistry.load(),
        settings=make_settings(db_url),
        graph=build_graph(),
        search=LocalSearch(sessionmaker),
        semantics=process_semantics(),  # as a served run has it: relevance, the screen
    )
    await engine.dispose()


async def run_outcome(service: RunService, providers: Providers) -> tuple[str | None, list[str]]:
    run_id = await service.start(
        question="I am exhausted after four nights up with the baby.", template="coach_reply", providers=providers
    )
    await service.wait(run_id)
    async with service.sessionmaker() as session:
        stored = await runs_repo.get_run(session=session, run_id=run_id)
        events = [e.name for e in await runs_repo.events_after(session=session, run_id=run_id)]
    assert stored is not None and stored.status == "done", stored and stored.error
    return stored.outcome, events


async def test_a_model_reviewer_answering_crisis_ends_the_run_in_crisis(
    service: RunService, script: Script, models: Callable[..., Any]
) -> None:
    script.play('{"verdict": "crisis", "reason": "risk to self", "concerns": ["risk"]}')
    outcome, events = await run_outcome(service, Providers(reviewer=models(ModelReviewer)))
    assert outcome == "crisis" and events.count("draft_composed") == 1
    assert len(script.requests) == 1 and "four nights up" in script.requests[0]["messages"][1]["content"]


async def test_a_model_reviewer_answering_prose_twice_sends_the_run_to_the_floor(
    service: RunService, script: Script, models: Callable[..., Any]
) -> None:
    script.play("Looks good to me, send it!")
    outcome, events = await run_outcome(service, Providers(reviewer=models(ModelReviewer)))
    assert outcome == "fallback"
    # The first unreadable answer cost the review one retry, told what was wrong; the second the run.
    assert len(script.requests) == 2 * events.count("draft_composed") == 2
    retry = script.requests[1]["messages"][1]["content"]
    assert "Your last answer could not be read (output: Invalid JSON" in retry


async def test_one_unreadable_reviewer_answer_costs_a_retry_not_the_run(
    service: RunService, script: Script, models: Callable[..., Any]
) -> None:
    script.play("Looks good to me, send it!", '{"verdict": "ok", "reason": "a calm reply", "concerns": []}')
    outcome, events = await run_outcome(service, Providers(reviewer=models(ModelReviewer)))
    assert outcome == "shipped" and events.count("draft_composed") == 1 and len(script.requests) == 2


async def test_a_judge_that_cannot_be_reached_sends_the_run_to_the_floor_not_to_a_failed_run(
    service: RunService, script: Script, models: Callable[..., Any]
) -> None:
    script.play(Status(503))
    outcome, events = await run_outcome(service, Providers(judge=models(ModelJudge)))
    assert outcome == "fallback"
    # A failure goes to the floor without a second draft; at most the calls already in flight were sent.
    assert events.count("draft_composed") == 1 and 1 <= len(script.requests) <= JUDGE_CONCURRENCY
    assert events[-1] == "complete"


async def test_a_judge_that_keeps_answering_prose_leaves_its_claims_unverified_not_the_run_failed(
    service: RunService, script: Script, models: Callable[..., Any]
) -> None:
    script.play("I think the claim is fine.")
    outcome, events = await run_outcome(service, Providers(judge=models(ModelJudge)))
    # Each claim got one informed retry; unreadable twice, it is unverified (unsupported), so the draft was sent
    # back like any other with an unsupported claim, and the floor came after the template's attempts.
    assert outcome == "fallback" and events.count("draft_composed") == 2
    retries = [r for r in script.requests if "Your last answer could not be read" in r["messages"][1]["content"]]
    assert retries and len(script.requests) == 2 * len(retries)
    assert events[-1] == "complete"


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [("Sure! Here is my answer.", "output: Invalid JSON"), ('{"label": "maybe", "reason": "r"}', "label: ")],
)
def test_judge_reviewer_and_planner_output_fail_alike_through_one_parser(raw: str, fragment: str) -> None:
    from veracity.compose.planner import Plan
    from veracity.guards.model import GroundingAnswer, parse_grounding
    from veracity.guards.reviewer import parse_verdict
    from veracity.models.output import parse_as

    with pytest.raises(MalformedOutput) as grounding:
        parse_grounding(raw)
    assert any(fragment in p for p in grounding.value.problems) and grounding.value.raw == raw
    with pytest.raises(MalformedOutput) as direct:
        parse_as(raw, GroundingAnswer)
    assert direct.value.problems == grounding.value.problems
    for parse in (parse_verdict, lambda text: parse_as(text, Plan)):
        with pytest.raises(MalformedOutput) as other:
            parse(raw)
        assert other.value.problems and all(": " in p for p in other.value.problems)
    assert parse_as('```json\n{"subtasks": []}\n```', Plan).subtasks == []


async def test_a_judge_answer_cut_at_the_token_cap_is_truncated_and_its_retry_is_told(
    server: Server, models: Callable[..., Any]
) -> None:
    from veracity.errors import TruncatedOutput

    cut = {"content": '{"label": "supported", "quote": "Coffee production is', "finish_reason": "length"}
    server.script.llm.play({"*": [cut, {"content": answer("supported", "Tea is an aromatic beverage", "ev-tea")}]})
    judge = models(ModelJudge, max_tokens=64)
    verdict = await judge.judge("Tea is an aromatic beverage.", SOURCES)
    assert verdict.label == "supported" and len(server.script.requests) == 2
    server.script.llm.play({"*": [cut, cut]})
    with pytest.raises(TruncatedOutput) as caught:  # cut twice: the caller leaves the claim unverified
        await judge.judge(CLAIM, SOURCES)
    assert "cut off at the 64-token limit" in caught.value.problems[0]
    for retry in (server.script.requests[1], server.script.requests[-1]):
        told = retry["messages"][1]["content"]
        assert "Your last answer could not be read (the answer was cut off at the 64-token limit" in told
