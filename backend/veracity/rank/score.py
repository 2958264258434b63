"""Ranking search hits for one query. Every term is a setting (``RankSettings``) with a documented default:

score = bm25        × BM25 of the query over the hit's title + snippet, computed over this query's hits and
                      scaled so the best is 1
      + provider    × the provider's own order (1 for its first hit, falling linearly to 0)
      + title       × share of the query's content words found in the title
      + trust       × domain trust of the host (data table; local documents count as the table's default)
      + recency     × 0.5 ** (age in days / half-life), from the best known date (0 when none is known)
      − thin        when the snippet is shorter than ``thin_snippet_chars``
      − geo         when the query and the hit name places and share no country (``veracity.rank.geo``)

With ``rerank`` on and the embedder's wheels installed, the sum above is fused with the cosine similarity of
query and hit (all-MiniLM-L6-v2, ``veracity.rank.embed``): ``(1 − w)·minmax(sum) + w·minmax(cosine)``.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime

from veracity.fetch.canonical import host_of
from veracity.ports import SearchHit
from veracity.rank.embed import Embedder, fuse_scores
from veracity.rank.geo import countries_named, diverges
from veracity.rank.trust import DomainTrust
from veracity.settings import RankSettings
from veracity.text import content_terms, words

_K1, _B = 1.2, 0.75


@dataclass(frozen=True)
class Ranker:
    settings: RankSettings
    trust: DomainTrust
    embedder: Embedder | None = None
    """Reranks with sentence embeddings when given (``RankSettings.rerank``)."""

    def rank(self, query: str, hits: list[SearchHit], *, today: date | None = None) -> list[SearchHit]:
        """``hits`` rescored and sorted best first (ties keep the provider's order); each carries its terms."""
        if not hits:
            return []
        today = today or datetime.now(UTC).date()
        terms = content_terms(query)
        bm25 = _bm25([words(f"{h.title} {h.text}") for h in hits], terms)
        top = max(bm25) or 1.0
        query_places = countries_named(query)
        n = len(hits)
        scored: list[tuple[float, int, SearchHit]] = []
        for i, hit in enumerate(hits):
            parts = self._terms(hit, terms, query_places, today)
            parts["bm25"] = self.settings.bm25_weight * bm25[i] / top
            parts["provider"] = self.settings.provider_weight * (1.0 - i / n)
            total = round(sum(parts.values()), 6)
            scored.append((total, i, replace(hit, score=total, rank_terms=parts)))
        if self.embedder is not None:
            scored = self._rerank(query, scored)
        scored.sort(key=lambda t: (-t[0], t[1]))
        return [hit for _, _, hit in scored]

    def _rerank(self, query: str, scored: list[tuple[float, int, SearchHit]]) -> list[tuple[float, int, SearchHit]]:
        assert self.embedder is not None
        sims = self.embedder.similarities(query, [f"{h.title}. {h.text}" for _, _, h in scored])
        fused = fuse_scores([t for t, _, _ in scored], sims, weight=self.settings.rerank_weight)
        out = []
        for (_, i, hit), sim, score in zip(scored, sims, fused, strict=True):
            terms = {**hit.rank_terms, "similarity": round(sim, 6)}
            out.append((round(score, 6), i, replace(hit, score=round(score, 6), rank_terms=terms)))
        return out

    def _terms(self, hit: SearchHit, terms: list[str], query_places: frozenset[str], today: date) -> dict[str, float]:
        s = self.settings
        title_words = set(words(hit.title))
        parts = {
            "title": s.title_weight * (len(title_words & set(terms)) / len(terms) if terms else 0.0),
            "trust": s.trust_weight * (self.trust.of(host_of(hit.url)) if hit.url else self.trust.default),
            "recency": s.recency_weight * _recency(hit.published, today, s.recency_half_life_days),
            "thin": -s.thin_snippet_penalty if len(hit.text.strip()) < s.thin_snippet_chars else 0.0,
            "geo": 0.0,
        }
        if query_places and diverges(query_places, countries_named(f"{hit.title}. {hit.text}")):
            parts["geo"] = -s.geo_penalty
        return parts


def _bm25(docs: list[list[str]], terms: list[str]) -> list[float]:
    """Okapi BM25 of ``terms`` over the small collection ``docs`` (IDF from the collection itself)."""
    n = len(docs)
    avg = sum(len(d) for d in docs) / n or 1.0
    df = Counter(t for d in docs for t in set(d) if t in terms)
    out = []
    for doc in docs:
        tf = Counter(doc)
        score = 0.0
        for term in terms:
            if tf[term]:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * tf[term] * (_K1 + 1) / (tf[term] + _K1 * (1 - _B + _B * len(doc) / avg))
        out.append(score)
    return out


def _recency(published: str | None, today: date, half_life_days: float) -> float:
    if not published:
        return 0.0
    try:
        when = date.fromisoformat(published[:10])
    except ValueError:
        return 0.0
    age = max(0, (today - when).days)
    return float(0.5 ** (age / half_life_days))
