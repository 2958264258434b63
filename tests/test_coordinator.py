"""The RetrievalCoordinator: one opening per page per run, a global page budget, bounded IO concurrency."""

from __future__ import annotations

import asyncio

import pytest

from veracity.graph.context import RetrievalCoordinator


class Loader:
    """Counts loads per key and the most loads in flight at once."""

    def __init__(self, delay: float = 0.02) -> None:
        self.calls: dict[str, int] = {}
        self.in_flight = 0
        self.peak = 0
        self.delay = delay

    def __call__(self, key: str):
        async def load() -> str:
            self.calls[key] = self.calls.get(key, 0) + 1
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            await asyncio.sleep(self.delay)
            self.in_flight -= 1
            return f"page {key}"

        return load


async def test_eight_branches_asking_for_the_same_pages_open_each_once_and_share_it() -> None:
    coordinator = RetrievalCoordinator(max_pages=100, io_concurrency=8)
    loader = Loader()

    async def branch() -> list[tuple[str, int, bool]]:
        out = []
        for key in ("a", "b", "c", "d"):
            got = await coordinator.open_once(key, loader(key))
            assert got is not None
            out.append(got)
        return out

    results = await asyncio.gather(*(branch() for _ in range(8)))
    assert loader.calls == {"a": 1, "b": 1, "c": 1, "d": 1}
    assert coordinator.opened == 4
    for key_index, key in enumerate(("a", "b", "c", "d")):
        rows = [r[key_index] for r in results]
        assert {r[0] for r in rows} == {f"page {key}"}  # every branch got the text
        assert len({r[1] for r in rows}) == 1  # one opening order per page
        assert sum(r[2] for r in rows) == 1  # exactly one branch loaded it
    assert sorted({r[1] for rows in results for r in rows}) == [1, 2, 3, 4]


async def test_the_page_budget_is_global_across_branches() -> None:
    coordinator = RetrievalCoordinator(max_pages=5, io_concurrency=8)
    loader = Loader(delay=0.001)

    async def branch(b: int) -> int:
        opened = 0
        for p in range(4):
            if await coordinator.open_once(f"{b}-{p}", loader(f"{b}-{p}")) is not None:
                opened += 1
        return opened

    assert sum(await asyncio.gather(*(branch(b) for b in range(8)))) == 5
    assert coordinator.opened == 5 and sum(loader.calls.values()) == 5
    # Once the budget is spent, a new local passage cannot be read; one already opened still can (shared).
    assert await coordinator.read("local:1") is None
    assert await coordinator.read("0-0") == (1, False)


async def test_io_in_flight_never_exceeds_the_semaphore() -> None:
    coordinator = RetrievalCoordinator(max_pages=100, io_concurrency=3)
    loader = Loader(delay=0.02)
    await asyncio.gather(*(coordinator.open_once(f"k{i}", loader(f"k{i}")) for i in range(12)))
    assert loader.peak == 3
    assert len(loader.calls) == 12


async def test_a_local_passage_has_one_opening_order_and_every_branch_reads_it() -> None:
    """Whichever branch is scheduled first opens it; the others read it too, shared: what a branch reads does
    not depend on the order the branches ran in."""
    coordinator = RetrievalCoordinator(max_pages=3)
    assert await coordinator.read("x") == (1, True)
    assert await coordinator.read("x") == (1, False)
    assert await coordinator.read("y") == (2, True)
    assert coordinator.opened == 2


async def test_a_loader_that_raises_reaches_every_waiting_branch_and_is_not_retried() -> None:
    coordinator = RetrievalCoordinator(max_pages=10)
    calls = 0

    async def boom() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        raise OSError("disk full")

    results = await asyncio.gather(*(coordinator.open_once("k", boom) for _ in range(3)), return_exceptions=True)
    assert calls == 1
    assert all(isinstance(r, OSError) for r in results)
    with pytest.raises(OSError):
        await coordinator.open_once("k", boom)
    assert calls == 1
