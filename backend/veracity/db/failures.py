"""What a user may see of an exception: a database failure becomes one sentence from ``messages`` (its statement
and parameters, which can run to kilobytes and hold anything a run stored, go to the log), anything else keeps
its text, cut to a length a page can show."""

from __future__ import annotations

import logging
import sqlite3

import asyncpg
import psycopg
from sqlalchemy.exc import SQLAlchemyError

from veracity import messages
from veracity.db.transient import causes

logger = logging.getLogger(__name__)

PUBLIC_LIMIT = 300
"""Longest reason shown to a user, in characters."""

_DATABASE_ERRORS = (SQLAlchemyError, sqlite3.Error, asyncpg.PostgresError, asyncpg.InterfaceError, psycopg.Error)


def is_database_error(exc: BaseException) -> bool:
    """Raised by SQLAlchemy or a database driver (psycopg: the graph's checkpointer), or raised from such an
    error."""
    return any(isinstance(cause, _DATABASE_ERRORS) for cause in causes(exc))


def bounded(text: str, limit: int = PUBLIC_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def public_error(
    exc: BaseException, *, where: str = "", limit: int = PUBLIC_LIMIT, connection_is_database: bool = False
) -> str:
    """The reason to show a user for ``exc`` (fits ``messages.RUN_FAILED``'s ``{reason}``): a database failure is
    ``messages.DATABASE_FAILED`` and is logged here in full, with ``where`` (e.g. ``"run <id>"``) to find it by;
    anything else reads as runs and branches have always shown it, ``"<type>: <text>"``, cut to ``limit``
    characters. ``connection_is_database``: a bare ``ConnectionError`` is the database's too — at a run's edge,
    where asyncpg's connect raises the socket's own error when the server cannot be reached (SQLAlchemy does not
    wrap it), while a run's other connections (model servers, web pages) are caught inside it or wrapped by their
    HTTP clients."""
    if is_database_error(exc) or (connection_is_database and isinstance(exc, ConnectionError)):
        logger.warning(
            "%sdatabase failure, shown as %r: %s", f"{where}: " if where else "", messages.DATABASE_FAILED, exc
        )
        return messages.DATABASE_FAILED
    text = str(exc)
    return bounded(f"{type(exc).__name__}: {text}" if text else type(exc).__name__, limit)
