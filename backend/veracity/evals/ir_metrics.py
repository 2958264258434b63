"""Ranking metrics with the BEIR / trec_eval definitions, one ranked list of document ids at a time.

Divergence from BEIR, on purpose: a query for which the search returns nothing scores 0 here. BEIR (through
pytrec_eval) leaves such a query out of the mean, which flatters a search that returns nothing for hard queries.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence


def ndcg_at_k(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k with linear gain (trec_eval's ``ndcg_cut``): Σ rel_i / log2(i + 1) over the top k, divided by the
    same sum for the ideal ordering of the judged documents. 0 when nothing is relevant."""
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """Share of the relevant documents found in the top k. 0 when nothing is relevant."""
    wanted = set(relevant)
    if not wanted:
        return 0.0
    return len(wanted.intersection(ranked[:k])) / len(wanted)


def all_found_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """1.0 when every relevant document is in the top k (HotpotQA's "both gold paragraphs"), else 0.0."""
    wanted = set(relevant)
    return 1.0 if wanted and wanted.issubset(ranked[:k]) else 0.0


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
