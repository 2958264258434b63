"""The second hop: a question about something the first passages name is answered in the passage that names it,
which the question's own words do not find. ``search.hop`` reads the names; ``retrieve`` searches each one over
a local corpus and scores what it opened with the rest (the ``bridge`` signal lifts it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from conftest import load_docs, make_settings
from veracity.db import runs_repo
from veracity.db.corpus_repo import DocumentIn
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.ports import SearchHit
from veracity.runs.service import RunService
from veracity.search.hop import HOP_NAMES, hop_names, names_in


def test_names_are_runs_of_capitalised_words_and_a_sentence_s_first_word_alone_is_not_one():
    sentence = "In 1902 the shipyard was bought by Ines Marrow of Leith, a founder of the Forth Cable Company."
    assert names_in(sentence) == ["Ines Marrow of Leith", "Forth Cable Company"]
    # "and" lists names; it does not join them into one.
    assert names_in("It sold ships to Norway and Sweden.") == ["Norway", "Sweden"]
    assert names_in("The Harwick Bridge opened in 1890.") == ["The Harwick Bridge"]
    assert names_in("Sales rose.") == []
    # A word that only opens the sentence, a possessive, a full stop and other scripts' capitals.
    assert names_in("After Shirley Temple's film, she moved to Ghana.") == ["Shirley Temple", "Ghana"]
    assert names_in("In Paris he met Émile Zola and Łukasz Nowak of Kraków.") == [
        "Paris",
        "Émile Zola",
        "Łukasz Nowak of Kraków",
    ]
    assert names_in("He moved to St. Louis. Then he left.") == ["St. Louis"]
    assert names_in("Procter & Gamble makes soap.") == ["Procter & Gamble"]


def test_hop_names_skip_what_the_question_says_and_what_is_open_strongest_sentence_first():
    question = "Which company did the founder of the Harwick shipyard start?"
    sentences = [
        "The Harwick shipyard was founded by Ines Marrow in 1902.",
        "Tourists visit Leith Harbour and the Ocean Terminal.",
        "The shipyard built ferries for Caledonian MacBrayne.",
    ]
    # The strongest sentence first; "Harwick" is the question's; an opened article's subject is not searched again.
    assert hop_names(question, sentences, [0.9, 0.1, 0.5], ["Caledonian MacBrayne (ferries)"]) == [
        "Ines Marrow",
        "Leith Harbour",
    ]
    assert len(hop_names(question, sentences * 3, [0.5] * 9, [])) == HOP_NAMES
    assert hop_names(question, [], [], []) == []


DOCS = [
    DocumentIn(
        doc_id="harwick",
        title="Harwick shipyard",
        text=(
            "The Harwick shipyard is a shipbuilding yard on the Firth of Clyde. "
            "The Harwick shipyard was founded in 1902 by the engineer Ines Marrow. "
            "The yard built ferries and coastal steamers until 1968."
        ),
    ),
    DocumentIn(
        doc_id="marrow",
        title="Ines Marrow",
        text=(
            "Ines Marrow was a Scottish engineer and industrialist. "
            "Later in life she started the Orkney Cable Company, which laid telegraph cables to the northern isles. "
            "She died in Edinburgh in 1941."
        ),
    ),
    DocumentIn(
        doc_id="tea",
        title="Tea",
        text="Tea is an aromatic beverage prepared by pouring hot water over cured leaves. China grows the most tea.",
    ),
]


@pytest.fixture
async def service(db_url: str) -> AsyncIterator[tuple[RunService, Any, list[tuple[str, list[str]]]]]:
    """A service over ``DOCS`` whose search opens one passage per query and records what each query found."""
    await load_docs(db_url, "yards", DOCS)
    engine = make_engine(db_url)
    runs = RunService.from_settings(make_settings(db_url, search_k=1), make_sessionmaker(engine))
    searched: list[tuple[str, list[str]]] = []
    inner = runs.search

    class Recording:
        name = inner.name

        def __getattr__(self, attribute: str) -> Any:
            return getattr(inner, attribute)

        async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]:
            hits = await inner.search(query=query, corpus=corpus, k=k)
            searched.append((query, [h.doc_id for h in hits]))
            return hits

    runs.search = Recording()  # type: ignore[assignment]
    try:
        yield runs, make_sessionmaker(engine), searched
    finally:
        await runs.shutdown()
        await engine.dispose()


async def test_retrieve_opens_the_passage_the_first_one_names_and_the_answer_in_it_ships(
    service: tuple[RunService, Any, list[tuple[str, list[str]]]],
) -> None:
    runs, sessionmaker, searched = service
    question = "Which company was started by the engineer who founded the Harwick shipyard?"
    run_id = await runs.start(question=question, template="answer", corpus="yards")
    await runs.wait(run_id)
    async with sessionmaker() as session:
        events = [(e.name, e.payload) for e in await runs_repo.events_after(session=session, run_id=run_id)]
        artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
    opened = [
        row["doc_id"] for name, p in events if name == "retrieve_map_progress" for row in (p.get("sources") or [])
    ]
    # The question's own searches find the shipyard's article only; the founder's is found by searching her name.
    # (The planner's queries are the question's words in lower case; the hop's are names as written.)
    planned = [found for query, found in searched if not query[:1].isupper()]
    assert planned and all(found == ["harwick"] for found in planned), searched
    assert any(query == "Ines Marrow" and "marrow" in found for query, found in searched), searched
    assert "harwick" in opened and "marrow" in opened
    assert artifact is not None and artifact.report["outcome"] == "shipped"
    claims = [c["text"] for s in artifact.report["sections"] for c in s["claims"]]
    assert any("Orkney Cable Company" in c for c in claims), claims
    assert not any("Tea" in c for c in claims)
