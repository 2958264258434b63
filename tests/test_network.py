"""The one-hidden-layer network a fit may choose instead of a logistic model (the screen's heads)."""

from __future__ import annotations

import numpy as np
import pytest

from veracity.guards.screen_model import Head
from veracity.semantic.logistic import fit_logistic, predict
from veracity.semantic.network import (
    NetworkModel,
    family_dict,
    fit_family,
    fit_network,
    network_dict,
    network_predict,
    predict_family,
)


def conjunctions(n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Two cues that mean something only together or only apart (exclusive or), plus a noise column: the case a
    sum of weights cannot express."""
    rng = np.random.default_rng(7)
    a, b = rng.integers(0, 2, n), rng.integers(0, 2, n)
    x = np.column_stack([a, b, rng.normal(size=n)]).astype(np.float64)
    return x, (a ^ b).astype(np.float64)


def test_the_network_learns_what_a_sum_of_weights_cannot() -> None:
    x, y = conjunctions()
    network = network_predict(x, *fit_network(x, y, 0.001))
    logistic = predict(x, *fit_logistic(x, y, 0.01))
    assert ((network >= 0.5) == (y == 1)).mean() == 1.0
    assert ((logistic >= 0.5) == (y == 1)).mean() < 0.8


def test_a_fit_is_deterministic() -> None:
    x, y = conjunctions()
    first, second = fit_network(x, y, 0.01), fit_network(x, y, 0.01)
    assert all(np.array_equal(np.asarray(p), np.asarray(q)) for p, q in zip(first, second, strict=True))


def test_a_head_of_an_unknown_family_is_refused_at_load() -> None:
    with pytest.raises(ValueError, match="unknown model family 'forest'"):
        Head.from_fit({"family": "forest", "threshold": 0.5}, ("embedding",))


def test_either_family_ships_as_the_fit_scored_it() -> None:
    """What ``make fit-screen`` writes for a head of either family, read back as the screen reads it, scores as
    the fitted model did (a refit may choose logistic again for any class)."""
    x, y = conjunctions()
    for family, strength in (("logistic", 0.01), ("network", 0.001)):
        fitted = fit_family(family, x, y, strength)
        head = Head.from_fit({**family_dict(fitted), "threshold": 0.4}, ("a", "b", "noise"))
        assert head.threshold == 0.4
        assert head.model.probability(x) == pytest.approx(predict_family(fitted, x), abs=1e-4), family
        assert head.model.probability(np.zeros((0, 3))).tolist() == []


def test_a_head_reads_the_reading_when_its_mode_does_and_its_partner_is_the_named_modes_head_less_it() -> None:
    """A head of a mode with the reading reads it; the partner an advice head of the reading mode is averaged with
    is the same class's head of the mode its ``with`` names, whose features are this mode's less the reading (the
    screen gives it the columns before the reading) — any other list is refused at load, not found wrong at the
    first score."""
    from veracity.guards.screen_model import partner_head

    x, y = conjunctions()
    shipped = {**family_dict(fit_family("logistic", x, y, 0.01)), "threshold": 0.4}
    reading_mode = ("a", "b", "reading", "reading_logit")
    assert Head.from_fit(shipped, reading_mode).reads
    assert not Head.from_fit(shipped, ("a", "b")).reads
    assert partner_head({}, shipped, "legal", reading_mode) is None
    paired = {**shipped, "with": "semantic"}
    every = {"semantic": {"features": ["a", "b"], "heads": {"legal": shipped}}}
    partner = partner_head(every, paired, "legal", reading_mode)
    assert partner is not None and not partner.reads and partner.model.features == ("a", "b")
    head = Head.from_fit(paired, reading_mode, partner)
    assert head.reads and head.partner is partner
    for wrong in (["a"], ["b", "a"], ["a", "reading", "reading_logit"]):
        with pytest.raises(ValueError, match="not this mode's less the reading"):
            partner_head({"semantic": {"features": wrong, "heads": {"legal": shipped}}}, paired, "legal", reading_mode)


def test_network_parameters_that_do_not_fit_together_are_refused_at_load() -> None:
    x, y = conjunctions()
    shipped = network_dict(fit_network(x, y, 0.01))
    with pytest.raises(ValueError, match="do not fit together"):
        NetworkModel.from_dict({**shipped, "weights": shipped["weights"][:-1], "threshold": 0.5}, ("a", "b", "c"))
    with pytest.raises(ValueError, match="do not fit together"):
        NetworkModel.from_dict({**shipped, "mean": shipped["mean"] + [0.0], "threshold": 0.5}, ("a", "b", "c"))
