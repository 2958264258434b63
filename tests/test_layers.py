"""The package's layers: every import of every module (module level, inside functions, under ``TYPE_CHECKING``)
goes from a package to one in its own layer or below, and no two packages import each other, directly or round a
longer loop. A package is a top-level subpackage or module of ``veracity`` (``guards.judge`` is part of
``guards``).

The layers, lowest first (README, "Layers"):

0. contracts and values: ``ports``, ``errors``, ``domain``, ``specs``, ``settings``, ``text``, ``checks``,
   ``messages``, ``prompts``, ``inputs``
1. infrastructure: ``db``, ``fetch``, ``rank``, ``migrations`` (Alembic's history, package data)
2. ``semantic`` (the sentence model and the models fitted on it), ``synthesis`` (sections from evidence)
3. ``models`` (the chat client, budgets, model output reading)
4. ``guards`` (screen, judge, reviewer, gate, floor rules)
5. ``search``, ``corpus``
6. ``compose``
7. ``graph`` (nodes never import ``runs``)
8. ``runs`` (the run service and what it assembles)
9. the edges: ``web``, ``cli``, ``evals``, ``progress``
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import veracity

PACKAGE = Path(veracity.__file__).parent
LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(names.split())
    for names in (
        "__init__ ports errors domain events specs settings text checks messages prompts inputs",
        "db fetch rank migrations",
        "semantic synthesis",
        "models",
        "guards",
        "search corpus",
        "compose",
        "graph",
        "runs accounts",
        "web cli cli_accounts evals progress",
    )
)
LEVEL = {name: level for level, names in enumerate(LAYERS) for name in names}


def _package(module: str) -> str:
    """``veracity.guards.judge.fit`` → ``guards``; ``veracity`` → ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    parts = ("veracity", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> list[tuple[str, bool, str]]:
    """(module name, is a package's ``__init__``, source text) of every module of the installed package."""
    return [
        (_module_name(path), path.name == "__init__.py", path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def parse(text: str) -> ast.Module:
    """``ast.parse``, tried again when CPython 3.11 reports "AST constructor recursion depth mismatch": its AST
    builder counts depth per interpreter, not per thread, so another thread building an AST at the same moment (a
    leftover run of an earlier test whose LangChain code reads a function's source) trips it (CPython gh-106905;
    seen once in a full `make test`). The source is not at fault; a second try parses it."""
    for attempt in range(3):
        try:
            return ast.parse(text)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc) or attempt == 2:
                raise
    raise AssertionError("unreachable")


def imports_of(module: str, is_init: bool, text: str) -> list[tuple[str, int]]:
    """Every ``veracity`` module the source imports, with the line: anywhere in it, relative imports resolved."""
    package = module if is_init else module.rpartition(".")[0]
    found = []
    for node in ast.walk(parse(text)):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target == "veracity":  # ``from veracity import runs`` imports the package ``runs``
                found += [
                    (f"veracity.{a.name}" if (PACKAGE / a.name).is_dir() or (PACKAGE / f"{a.name}.py").exists()
                     else "veracity", node.lineno)
                    for a in node.names
                ]  # fmt: skip
                continue
            found.append((target, node.lineno))
    return [(name, line) for name, line in found if name == "veracity" or name.startswith("veracity.")]


def package_edges(modules: list[tuple[str, bool, str]]) -> dict[tuple[str, str], list[str]]:
    """(importing package, imported package) → where, for every import that crosses packages."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module, is_init, text in modules:
        source = _package(module)
        for target, line in imports_of(module, is_init, text):
            if _package(target) != source:
                edges[(source, _package(target))].append(f"{module}:{line}")
    return edges


def cycles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one package (Tarjan)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_package_has_a_layer() -> None:
    packages = {_package(_module_name(p)) for p in PACKAGE.rglob("*.py")}
    assert packages - set(LEVEL) == set(), "a new package needs its layer in LAYERS and the README"


def test_no_import_goes_up_a_layer() -> None:
    upward = {
        f"{a} (layer {LEVEL[a]}) imports {b} (layer {LEVEL[b]}): {', '.join(where)}"
        for (a, b), where in package_edges(sources()).items()
        if LEVEL.get(b, 0) > LEVEL.get(a, 0)
    }
    assert upward == set()


def test_no_import_cycle_between_packages() -> None:
    assert cycles(package_edges(sources())) == []


def test_the_walk_sees_imports_inside_functions_and_type_checking_blocks() -> None:
    """The check is not vacuous: a lazy import and a ``TYPE_CHECKING`` import both count, relative imports resolve,
    an upward import is reported, and a loop is found."""
    modules = sources()
    decide = next(m for m in modules if m[0] == "veracity.graph.nodes.decide")
    assert "veracity.guards.gate" in {name for name, _ in imports_of(*decide)}  # what decide really imports
    probe = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from veracity.runs.service import RunService\n"
        "def f():\n    from ...web import app\nfrom veracity import cli\n"
    )
    assert {name for name, _ in imports_of("veracity.graph.nodes.probe", False, probe)} == {
        "veracity.runs.service",
        "veracity.web",
        "veracity.cli",
    }
    edges = package_edges([*modules, ("veracity.graph.nodes.probe", False, probe)])
    assert sorted((a, b) for a, b in edges if LEVEL[b] > LEVEL[a]) == [
        ("graph", "cli"),
        ("graph", "runs"),
        ("graph", "web"),
    ]
    assert any({"graph", "runs", "web"} <= set(group) for group in cycles(edges))  # the probe closes loops


def test_the_web_uses_the_run_service_for_runs_only() -> None:
    """Handlers take the templates, settings, sessions and the judge from ``web/deps.py``; ``service.`` is for
    run operations (start, follow, cancel, re-run, follow up, refresh), never a way to reach the rest of the process."""
    reached = {
        f"{name}:{node.lineno} service.{node.attr}"
        for name, _, text in sources()
        if name.startswith("veracity.web")
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "service"
        and node.attr not in {"start", "tail", "cancel", "rerun", "follow_up", "refresh"}
    }
    assert reached == set()
