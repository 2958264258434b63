"""Per-run model usage and budgets.

A run's ``UsageMeter`` lives in a context variable set by the run's task, so every model call made for the run —
composer, judge, reviewer, in any node — is counted against the run's budgets without being handed the meter.
A call that would exceed a budget is refused before it is sent (``BudgetExceeded``, a ``ModelError``): the run
degrades to the floor with the budget named, never crashes. A call counts against the call budget when it is sent
(so calls in flight at once, like the judge's, cannot overshoot it), and is recorded when it ends, whether it
answered, failed or timed out (``error`` says which).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from veracity.errors import BudgetExceeded, ModelError

# USD per million tokens (prompt, completion) for models whose public prices are known; others cost "unknown".
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
}


@dataclass
class UsageMeter:
    max_calls: int = 0
    max_prompt_tokens: int = 0
    max_completion_tokens: int = 0
    max_seconds: float = 0.0
    """Zero means no limit."""
    started: float = field(default_factory=time.monotonic)
    calls: int = 0
    """Calls sent (an ended one is also recorded, with its error when it failed)."""
    failed: int = 0
    """Calls that failed or timed out."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    by_role: dict[str, dict[str, float]] = field(default_factory=dict)

    def before_call(self, role: str) -> None:
        """Refuse a call that the budgets no longer allow; otherwise count it (it is about to be sent)."""
        if self.max_calls and self.calls >= self.max_calls:
            raise BudgetExceeded(f"model call budget spent ({self.max_calls} calls) before the {role} call")
        if self.max_prompt_tokens and self.prompt_tokens >= self.max_prompt_tokens:
            raise BudgetExceeded(f"prompt token budget spent ({self.prompt_tokens}/{self.max_prompt_tokens})")
        if self.max_completion_tokens and self.completion_tokens >= self.max_completion_tokens:
            raise BudgetExceeded(
                f"completion token budget spent ({self.completion_tokens}/{self.max_completion_tokens})"
            )
        elapsed = time.monotonic() - self.started
        if self.max_seconds and elapsed >= self.max_seconds:
            raise BudgetExceeded(f"wall-time budget spent ({elapsed:.1f} s of {self.max_seconds:.0f} s)")
        self.calls += 1

    def remaining_seconds(self) -> float | None:
        if not self.max_seconds:
            return None
        return max(0.0, self.max_seconds - (time.monotonic() - self.started))

    def record(
        self,
        *,
        role: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        ms: float,
        error: str | None = None,
        finish_reason: str | None = None,
    ) -> dict[str, Any]:
        """One ended call (counted by :meth:`before_call` when it was sent): its usage, and ``error`` when it failed
        or timed out (its tokens are then whatever the server reported, usually none)."""
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        price = PRICES_PER_MTOK.get(model)
        cost = None
        if price is None:
            self.cost_known = False
        else:
            cost = (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000
            self.cost_usd += cost
        row = self.by_role.setdefault(
            role, {"calls": 0, "failed": 0, "prompt_tokens": 0, "completion_tokens": 0, "ms": 0.0}
        )
        row["calls"] += 1
        row["failed"] += 1 if error else 0
        row["prompt_tokens"] += prompt_tokens
        row["completion_tokens"] += completion_tokens
        row["ms"] += ms
        self.failed += 1 if error else 0
        return {
            "role": role,
            "model": model,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "ms": round(ms, 1),
            "cost_usd": cost,
            **({"error": error} if error else {}),
            **({"finish_reason": finish_reason} if finish_reason else {}),
            "totals": self.totals(),
        }

    def totals(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "failed": self.failed,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": round(self.cost_usd, 6) if self.cost_known else None,
            "by_role": {k: {**v, "ms": round(v["ms"], 1)} for k, v in self.by_role.items()},
        }


current_meter: contextvars.ContextVar[UsageMeter | None] = contextvars.ContextVar("veracity_usage", default=None)
"""The running run's meter (set by the run's task; None outside a run, e.g. ``veracity verify``)."""

UsageListener = Callable[[dict[str, Any]], Awaitable[None]]
current_listener: contextvars.ContextVar[UsageListener | None] = contextvars.ContextVar(
    "veracity_usage_listener", default=None
)
"""Called (awaited) with each call's record, so the run can stream it; None outside a run."""


@dataclass
class Circuit:
    """Gives up cleanly on a model server that keeps failing: after ``threshold`` failed calls in a row the circuit
    opens and calls fail at once for ``cooldown_seconds``; then one call is let through to try again."""

    threshold: int = 3
    cooldown_seconds: float = 30.0
    failures: int = 0
    opened_at: float | None = None

    def check(self, model: str) -> None:
        if self.opened_at is None:
            return
        if time.monotonic() - self.opened_at < self.cooldown_seconds:
            raise ModelError(
                f"model {model} is failing ({self.failures} failed calls in a row); not called for "
                f"{self.cooldown_seconds:.0f} s"
            )
        self.opened_at = None  # half-open: this call decides

    def success(self) -> None:
        self.failures, self.opened_at = 0, None

    def failure(self) -> None:
        self.failures += 1
        if self.failures >= self.threshold:
            self.opened_at = time.monotonic()
