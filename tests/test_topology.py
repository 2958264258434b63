"""The scale-out topology of ``docker-compose.yml``, kept in step with the code and proven with real processes.

There is no Docker daemon here, so the compose file is checked by reading it — its services, replicas, commands
(real ``veracity`` subcommands, parsed by the CLI's own parser), settings (every ``VERACITY_*`` name a real
setting), health checks and start order — and the same topology is started for real on 127.0.0.1 with the
file's own commands and environment (only the database URL, the listening address and a few pacing settings
swapped): one migrate step, two ``veracity serve`` with ``VERACITY_WORKER__EMBEDDED=false`` and two ``veracity
worker`` on a fresh PostgreSQL database. Runs are started through both web processes and each is streamed from the
other one; both workers execute some, each run once.

The migrate step runs the file's ``veracity migrate``, then loads the small test corpus instead of its
``veracity load-default-corpus``: the default corpus is 10,000 Wikipedia passages, about 30 s to load lexically and
two more minutes to embed on two cores, too slow for a test; the web and worker processes are the same either way
(they autoload nothing, as in the file)."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml
from httpx_sse import aconnect_sse

from conftest import SMALL_CORPUS, load_docs
from test_worker import (
    RUN,
    VERACITY,
    Proc,
    _assert_executed_once,
    _claimed,
    _events,
    _free_port,
    _healthy,
    _ready,
    _until,
    launched,
)
from veracity.cli import build_parser
from veracity.settings import flat_fields

REPO = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
APP_SERVICES = ("migrate", "web", "worker")
"""The services that run the app's image."""
SETTINGS = {name for name, _, _ in flat_fields()}
PACING = {"VERACITY_WORKER__CONCURRENCY": "2"}  # at most two runs each at once: six cannot all go to one worker


def _commands(service: str) -> list[list[str]]:
    """The ``veracity`` command lines a service runs: its command, or each step of a ``sh -c "a && b"``."""
    command = SERVICES[service]["command"]
    if command[:2] == ["sh", "-c"]:
        return [shlex.split(step) for step in command[2].split("&&")]
    return [command]


# ---- the file -----------------------------------------------------------------------------------------------


def test_compose_declares_the_topology() -> None:
    assert set(SERVICES) == {"postgres", "migrate", "web", "worker", "proxy"}
    assert SERVICES["web"]["deploy"]["replicas"] == 2
    assert SERVICES["worker"]["deploy"]["replicas"] == 2
    assert SERVICES["migrate"]["restart"] == "no"  # one-shot
    assert "ports" not in SERVICES["web"]  # replicas cannot each bind one host port: the proxy has it
    assert SERVICES["web"]["expose"] == ["8000"]
    assert SERVICES["proxy"]["ports"] == ["127.0.0.1:8000:80"]


def test_compose_commands_are_the_cli_subcommands() -> None:
    parser = build_parser()
    subcommands = {}
    for service in APP_SERVICES:
        for command in _commands(service):
            assert command[0] == "veracity", command
            args = parser.parse_args(command[1:])  # an unknown subcommand or option exits here
            subcommands.setdefault(service, []).append(args.command)
    assert subcommands == {"migrate": ["migrate", "load-default-corpus"], "web": ["serve"], "worker": ["worker"]}
    serve = parser.parse_args(_commands("web")[0][1:])
    assert (serve.host, serve.port) == ("0.0.0.0", 8000)  # reachable from the proxy's container, on 8000


def test_compose_environment_names_real_settings_and_one_database() -> None:
    for service in APP_SERVICES:
        environment = SERVICES[service]["environment"]
        unknown = {name for name in environment if name.startswith("VERACITY_")} - SETTINGS
        assert not unknown, f"{service}: not settings: {unknown}"
        assert environment["VERACITY_CORPUS__AUTOLOAD_WIKI"] == "false"  # only migrate loads the corpus
        assert environment["VERACITY_AUTH__ENABLED"] == "true"  # every service listens on 0.0.0.0: accounts on
    urls = {SERVICES[s]["environment"]["VERACITY_DATABASE__URL"] for s in APP_SERVICES}
    db = SERVICES["postgres"]["environment"]
    assert urls == {
        f"postgresql+asyncpg://{db['POSTGRES_USER']}:{db['POSTGRES_PASSWORD']}@postgres:5432/{db['POSTGRES_DB']}"
    }
    assert SERVICES["web"]["environment"]["VERACITY_WORKER__EMBEDDED"] == "false"  # the web executes no run
    assert "VERACITY_WORKER__EMBEDDED" not in SERVICES["worker"]["environment"]  # means nothing to a worker


def test_compose_health_checks_and_start_order() -> None:
    assert "pg_isready" in " ".join(SERVICES["postgres"]["healthcheck"]["test"])
    web_check = SERVICES["web"]["healthcheck"]["test"]
    assert web_check[:3] == ["CMD", "python", "-c"] and "http://127.0.0.1:8000/healthz" in web_check[3]
    # The image has that python: the Dockerfile's final stage is a python image.
    stages = re.findall(r"^FROM (\S+)", (REPO / "Dockerfile").read_text(), re.MULTILINE)
    assert stages[-1].startswith("python:")
    # A worker has no port to ask; the file says why it has no check.
    assert "healthcheck" not in SERVICES["worker"]
    assert "worker listens on no port" in (REPO / "docker-compose.yml").read_text()

    def after(service: str) -> dict[str, str]:
        return {name: dep["condition"] for name, dep in SERVICES[service]["depends_on"].items()}

    assert after("migrate") == {"postgres": "service_healthy"}
    assert after("web") == {"migrate": "service_completed_successfully"}
    assert after("worker") == {"migrate": "service_completed_successfully"}
    assert after("proxy") == {"web": "service_healthy"}


def test_the_proxy_spreads_requests_over_the_web_replicas_unbuffered() -> None:
    (mount,) = SERVICES["proxy"]["volumes"]
    source, target, mode = mount.split(":")
    assert (target, mode) == ("/etc/nginx/conf.d/default.conf", "ro")
    conf = (REPO / source).read_text()
    assert "set $web http://web:8000;" in conf and "proxy_pass $web;" in conf  # every replica, resolved at run time
    assert "proxy_buffering off;" in conf  # SSE events go out as they are written


# ---- the same topology, for real ----------------------------------------------------------------------------


def _env(service: str) -> dict[str, str]:
    """The service's environment from the file but its database URL (the test's own database replaces it)."""
    return {k: str(v) for k, v in SERVICES[service]["environment"].items() if k != "VERACITY_DATABASE__URL"}


def _serve_args(port: int) -> list[str]:
    """The web service's command on 127.0.0.1 and a free port instead of 0.0.0.0:8000."""
    args = _commands("web")[0][1:]
    args[args.index("--host") + 1] = "127.0.0.1"
    args[args.index("--port") + 1] = str(port)
    return args


def _health_check(port: int) -> int:
    """The web service's own health check command, run here against a web process."""
    _, _, *args = SERVICES["web"]["healthcheck"]["test"]
    args = [a.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for a in args]
    return subprocess.run([sys.executable, *args], capture_output=True, timeout=30, check=False).returncode


async def _stream(client: httpx.AsyncClient, base: str, run_id: str) -> list[tuple[int, str]]:
    """A run's events over SSE from ``base``, from the first to its last."""
    streamed: list[tuple[int, str]] = []
    async with aconnect_sse(client, "GET", f"{base}/v1/research/{run_id}/events") as source:
        assert source.response.status_code == 200
        async for sse in source.aiter_sse():
            streamed.append((int(sse.id), sse.event))
            if sse.event in ("complete", "error"):
                break
    return streamed


async def _watch_health(base: str, seen: list[dict[str, Any]], stop: asyncio.Event) -> None:
    async with httpx.AsyncClient(timeout=5) as client:
        while not stop.is_set():
            response = await client.get(f"{base}/healthz")
            seen.append({**response.json(), "http": response.status_code})
            await asyncio.sleep(0.2)


async def test_two_web_and_two_worker_processes_run_the_compose_topology(pg_url: str, tmp_path: Path) -> None:
    started = time.monotonic()
    # migrate: the file's first step for real, then the small corpus (see the module's docstring).
    (migrate_args, load_args) = _commands("migrate")
    assert load_args == ["veracity", "load-default-corpus"]
    done = await asyncio.to_thread(
        subprocess.run,
        [VERACITY, *migrate_args[1:]],
        cwd=REPO,
        env={**os.environ, **_env("migrate"), "VERACITY_DATABASE__URL": pg_url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    await load_docs(pg_url, "small", SMALL_CORPUS)
    # Accounts are on (the servers listen on every address): an admin and an API token, made as the README says.
    cli_env = {**os.environ, **_env("migrate"), "VERACITY_DATABASE__URL": pg_url}
    for args, stdin in (
        (["user", "add", "ops", "--admin", "--password-stdin"], "a long enough password\n"),
        (["token", "create", "ops", "--name", "topology test"], ""),
    ):
        made = await asyncio.to_thread(
            subprocess.run,
            [VERACITY, *args],
            cwd=REPO,
            env=cli_env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert made.returncode == 0, made.stderr
    auth = {"Authorization": f"Bearer {made.stdout.strip().splitlines()[-1]}"}

    ports = [_free_port(), _free_port()]
    while ports[0] == ports[1]:
        ports[1] = _free_port()
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    web_env, worker_env = _env("web"), _env("worker")
    with (
        launched(_serve_args(ports[0]), pg_url, tmp_path / "web1.log", **web_env) as web1,
        launched(_serve_args(ports[1]), pg_url, tmp_path / "web2.log", **web_env) as web2,
        launched(_commands("worker")[0][1:], pg_url, tmp_path / "w1.log", **worker_env, **PACING) as w1,
        launched(_commands("worker")[0][1:], pg_url, tmp_path / "w2.log", **worker_env, **PACING) as w2,
    ):
        webs: list[Proc] = [web1, web2]
        for proc, base in zip(webs, bases, strict=True):
            await _until(lambda base=base: _healthy(base), f"{base}/healthz", proc, timeout=60)
        for port in ports:
            assert await asyncio.to_thread(_health_check, port) == 0  # the compose health check passes on both
        await _ready(w1)
        await _ready(w2)

        health: list[list[dict[str, Any]]] = [[], []]
        stop = asyncio.Event()
        watchers = [asyncio.create_task(_watch_health(b, seen, stop)) for b, seen in zip(bases, health, strict=True)]
        try:
            async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=60), headers=auth) as client:
                accepted_by = [i % 2 for i in range(6)]  # alternate: web1, web2, web1, …
                runs = []
                for i in accepted_by:
                    async with client.stream("POST", f"{bases[i]}/v1/research/stream", json=RUN) as response:
                        assert response.status_code == 200
                        runs.append(response.headers["x-run-id"])
                # Each run streamed from the web process that did not accept it, all at once.
                streamed = await asyncio.wait_for(
                    asyncio.gather(
                        *(_stream(client, bases[1 - i], run_id) for i, run_id in zip(accepted_by, runs, strict=True))
                    ),
                    timeout=60,
                )
        finally:
            stop.set()
            await asyncio.gather(*watchers, return_exceptions=True)
        for watcher in watchers:
            assert watcher.exception() is None, watcher.exception()

        stopping = time.monotonic()
        codes = [w1.stop(timeout=30), w2.stop(timeout=30), web1.stop(timeout=30), web2.stop(timeout=30)]
        assert codes == [0, 0, 0, 0]
        assert time.monotonic() - stopping < 60

    for run_id, events in zip(runs, streamed, strict=True):
        stored = await _events(pg_url, run_id)
        _assert_executed_once(stored)
        assert events == stored  # the other web process streamed every event, in order
    first, second = _claimed(w1), _claimed(w2)
    assert first and second and not first & second and first | second == set(runs)  # both worked, each run once
    assert all(": claimed by " not in web.log() for web in webs)  # EMBEDDED=false: the web processes executed none

    # /healthz stayed 200 on both while the runs executed, and each saw the workers at work — the workers only.
    worker_pids = {str(w1.proc.pid), str(w2.proc.pid)}
    for seen in health:
        assert seen and all(h["http"] == 200 and h["status"] == "ok" for h in seen)
        executors = {executor for h in seen for executor in h["workers"]}
        assert executors and {executor.split(":")[1] for executor in executors} <= worker_pids, executors
    assert time.monotonic() - started < 90
