"""Sentence-level evidence from search hits: fact-shaped sentences with exact offsets and a content hash."""

from __future__ import annotations

import re

from veracity.domain import WEB_SOURCE, Evidence, SourceRef
from veracity.fetch.canonical import host_of
from veracity.graph.context import SearchHit
from veracity.search.memindex import ANALYZER, index_stems
from veracity.text import content_terms, sentence_spans, sha256_hex, words

_MIN_CHARS, _MAX_CHARS, _MIN_WORDS = 30, 600, 5
MIN_FOCUS_MASS = 0.5
"""The share of the question's focus-term weight (rarity in the corpus) a sentence must carry to be kept."""
CONTEXT_CHARS = 280
"""Source text kept either side of a quote, so a reader sees the quote where it stood (cut at a word)."""
_TERMINAL = re.compile(r"[.!][\"'”’)\]]*$")
_NAVISH = re.compile(r"^(see also|references|external links|click|read more|share|subscribe)\b", re.I)


def is_fact_shaped(sentence: str) -> bool:
    """A declarative sentence of reasonable length, not a heading, list stub or navigation text."""
    if not (_MIN_CHARS <= len(sentence) <= _MAX_CHARS):
        return False
    if sentence.startswith("#") or len(words(sentence)) < _MIN_WORDS or sentence.endswith((":", "?")):
        return False
    if not _TERMINAL.search(sentence):  # a heading, caption or menu line, not a sentence
        return False
    if _NAVISH.match(sentence):
        return False
    letters = sum(ch.isalpha() for ch in sentence)
    return letters >= 0.6 * len(sentence.replace(" ", ""))


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


def focus_weights(focus_terms: list[str], weights: dict[str, float] | None) -> dict[str, float]:
    """The focus terms' weights, keyed by index stem (``index_stems``), from the corpus's ``weights`` (as
    ``LocalSearch.term_weights`` returns them); empty when there is nothing to weigh by — no weights, or a
    corpus that holds none of the focus words."""
    if not weights:
        return {}
    mine = {stem: weights.get(stem, 0.0) for stem in index_stems(focus_terms)}
    return mine if sum(mine.values()) > 0 else {}


def carries_focus(stems: set[str], weights: dict[str, float]) -> bool:
    """Whether a sentence (its stems, with its source title's) carries what the question is about: it names
    the question's most specific term (the rarest one the corpus holds) or carries at least ``MIN_FOCUS_MASS``
    of the focus terms' total weight. For "history of coffee production" a sentence about film or oil
    production shares only "production" (and perhaps "history") and is dropped; one about coffee is kept."""
    top = max(weights.values())
    if any(w == top and t in stems for t, w in weights.items()):
        return True
    return sum(w for t, w in weights.items() if t in stems) >= MIN_FOCUS_MASS * sum(weights.values())


def extract_evidence(
    hit: SearchHit,
    *,
    query: str,
    focus_terms: list[str],
    subtask_id: str,
    corpus: str,
    fetched_at: str,
    weights: dict[str, float] | None = None,
) -> list[Evidence]:
    """Fact-shaped sentences of a hit that touch the question's own words (in the sentence or the title).

    ``weights`` is each focus word's rarity in the corpus, keyed by index stem (``LocalSearch.term_weights``);
    with them a sentence must also carry enough of the question (``carries_focus``), its words matched to the
    focus words by stem ("elections" names "election"). Without them, any focus word (exact) is enough."""
    terms = set(content_terms(query))
    focus = set(focus_terms) or terms
    weighed = focus_weights(sorted(focus), weights)
    title_words = set(words(hit.title))
    title_stems = set(ANALYZER.tokens(hit.title)) if weighed else set()
    out: list[Evidence] = []
    for s, e in sentence_spans(hit.text):
        sentence = hit.text[s:e]
        if not is_fact_shaped(sentence):
            continue
        sentence_words = set(words(sentence))
        focus_hit = len(focus & (sentence_words | title_words)) / max(1, len(focus))
        if weighed:
            if not carries_focus(set(ANALYZER.tokens(sentence)) | title_stems, weighed):
                continue
        elif focus_hit == 0:
            continue
        overlap = 0.7 * focus_hit + 0.3 * len(terms & sentence_words) / max(1, len(terms))
        start, end = hit.start + s, hit.start + e
        before, after = context_around(hit.text, s, e)
        out.append(
            Evidence(
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
                    fetched_at=fetched_at,
                    corpus=corpus,
                ),
                origin_subtask_id=subtask_id,
                # The passage's rank score, lifted by how much of the sub-question the sentence itself covers;
                # earlier sentences of a passage (Wikipedia leads put the definition first) get a small edge.
                score=round(hit.score * (0.5 + overlap) * (1.0 - min(s, 2000) / 20000), 6),
                context_before=before,
                context_after=after,
            )
        )
    return out


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
