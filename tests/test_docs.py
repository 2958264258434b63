"""Docs stay true by test: every setting is in .env.example and the README, every event in the README."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from veracity.events import ALL_EVENTS
from veracity.runs.reducer import RunView, apply
from veracity.settings import flat_fields

ROOT = Path(__file__).resolve().parents[1]


def test_every_setting_is_documented_in_env_example_and_readme() -> None:
    env = (ROOT / ".env.example").read_text()
    readme = (ROOT / "README.md").read_text()
    for name, _default, description in flat_fields():
        assert description, f"{name} has no description"
        assert f"{name}=" in env or f"# {name}=" in env, f"{name} missing from .env.example"
        assert f"`{name}`" in readme, f"{name} missing from the README settings table"


def test_every_event_name_is_in_the_readme() -> None:
    # That each has its own timeline row and partials: tests/test_events.py, over one example of every model.
    readme = (ROOT / "README.md").read_text()
    for name in ALL_EVENTS:
        assert f"`{name}`" in readme, f"event {name} missing from the README events table"


def test_reducer_ignores_late_or_repeated_events_and_status_only_moves_forward() -> None:
    now = datetime.now(UTC)
    view = RunView(run_id="r")
    apply(
        view,
        1,
        "retrieve_map_progress",
        {"subtask_id": "st1", "status": "done", "queries": 2, "pages": 3, "evidences": 4},
        now,
    )
    apply(
        view,
        2,
        "retrieve_map_progress",
        {"subtask_id": "st1", "status": "running", "queries": 0, "pages": 0, "evidences": 0},
        now,
    )
    apply(view, 2, "retrieve_map_progress", {"subtask_id": "st1", "status": "failed"}, now)  # repeated seq
    b = view.branches["st1"]
    assert (b.retrieve, b.queries, b.pages, b.evidences) == ("done", 2, 3, 4)
    assert [r.seq for r in view.timeline] == [1, 2]
