"""Fit the offline judge (``guards/data/judge.json``): ``python -m veracity.guards.judge.fit [training/judge]``
(``make fit-judge``).

Training material, and nothing else: ``training/judge``, read into clause rows by
:mod:`veracity.guards.judge.material` (which says which clauses are fitted on). No evaluation set is read.

Split: a passage or article is in the **test** split when ``int(sha256(id), 16) % 5 == 0`` (``material.split_of``) and
is never read while fitting; the rest is the **fit** split. On the fit split, 5-fold cross-validation with each
passage or article kept whole inside one fold gives out-of-fold clause probabilities, and claim labels from them
(``learned.claim_label``). The two cut-offs (below the lower a clause is unsupported, at or above the upper
supported) are chosen together, with the contradiction reader's, when a lexical contradiction counts
(``SAMENESS_GRID``) and from which probability a clause with an unstated number or name is partial, for the best
mean of the two figures the judge is held to: balanced accuracy over multi-sentence inputs — what ``veracity
verify`` labels by their worst claim, and what hallucination is measured on: the articles' summaries, and per
passage its first four supported claims (faithful) and, for each of its unsupported claims, the first three
supported ones with it (hallucinated); a cut-off chosen on single claims would flag too many true sentences, and a
summary of four has four chances to be flagged — and 3-way macro-F1 over the claims (a partly supported claim told
from an unsupported one, which the first figure never asks). Ties go to the better balanced accuracy. The model
is then fitted on the whole fit split and measured once on the test split. Summary figures: a summary is
hallucinated when any sentence is not ``supported`` (gold) and caught when any sentence is judged ``unsupported``
(the rule ``veracity verify`` applies to a multi-sentence input).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from veracity.guards.judge.learned import claim_label, clause_labels
from veracity.guards.judge.material import Example, Rows, clause_rows, read_material, split_of
from veracity.guards.judge.signals import LEXICAL_FEATURES, NOT_READ, SEMANTIC_FEATURES, SIGNS
from veracity.ports import LABEL_ORDER, Label
from veracity.semantic.logistic import L2, auc, logistic_dict, predict, sigmoid, standardiser
from veracity.semantic.model import load_semantics
from veracity.semantic.nli import process_contradiction

FOLDS = 5
MAX_SWEEPS = 500
GRID = np.round(np.arange(0.05, 0.96, 0.01), 2)
COARSE = GRID[::4]
READER_GRID = tuple(
    (logit, share) for logit in (3.5, 4.0, 4.25, 4.5, 4.75, 5.0, 5.25) for share in (0.0, 0.25, 0.5, 0.75)
) + ((math.inf, 1.0),)
"""(logit, share) pairs tried as the contradiction reader's cut-offs: it contradicts a clause when its logit reaches
the first and the clause's closest sentence holds at least that share of its content words ((inf, 1): not used)."""
SAMENESS_GRID = tuple((share, elsewhere) for share in (0.0, 0.75, 0.85, 1.0) for elsewhere in (False, True))
"""(share, unless_elsewhere) pairs tried for when the lexical reading's contradiction counts (``learned.Sameness``):
its sentence covers that share of the clause's other words (the reading itself asks two in three), and, with the
second, no other sentence holds every number of the clause and two in three of its other words. Never "not at all": a
changed number, name or negation in the sentence stating the same fact is a contradiction."""
SAME_FACT = (0.0, False)
"""Every lexical contradiction counts (the lexical judge's rule)."""
OUT = Path(__file__).parents[1] / "data" / "judge.json"


def claim_labels(
    rows: Rows,
    p: np.ndarray,
    t_u: float,
    t_s: float,
    n: int,
    reader: tuple[float, float] = (math.inf, 1.0),
    same: tuple[float, bool] = SAME_FACT,
    partly: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per example, its label index under the cut-offs (``reader``: the contradiction reader's logit and the share of
    the clause its closest sentence must hold for the reader to contradict it; ``same``: when a lexical
    contradiction counts, ``SAMENESS_GRID``; ``partly``: from which probability a clause with an unstated number or
    name is partly supported, None for ``t_s``) and its score (the clauses' weighted mean probability)."""
    labels, scores = np.zeros(n, dtype=int), np.zeros(n)
    lexical = rows.contradicted & (rows.context_share >= same[0]) & ~(same[1] & rows.elsewhere)
    contradicted = lexical | ((rows.reader >= reader[0]) & (rows.share >= reader[1]))
    # Each example's clauses as one slice of the rows sorted by owner (stable: in their order), not a mask over all
    # rows per example — the cut-off search calls this thousands of times.
    order = np.argsort(rows.owner, kind="stable")
    bounds = np.searchsorted(rows.owner[order], np.arange(n + 1))
    for i in range(n):
        mine = order[bounds[i] : bounds[i + 1]]
        hit, extra = list(contradicted[mine]), list(rows.unstated[mine])
        names: list[Label] = clause_labels(p[mine], t_u, t_s, hit, extra, partly)
        labels[i] = LABEL_ORDER.index(claim_label(names, hit))
        stated = np.where(contradicted[mine] | rows.unstated[mine], 0.0, p[mine])
        scores[i] = float(stated @ rows.weight[mine] / rows.weight[mine].sum())
    return labels, scores


def macro_f1(gold: np.ndarray, judged: np.ndarray) -> float:
    f1s = []
    for k in range(3):
        tp = float(((gold == k) & (judged == k)).sum())
        predicted, support = float((judged == k).sum()), float((gold == k).sum())
        precision = tp / predicted if predicted else 0.0
        recall = tp / support if support else 0.0
        f1s.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
    return sum(f1s) / 3


def figures(examples: list[Example], gold: np.ndarray, judged: np.ndarray, p_u: np.ndarray) -> dict[str, Any]:
    """3-way accuracy and macro-F1, AUC of the unsupported probability, recall per kind, and per summary."""
    kinds: dict[str, list[bool]] = {}
    for e, g, j in zip(examples, gold, judged, strict=True):
        kinds.setdefault(f"{e.label}/{e.kind}", []).append(bool(g == j))
    summaries: dict[str, tuple[bool, bool]] = {}
    for e, g, j in zip(examples, gold, judged, strict=True):
        if e.summary:
            hallucinated, caught = summaries.get(e.summary, (False, False))
            summaries[e.summary] = (hallucinated or g != 0, caught or j == 2)
    out: dict[str, Any] = {
        "claims": len(gold),
        "accuracy": round(float((gold == judged).mean()), 3),
        "macro_f1": round(macro_f1(gold, judged), 3),
        "unsupported_auc": round(auc((gold == 2).astype(float), p_u), 3),
        "confusion": {
            LABEL_ORDER[g]: {LABEL_ORDER[j]: int(((gold == g) & (judged == j)).sum()) for j in range(3)}
            for g in range(3)
        },
        "right_by_kind": {k: f"{sum(v)}/{len(v)}" for k, v in sorted(kinds.items())},
    }
    if summaries:
        pos = [c for h, c in summaries.values() if h]
        neg = [not c for h, c in summaries.values() if not h]
        tpr, tnr = sum(pos) / max(1, len(pos)), sum(neg) / max(1, len(neg))
        out["summaries"] = {
            "hallucinated": len(pos),
            "faithful": len(neg),
            "caught": round(tpr, 3),
            "faithful_passed": round(tnr, 3),
            "balanced_accuracy": round((tpr + tnr) / 2, 3),
        }
    return out


def _model(
    params: tuple[Any, ...],
    names: tuple[str, ...],
    t_u: float,
    t_s: float,
    reader: tuple[float, float],
    same: tuple[float, bool],
    partly: float,
) -> dict[str, Any]:
    return {
        "unstated_partial_from": partly,
        "contradiction_above": None if math.isinf(reader[0]) else reader[0],
        "contradiction_share": reader[1],
        "lexical_share": same[0],
        "lexical_unless_elsewhere": same[1],
        "features": list(names),
        **logistic_dict(params),
        "threshold": t_s,
        "unsupported_below": t_u,
    }


def _subset(rows: Rows, keep: np.ndarray) -> tuple[Rows, list[int]]:
    """The clauses of the kept examples, renumbered; and the kept examples' indices."""
    kept = [int(i) for i in np.flatnonzero(keep)]
    index = {old: new for new, old in enumerate(kept)}
    mine = np.isin(rows.owner, kept)
    owner = np.array([index[int(o)] for o in rows.owner[mine]])
    return Rows(
        rows.x[mine],
        owner,
        rows.contradicted[mine],
        rows.context_share[mine],
        rows.elsewhere[mine],
        rows.reader[mine],
        rows.share[mine],
        rows.unstated[mine],
        rows.weight[mine],
        rows.target[mine],
    ), kept


def fit_signed(x: np.ndarray, y: np.ndarray, signs: np.ndarray) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """Weights, bias, mean, scale of an L2-regularised logistic regression on standardised ``x`` whose weights keep
    ``signs`` (1: ≥ 0, -1: ≤ 0, 0: free): cyclic coordinate descent, one clipped Newton step per coordinate."""
    mean, scale = standardiser(x)
    z = (x - mean) / scale
    w = np.zeros(z.shape[1])
    b = float(np.log((y.mean() + 1e-9) / (1 - y.mean() + 1e-9)))
    for _ in range(MAX_SWEEPS):
        moved = 0.0
        for j in range(-1, z.shape[1]):
            p = sigmoid(z @ w + b)
            if j < 0:
                step = float((p - y).mean() / ((p * (1 - p)).mean() + 1e-9))
                b -= step
            else:
                grad = z[:, j] @ (p - y) / len(y) + L2 * w[j]
                hess = (z[:, j] ** 2) @ (p * (1 - p)) / len(y) + L2
                new = w[j] - grad / hess
                new = max(new, 0.0) if signs[j] > 0 else min(new, 0.0) if signs[j] < 0 else new
                step, w[j] = new - w[j], new
            moved = max(moved, abs(step))
        if moved < 1e-7:
            break
    return w, b, mean, scale


def _fit(rows: Rows, names: tuple[str, ...]) -> tuple[Any, ...]:
    use = rows.target >= 0
    signs = np.array([SIGNS.get(n, -1) for n in names])
    return fit_signed(rows.x[use], rows.target[use].astype(float), signs)


def inputs(examples: list[Example]) -> list[tuple[list[int], bool]]:
    """Multi-sentence inputs (example indices, hallucinated?): the summaries, and per passage its supported claims
    with and without one of its unsupported ones."""
    out: dict[str, tuple[list[int], bool]] = {}
    by_group: dict[str, tuple[list[int], list[int]]] = {}
    for i, e in enumerate(examples):
        if e.summary:
            members, hallucinated = out.get(e.summary, ([], False))
            out[e.summary] = ([*members, i], hallucinated or e.label != "supported")
        elif e.label != "partial":
            by_group.setdefault(e.group, ([], []))[e.label == "unsupported"].append(i)
    for group, (supported, unsupported) in by_group.items():
        out[group] = (supported[:4], False)
        out.update({f"{group}+{u}": ([*supported[:3], u], True) for u in unsupported})
    return [v for v in out.values() if v[0]]


def input_balanced_accuracy(groups: list[tuple[list[int], bool]], labels: np.ndarray) -> float:
    caught = [bool((labels[members] == 2).any()) for members, _ in groups]
    pos = [c for c, (_, h) in zip(caught, groups, strict=True) if h]
    neg = [not c for c, (_, h) in zip(caught, groups, strict=True) if not h]
    return (sum(pos) / max(1, len(pos)) + sum(neg) / max(1, len(neg))) / 2


def fit_mode(examples: list[Example], rows: Rows, names: tuple[str, ...]) -> dict[str, Any]:
    gold = np.array([LABEL_ORDER.index(e.label) for e in examples])
    in_fit = np.array([split_of(e.group) == "fit" for e in examples])
    fit_rows, fit_ids = _subset(rows, in_fit)
    folds = np.array([int(hashlib.sha256(examples[i].group.encode()).hexdigest(), 16) // 5 % FOLDS for i in fit_ids])
    clause_fold = folds[fit_rows.owner]
    p = np.zeros(len(fit_rows.x))
    for k in range(FOLDS):
        train, _ = _subset(fit_rows, folds != k)
        p[clause_fold == k] = predict(fit_rows.x[clause_fold == k], *_fit(train, names))
    gf, n = gold[fit_ids], len(fit_ids)
    multi = inputs([examples[i] for i in fit_ids])

    # Both cut-offs together (a clause between them is partial, and a claim with one unsupported clause and no
    # supported one is unsupported, so the upper cut-off moves what is caught too), with the contradiction reader's
    # cut-off, when a lexical contradiction counts and from which probability a clause with an unstated number or
    # name is partly supported: the best mean of the two figures the judge is held to — balanced accuracy over the
    # multi-sentence inputs (hallucinations caught) and 3-way macro-F1 over the claims (supported / partial /
    # unsupported told apart) — ties to the better balanced accuracy. The reader's cut-off, then the lexical one, then
    # the reader's again are each chosen on a coarse grid of the pair (with the others held), then the pair on the
    # fine grid, then the unstated clause's cut-off, then the pair again.
    def best(
        lows: np.ndarray,
        highs: np.ndarray,
        readers: tuple[tuple[float, float], ...],
        sames: tuple[tuple[float, bool], ...],
        partlies: tuple[float | None, ...] = (None,),
    ) -> tuple[float, float, tuple[float, float], tuple[float, bool], float | None, float, float]:
        scored = []
        for t in readers:
            for s in sames:
                for x in partlies:
                    for lo in lows:
                        for hi in highs:
                            if hi < lo:
                                continue
                            labels = claim_labels(fit_rows, p, float(lo), float(hi), n, t, s, x)[0]
                            ba = input_balanced_accuracy(multi, labels)
                            f1 = macro_f1(gf, labels)
                            # ties: the reader overruling least ((inf, 1): not at all), the lexical contradictions
                            # counting most, the unstated clause's cut-off at the supported one
                            scored.append(
                                (round((ba + f1) / 2, 4), round(ba, 4), t, (-s[0], not s[1]), x is None, x, lo, hi)
                            )
        score, ba, t, (share, anywhere), _, x, lo, hi = max(scored, key=lambda k: k[:5] + (k[6], k[7]))
        return ba, score, t, (-share, not anywhere), x, float(lo), float(hi)

    readers = READER_GRID if bool((fit_rows.reader > NOT_READ).any()) else ((math.inf, 1.0),)
    reader = best(COARSE, COARSE, readers, (SAME_FACT,))[2]
    same = best(COARSE, COARSE, (reader,), SAMENESS_GRID)[3]
    reader = best(COARSE, COARSE, readers, (same,))[2]
    _, _, _, _, _, t_u, t_s = best(GRID, GRID, (reader,), (same,))

    def partial_from(t_u: float, t_s: float) -> float:
        """From which probability in [t_u, t_s] a clause with an unstated number or name is partial."""
        partlies = (None, *(float(g) for g in GRID if t_u <= g < t_s))
        chosen = best(np.array([t_u]), np.array([t_s]), (reader,), (same,), partlies)[4]
        return t_s if chosen is None else chosen

    partly = partial_from(t_u, t_s)
    _, _, _, _, _, t_u, t_s = best(GRID, GRID, (reader,), (same,), (partly,))
    partly = partial_from(t_u, t_s)  # again for the final pair: always within it
    ba = best(np.array([t_u]), np.array([t_s]), (reader,), (same,), (partly,))[0]
    params = _fit(fit_rows, names)
    oof_labels, oof_scores = claim_labels(fit_rows, p, t_u, t_s, n, reader, same, partly)
    test_rows, test_ids = _subset(rows, ~in_fit)
    test_labels, test_scores = claim_labels(
        test_rows, predict(test_rows.x, *params), t_u, t_s, len(test_ids), reader, same, partly
    )
    return {
        "stated": _model(params, names, t_u, t_s, reader, same, partly),
        "cv": {
            "folds": FOLDS,
            "clauses_fitted": int((fit_rows.target >= 0).sum()),
            "inputs": {"n": len(multi), "hallucinated": sum(h for _, h in multi), "balanced_accuracy": round(ba, 3)},
            **figures([examples[i] for i in fit_ids], gf, oof_labels, 1 - oof_scores),
        },
        "test": figures([examples[i] for i in test_ids], gold[test_ids], test_labels, 1 - test_scores),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m veracity.guards.judge.fit", description=__doc__.split("\n")[0])
    parser.add_argument("material", type=Path, nargs="?", default=Path("training/judge"))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    examples = read_material(args.material)
    if not examples:
        print(f"no training material under {args.material}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    semantics = load_semantics()
    if semantics.model is None:
        print(f"the semantic model did not load: {semantics.reason}", file=sys.stderr)
        return 1
    groups = sorted({e.group for e in examples})
    result: dict[str, Any] = {
        "model": semantics.model.id,
        "fitted": datetime.now(UTC).date().isoformat(),
        "split": "test = int(sha256(passage or article id), 16) % 5 == 0 (veracity.guards.judge.material.split_of), "
        "never read when fitting; folds = (sha256 // 5) % 5 over the fit split, each passage or article whole",
        "selection": "over out-of-fold clause probabilities: the pair of cut-offs (unsupported below, supported at or "
        "above) with the best mean of balanced accuracy over multi-sentence inputs (worst claim) and 3-way macro-F1 "
        "over claims, ties to the better balanced accuracy; the contradiction reader's (logit, share), then when a "
        "lexical contradiction counts (share, unless stated elsewhere), then the reader's again, each on a coarse "
        "grid of the pair; the pair on the fine grid; from which probability a clause with an unstated number or "
        "name is partial; the pair again",
        "sources": [
            {
                "name": "Veracity's judge material: passages and news-style articles with labelled claims and "
                "summaries, written for the purpose",
                "licence": "Apache-2.0",
                "path": str(args.material),
                "claims": len(examples),
                "fit_groups": sum(split_of(g) == "fit" for g in groups),
                "test_groups": [g for g in groups if split_of(g) == "test"],
            }
        ],
    }
    reader = process_contradiction(True).model
    if reader is None:
        print(f"the contradiction reader did not load: {process_contradiction(True).reason}", file=sys.stderr)
        return 1
    result["reader"] = reader.id
    for mode, model, names in (("semantic", semantics.model, SEMANTIC_FEATURES), ("lexical", None, LEXICAL_FEATURES)):
        result[mode] = fit_mode(examples, clause_rows(examples, model, reader if model else None), names)
        print(f"{mode}: cv {json.dumps(result[mode]['cv'])}\n{mode}: test {json.dumps(result[mode]['test'])}")
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
