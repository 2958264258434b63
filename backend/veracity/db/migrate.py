"""Run the Alembic history programmatically (the CLI, the server's start-up and the tests all use this), then create
the graph checkpointer's tables (``db/checkpoints.py``: LangGraph versions those itself)."""

from __future__ import annotations

import asyncio

from alembic import command
from alembic.config import Config

from veracity.db.checkpoints import setup_checkpoints
from veracity.db.jobs import install_schema, is_postgresql
from veracity.settings import PACKAGE_DIR


def alembic_config(url: str) -> Config:
    config = Config(str(PACKAGE_DIR / "alembic.ini"))
    config.set_main_option("script_location", str(PACKAGE_DIR / "migrations"))
    config.attributes["url"] = url
    config.attributes["configure_logging"] = False
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Synchronous: Alembic's env.py runs its own event loop. From async code use ``asyncio.to_thread``. On
    PostgreSQL the run queue's tables (pgqueuer's) come with it."""
    command.upgrade(alembic_config(url), revision)
    if is_postgresql(url) and revision == "head":
        asyncio.run(install_schema(url))
    setup_checkpoints(url)


def downgrade(url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(url), revision)
