"""A small feed-forward network, fitted offline and shipped as JSON beside the logistic models (the screen's
heads): standardised features, one hidden layer of rectified units, a logistic output. It reads the same feature
rows as a logistic model, so a fit can choose between the two out of fold; the functions at the end
(``fit_family``, ``predict_family``, ``family_dict``, ``model_from_dict``) are the one place that tells the two
families apart. Fitting is deterministic (a fixed seed, full-batch Adam): every run of a fit on the same material
and machine writes the same file (another CPU's matrix kernels may round differently over the steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from veracity.semantic.logistic import LogisticModel, fit_logistic, logistic_dict, predict, sigmoid, standardiser

HIDDEN = 64
"""Hidden units: enough to combine the embedding with the cues (a crisis is "first person" *and* "wants to die",
not either alone), few enough for some 6,000 training rows."""
EPOCHS = 300
LEARNING_RATE = 3e-3
SEED = 0

NetworkParams = tuple[np.ndarray, np.ndarray, np.ndarray, float, np.ndarray, np.ndarray]
"""hidden weights (features × units), hidden bias, output weights, output bias, mean, scale."""


def fit_network(x: np.ndarray, y: np.ndarray, decay: float) -> NetworkParams:
    """A one-hidden-layer network fitted by full-batch Adam on the mean log-loss plus ``decay``/2 times the
    squared weights (the biases are not penalised)."""
    mean, scale = standardiser(x)
    z = (x - mean) / scale
    rng = np.random.default_rng(SEED)
    params = [
        rng.normal(0.0, np.sqrt(2.0 / z.shape[1]), (z.shape[1], HIDDEN)),
        np.zeros(HIDDEN),
        rng.normal(0.0, np.sqrt(1.0 / HIDDEN), HIDDEN),
        np.zeros(1),
    ]
    first = [np.zeros_like(p) for p in params]
    second = [np.zeros_like(p) for p in params]
    for step in range(1, EPOCHS + 1):
        h = np.maximum(z @ params[0] + params[1], 0.0)
        p = sigmoid(h @ params[2] + params[3][0])
        g = (p - y) / len(y)
        back = np.outer(g, params[2]) * (h > 0)
        grads = [z.T @ back + decay * params[0], back.sum(axis=0), h.T @ g + decay * params[2], np.array([g.sum()])]
        for i, grad in enumerate(grads):
            first[i] = 0.9 * first[i] + 0.1 * grad
            second[i] = 0.999 * second[i] + 0.001 * grad * grad
            params[i] -= LEARNING_RATE * (first[i] / (1 - 0.9**step)) / (np.sqrt(second[i] / (1 - 0.999**step)) + 1e-8)
    return params[0], params[1], params[2], float(params[3][0]), mean, scale


def network_predict(
    x: np.ndarray,
    hidden: np.ndarray,
    hidden_bias: np.ndarray,
    weights: np.ndarray,
    bias: float,
    mean: np.ndarray,
    scale: np.ndarray,
) -> np.ndarray:
    if len(x) == 0:
        return np.zeros(0)
    h = np.maximum(((x - mean) / scale) @ hidden + hidden_bias, 0.0)
    return sigmoid(h @ weights + bias)


def network_dict(params: NetworkParams) -> dict[str, Any]:
    """The fitted parameters as the shipped file holds them (six decimals)."""
    hidden, hidden_bias, weights, bias, mean, scale = params
    return {
        "family": "network",
        "hidden": np.round(hidden, 6).tolist(),
        "hidden_bias": np.round(hidden_bias, 6).tolist(),
        "weights": np.round(weights, 6).tolist(),
        "bias": round(bias, 6),
        "mean": np.round(mean, 6).tolist(),
        "scale": np.round(scale, 6).tolist(),
    }


@dataclass(frozen=True, eq=False)
class NetworkModel:
    """A shipped network: the run-time counterpart of ``LogisticModel`` (``probability``, ``threshold``)."""

    features: tuple[str, ...]
    params: NetworkParams
    threshold: float

    def probability(self, x: np.ndarray) -> np.ndarray:
        return network_predict(x, *self.params)

    @classmethod
    def from_dict(cls, data: dict[str, Any], features: tuple[str, ...]) -> NetworkModel:
        params: NetworkParams = (
            np.asarray(data["hidden"], dtype=np.float64),
            np.asarray(data["hidden_bias"], dtype=np.float64),
            np.asarray(data["weights"], dtype=np.float64),
            float(data["bias"]),
            np.asarray(data["mean"], dtype=np.float64),
            np.asarray(data["scale"], dtype=np.float64),
        )
        hidden, hidden_bias, weights, _, mean, scale = params
        if not (
            hidden.ndim == 2
            and hidden.shape == (len(mean), len(hidden_bias))
            and len(weights) == len(hidden_bias)
            and len(scale) == len(mean)
        ):
            raise ValueError(
                f"network parameters do not fit together: hidden {hidden.shape}, hidden bias {len(hidden_bias)}, "
                f"weights {len(weights)}, mean {len(mean)}, scale {len(scale)}"
            )
        return cls(features, params, float(data["threshold"]))


# ---- either family ---------------------------------------------------------------------------------------------

FAMILIES = ("logistic", "network")
Fitted = tuple[str, tuple[Any, ...]]
"""A model family and its fitted parameters (``fit_logistic``'s or ``fit_network``'s result)."""


def fit_family(family: str, x: np.ndarray, y: np.ndarray, strength: float) -> Fitted:
    """A model of ``family`` fitted on ``x``, ``y``; ``strength`` is its penalty (L2 or weight decay)."""
    return family, fit_network(x, y, strength) if family == "network" else fit_logistic(x, y, strength)


def predict_family(model: Fitted, x: np.ndarray) -> np.ndarray:
    family, params = model
    return network_predict(x, *params) if family == "network" else predict(x, *params)


def family_dict(model: Fitted) -> dict[str, Any]:
    """A fitted model's parameters as the shipped file holds them, its family named."""
    family, params = model
    return network_dict(params) if family == "network" else {"family": "logistic", **logistic_dict(params)}


def model_from_dict(data: dict[str, Any], features: tuple[str, ...]) -> LogisticModel | NetworkModel:
    """The run-time model of a shipped head (a file without ``family`` holds a logistic model); an unknown family
    is refused."""
    family = data.get("family", "logistic")
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}")
    return NetworkModel.from_dict(data, features) if family == "network" else LogisticModel.from_dict(data, features)
