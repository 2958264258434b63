"""The judge's training material as the fit reads it: ``training/judge`` (see its README), written for the
purpose — short passages and long extractor-style pages, each with claims labelled supported / partial /
unsupported by kind (faithful paraphrase, unit conversion, a claim with an unstated extra, changed number, date,
name, negation or antonym, swapped roles, an invented fact), and news-style articles with multi-sentence summaries
labelled per sentence — its split, and its clauses as feature rows.

The model scores clauses the rules leave to it (``learned``: a contradicted clause is unsupported whatever the model
says, and one holding a number or a name no source sentence holds is never supported). A clause the lexical reading
contradicts is left out of the fit even where the fitted ``Sameness`` does not count its contradiction: which ones
count is chosen after the model is fitted. Every other clause of a
supported claim is a positive; a one-clause invented claim (words and meaning the sources lack) is a negative. A
minimal edit the checks do not flag (an antonym, swapped roles, a changed common noun) keeps the source's words and
most of its meaning, so fitting on it would only teach that covering a claim's words makes it less supported; such
clauses, and the clauses of partial claims, are left out of the fit (target -1), and every figure still counts them
(``right_by_kind``)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from veracity.guards.judge.lexical import LexicalJudge
from veracity.guards.judge.signals import LEXICAL_FEATURES, NOT_READ, SEMANTIC_FEATURES, signals, unstated
from veracity.ports import Label, Source
from veracity.semantic.model import SemanticModel
from veracity.semantic.nli import ContradictionModel

INVENTED = "added"
"""The kind of an invented claim: a fact on the passage's topic that it never states."""


@dataclass(frozen=True)
class Example:
    group: str  # the passage or article: kept whole in one fold and one split
    summary: str  # "article/k" for a summary sentence, "" for a passage claim
    claim: str
    source: str
    label: Label
    kind: str


def split_of(group: str) -> str:
    """``fit`` or ``test``: fixed by the id alone, so every tool agrees which items were seen."""
    return "test" if int(hashlib.sha256(group.encode()).hexdigest(), 16) % 5 == 0 else "fit"


def read_material(folder: Path) -> list[Example]:
    out: list[Example] = []
    for path in sorted(folder.glob("passages_*.jsonl")):
        for line in path.open(encoding="utf-8"):
            item = json.loads(line)
            out += [Example(item["id"], "", c["claim"], item["text"], c["label"], c["kind"]) for c in item["claims"]]
    for path in sorted(folder.glob("articles_*.jsonl")):
        for line in path.open(encoding="utf-8"):
            item = json.loads(line)
            for k, summary in enumerate(item["summaries"]):
                out += [
                    Example(item["id"], f"{item['id']}/{k}", s["text"], item["article"], s["label"], s["kind"])
                    for s in summary["sentences"]
                ]
    return out


@dataclass(frozen=True)
class Rows:
    """Clause feature rows of a set of examples, with the example each clause belongs to."""

    x: np.ndarray
    owner: np.ndarray  # example index per clause
    contradicted: np.ndarray  # per clause, by the lexical rules
    context_share: np.ndarray  # per clause: the share of its other words the contradicting sentence covers
    elsewhere: np.ndarray  # per clause: its contradicted number is held by another source sentence
    reader: np.ndarray  # per clause: the contradiction reader's logit (NOT_READ without it)
    share: np.ndarray  # per clause: the share of its content words its closest sentence holds (0 without the reader)
    unstated: np.ndarray  # per clause: holds a number or a name no source sentence holds
    weight: np.ndarray  # per clause: its content words
    target: np.ndarray  # per clause: 1 stated, 0 not, -1 not labelled (left out of the fit)


def clause_rows(examples: list[Example], model: SemanticModel | None, reader: ContradictionModel | None = None) -> Rows:
    judge = LexicalJudge()
    names = SEMANTIC_FEATURES if model is not None else LEXICAL_FEATURES
    x, owner, contradicted, read, share, extra, weight, target = [], [], [], [], [], [], [], []
    context_share, elsewhere = [], []
    for n, e in enumerate(examples):
        analysis = judge.analyse(e.claim, [Source(e.group, e.source)])
        single = len(analysis.results) == 1
        for found, result in zip(signals(analysis, model, reader), analysis.results, strict=True):
            x.append(found.row(names))
            owner.append(n)
            contradicted.append(bool(result.contradiction))
            context_share.append(result.context_share)
            elsewhere.append(result.stated_elsewhere)
            read.append(found.values.get("contradiction", NOT_READ))
            share.append(found.values.get("closest_share", 0.0))
            extra.append(unstated(found.values))
            weight.append(result.weight)
            if result.contradiction or extra[-1]:
                target.append(-1)  # decided (or bounded) by the rules, not the model
            elif e.label == "supported":
                target.append(1)
            elif e.label == "unsupported" and single and e.kind == INVENTED:
                target.append(0)
            else:
                target.append(-1)
    return Rows(
        np.vstack(x),
        np.array(owner),
        np.array(contradicted),
        np.array(context_share),
        np.array(elsewhere),
        np.array(read),
        np.array(share),
        np.array(extra),
        np.array(weight),
        np.array(target),
    )
