"""The system prompts shipped with the package, one Markdown file each (``composer``, ``judge``, ``planner``, …)."""

from __future__ import annotations

from functools import cache
from importlib.resources import files


@cache
def load_prompt(name: str) -> str:
    """The prompt ``<name>.md`` of this package, stripped."""
    return files(__name__).joinpath(f"{name}.md").read_text(encoding="utf-8").strip()
