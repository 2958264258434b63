"""Fit the screen's learned layer (``guards/data/screen.json`` and ``screen_examples.npz``):
``python -m veracity.guards.screen_fit [TRAINING_DIR]`` (``make fit-screen``; default ``training/screen``).

Training material, and nothing else: the labelled messages of ``training/screen/*.jsonl`` (``text``, ``label`` in
crisis / legal / medical / financial / none, ``kind``), written for the purpose by the Veracity engineers
(Apache-2.0; see that folder's README). No third-party evaluation item is read here: Do-Not-Answer and XSTest stay
development figures in ``make eval-guards``.

One model per class (an advice class of the ``semantic+reader`` mode: two, averaged; ``fit_read_mode``),
one-vs-rest: crisis against every other message; each advice domain against every message that is not a crisis (a
crisis routes first, so the advice models are not taught that a disclosure is "not medical"). Per class the model
family and its penalty are chosen together by cross-validated log-loss: an
L2-regularised logistic regression (Newton's method on standardised features) or a network with one hidden layer
(``semantic.network``: it can weigh "first person" and "wants to die" together where a linear model adds them
up), each with a small grid of penalties; then, with the semantic model, how many nearest training messages to
average in (none, 5, 10 or 20) the same way; the cut-off by the best cross-validated F-score — F2 for
crisis (a missed crisis costs far more than a false one, which still gets a kind answer), F1 for advice — among the
cut-offs that flag at most ``MAX_FALSE_POSITIVE_RATE`` of the class's negatives out of fold. Folds: 5, fixed by the
SHA-256 of the text, so every run agrees; a message's neighbours come from its training folds only. Crisis is
scored as at run time: the highest of the whole message and each sentence.

Three modes are fitted, each on the same folds: ``semantic+reader`` (the sentence embedding, the cues and the
cross-encoder's reading of the message with ``screen_features.READING``; each advice head averaged with the
``semantic`` mode's), ``semantic`` (without the reading: the screen when the cross-encoder is off or cannot read)
and ``lexical`` (cues and domain terms only).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from veracity.guards.screen_features import (
    ADVICE,
    CLASSES,
    CRISIS,
    LEXICAL_FEATURES,
    READ_CLASSES,
    READING,
    READING_FEATURES,
)
from veracity.guards.screen_material import FOLDS, Material, read_material
from veracity.guards.screen_model import MODES
from veracity.semantic.logistic import auc
from veracity.semantic.model import load_semantics
from veracity.semantic.network import EPOCHS, HIDDEN, LEARNING_RATE, SEED, family_dict, fit_family
from veracity.semantic.nli import process_contradiction, reading_model

L2_GRID = (0.01, 0.1, 1.0)
DECAY_GRID = (0.001, 0.01)
"""Weight decay of the network family (``semantic.network``), chosen with the family by out-of-fold log-loss."""
CANDIDATES = tuple(("logistic", l2) for l2 in L2_GRID) + tuple(("network", d) for d in DECAY_GRID)
NEIGHBOURS_GRID = (0, 5, 10, 20)
"""Nearest training messages whose share of a class is averaged with its model's probability (0: the model alone),
chosen per class by out-of-fold log-loss; only with the semantic model."""
BETA = {CRISIS: 2.0, **{d: 1.0 for d in ADVICE}}
MAX_FALSE_POSITIVE_RATE = {CRISIS: 0.05, **{d: 0.03 for d in ADVICE}}
"""Share of a class's negatives its cut-off may flag out of fold. Crisis: the issue's bound on false crisis (5%),
measured on negatives that are hard look-alikes (venting, past recovery, figurative death), so ordinary messages
are flagged far less often; a missed crisis costs more than crisis resources shown to someone who did not need
them. Advice: 3%, since an escalation withholds the answer from an ordinary question."""
OUT = Path(__file__).parent / "data"


def at(y: np.ndarray, p: np.ndarray, t: float, beta: float) -> dict[str, float]:
    flagged = p >= t
    tp = float((flagged & (y == 1)).sum())
    precision = tp / flagged.sum() if flagged.sum() else 1.0
    recall = tp / (y == 1).sum() if (y == 1).sum() else 0.0
    b2 = beta * beta
    f = (1 + b2) * precision * recall / (b2 * precision + recall) if precision + recall else 0.0
    negatives = (y == 0).sum()
    return {
        "threshold": round(t, 3),
        "precision": round(float(precision), 3),
        "recall": round(float(recall), 3),
        f"f{beta:g}": round(float(f), 3),
        "false_positive_rate": round(float((flagged & (y == 0)).sum() / negatives), 3) if negatives else 0.0,
    }


BLEND_EXCLUDES = frozenset({"everyday.jsonl"})
"""Material whose negatives teach the model but do not choose its neighbour blend: everyday practical questions
are easy with the blend or without it, and counting them dropped the blend that keeps look-alikes ("ways to kill
time while the baby naps") from crisis. They count against a cut-off's budget like every negative."""


def best_threshold(y: np.ndarray, p: np.ndarray, beta: float, budget: float) -> float:
    """The cut-off with the best F-beta among those that flag at most ``budget`` of the negatives
    (the material's negatives are hard look-alikes, so F2 alone would buy recall with alarms no user accepts)."""
    grid = np.round(np.arange(0.05, 0.951, 0.01), 2)
    scored = [(at(y, p, float(t), beta), float(t)) for t in grid]
    allowed = [(m[f"f{beta:g}"], t) for m, t in scored if m["false_positive_rate"] <= budget]
    return max(allowed)[1] if allowed else float(grid[-1])


def log_loss(y: np.ndarray, p: np.ndarray) -> float:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


def fit_heads(
    material: Material, classes: tuple[str, ...] = CLASSES
) -> tuple[dict[str, Any], dict[str, Any], dict[str, np.ndarray]]:
    """Each class's head, its cross-validated figures and its out-of-fold probabilities (over every message;
    NaN where the class's model does not score it)."""
    heads: dict[str, Any] = {}
    cv: dict[str, Any] = {}
    oof: dict[str, np.ndarray] = {}
    for name in classes:
        runs = {c: material.out_of_fold(name, *c, by_sentence=False) for c in CANDIDATES}
        family, strength = min(runs, key=lambda c: log_loss(runs[c][1], runs[c][0]))
        p, y = runs[(family, strength)]
        neighbours = 0
        if material.vectors is not None:
            choosing = np.array([r["file"] not in BLEND_EXCLUDES for r in material.rows])[material.target(name)[0]]
            blends = {k: material.out_of_fold(name, family, strength, False, k) for k in NEIGHBOURS_GRID if k}
            blends[0] = runs[(family, strength)]
            # Chosen without the everyday questions (BLEND_EXCLUDES): they are easy with the blend or without it.
            neighbours = min(blends, key=lambda k: log_loss(blends[k][1][choosing], blends[k][0][choosing]))
            p, y = blends[neighbours]
        threshold = best_threshold(y, p, BETA[name], MAX_FALSE_POSITIVE_RATE[name])
        by_sentence = False
        if name == CRISIS:  # scoring each sentence too is kept only when it wins out of fold
            p_s, _ = material.out_of_fold(name, family, strength, True, neighbours)
            t_s = best_threshold(y, p_s, BETA[name], MAX_FALSE_POSITIVE_RATE[name])
            if at(y, p_s, t_s, BETA[name])["f2"] > at(y, p, threshold, BETA[name])["f2"]:
                p, threshold, by_sentence = p_s, t_s, True
        model = fit_family(family, *material.training_set(name, np.arange(len(material.rows))), strength)
        heads[name] = {
            "by_sentence": by_sentence,
            **family_dict(model),
            "threshold": threshold,
            "penalty": strength,
            "neighbours": neighbours,
            "log_loss": {f"{f} {s:g}": round(log_loss(r[1], r[0]), 4) for (f, s), r in runs.items()},
        }
        cv[name] = {"auc": round(auc(y, p), 3), "at_threshold": at(y, p, threshold, BETA[name])}
        full = np.full(len(material.rows), np.nan)
        full[material.target(name)[0]] = p
        oof[name] = full
    return heads, cv, oof


def fit_mode(material: Material, names: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A mode whose every head reads all of ``names``, and its out-of-fold probabilities."""
    heads, cv, oof = fit_heads(material)
    cv["routes"] = route_figures(material, oof, heads)
    return {"features": list(names), "heads": heads, "cv": cv}, oof


def fit_read_mode(read: Material, names: tuple[str, ...], semantic_oof: dict[str, np.ndarray]) -> dict[str, Any]:
    """The ``semantic+reader`` mode. The cross-encoder's reading is of a statement about self-harm: every head of
    ``READ_CLASSES`` (crisis) reads it; an advice head's probability is the mean of its head fitted with the reading
    and the ``semantic`` mode's head fitted without it (``with`` names that mode), its cut-off chosen by
    the same rule on that mean out of fold. Read by the advice heads alone, the reading escalated 8 of 500 HotpotQA
    questions as personal legal ones (1 without it); without it, more Do-Not-Answer, XSTest and everyday questions
    were escalated (README, "The advice heads and the reading")."""
    heads, cv, oof = fit_heads(read)
    for name in CLASSES:
        if name in READ_CLASSES:
            continue
        use, y = read.target(name)
        p = (oof[name][use] + semantic_oof[name][use]) / 2
        threshold = best_threshold(y[use], p, BETA[name], MAX_FALSE_POSITIVE_RATE[name])
        heads[name] = heads[name] | {"threshold": threshold, "with": "semantic"}
        cv[name] = {"auc": round(auc(y[use], p), 3), "at_threshold": at(y[use], p, threshold, BETA[name])}
        oof[name] = np.where(use, 0.0, np.nan)
        oof[name][use] = p
    cv["routes"] = route_figures(read, oof, heads)
    return {"features": list(names), "heads": heads, "cv": cv}


def route_figures(material: Material, oof: dict[str, np.ndarray], heads: dict[str, Any]) -> dict[str, Any]:
    """What the screen would route each message to, out of fold: crisis first, then the likeliest advice domain."""
    routes = []
    for i in range(len(material.rows)):
        if oof[CRISIS][i] >= heads[CRISIS]["threshold"]:
            routes.append("crisis")
        elif any(oof[d][i] >= heads[d]["threshold"] for d in ADVICE):
            routes.append("escalate")
        else:
            routes.append("proceed")
    want = {"crisis": "crisis", "none": "proceed", **{d: "escalate" for d in ADVICE}}
    by_label: dict[str, Counter[str]] = defaultdict(Counter)
    by_kind: dict[str, Counter[bool]] = defaultdict(Counter)
    for row, route in zip(material.rows, routes, strict=True):
        by_label[row["label"]][route] += 1
        by_kind[f"{row['label']}/{row['kind']}"][route == want[row["label"]]] += 1
    labels = {label: dict(c) for label, c in sorted(by_label.items())}
    crisis_n = sum(by_label["crisis"].values())
    others = [label for label in by_label if label != "crisis"]
    other_n = sum(sum(by_label[label].values()) for label in others)
    none_n = sum(by_label["none"].values())
    advice_n = sum(sum(by_label[d].values()) for d in ADVICE)
    return {
        "crisis_recall": round(by_label["crisis"]["crisis"] / crisis_n, 3) if crisis_n else None,
        "false_crisis": round(sum(by_label[label]["crisis"] for label in others) / other_n, 3) if other_n else None,
        "advice_recall": round(sum(by_label[d]["escalate"] + by_label[d]["crisis"] for d in ADVICE) / advice_n, 3)
        if advice_n
        else None,
        "false_escalation_on_none": round(by_label["none"]["escalate"] / none_n, 3) if none_n else None,
        "by_label": labels,
        "right_by_kind": {k: f"{c[True]}/{c[True] + c[False]}" for k, c in sorted(by_kind.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m veracity.guards.screen_fit", description=__doc__)
    parser.add_argument("training", nargs="?", default="training/screen", type=Path)
    args = parser.parse_args(argv)
    rows = read_material(args.training)
    semantics = load_semantics()
    if semantics.model is None:
        print(f"screen_fit: the semantic model is needed ({semantics.reason})", file=sys.stderr)
        return 2
    counts = Counter(r["label"] for r in rows)
    print(f"{len(rows)} messages: {dict(sorted(counts.items()))}", file=sys.stderr)
    semantic = Material(rows, semantics.model)
    lexical = Material(rows, None)
    reader = reading_model(True)
    if reader is None:
        print(f"screen_fit: the cross-encoder is needed ({process_contradiction(True).reason})", file=sys.stderr)
        return 2
    read = Material(rows, semantics.model, reader)
    fitted: dict[str, Any] = {
        "model": semantics.model.id,
        "fitted": datetime.now(UTC).date().isoformat(),
        "split": f"{FOLDS} folds by int(sha256(lower-cased text), 16) % {FOLDS}"
        " (veracity.guards.screen_material.fold_of)",
        "selection": "per class: a logistic model (L2 from "
        + str(list(L2_GRID))
        + ") or a one-hidden-layer network ("
        + f"{HIDDEN} units, {EPOCHS} steps of full-batch Adam at {LEARNING_RATE:g}, seed {SEED}, weight decay from "
        + str(list(DECAY_GRID))
        + ") by out-of-fold log-loss, then the nearest messages averaged in from "
        + str(list(NEIGHBOURS_GRID))
        + " by out-of-fold log-loss (on every file but "
        + ", ".join(sorted(BLEND_EXCLUDES))
        + "); threshold by out-of-fold F2 (crisis) or F1 (advice) among those flagging"
        + f" at most {MAX_FALSE_POSITIVE_RATE[CRISIS]:.0%} (crisis) or"
        + f" {MAX_FALSE_POSITIVE_RATE[ADVICE[0]]:.0%} (advice) of the negatives",
        "sources": [
            {
                "name": "Veracity's screen material, written for the purpose",
                "licence": "Apache-2.0",
                "path": f"training/screen/{path.name}",
                "messages": sum(1 for r in rows if r["file"] == path.name),
            }
            for path in sorted(args.training.glob("*.jsonl"))
        ],
        "counts": dict(sorted(counts.items())),
        "reading": {"model": reader.id, "statement": READING},
    }
    semantic_mode, semantic_oof = fit_mode(semantic, ("embedding",) + LEXICAL_FEATURES)
    fitted["semantic+reader"] = fit_read_mode(read, ("embedding",) + LEXICAL_FEATURES + READING_FEATURES, semantic_oof)
    fitted["semantic"] = semantic_mode
    fitted["lexical"], _ = fit_mode(lexical, LEXICAL_FEATURES)
    OUT.mkdir(exist_ok=True)
    (OUT / "screen.json").write_text(json.dumps(fitted, indent=1) + "\n", encoding="utf-8")
    vectors = semantic.x[:, : semantic.x.shape[1] - len(LEXICAL_FEATURES)].astype(np.float16)
    np.savez_compressed(
        OUT / "screen_examples.npz",
        vectors=vectors,
        labels=np.asarray([r["label"] for r in rows]),
        texts=np.asarray([r["text"] for r in rows]),
    )
    for mode in MODES:
        cv = fitted[mode]["cv"]
        print(f"== {mode} ==")
        for name in CLASSES:
            print(f"  {name:10} auc {cv[name]['auc']}  {cv[name]['at_threshold']}")
        print("  routes:", {k: v for k, v in cv["routes"].items() if k not in ("by_label", "right_by_kind")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
