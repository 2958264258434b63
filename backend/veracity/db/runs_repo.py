"""Data access for runs, their events and their artifact versions. Callers own the transaction."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import CursorResult, and_, case, delete, exists, func, not_, select, text, true, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity.db.models import ArtifactVersion, AuditEntry, ResearchRun, RunEvent, utcnow
from veracity.errors import LeaseLost, RunCancelled
from veracity.text import sha256_hex

ACTIVE = ("pending", "running")
RUN_EVENTS_CHANNEL = "veracity_run_events"
"""The PostgreSQL notification channel a run's new events are announced on (payload ``run_id:seq``)."""
QUEUED = and_(ResearchRun.status == "pending", ResearchRun.owner.is_(None))
"""A run waiting on the queue: no executor has claimed it yet, so it has no lease to lapse and is never swept."""


@dataclass(frozen=True)
class Fence:
    """A claim on a run: who executes it, under which generation. Every write of the run's executor checks it."""

    run_id: str
    owner: str
    generation: int


def question_key(question: str) -> str:
    """The indexed key of a question's runs (its SHA-256)."""
    return sha256_hex(question)


def _rows(result: object) -> int:
    return result.rowcount if isinstance(result, CursorResult) else 0


async def bound_idle(*, session: AsyncSession, seconds: float) -> None:
    """PostgreSQL: should this process fall silent inside the caller's transaction for ``seconds`` (frozen,
    swapped out, stuck), the server ends the transaction and closes its connection (``SET LOCAL
    idle_in_transaction_session_timeout``). A transaction that writes a run holds the run's row lock, and a
    process frozen inside one would otherwise keep every sweep waiting on that lock, so a run whose executor
    froze would never be taken over. Given the run lease: a process silent that long has lost its runs anyway
    (its writes, retried, meet a fence that no longer holds). Nothing on SQLite, whose write lock is bounded by
    its busy timeout and whose writers all live in one process."""
    if session.get_bind().dialect.name != "postgresql":
        return
    await session.execute(
        select(func.set_config("idle_in_transaction_session_timeout", str(max(1, round(seconds * 1000))), True))
    )


@asynccontextmanager
async def run_transaction(
    sessionmaker: async_sessionmaker[AsyncSession], lease_seconds: float
) -> AsyncIterator[AsyncSession]:
    """A session in a transaction that writes or claims a run (it takes the run's row lock), bounded to the run
    lease by ``bound_idle``: every such transaction opens here."""
    async with sessionmaker() as session, session.begin():
        await bound_idle(session=session, seconds=lease_seconds)
        yield session


async def hold(*, session: AsyncSession, fence: Fence) -> None:
    """Check the claim in the caller's transaction, and renew the lease with it: the run is still active, still
    this owner's, still this generation. The UPDATE takes the run's row lock (PostgreSQL) or the write lock
    (SQLite), so a sweep cannot slip between this check and the writes that follow it. Raises ``LeaseLost``, or
    ``RunCancelled`` once a user asked the run to stop (the write is not made; the executor ends the run)."""
    result = await session.execute(
        update(ResearchRun)
        .where(
            ResearchRun.id == fence.run_id,
            ResearchRun.owner == fence.owner,
            ResearchRun.lease_generation == fence.generation,
            ResearchRun.status.in_(ACTIVE),
        )
        .values(updated_at=utcnow())
        .returning(ResearchRun.cancel_requested)
    )
    rows = result.all()
    if len(rows) != 1:
        raise LeaseLost(f"run {fence.run_id} is no longer held by {fence.owner} (generation {fence.generation})")
    if rows[0][0]:
        raise RunCancelled(f"run {fence.run_id}: cancel requested")


async def create_run(
    *,
    session: AsyncSession,
    run_id: str,
    template_id: str,
    question: str,
    corpus: str,
    budgets: dict[str, Any],
    owner: str | None = None,
    rerun_of: str | None = None,
    user_id: int | None = None,
    parent_id: str | None = None,
    refresh_of: str | None = None,
) -> ResearchRun:
    """A pending run (``user_id``: whose; None in single-user mode; ``parent_id``: the run it follows up;
    ``refresh_of``: the run it refreshes); with ``owner``, already claimed by it (generation 1)."""
    run = ResearchRun(
        id=run_id,
        template_id=template_id,
        question=question,
        corpus=corpus,
        status="pending",
        metrics={},
        budgets=budgets,
        owner=owner,
        lease_generation=1 if owner else 0,
        rerun_of=rerun_of,
        user_id=user_id,
        parent_id=parent_id,
        refresh_of=refresh_of,
        question_key=question_key(question),
    )
    session.add(run)
    await session.flush()
    return run


async def claim_run(*, session: AsyncSession, run_id: str, owner: str, stale_before: datetime) -> int | None:
    """A worker takes a queued run: one conditional UPDATE, so of two workers given the same run one wins. The run
    must be active and either unclaimed or its claim stale (its lease not renewed since ``stale_before``); the
    claim bumps the generation, so a former executor's fence no longer holds. Returns the new generation, or None
    when the run ended or another executor holds it."""
    result = await session.execute(
        update(ResearchRun)
        .where(
            ResearchRun.id == run_id,
            ResearchRun.status.in_(ACTIVE),
            (ResearchRun.owner.is_(None)) | (ResearchRun.updated_at < stale_before),
        )
        .values(owner=owner, lease_generation=ResearchRun.lease_generation + 1, updated_at=utcnow())
        .returning(ResearchRun.lease_generation)
    )
    return result.scalar_one_or_none()


async def get_run(*, session: AsyncSession, run_id: str) -> ResearchRun | None:
    return await session.get(ResearchRun, run_id)


async def set_run_status(
    *,
    session: AsyncSession,
    run_id: str,
    status: str,
    outcome: str | None = None,
    error: str | None = None,
    metrics: dict[str, Any] | None = None,
    fence: Fence | None = None,
) -> None:
    """Set a run's status; with ``fence``, only while the claim holds (else ``LeaseLost``, nothing changed). A run
    that ends (done, failed) is released: no owner."""
    values: dict[str, Any] = {"status": status, "updated_at": utcnow()}
    if status not in ACTIVE:
        values["owner"] = None
    if outcome is not None:
        values["outcome"] = outcome
    if error is not None:
        values["error"] = error
    if metrics is not None:
        values["metrics"] = metrics
    query = update(ResearchRun).where(ResearchRun.id == run_id)
    if fence is not None:
        query = query.where(
            ResearchRun.owner == fence.owner,
            ResearchRun.lease_generation == fence.generation,
            ResearchRun.status.in_(ACTIVE),
        )
    result = await session.execute(query.values(**values))
    if fence is not None and _rows(result) != 1:
        raise LeaseLost(f"run {run_id} is no longer held by {fence.owner} (generation {fence.generation})")


async def fail_stale(
    *, session: AsyncSession, run_id: str, stale_before: datetime, error: str, cancelled: str | None = None
) -> str | None:
    """Fail a run whose executor stopped renewing its lease — only if it is still active and still stale when
    this statement runs, so two sweeps (or a sweep and a late executor) end it at most once. Bumps the
    generation: the old executor's fence no longer holds. The error it was failed with when this call failed it
    (``cancelled`` for a run a user had asked to stop, else ``error``; the caller then writes its one ``error``
    event in the same transaction), else None."""
    reason = case((ResearchRun.cancel_requested, cancelled or error), else_=error)
    result = await session.execute(
        update(ResearchRun)
        .where(
            ResearchRun.id == run_id,
            ResearchRun.status.in_(ACTIVE),
            not_(QUEUED),
            ResearchRun.updated_at < stale_before,
        )
        .values(
            status="failed",
            error=reason,
            owner=None,
            lease_generation=ResearchRun.lease_generation + 1,
            updated_at=utcnow(),
        )
        .returning(ResearchRun.error)
    )
    row = result.first()
    return str(row[0]) if row is not None else None


async def claim_stale(
    *, session: AsyncSession, run_id: str, owner: str, stale_before: datetime, max_resumes: int
) -> Fence | None:
    """Take over a run whose executor stopped renewing its lease, to resume it: only if it is still active, still
    stale and resumed fewer than ``max_resumes`` times when this statement runs (two sweeps racing take it once).
    Bumps the generation (the old executor's fence no longer holds), counts the resume and makes ``owner`` its
    executor. The new claim, or None when the run was not taken."""
    result = await session.execute(
        update(ResearchRun)
        .where(
            ResearchRun.id == run_id,
            ResearchRun.status.in_(ACTIVE),
            ResearchRun.updated_at < stale_before,
            ResearchRun.resumes < max_resumes,
        )
        .values(
            owner=owner,
            lease_generation=ResearchRun.lease_generation + 1,
            resumes=ResearchRun.resumes + 1,
            updated_at=utcnow(),
        )
        .returning(ResearchRun.lease_generation)
    )
    rows = result.all()
    return Fence(run_id=run_id, owner=owner, generation=rows[0][0]) if len(rows) == 1 else None


async def has_event(*, session: AsyncSession, run_id: str, name: str) -> bool:
    """Whether the run has stored an event of this name."""
    found = await session.scalar(select(exists().where(RunEvent.run_id == run_id, RunEvent.name == name)))
    return bool(found)


@dataclass(frozen=True)
class Visibility:
    """Whose runs a reader may see: everyone's (``every``: an admin, or single-user mode) or ``user_id``'s."""

    user_id: int | None
    every: bool

    def allows(self, run: ResearchRun) -> bool:
        return self.every or (run.user_id is not None and run.user_id == self.user_id)

    def clause(self) -> Any:
        return true() if self.every else ResearchRun.user_id == self.user_id


def _escape_like(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


async def recent_runs(
    *,
    session: AsyncSession,
    limit: int = 20,
    visible: Visibility | None = None,
    query: str = "",
    offset: int = 0,
) -> Sequence[ResearchRun]:
    """Runs newest first: those ``visible`` to the reader (all without), whose question contains ``query`` (any
    case), a page of ``limit`` from ``offset``."""
    statement = select(ResearchRun).where(ResearchRun.refresh_of.is_(None))  # a refresh shows on its run's page
    if visible is not None:
        statement = statement.where(visible.clause())
    if query:
        pattern = f"%{_escape_like(query.lower())}%"
        statement = statement.where(func.lower(ResearchRun.question).like(pattern, escape="\\"))
    statement = statement.order_by(ResearchRun.created_at.desc(), ResearchRun.id).offset(offset).limit(limit)
    result = await session.execute(statement)
    return result.scalars().all()


def _of_user(user_id: int | None) -> Any:
    """The runs of ``user_id`` (None: single-user mode's and the CLI's, which belong to no account)."""
    return ResearchRun.user_id.is_(None) if user_id is None else ResearchRun.user_id == user_id


async def started_since(*, session: AsyncSession, user_id: int | None, since: datetime) -> list[datetime]:
    """When the runs ``user_id`` started since ``since`` were created, oldest first (for the per-minute limit)."""
    result = await session.execute(
        select(ResearchRun.created_at)
        .where(_of_user(user_id), ResearchRun.created_at >= since)
        .order_by(ResearchRun.created_at)
    )
    return list(result.scalars().all())


async def active_count(*, session: AsyncSession, user_id: int | None) -> int:
    """How many of ``user_id``'s runs are queued or running."""
    count = await session.scalar(
        select(func.count()).select_from(ResearchRun).where(_of_user(user_id), ResearchRun.status.in_(ACTIVE))
    )
    return int(count or 0)


async def delete_run(*, session: AsyncSession, run_id: str) -> bool:
    """Delete a finished run with its events, audit trail and artifact versions (True when it was deleted). An
    active run is kept (False): cancel it first."""
    for table in (RunEvent, AuditEntry, ArtifactVersion):
        await session.execute(
            delete(table).where(
                table.run_id == run_id,
                exists().where(ResearchRun.id == run_id, ResearchRun.status.not_in(ACTIVE)),
            )
        )
    result = await session.execute(
        delete(ResearchRun).where(ResearchRun.id == run_id, ResearchRun.status.not_in(ACTIVE))
    )
    return _rows(result) == 1


async def runs_of_question(
    *, session: AsyncSession, question: str, template_id: str, exclude: str, limit: int = 10
) -> Sequence[ResearchRun]:
    """Other runs of the same question with the same template, newest first (a question's history)."""
    result = await session.execute(
        select(ResearchRun)
        .where(
            ResearchRun.question_key == question_key(question),
            ResearchRun.template_id == template_id,
            ResearchRun.question == question,
            ResearchRun.id != exclude,
        )
        .order_by(ResearchRun.created_at.desc())
        .limit(limit)
    )
    return result.scalars().all()


async def unfinished_runs(*, session: AsyncSession, stale_before: datetime | None = None) -> Sequence[ResearchRun]:
    """Runs pending or running; with ``stale_before``, only those whose lease was last renewed before it (a queued
    run, claimed by no one, has no lease: it waits for a worker however long that takes)."""
    query = select(ResearchRun).where(ResearchRun.status.in_(ACTIVE))
    if stale_before is not None:
        query = query.where(ResearchRun.updated_at < stale_before, not_(QUEUED))
    result = await session.execute(query)
    return result.scalars().all()


async def request_cancel(*, session: AsyncSession, run_id: str) -> ResearchRun | None:
    """Ask an active run to stop; the run as it now is (None when unknown). A run nobody has claimed yet (queued)
    is ended here and now — status failed with ``error`` — and the caller writes its ``error`` event; a claimed
    one is stopped by its executor at its next write or lease renewal."""
    await session.execute(
        update(ResearchRun)
        .where(ResearchRun.id == run_id, ResearchRun.status.in_(ACTIVE))
        .values(cancel_requested=True)
    )
    return await session.get(ResearchRun, run_id, populate_existing=True)


async def end_unclaimed(*, session: AsyncSession, run_id: str, error: str) -> bool:
    """Fail a run no executor holds (still queued), once: True when this call ended it."""
    result = await session.execute(
        update(ResearchRun)
        .where(ResearchRun.id == run_id, ResearchRun.status.in_(ACTIVE), ResearchRun.owner.is_(None))
        .values(status="failed", error=error, lease_generation=ResearchRun.lease_generation + 1, updated_at=utcnow())
    )
    return _rows(result) == 1


async def renew_leases(*, session: AsyncSession, fences: Sequence[Fence]) -> list[str]:
    """Renew the leases this executor still holds; the runs whose claim was lost (swept, claimed elsewhere)."""
    lost: list[str] = []
    for fence in fences:
        try:
            await hold(session=session, fence=fence)
        except (LeaseLost, RunCancelled):
            lost.append(fence.run_id)
    return lost


async def append_event(*, session: AsyncSession, run_id: str, name: str, payload: dict[str, Any]) -> RunEvent:
    """Store an event with the next per-run sequence number (1, 2, …; the seq is also its SSE id) and announce it
    to every process in the same transaction (``announce_event``): no event is stored unannounced."""
    event = RunEvent(run_id=run_id, seq=await last_seq(session=session, run_id=run_id) + 1, name=name, payload=payload)
    session.add(event)
    await session.flush()
    await announce_event(session=session, run_id=run_id, seq=event.seq)
    return event


async def last_seq(*, session: AsyncSession, run_id: str) -> int:
    """The run's newest event's seq (0 when it has none)."""
    return int(await session.scalar(select(func.max(RunEvent.seq)).where(RunEvent.run_id == run_id)) or 0)


async def last_event_is(*, session: AsyncSession, run_id: str, name: str, payload: dict[str, Any]) -> bool:
    """Whether the run's newest event is this one: a retried write whose first commit did land (its
    acknowledgement was lost) is not stored twice."""
    last = await session.scalar(
        select(RunEvent).where(RunEvent.run_id == run_id).order_by(RunEvent.seq.desc()).limit(1)
    )
    return last is not None and last.name == name and last.payload == payload


async def announce_event(*, session: AsyncSession, run_id: str, seq: int) -> None:
    """Tell every process listening that ``run_id`` has an event ``seq``, in the caller's transaction: PostgreSQL
    delivers the notification on commit, and never when the transaction rolls back. Nothing on SQLite, which has no
    notifications (its readers are woken in-process, and poll)."""
    if session.get_bind().dialect.name != "postgresql":
        return
    await session.execute(
        text("SELECT pg_notify(:channel, :payload)"), {"channel": RUN_EVENTS_CHANNEL, "payload": f"{run_id}:{seq}"}
    )


async def last_audit_is(
    *, session: AsyncSession, run_id: str, stage: str, attempt: int, payload: dict[str, Any]
) -> bool:
    """Whether the run's newest audit entry is this one (a retried write whose first commit did land)."""
    newest = select(AuditEntry).where(AuditEntry.run_id == run_id).order_by(AuditEntry.seq.desc()).limit(1)
    last = await session.scalar(newest)
    return last is not None and (last.stage, last.attempt, last.payload) == (stage, attempt, payload)


async def append_audit(
    *, session: AsyncSession, run_id: str, stage: str, attempt: int, payload: dict[str, Any]
) -> AuditEntry:
    current = await session.scalar(select(func.max(AuditEntry.seq)).where(AuditEntry.run_id == run_id))
    entry = AuditEntry(run_id=run_id, seq=(current or 0) + 1, stage=stage, attempt=attempt, payload=payload)
    session.add(entry)
    await session.flush()
    return entry


async def audit_trail(*, session: AsyncSession, run_id: str) -> Sequence[AuditEntry]:
    result = await session.execute(select(AuditEntry).where(AuditEntry.run_id == run_id).order_by(AuditEntry.seq))
    return result.scalars().all()


async def events_after(
    *, session: AsyncSession, run_id: str, after_seq: int = 0, through_seq: int | None = None, limit: int | None = None
) -> Sequence[RunEvent]:
    """A run's events after ``after_seq`` (up to ``through_seq`` inclusive, when given), in order."""
    query = select(RunEvent).where(RunEvent.run_id == run_id, RunEvent.seq > after_seq).order_by(RunEvent.seq)
    if through_seq is not None:
        query = query.where(RunEvent.seq <= through_seq)
    if limit is not None:
        query = query.limit(limit)
    result = await session.execute(query)
    return result.scalars().all()


async def add_artifact_version(
    *, session: AsyncSession, run_id: str, report: dict[str, Any], markdown: str
) -> ArtifactVersion:
    """Write the next version (1, 2, …) of a run's artifact."""
    current = await session.scalar(select(func.max(ArtifactVersion.version)).where(ArtifactVersion.run_id == run_id))
    artifact = ArtifactVersion(run_id=run_id, version=(current or 0) + 1, report=report, markdown=markdown)
    session.add(artifact)
    await session.flush()
    return artifact


async def latest_artifact(*, session: AsyncSession, run_id: str) -> ArtifactVersion | None:
    result = await session.execute(
        select(ArtifactVersion)
        .where(ArtifactVersion.run_id == run_id)
        .order_by(ArtifactVersion.version.desc())
        .limit(1)
    )
    return result.scalar_one_or_none()


async def artifact_versions(*, session: AsyncSession, run_id: str) -> Sequence[ArtifactVersion]:
    result = await session.execute(
        select(ArtifactVersion).where(ArtifactVersion.run_id == run_id).order_by(ArtifactVersion.version)
    )
    return result.scalars().all()


async def children_of(*, session: AsyncSession, run_id: str, limit: int = 20) -> Sequence[ResearchRun]:
    """The follow-ups of ``run_id``, oldest first."""
    result = await session.execute(
        select(ResearchRun).where(ResearchRun.parent_id == run_id).order_by(ResearchRun.created_at).limit(limit)
    )
    return result.scalars().all()


async def active_refresh(*, session: AsyncSession, run_id: str) -> str | None:
    """A refresh of ``run_id`` still queued or running (its id), if any."""
    return await session.scalar(
        select(ResearchRun.id).where(ResearchRun.refresh_of == run_id, ResearchRun.status.in_(ACTIVE)).limit(1)
    )


async def refresh_target(*, session: AsyncSession, run_id: str) -> str | None:
    """The run whose next version ``run_id`` writes (a refresh), when it still exists."""
    target = await session.scalar(select(ResearchRun.refresh_of).where(ResearchRun.id == run_id))
    if target is None:
        return None
    # Locked until the caller's transaction ends (PostgreSQL; SQLite writes one at a time): a delete of the target
    # waits for the version written here, and two refreshes ending together number their versions one by one.
    return await session.scalar(select(ResearchRun.id).where(ResearchRun.id == target).with_for_update())


async def latest_version_number(*, session: AsyncSession, run_id: str) -> int | None:
    return await session.scalar(select(func.max(ArtifactVersion.version)).where(ArtifactVersion.run_id == run_id))


async def refreshes_of(*, session: AsyncSession, run_id: str, limit: int = 10) -> Sequence[ResearchRun]:
    """The refreshes of ``run_id``, newest first."""
    result = await session.execute(
        select(ResearchRun).where(ResearchRun.refresh_of == run_id).order_by(ResearchRun.created_at.desc()).limit(limit)
    )
    return result.scalars().all()
