"""Wakes stream readers when a run gets a new event. In-process only: readers also poll the table on a
short timeout, so a reader in another process (or after a missed wake-up) still sees every event."""

from __future__ import annotations

import asyncio
from collections import defaultdict


class RunNotifier:
    def __init__(self) -> None:
        self._conditions: defaultdict[str, asyncio.Condition] = defaultdict(asyncio.Condition)

    async def notify(self, run_id: str) -> None:
        condition = self._conditions[run_id]
        async with condition:
            condition.notify_all()

    async def wait(self, run_id: str, timeout: float) -> None:
        condition = self._conditions[run_id]
        async with condition:
            try:
                await asyncio.wait_for(condition.wait(), timeout)
            except TimeoutError:
                pass
