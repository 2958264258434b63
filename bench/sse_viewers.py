"""SSE viewers for bench/scale.py, as a process of their own: ``python bench/sse_viewers.py --run ID --viewers N
--out FILE BASE [BASE …]`` opens N ``GET /v1/research/{id}/events`` streams, spread over the BASE web processes,
prints ``opened <ok> <failed>`` once every stream has its 200 response, then records each event's ``id`` (the
seq) with the wall-clock time it arrived, until every stream has had its ``complete`` or ``error`` — or a line on
stdin says ``stop`` (idle viewers), or the deadline passes. It writes the figures to FILE as JSON and prints
``done``.

Deliberately raw asyncio protocols, not httpx: a thousand httpx streams in one process cost the client more CPU than
the servers it measures on two cores. Each stream is one TCP connection speaking HTTP/1.1 with a chunked body
(uvicorn's framing of a streaming response), parsed here just far enough for SSE: the ``id:`` and ``event:``
lines of each message; comments (sse-starlette's pings) are ignored."""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ENDINGS = (b"complete", b"error")
CONNECT_AT_ONCE = 100
"""Connections being opened at a time (the rest wait), so a thousand SYNs do not arrive in one burst."""


@dataclass
class Figures:
    """What one viewer saw."""

    events: list[tuple[int, float]] = field(default_factory=list)
    """(seq, time.time() when it arrived), in arrival order."""
    error: str | None = None


class Viewer(asyncio.Protocol):
    """One SSE stream: the request, then the chunked response decoded into SSE messages as bytes arrive."""

    def __init__(self, request: bytes, opened: asyncio.Future[bool], ended: asyncio.Future[None]) -> None:
        self.request = request
        self.opened = opened
        self.ended = ended
        self.figures = Figures()
        self.transport: asyncio.Transport | None = None
        self._raw = bytearray()
        self._body = bytearray()
        self._head = True
        self._chunk_left = -1  # -1: a size line is next; > 0: data bytes of the chunk; 0: the CRLF after it

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.request)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.opened.done():
            self.opened.set_result(False)
            self.figures.error = f"closed before the response: {exc}"
        if not self.ended.done():
            self.figures.error = self.figures.error or f"stream closed before its ending: {exc}"
            self.ended.set_result(None)

    def data_received(self, data: bytes) -> None:
        now = time.time()
        self._raw += data
        if self._head:
            end = self._raw.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self._raw[:end]).lower()
            del self._raw[: end + 4]
            self._head = False
            if not head.startswith(b"http/1.1 200") or b"transfer-encoding: chunked" not in head:
                self.figures.error = head.split(b"\r\n", 1)[0].decode(errors="replace")
                self.opened.set_result(False)
                self.close()
                return
            self.opened.set_result(True)
        self._dechunk()
        self._messages(now)

    def _dechunk(self) -> None:
        raw = self._raw
        while raw:
            if self._chunk_left < 0:
                line_end = raw.find(b"\r\n")
                if line_end < 0:
                    return
                size = int(bytes(raw[:line_end]).split(b";", 1)[0], 16)
                del raw[: line_end + 2]
                if size == 0:  # the last chunk: the server ended the stream
                    self.close()
                    return
                self._chunk_left = size
            elif self._chunk_left > 0:
                take = min(self._chunk_left, len(raw))
                self._body += raw[:take]
                del raw[:take]
                self._chunk_left -= take
            else:
                if len(raw) < 2:
                    return
                del raw[:2]
                self._chunk_left = -1

    def _messages(self, now: float) -> None:
        while (end := self._body.find(b"\r\n\r\n")) >= 0:
            message = bytes(self._body[:end])
            del self._body[: end + 4]
            seq: int | None = None
            name = b""
            for line in message.split(b"\r\n"):
                if line.startswith(b"id: "):
                    seq = int(line[4:])
                elif line.startswith(b"event: "):
                    name = line[7:]
            if seq is None:
                continue  # a comment (ping)
            self.figures.events.append((seq, now))
            if name in ENDINGS:
                self.close()
                return

    def close(self) -> None:
        if not self.ended.done():
            self.ended.set_result(None)
        if self.transport is not None:
            self.transport.close()


async def _open(base: str, run_id: str, gate: asyncio.Semaphore) -> tuple[Viewer, asyncio.Future[bool]]:
    loop = asyncio.get_running_loop()
    url = urlsplit(base)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    request = (
        f"GET /v1/research/{run_id}/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Accept: text/event-stream\r\nCache-Control: no-cache\r\n\r\n"
    ).encode()
    opened: asyncio.Future[bool] = loop.create_future()
    viewer = Viewer(request, opened, loop.create_future())
    async with gate:
        try:
            await loop.create_connection(lambda: viewer, host, port)
        except OSError as exc:
            viewer.figures.error = f"connect: {exc}"
            opened.set_result(False)
            viewer.ended.set_result(None)
            return viewer, opened
        await asyncio.wait([opened], timeout=60)
    return viewer, opened


async def _stopped() -> None:
    """Until stdin says ``stop`` (or closes)."""
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line or line.strip() == "stop":
            return


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("bases", nargs="+", help="web processes, http://127.0.0.1:PORT")
    parser.add_argument("--run", required=True)
    parser.add_argument("--viewers", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--deadline", type=float, default=120.0, help="seconds, from the streams being open")
    args = parser.parse_args(argv)

    gate = asyncio.Semaphore(CONNECT_AT_ONCE)
    opening = [_open(args.bases[i % len(args.bases)], args.run, gate) for i in range(args.viewers)]
    pairs = await asyncio.gather(*opening)
    viewers = [v for v, _ in pairs]
    ok = sum(1 for _, opened in pairs if opened.done() and opened.result())
    print(f"opened {ok} {len(viewers) - ok}", flush=True)

    ended: asyncio.Future[Any] = asyncio.gather(*(v.ended for v in viewers))
    stop: asyncio.Future[Any] = asyncio.ensure_future(_stopped())
    await asyncio.wait([ended, stop], timeout=args.deadline, return_when=asyncio.FIRST_COMPLETED)
    for viewer in viewers:
        if not viewer.ended.done() and not stop.done():
            viewer.figures.error = viewer.figures.error or "deadline passed before the stream's ending"
        viewer.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    args.out.write_text(
        json.dumps(
            {
                "viewers": [v.figures.events for v in viewers],
                "errors": [v.figures.error for v in viewers if v.figures.error],
                "cpu_seconds": usage.ru_utime + usage.ru_stime,
            }
        )
    )
    print("done", flush=True)
    stop.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
