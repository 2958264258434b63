"""Anchors: the ``[evidence:ID]`` form every claim carries, turning a written sentence into a claim, and a draft
written back as anchored sentences (``render_draft``)."""

from __future__ import annotations

import re

from veracity.domain import Claim, SectionDraft

ANCHOR_RE = re.compile(r"\[evidence:([A-Za-z0-9_-]+)\]")


def anchored(text: str, evidence_ids: list[str]) -> str:
    return text + "".join(f" [evidence:{eid}]" for eid in evidence_ids)


def parse_claim(sentence: str) -> Claim:
    """Split a written sentence into its text and the evidence ids of its anchors."""
    ids = ANCHOR_RE.findall(sentence)
    text = re.sub(r"\s+", " ", ANCHOR_RE.sub("", sentence)).strip()
    return Claim(text=text, evidence_ids=list(dict.fromkeys(ids)))


def render_draft(draft: list[SectionDraft]) -> str:
    """A draft as the reviewer reads it: headings and anchored sentences."""
    lines: list[str] = []
    for section in draft:
        lines += [f"## {section.title}"] + [anchored(c.text, c.evidence_ids) for c in section.claims]
    return "\n".join(lines)
