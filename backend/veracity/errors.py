"""One exception hierarchy, model errors included; translated to HTTP, SSE or CLI output only at the edges."""

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


class LeaseLost(VeracityError):
    """This executor no longer holds the run (a sweep failed it, or another worker claimed it): the write was
    refused and nothing more of the run may be written from here."""

    status_code = 409
    code = "lease_lost"


class RunCancelled(VeracityError):
    """A user asked the run to stop (``research_runs.cancel_requested``): its executor ends it as cancelled."""

    code = "run_cancelled"


class Conflict(VeracityError):
    """The request does not fit the resource's state (cancelling a finished run)."""

    status_code = 409
    code = "conflict"


class ModelError(VeracityError):
    """The model could not be reached, timed out, or refused; the run falls to the floor."""

    code = "model_error"


class BudgetExceeded(ModelError):
    """A run's model budget is spent; the run falls to the floor with this reason."""

    code = "budget_exceeded"


class MalformedOutput(VeracityError):
    """A composer or reviewer wrote something that does not parse into its contract."""

    code = "malformed_output"

    def __init__(self, problems: list[str], raw: str = "") -> None:
        super().__init__("; ".join(problems))
        self.problems = problems
        self.raw = raw


class TruncatedOutput(MalformedOutput):
    """The model stopped at its token cap (``finish_reason == "length"``): what it wrote is cut off, whether or not
    it happens to parse, and the next attempt is told so."""

    def __init__(self, max_tokens: int, raw: str = "", *, thinking: bool = False) -> None:
        where = " while still thinking (a <think> block with no answer after it)" if thinking else ""
        super().__init__(
            [
                f"the answer was cut off at the {max_tokens}-token limit{where}; write less: fewer and shorter "
                "sentences, no preamble"
            ],
            raw,
        )
        self.max_tokens = max_tokens


class Unauthorized(VeracityError):
    """No valid sign-in or API token where one is needed (pages redirect to /signin instead)."""

    status_code = 401
    code = "unauthorized"


class Forbidden(VeracityError):
    """Signed in, but not allowed (an admin's act; a cross-origin or CSRF-less state change)."""

    status_code = 403
    code = "forbidden"


class TooMany(VeracityError):
    """A per-user limit was reached; ``retry_after``: seconds until it frees up (the Retry-After header)."""

    status_code = 429
    code = "rate_limited"

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = max(1, retry_after)
