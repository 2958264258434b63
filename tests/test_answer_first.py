"""The `answer` template answers first, on the default corpus through the whole pipeline: its Answer section takes
the run's most relevant sentences (``answers``), and sentences of equal relevance read in their source's order."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from conftest import service_on
from veracity.db import runs_repo
from veracity.runs.service import RunService


@pytest.fixture
async def service(wiki_db_url: str) -> AsyncIterator[tuple[RunService, Any]]:
    async with service_on(wiki_db_url) as built:
        yield built


async def _ask(service: tuple[RunService, Any], question: str) -> tuple[dict[str, list[str]], dict[str, Any]]:
    runs, sessionmaker = service
    run_id = await runs.start(question=question, template="answer", corpus="wiki")
    await runs.wait(run_id)
    async with sessionmaker() as session:
        artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
        events = list(await runs_repo.events_after(session=session, run_id=run_id))
    assert artifact is not None and artifact.report["outcome"] == "shipped", artifact
    sections = {s["id"]: [c["text"] for c in s["claims"]] for s in artifact.report["sections"]}
    merged = [e.payload for e in events if e.name == "synthesize_merge_complete"]
    assert len(merged) == 1
    return sections, merged[0]


async def test_the_sentence_naming_who_is_the_answer_not_supporting_detail(
    service: tuple[RunService, Any],
) -> None:
    sections, merged = await _ask(service, "Who wrote To Kill a Mockingbird?")
    assert "Harper Lee" in sections["answer"][0], sections
    assert not any("Harper Lee" in text for text in sections["details"]), sections
    # The event says what the Answer took: the run's two most relevant sentences.
    assert list(merged["answers"]) == ["answer"] and len(merged["answers"]["answer"]) == 2


async def test_the_sentence_naming_what_it_stands_for_comes_before_it(service: tuple[RunService, Any]) -> None:
    sections, _ = await _ask(service, "How tall is Mount Everest?")
    answer = sections["answer"]
    named = next(i for i, t in enumerate(answer) if t.startswith("Mount Everest is the highest mountain"))
    it = next(i for i, t in enumerate(answer) if t.startswith("It lies in the Mahalangur"))
    assert named == it - 1, answer
