"""Anchors: the ``[evidence:ID]`` form every claim carries, and turning a written sentence into a claim."""

from __future__ import annotations

import re

from veracity.domain import Claim

ANCHOR_RE = re.compile(r"\[evidence:([A-Za-z0-9_-]+)\]")


def anchored(text: str, evidence_ids: list[str]) -> str:
    return text + "".join(f" [evidence:{eid}]" for eid in evidence_ids)


def parse_claim(sentence: str) -> Claim:
    """Split a written sentence into its text and the evidence ids of its anchors."""
    ids = ANCHOR_RE.findall(sentence)
    text = re.sub(r"\s+", " ", ANCHOR_RE.sub("", sentence)).strip()
    return Claim(text=text, evidence_ids=list(dict.fromkeys(ids)))
