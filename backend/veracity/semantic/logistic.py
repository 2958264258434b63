"""The logistic models the project fits offline and ships as JSON (relevance, the judge, and a candidate for each
of the screen's heads beside ``semantic.network``): one model class for run time, one loader for the shipped files,
and the fitting and figure helpers every ``fit`` module shares (standardised features, L2-regularised Newton steps,
the shipped form of a fit, tie-aware AUC)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

L2 = 0.01
"""The ridge penalty of the relevance and judge fits (one prior, not tuned per model; the screen picks its own per
class from a small grid by out-of-fold log-loss)."""


@dataclass(frozen=True)
class LogisticModel:
    features: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    threshold: float
    """The default cut-off: the probability at or above which the model says yes (chosen at fitting)."""

    def probability(self, x: np.ndarray) -> np.ndarray:
        if len(x) == 0:
            return np.zeros(0)
        z = ((x - np.asarray(self.mean)) / np.asarray(self.scale)) @ np.asarray(self.weights) + self.bias
        return sigmoid(z)

    @classmethod
    def from_dict(cls, data: dict[str, Any], features: tuple[str, ...] | None = None) -> LogisticModel:
        return cls(
            features=tuple(data["features"]) if features is None else features,
            weights=tuple(data["weights"]),
            bias=float(data["bias"]),
            mean=tuple(data["mean"]),
            scale=tuple(data["scale"]),
            threshold=float(data["threshold"]),
        )


@cache
def load_fit(package: str, name: str) -> dict[str, Any]:
    """A shipped fit file (``<package>/data/<name>``), read once per process."""
    with resources.files(package).joinpath("data", name).open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def sigmoid(z: np.ndarray) -> np.ndarray:
    """The logistic function, its argument clipped so that ``exp`` cannot overflow."""
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z, -30, 30))))


def logistic_dict(params: tuple[np.ndarray, float, np.ndarray, np.ndarray]) -> dict[str, Any]:
    """A fitted logistic model's parameters (``fit_logistic``'s result) as the shipped files hold them."""
    weights, bias, mean, scale = params
    return {
        "weights": [round(float(v), 6) for v in weights],
        "bias": round(bias, 6),
        "mean": [round(float(v), 6) for v in mean],
        "scale": [round(float(v), 6) for v in scale],
    }


def standardiser(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and scale of each column; a column constant in the material gets scale 1 (no weight), not 1/0. A spread
    below 1e-6 counts as constant: the fitted files keep six decimals, and a smaller scale would be written as 0."""
    mean, spread = x.mean(axis=0), x.std(axis=0)
    return mean, np.where(spread > 1e-6, spread, 1.0)


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """Weights, bias, mean, scale of an L2-regularised logistic regression on standardised ``x`` (Newton's
    method; the bias is not penalised)."""
    mean, scale = standardiser(x)
    z = np.column_stack([(x - mean) / scale, np.ones(len(x))])
    w = np.zeros(z.shape[1])
    penalty = np.r_[np.full(z.shape[1] - 1, l2), 0.0]
    for _ in range(60):
        p = sigmoid(z @ w)
        grad = z.T @ (p - y) / len(y) + penalty * w
        hess = (z * (p * (1 - p))[:, None]).T @ z / len(y) + np.diag(penalty)
        step = np.linalg.solve(hess + 1e-9 * np.eye(len(w)), grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:-1], float(w[-1]), mean, scale


def predict(x: np.ndarray, w: np.ndarray, b: float, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return sigmoid(((x - mean) / scale) @ w + b)


def auc(y: np.ndarray, p: np.ndarray) -> float:
    """Area under the ROC curve; tied scores share their mean rank."""
    order = np.argsort(p, kind="stable")
    ranks = np.empty(len(p))
    ranks[order] = np.arange(1, len(p) + 1)
    _, group = np.unique(p, return_inverse=True)
    ranks = (np.bincount(group, weights=ranks) / np.bincount(group))[group]
    pos = y == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / max(1, n_pos * n_neg))
