"""The package installs like one: the wheel built from this checkout, installed non-editable into a fresh
virtualenv and run from an unrelated directory, migrates a database, serves the page and its static files, ingests
a file and answers a question. Templates, static files, migrations and ``alembic.ini`` are package data, so
nothing may be looked up beside a source checkout.

The fresh virtualenv gets Veracity from the wheel only; its third-party dependencies are borrowed from the test
environment's site-packages through a ``.pth`` line (which does not load that environment's editable Veracity),
so the check costs seconds rather than a full dependency download. `make install` proves the dependencies
resolve."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` directory of a fresh virtualenv holding the wheel built from this checkout."""
    base = tmp_path_factory.mktemp("wheel")
    dist = base / "dist"
    source = base / "source"  # a copy: a build leaves build/ and *.egg-info behind, and reuses a stale build/
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "backend", source / "backend", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(source)],
        check=True,
        cwd=base,
    )
    (wheel,) = dist.glob("veracity-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in (
        "veracity/alembic.ini",
        "veracity/migrations/env.py",
        "veracity/migrations/versions/0001_initial.py",
        "veracity/frontend/templates/base.html",
        "veracity/frontend/static/vendor/SHA256SUMS",
        "veracity/prompts/composer.md",
        "veracity/guards/data/cues.toml",
    ):
        assert data in names, f"{data} is missing from the wheel"
    assert not any(n.startswith(("tests/", "bench/", "veracity/testing/")) or "fixture_" in n for n in names)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        env={**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    site = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    assert (venv / "bin" / "veracity").exists()  # the console script, from the wheel's entry points
    (site / "borrowed-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return venv / "bin"


def _run(bin_dir: Path, cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "veracity"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_wheel_migrates_serves_ingests_and_answers_from_an_unrelated_directory(
    installed: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "VERACITY_DATABASE__URL": f"sqlite+aiosqlite:///{elsewhere / 'desk.db'}",
        "VERACITY_CORPUS__AUTOLOAD_WIKI": "false",
    }
    where = subprocess.run(
        [str(installed / "python"), "-c", "import veracity; print(veracity.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(installed.parent)), where  # the wheel's copy, not the checkout's

    migrated = _run(installed, elsewhere, "migrate", env=env)
    assert migrated.returncode == 0, migrated.stderr
    assert (elsewhere / "desk.db").exists()

    notes = elsewhere / "lighthouses.md"
    notes.write_text(
        "# Lighthouses\n\nThe Pharos of Alexandria was built in the third century BC on the island of Pharos. "
        "It stood for more than a thousand years before earthquakes ruined it.\n",
        encoding="utf-8",
    )
    ingested = _run(installed, elsewhere, "ingest", str(notes), "--corpus", "notes", "--json", env=env)
    assert ingested.returncode == 0, ingested.stderr
    asked = _run(
        installed,
        elsewhere,
        "ask",
        "When was the Pharos of Alexandria built?",
        "--corpus",
        "notes",
        "--json",
        "--progress",
        "none",
        env=env,
    )
    assert asked.returncode == 0, asked.stderr
    report = json.loads(asked.stdout)
    shipped = " ".join(c["text"] for s in report["sections"] for c in s["claims"])
    assert "third century BC" in shipped

    port = _free_port()
    server = subprocess.Popen(
        [str(installed / "veracity"), "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=elsewhere,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert server.poll() is None, server.stdout.read() if server.stdout else ""
                assert time.monotonic() < deadline, "the installed server never answered /healthz"
                time.sleep(0.5)
        assert health.status_code == 200
        page = httpx.get(f"http://127.0.0.1:{port}/", headers={"accept": "text/html"}, timeout=10)
        assert page.status_code == 200 and 'name="question"' in page.text
        script = next(p for p in page.text.split('"') if p.startswith("/static/") and p.endswith(".js"))
        assert httpx.get(f"http://127.0.0.1:{port}{script}", timeout=10).status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=30)
