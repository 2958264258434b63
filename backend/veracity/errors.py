"""One exception hierarchy; translated to HTTP, SSE or CLI output only at the edges."""

from __future__ import annotations


class VeracityError(Exception):
    """Base of every error Veracity raises on purpose. ``message`` is safe to show a user."""

    status_code = 500
    code = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadInput(VeracityError):
    status_code = 422
    code = "bad_input"


class NotFound(VeracityError):
    status_code = 404
    code = "not_found"


class IngestError(VeracityError):
    """One file could not be ingested; the rest of the ingest goes on."""

    status_code = 422
    code = "ingest_error"


class PipelineError(VeracityError):
    code = "pipeline_error"
