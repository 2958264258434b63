"""Sentence-level evidence from search hits: fact-shaped sentences with exact offsets and a content hash.

Which candidates become evidence is decided by their relevance to the question (``veracity.semantic.relevance``,
in ``retrieve``), not here: this module only finds sentences and records where they stood. A sentence that
addresses the model reading it ("SYSTEM: ...", "ignore previous instructions", ``guards.injection``) is never a
candidate, nor is any sentence of a passage whose title does; :func:`read_passage` lists them for the audit."""

from __future__ import annotations

import re
from dataclasses import dataclass

from veracity.domain import WEB_SOURCE, Evidence, SourceRef
from veracity.fetch.canonical import host_of
from veracity.guards.injection import Instruction, instruction_in
from veracity.ports import SearchHit
from veracity.text import LABEL_RE, sentence_spans, sha256_hex, words

_MIN_CHARS, _MAX_CHARS, _MIN_WORDS = 30, 600, 5
_RECORD_MIN_CHARS, _RECORD_MIN_WORDS = 12, 3
CONTEXT_CHARS = 280
"""Source text kept either side of a quote, so a reader sees the quote where it stood (cut at a word)."""
_TERMINAL = re.compile(r"[.!][\"'”’)\]]*$")
_NAVISH = re.compile(r"^(see also|references|external links|click|read more|share|subscribe)\b", re.I)


def is_fact_shaped(sentence: str) -> bool:
    """A declarative sentence of reasonable length, or a record line that states a figure (``is_record``); not a
    heading, list stub or navigation text."""
    if _NAVISH.match(sentence) or sentence.startswith("#") or sentence.endswith((":", "?")):
        return False
    if is_record(sentence):
        return True
    letters = sum(ch.isalpha() for ch in sentence)
    if letters < 0.6 * len(sentence.replace(" ", "")):
        return False
    if not (_MIN_CHARS <= len(sentence) <= _MAX_CHARS) or len(words(sentence)) < _MIN_WORDS:
        return False
    return _TERMINAL.search(sentence) is not None  # else a heading, caption or menu line, not a sentence


_PAGE_LABELS = frozenset(
    "posted updated published date copyright photo image picture figure fig table source tags tag share comments "
    "page chapter episode step subject read cookies".split()
)
"""Labels of a page's furniture, not of a fact ("Posted: 3 May 2021", "Figure 2: Revenue by region")."""


def is_record(line: str) -> bool:
    """A line that states a figure without a sentence's ending, as notes and pages write them: a table row (short
    cells between two "|" rules at least) or a "label: value" line, with a number (in the value, not the label)
    and three words; not a page's furniture (a byline's date, a figure's caption, a copyright line). A menu or a
    header row holds no number. A row is quoted as it stands (the quote's context shows its table)."""
    if "\n" in line or not (_RECORD_MIN_CHARS <= len(line) <= _MAX_CHARS) or len(words(line)) < _RECORD_MIN_WORDS:
        return False
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) >= 3:  # a row: a year in its first cell is a figure too ("1943 | Winter Orchard | …")
        label, values = cells[0], cells
    elif (labelled := LABEL_RE.match(line.strip())) is not None:
        label, values = labelled.group(1), [labelled.group(2)]
    else:
        return False
    if "©" in line or any(word in _PAGE_LABELS for word in words(label)):
        return False
    return any(ch.isdigit() for value in values for ch in value)


def context_around(text: str, start: int, end: int, size: int = CONTEXT_CHARS) -> tuple[str, str]:
    """Up to ``size`` characters of ``text`` before ``start`` and after ``end``, cut at whitespace so no word is
    shown half; an ellipsis marks where the context was cut short of the text's own edge."""
    lo, hi = max(0, start - size), min(len(text), end + size)
    before, after = text[lo:start], text[end:hi]
    if lo > 0:
        cut = before.find(" ")
        before = "…" + (before[cut + 1 :] if 0 <= cut < len(before) - 1 else before)
    if hi < len(text):
        cut = after.rfind(" ")
        after = (after[:cut] if cut > 0 else after) + "…"
    return before, after


def evidence_id(doc_id: str, start: int, end: int) -> str:
    return "ev" + sha256_hex(f"{doc_id}\x00{start}\x00{end}")[:10]


@dataclass(frozen=True)
class SentenceCandidate:
    """A fact-shaped sentence of an opened passage, before relevance decides whether it is evidence."""

    hit: SearchHit
    start: int
    """Offsets in ``hit.text`` (the passage), not yet in the document."""
    end: int
    position: int
    """Its index among the passage's sentences (0 = the first)."""
    fetched_at: str
    rank: int = 0
    """Where the search that found its passage ranked it (0 = first), a signal the relevance model reads."""

    @property
    def text(self) -> str:
        return self.hit.text[self.start : self.end]


@dataclass(frozen=True)
class SourceInstruction:
    """Text of an opened passage that addresses the model: never evidence, recorded in the audit."""

    text: str
    instruction: Instruction
    start: int | None
    """Offsets in the stored document; None for the passage's title."""
    end: int | None


def read_passage(
    hit: SearchHit, fetched_at: str, rank: int = 0
) -> tuple[list[SentenceCandidate], list[SourceInstruction]]:
    """One pass over an opened passage: its fact-shaped sentences as candidates, in order, and the title and
    sentences (fact-shaped or not) that address the model, which are never candidates. A passage whose title
    addresses the model gives no candidate at all."""
    candidates: list[SentenceCandidate] = []
    found: list[SourceInstruction] = []
    if (title := instruction_in(hit.title)) is not None:
        found.append(SourceInstruction(hit.title, title, None, None))
    for position, (s, e) in enumerate(sentence_spans(hit.text)):
        sentence = hit.text[s:e]
        if (instruction := instruction_in(sentence)) is not None:
            found.append(SourceInstruction(sentence, instruction, hit.start + s, hit.start + e))
        elif title is None and is_fact_shaped(sentence):
            candidates.append(
                SentenceCandidate(hit=hit, start=s, end=e, position=position, fetched_at=fetched_at, rank=rank)
            )
    return candidates, found


def to_evidence(
    candidate: SentenceCandidate, *, subtask_id: str, corpus: str, relevance: float | None, score: float
) -> Evidence:
    """The candidate as evidence: offsets into the stored document, content hash, source and context."""
    hit, s, e = candidate.hit, candidate.start, candidate.end
    sentence = hit.text[s:e]
    start, end = hit.start + s, hit.start + e
    before, after = context_around(hit.text, s, e)
    return Evidence(
        id=evidence_id(hit.doc_id, start, end),
        quote=sentence,
        start=start,
        end=end,
        content_hash=sha256_hex(sentence),
        source=SourceRef(
            doc_id=hit.doc_id,
            title=hit.title,
            url=hit.url,
            published=hit.published,
            fetched_at=candidate.fetched_at,
            corpus=corpus,
        ),
        origin_subtask_id=subtask_id,
        score=round(score, 6),
        relevance=relevance,
        context_before=before,
        context_after=after,
    )


def fingerprint(ev: Evidence) -> str:
    """Near-identical dedupe key: the normalised words of the quote (case, punctuation and spacing do not
    count) plus where it came from — the host for a web page (the same sentence on two pages of one site is one
    fact), the document for a local corpus."""
    origin = host_of(ev.source.url) if ev.source.corpus == WEB_SOURCE and ev.source.url else ev.source.doc_id
    return sha256_hex(" ".join(words(ev.quote)) + "\x00" + origin)


def dedupe_near_identical(evidence: list[Evidence]) -> list[Evidence]:
    """Keep the best-scored of each fingerprint; result sorted best first (ties by id, deterministic)."""
    best: dict[str, Evidence] = {}
    for ev in evidence:
        key = fingerprint(ev)
        if key not in best or ev.score > best[key].score:
            best[key] = ev
    return sorted(best.values(), key=lambda ev: (-ev.score, ev.id))
