"""Live viewing of runs, one reader per run per process. However many viewers follow a run here (browser pages,
API streams, the CLI), ONE task reads the run's new events — once per wake-up, whatever the number of viewers —
into an in-memory list, and every viewer walks that list from its own cursor. An idle viewer makes no query; a
viewer that starts before what the feed holds reads that older part once, itself.

Readers are woken three ways: in-process by the journal right after it commits an event (``wake``); across
processes by PostgreSQL, whose journal transactions ``pg_notify`` the channel ``veracity_run_events`` and whose
notifications reach this process's ONE listener connection (``db/listener.py``, started with the first viewer); and,
as a slow safety net for anything missed, a read every ``limits.feed_poll_seconds``. A notification names the event's
seq, and a wake for a seq that the reader's current (or last) read was certain to see is ignored: the journal wakes
only after its commit, so a pass that began after the wake sees that event. Its own process's event, announced both
in-process and by PostgreSQL, therefore costs one read, not two — a fixed number of queries per event, whatever the
timing and the number of viewers.

A run's state is dropped when its last viewer leaves; its reader stops then, or as soon as the run has ended
(``complete`` / ``error``). Nothing here is the run's truth: it is all re-read from the table on demand.
"""

from __future__ import annotations

import asyncio
import logging
from bisect import bisect_right
from collections.abc import AsyncIterator, Sequence

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity import messages
from veracity.db import runs_repo
from veracity.db.engine import is_sqlite
from veracity.db.listener import Listener
from veracity.db.models import RunEvent
from veracity.errors import NotFound, PipelineError, VeracityError
from veracity.events import TERMINAL_EVENTS
from veracity.settings import Settings

logger = logging.getLogger(__name__)

GATHER_SECONDS = 0.02
"""After a wake-up the reader waits this long before reading, so a burst of events (a fast run writes one every few
milliseconds) is read once and fanned out once: every viewer is woken per batch, not per event. It adds at most this
much to the lag, and takes most of the viewers' load off the event loop a run executes on."""


def _seq(event: RunEvent) -> int:
    return event.seq


class _Channel:
    """One run followed in this process: the events read so far (those after ``base``), and how viewers learn of
    more — ``tick`` is set, and replaced by a fresh one, whenever events arrive or the channel ends."""

    def __init__(self, run_id: str, base: int) -> None:
        self.run_id = run_id
        self.base = base
        self.events: list[RunEvent] = []
        self.last = base
        self.asked = base
        """The highest seq a wake-up has named."""
        self.covered = base
        """The highest seq the current (or last) read is certain to see: ``asked`` when it began."""
        self.ended = False
        self.error: VeracityError | None = None
        self.viewers = 0
        self.stopped = False
        self.wake = asyncio.Event()
        self.tick = asyncio.Event()
        self.reader: asyncio.Task[None] | None = None

    def signal(self) -> None:
        tick, self.tick = self.tick, asyncio.Event()
        tick.set()


class RunFeed:
    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], settings: Settings) -> None:
        self.sessionmaker = sessionmaker
        self.settings = settings
        self._channels: dict[str, _Channel] = {}
        self._opening: dict[str, asyncio.Future[int]] = {}
        """Runs whose newest seq is being read for a channel about to open (shared by viewers arriving together)."""
        self.closed = False
        """Closed with the process: no new viewer, no new reader."""
        url = settings.database.url
        self.listener: Listener | None = None
        """The process's PostgreSQL LISTEN connection (None on SQLite, where only in-process wake-ups exist)."""
        if not is_sqlite(url):
            self.listener = Listener(
                url, runs_repo.RUN_EVENTS_CHANNEL, on_message=self._notified, on_connect=self.wake_all
            )

    # ---- wake-ups ------------------------------------------------------------------------------------
    def wake(self, run_id: str, seq: int | None = None) -> None:
        """``run_id`` has new events (up to ``seq``, when known): its reader here, if any, reads them."""
        channel = self._channels.get(run_id)
        if channel is None:
            return
        if seq is not None:
            if seq <= channel.covered:
                return
            channel.asked = max(channel.asked, seq)
        channel.wake.set()

    def wake_all(self) -> None:
        """Every reader reads once: after the listener (re)connects, since notifications sent meanwhile are lost."""
        for channel in self._channels.values():
            channel.wake.set()

    def _notified(self, payload: str) -> None:
        run_id, _, seq = payload.partition(":")
        self.wake(run_id, int(seq) if seq.isdigit() else None)

    # ---- viewers ---------------------------------------------------------------------------------------
    async def follow(self, run_id: str, after_seq: int = 0) -> AsyncIterator[RunEvent]:
        """The run's events after ``after_seq``, stored ones first, then live ones as they are committed, each once
        and in order, until its terminal event. ``NotFound`` when there is no such run."""
        if self.closed:
            raise PipelineError(f"following run {run_id}: this process is shutting down")
        if self.listener is not None:
            self.listener.start()
        channel = self._channels.get(run_id)
        if channel is None:
            # The reader starts from what is stored, never from a cursor a client made up: a Last-Event-ID past
            # the run's end would otherwise make every later viewer here wait above it.
            opening = self._opening.get(run_id)
            if opening is None:  # one query however many viewers arrive together
                opening = self._opening[run_id] = asyncio.ensure_future(self._last_seq(run_id))
                opening.add_done_callback(lambda _f: self._opening.pop(run_id, None))
            top = await asyncio.shield(opening)
            channel = self._channels.get(run_id) or self._open(run_id, min(after_seq, top))
        channel.viewers += 1
        cursor = after_seq
        try:
            if cursor < channel.base:  # earlier than the feed holds: that part once, from the table
                for event in await self._backlog(run_id, cursor, channel.base):
                    cursor = event.seq
                    yield event
                    if event.name in TERMINAL_EVENTS:
                        return
                cursor = channel.base
            while True:
                tick = channel.tick
                held = channel.events
                for event in held[bisect_right(held, cursor, key=_seq) :]:
                    cursor = event.seq
                    yield event
                    if event.name in TERMINAL_EVENTS:
                        return
                if channel.error is not None:
                    raise type(channel.error)(*channel.error.args)  # a fresh one per viewer
                if channel.ended and cursor >= channel.last:
                    return
                await tick.wait()
        finally:
            channel.viewers -= 1
            if channel.viewers == 0:
                self._drop(channel)

    def viewing(self) -> dict[str, int]:
        """Runs followed here and their viewer counts."""
        return {run_id: channel.viewers for run_id, channel in self._channels.items()}

    async def close(self) -> None:
        """Stop every reader and the listener; viewers still following end their streams."""
        self.closed = True
        channels = list(self._channels.values())
        for channel in channels:
            self._drop(channel)
            channel.ended = True
            channel.signal()
        readers = [c.reader for c in channels if c.reader is not None]
        if readers:
            _, pending = await asyncio.wait(readers, timeout=5)
            for task in pending:
                task.cancel()
        if self.listener is not None:
            await self.listener.close()

    async def _last_seq(self, run_id: str) -> int:
        async with self.sessionmaker() as session:
            return await runs_repo.last_seq(session=session, run_id=run_id)

    # ---- the reader ------------------------------------------------------------------------------------
    def _open(self, run_id: str, base: int) -> _Channel:
        channel = _Channel(run_id, base)
        self._channels[run_id] = channel
        channel.reader = asyncio.create_task(self._read(channel), name=f"feed-{run_id}")
        channel.reader.add_done_callback(lambda task: self._reader_done(channel, task))
        return channel

    def _drop(self, channel: _Channel) -> None:
        if self._channels.get(channel.run_id) is channel:
            del self._channels[channel.run_id]
        channel.stopped = True
        channel.wake.set()

    def _reader_done(self, channel: _Channel, task: asyncio.Task[None]) -> None:
        failure = None if task.cancelled() else task.exception()
        if failure is not None:
            logger.error("run %s: feed reader failed", channel.run_id, exc_info=failure)
            channel.error = PipelineError(f"following run {channel.run_id} failed: {failure}")
            self._drop(channel)
            channel.signal()

    async def _read(self, channel: _Channel) -> None:
        """Read the run's new events whenever woken (or the safety net's period passes), until the run ends or no
        one here follows it. The run's status is read at the first pass and at each safety-net pass only."""
        poll = self.settings.limits.feed_poll_seconds
        check_run = True
        while not channel.stopped:
            channel.wake.clear()
            channel.covered = max(channel.asked, channel.last)
            try:
                async with self.sessionmaker() as session:
                    run = await runs_repo.get_run(session=session, run_id=channel.run_id) if check_run else None
                    if check_run and run is None:
                        channel.error = NotFound(messages.RUN_UNKNOWN.format(run_id=channel.run_id))
                        channel.signal()
                        return
                    batch = await runs_repo.events_after(session=session, run_id=channel.run_id, after_seq=channel.last)
            except (SQLAlchemyError, OSError) as exc:  # the database is away: viewers wait, the next pass retries
                logger.warning("run %s: feed read failed (%s); retrying", channel.run_id, exc)
                channel.covered = channel.last  # what this pass missed, the next wake-up asks for again
            else:
                # Status first, then events: a finished run's events are all committed by the time it reads so.
                finished = run is not None and run.status in ("done", "failed")
                self._take(channel, batch, finished)
                if channel.ended:
                    return
            try:
                await asyncio.wait_for(channel.wake.wait(), poll)
                check_run = False
                await asyncio.sleep(GATHER_SECONDS)
            except TimeoutError:
                check_run = True

    @staticmethod
    def _take(channel: _Channel, batch: Sequence[RunEvent], finished: bool) -> None:
        if batch:
            channel.events.extend(batch)
            channel.last = batch[-1].seq
            channel.covered = max(channel.covered, channel.last)
        channel.ended = finished or any(event.name in TERMINAL_EVENTS for event in batch)
        if batch or channel.ended:
            channel.signal()

    async def _backlog(self, run_id: str, after_seq: int, through_seq: int) -> Sequence[RunEvent]:
        async with self.sessionmaker() as session:
            return await runs_repo.events_after(
                session=session, run_id=run_id, after_seq=after_seq, through_seq=through_seq
            )
