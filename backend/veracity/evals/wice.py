"""WiCE claim-level evaluation of the grounding judge: 3-way label metrics and evidence sentence coverage.

The data is read by path (see ``/work/shared/eval-data/grounding_wice/README.md``) and never copied into the
project. Each evidence sentence becomes its own ``Source`` (id = its index), so the judge's cited spans map back
to the annotated ``supporting_sentence_sets``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from veracity.guards.judge import LearnedJudge, LexicalJudge, make_judge
from veracity.ports import Label, Source

LABELS: tuple[Label, ...] = ("supported", "partial", "unsupported")
GOLD_LABELS: dict[str, Label] = {
    "supported": "supported",
    "partially_supported": "partial",
    "not_supported": "unsupported",
}


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def evaluate_wice(path: Path, judge: LearnedJudge | LexicalJudge | None = None) -> dict[str, Any]:
    """Judge every claim in a WiCE-format jsonl file and score labels and cited sentences (by default with the
    judge runs use: ``make_judge()``, semantic when the process's model loads)."""
    judge = judge or make_judge()
    confusion = {gold: dict.fromkeys(LABELS, 0) for gold in LABELS}
    evidenced = needs_evidence = cited_total = 0
    started = time.perf_counter()
    with Path(path).open(encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            row = json.loads(line)
            gold = GOLD_LABELS[row["label"]]
            sources = [Source(str(i), text) for i, text in enumerate(row["evidence_sentences"])]
            verdict = judge.judge_sync(row["claim"], sources)
            confusion[gold][verdict.label] += 1
            cited = {int(span.source_id) for span in verdict.evidence}
            cited_total += len(cited)
            if gold != "unsupported":
                needs_evidence += 1
                if any(sets and set(sets) <= cited for sets in row["supporting_sentence_sets"]):
                    evidenced += 1
    seconds = time.perf_counter() - started

    n = sum(sum(row.values()) for row in confusion.values())
    per_label: dict[str, dict[str, float]] = {}
    for label in LABELS:
        tp = confusion[label][label]
        predicted = sum(confusion[gold][label] for gold in LABELS)
        support = sum(confusion[label].values())
        precision, recall = _ratio(tp, predicted), _ratio(tp, support)
        per_label[label] = {
            "precision": precision,
            "recall": recall,
            "f1": _ratio(2 * precision * recall, precision + recall),
            "support": support,
        }
    return {
        "n": n,
        "accuracy": _ratio(sum(confusion[label][label] for label in LABELS), n),
        "macro_f1": sum(m["f1"] for m in per_label.values()) / len(LABELS),
        "per_label": per_label,
        "confusion": confusion,
        "evidence_coverage": _ratio(evidenced, needs_evidence),
        "evidence_claims": needs_evidence,
        "mean_cited_sentences": _ratio(cited_total, n),
        "seconds": seconds,
    }


def format_wice(result: dict[str, Any]) -> str:
    """A plain-text report: headline figures, per-label table and confusion matrix (rows gold, columns judged)."""
    out = [
        f"WiCE claims: n={result['n']}  accuracy={result['accuracy']:.3f}  macro-F1={result['macro_f1']:.3f}  "
        f"evidence coverage={result['evidence_coverage']:.3f} (of {result['evidence_claims']})  "
        f"cited/claim={result['mean_cited_sentences']:.2f}  {result['seconds']:.2f}s",
        "",
        f"{'label':<12}{'precision':>10}{'recall':>10}{'f1':>10}{'support':>10}",
    ]
    for label, m in result["per_label"].items():
        out.append(f"{label:<12}{m['precision']:>10.3f}{m['recall']:>10.3f}{m['f1']:>10.3f}{m['support']:>10d}")
    out += ["", "gold \\ judged " + "".join(f"{label:>12}" for label in LABELS)]
    for gold, row in result["confusion"].items():
        out.append(f"{gold:<14}" + "".join(f"{row[label]:>12d}" for label in LABELS))
    return "\n".join(out)
