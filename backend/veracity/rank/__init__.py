"""Ranking of search hits: lexical, trust, recency, title and geographic terms; optional embedding rerank."""
