"""Fit the screen's learned layer (``guards/data/screen.json`` and ``screen_examples.npz``):
``python -m veracity.guards.screen_fit [TRAINING_DIR]`` (``make fit-screen``; default ``training/screen``).

Training material, and nothing else: the labelled messages of ``training/screen/*.jsonl`` (``text``, ``label`` in
crisis / legal / medical / financial / none, ``kind``), written for the purpose by the Veracity engineers
(Apache-2.0; see that folder's README). No third-party evaluation item is read here: Do-Not-Answer and XSTest stay
development figures in ``make eval-guards``.

One L2-regularised logistic regression per class, one-vs-rest (Newton's method on standardised features): crisis
against every other message; each advice domain against every message that is not a crisis (a crisis routes first,
so the advice models are not taught that a disclosure is "not medical"). The regularisation strength is chosen per
class from a small grid by cross-validated log-loss, then, with the semantic model, how many nearest training
messages to average in (none, 5, 10 or 20) the same way; the cut-off by the best cross-validated F-score — F2 for
crisis (a missed crisis costs far more than a false one, which still gets a kind answer), F1 for advice — among the
cut-offs that flag at most ``MAX_FALSE_POSITIVE_RATE`` of the class's negatives out of fold. Folds: 5, fixed by the
SHA-256 of the text, so every run agrees; a message's neighbours come from its training folds only. Crisis is
scored as at run time: the highest of the whole message and each sentence.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from veracity.guards.cues import normalise
from veracity.guards.screen_model import (
    ADVICE,
    CLASSES,
    CRISIS,
    LEXICAL_FEATURES,
    MAX_SENTENCES,
    feature_rows,
    neighbour_share,
)
from veracity.semantic.logistic import auc, fit_logistic, predict
from veracity.semantic.model import SemanticModel, load_semantics
from veracity.text import sentence_spans

Fitted = tuple[np.ndarray, float, np.ndarray, np.ndarray]
FOLDS = 5
L2_GRID = (0.01, 0.1, 1.0)
NEIGHBOURS_GRID = (0, 5, 10, 20)
"""Nearest training messages whose share of a class is averaged with its logistic probability (0: the logistic
model alone), chosen per class by out-of-fold log-loss; only with the semantic model."""
BETA = {CRISIS: 2.0, **{d: 1.0 for d in ADVICE}}
MAX_FALSE_POSITIVE_RATE = {CRISIS: 0.05, **{d: 0.03 for d in ADVICE}}
"""Share of a class's negatives its cut-off may flag out of fold. Crisis: the issue's bound on false crisis (5%),
measured on negatives that are hard look-alikes (venting, past recovery, figurative death), so ordinary messages
are flagged far less often; a missed crisis costs more than crisis resources shown to someone who did not need
them. Advice: 3%, since an escalation withholds the answer from an ordinary question."""
OUT = Path(__file__).parent / "data"
LABELS = frozenset((*CLASSES, "none"))


def fold_of(text: str) -> int:
    return int(hashlib.sha256(text.lower().encode()).hexdigest(), 16) % FOLDS


def read_material(folder: Path) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    for path in sorted(folder.glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            if row["label"] not in LABELS:
                raise ValueError(f"{path}:{number}: unknown label {row['label']!r}")
            text = normalise(row["text"])
            if text.lower() in seen:
                continue
            seen.add(text.lower())
            rows.append({"text": text, "label": row["label"], "kind": row.get("kind", ""), "file": path.name})
    return rows


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


def best_threshold(y: np.ndarray, p: np.ndarray, beta: float, budget: float) -> float:
    """The cut-off with the best F-beta among those that flag at most ``budget`` of the negatives
    (the material's negatives are hard look-alikes, so F2 alone would buy recall with alarms no user accepts)."""
    grid = np.round(np.arange(0.05, 0.951, 0.01), 2)
    scored = [(at(y, p, float(t), beta), float(t)) for t in grid]
    allowed = [(m[f"f{beta:g}"], t) for m, t in scored if m["false_positive_rate"] <= budget]
    return max(allowed)[1] if allowed else float(grid[-1])


class Material:
    """Feature rows of every message and of each message's sentences (for the crisis model's per-sentence max)."""

    def __init__(self, rows: list[dict[str, str]], semantic: SemanticModel | None) -> None:
        self.rows = rows
        texts = [r["text"] for r in rows]
        self.x = feature_rows(texts, semantic)
        owners: list[int] = []
        pieces: list[str] = []
        for i, text in enumerate(texts):
            sentences = [text[s:e] for s, e in sentence_spans(text)][:MAX_SENTENCES]
            if len(sentences) > 1:
                pieces += [s for s in sentences if s != text]
                owners += [i] * sum(1 for s in sentences if s != text)
        self.sentence_x = feature_rows(pieces, semantic) if pieces else np.zeros((0, self.x.shape[1]))
        self.sentence_owner = np.asarray(owners, dtype=int)
        self.folds = np.asarray([fold_of(t) for t in texts])
        self.labels = np.asarray([r["label"] for r in rows])
        dim = self.x.shape[1] - len(LEXICAL_FEATURES)
        self.vectors = self.x[:, :dim] if semantic is not None else None
        self.sentence_vectors = self.sentence_x[:, :dim] if semantic is not None else None

    def target(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The rows a class's model learns from and their 0/1 labels."""
        use = np.ones(len(self.rows), dtype=bool) if name == CRISIS else self.labels != CRISIS
        return use, (self.labels == name).astype(float)

    def training_set(self, name: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The feature rows and labels a class's model is fitted on. For crisis, every sentence of a message that
        is not a crisis is one more negative (no part of it is a crisis), so a sentence scored on its own at run
        time is judged by a model that has seen sentences; a crisis message's sentences are not labelled (any one
        of them may be the ordinary part)."""
        use, y = self.target(name)
        rows = rows[use[rows]]
        x, target = self.x[rows], y[rows]
        if name == CRISIS and len(self.sentence_owner):
            extra = np.isin(self.sentence_owner, rows) & (y[self.sentence_owner] == 0)
            x = np.vstack([x, self.sentence_x[extra]])
            target = np.r_[target, np.zeros(int(extra.sum()))]
        return x, target

    def score(
        self,
        name: str,
        model: Fitted,
        rows: np.ndarray,
        by_sentence: bool = True,
        neighbours: int = 0,
        train: np.ndarray | None = None,
    ) -> np.ndarray:
        """Probabilities of the given rows, as at run time: the logistic model's, averaged with the class's share
        among the ``neighbours`` nearest ``train`` messages when asked; crisis, when ``by_sentence``, the max over
        the message and its sentences."""
        p = self._blend(name, predict(self.x[rows], *model), self.vectors, rows, neighbours, train)
        if name == CRISIS and by_sentence and len(self.sentence_owner):
            by_row = {int(r): k for k, r in enumerate(rows)}
            mine = np.flatnonzero(np.isin(self.sentence_owner, rows))
            if len(mine):
                sentence_p = predict(self.sentence_x[mine], *model)
                sentence_p = self._blend(name, sentence_p, self.sentence_vectors, mine, neighbours, train)
                for owner, value in zip(self.sentence_owner[mine], sentence_p, strict=True):
                    k = by_row[int(owner)]
                    p[k] = max(p[k], value)
        return p

    def _blend(
        self,
        name: str,
        p: np.ndarray,
        vectors: np.ndarray | None,
        rows: np.ndarray,
        neighbours: int,
        train: np.ndarray | None,
    ) -> np.ndarray:
        if not neighbours or vectors is None or self.vectors is None:
            return p
        use, y = self.target(name)
        pool = np.flatnonzero(use) if train is None else train[use[train]]
        share = neighbour_share(vectors[rows], self.vectors[pool], y[pool] == 1, neighbours)
        return np.asarray((p + share) / 2)

    def out_of_fold(
        self, name: str, l2: float, by_sentence: bool, neighbours: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        use, y = self.target(name)
        p = np.full(len(self.rows), np.nan)
        for fold in range(FOLDS):
            train = np.flatnonzero(self.folds != fold)
            model = fit_logistic(*self.training_set(name, train), l2)
            test = np.flatnonzero(use & (self.folds == fold))
            p[test] = self.score(name, model, test, by_sentence, neighbours, train)
        return p[use], y[use]


def log_loss(y: np.ndarray, p: np.ndarray) -> float:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


def fit_mode(material: Material, names: tuple[str, ...]) -> dict[str, Any]:
    heads: dict[str, Any] = {}
    cv: dict[str, Any] = {}
    oof: dict[str, np.ndarray] = {}
    for name in CLASSES:
        runs = {l2: material.out_of_fold(name, l2, by_sentence=False) for l2 in L2_GRID}
        l2 = min(runs, key=lambda k: log_loss(runs[k][1], runs[k][0]))
        p, y = runs[l2]
        neighbours = 0
        if material.vectors is not None:
            blends = {k: material.out_of_fold(name, l2, False, k) for k in NEIGHBOURS_GRID if k}
            blends[0] = runs[l2]
            neighbours = min(blends, key=lambda k: log_loss(blends[k][1], blends[k][0]))
            p, y = blends[neighbours]
        threshold = best_threshold(y, p, BETA[name], MAX_FALSE_POSITIVE_RATE[name])
        by_sentence = False
        if name == CRISIS:  # scoring each sentence too is kept only when it wins out of fold
            p_s, _ = material.out_of_fold(name, l2, True, neighbours)
            t_s = best_threshold(y, p_s, BETA[name], MAX_FALSE_POSITIVE_RATE[name])
            if at(y, p_s, t_s, BETA[name])["f2"] > at(y, p, threshold, BETA[name])["f2"]:
                p, threshold, by_sentence = p_s, t_s, True
        weights, bias, mean, scale = fit_logistic(*material.training_set(name, np.arange(len(material.rows))), l2)
        heads[name] = {
            "by_sentence": by_sentence,
            "weights": [round(float(v), 6) for v in weights],
            "bias": round(bias, 6),
            "mean": [round(float(v), 6) for v in mean],
            "scale": [round(float(v), 6) for v in scale],
            "threshold": threshold,
            "l2": l2,
            "neighbours": neighbours,
        }
        cv[name] = {"auc": round(auc(y, p), 3), "at_threshold": at(y, p, threshold, BETA[name])}
        full = np.full(len(material.rows), np.nan)
        full[material.target(name)[0]] = p
        oof[name] = full
    cv["routes"] = route_figures(material, oof, heads)
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
    fitted: dict[str, Any] = {
        "model": semantics.model.id,
        "fitted": datetime.now(UTC).date().isoformat(),
        "split": f"{FOLDS} folds by int(sha256(lower-cased text), 16) % {FOLDS} (veracity.guards.screen_fit.fold_of)",
        "selection": "per class: L2 from "
        + str(list(L2_GRID))
        + " by out-of-fold log-loss, then the nearest messages averaged in from "
        + str(list(NEIGHBOURS_GRID))
        + " by out-of-fold log-loss; threshold by out-of-fold F2 (crisis) or F1 (advice) among those flagging"
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
        "semantic": fit_mode(semantic, ("embedding",) + LEXICAL_FEATURES),
        "lexical": fit_mode(lexical, LEXICAL_FEATURES),
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "screen.json").write_text(json.dumps(fitted, indent=1) + "\n", encoding="utf-8")
    vectors = semantic.x[:, : semantic.x.shape[1] - len(LEXICAL_FEATURES)].astype(np.float16)
    np.savez_compressed(
        OUT / "screen_examples.npz",
        vectors=vectors,
        labels=np.asarray([r["label"] for r in rows]),
        texts=np.asarray([r["text"] for r in rows]),
    )
    for mode in ("semantic", "lexical"):
        cv = fitted[mode]["cv"]
        print(f"== {mode} ==")
        for name in CLASSES:
            print(f"  {name:10} auc {cv[name]['auc']}  {cv[name]['at_threshold']}")
        print("  routes:", {k: v for k, v in cv["routes"].items() if k not in ("by_label", "right_by_kind")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
