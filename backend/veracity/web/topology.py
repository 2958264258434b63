"""Lay out the compiled graph's own nodes and edges as an SVG-ready structure.

Nothing here is a hand-drawn copy of the pipeline: the node list and the edges come from
``CompiledStateGraph.get_graph()``. Fan-out nodes (targets of ``Send``) are drawn as one box per branch
that actually ran, with its counters; a back edge (the bounded revise loop) is drawn as such.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langgraph.graph.state import CompiledStateGraph

from veracity.runs.reducer import RunView

WIDTH, ROW_H, BOX_H, BOX_W, MARGIN = 380, 64, 38, 200, 12
FAN_OUT_NODES = frozenset({"retrieve", "synthesize"})


@dataclass(frozen=True)
class GraphShape:
    """Node order (top to bottom) and edges of the compiled graph, computed once per process."""

    nodes: list[str]
    edges: list[tuple[str, str, bool]]  # (source, target, conditional)
    layer: dict[str, int] = field(default_factory=dict)
    back: set[tuple[str, str]] = field(default_factory=set)


def graph_shape(graph: CompiledStateGraph[Any, Any, Any, Any]) -> GraphShape:
    drawable = graph.get_graph()
    edges = [(e.source, e.target, bool(e.conditional)) for e in drawable.edges]
    back = _back_edges(edges, "__start__")
    forward = [(s, t) for s, t, _ in edges if (s, t) not in back]
    layer: dict[str, int] = {"__start__": 0}
    # Longest-path layering over the forward edges (a DAG once the loop's back edge is set aside).
    for _ in range(len(drawable.nodes)):
        for source, target in forward:
            if source in layer and layer.get(target, -1) < layer[source] + 1:
                layer[target] = layer[source] + 1
    nodes = sorted((n for n in drawable.nodes if n not in ("__start__", "__end__")), key=lambda n: layer.get(n, 99))
    return GraphShape(nodes=nodes, edges=edges, layer=layer, back=back)


def _back_edges(edges: list[tuple[str, str, bool]], start: str) -> set[tuple[str, str]]:
    """Edges into a node still on the depth-first stack: the loops."""
    back: set[tuple[str, str]] = set()
    on_stack: set[str] = set()
    done: set[str] = set()

    def visit(node: str) -> None:
        on_stack.add(node)
        for s, t, _ in edges:
            if s != node:
                continue
            if t in on_stack:
                back.add((s, t))
            elif t not in done:
                visit(t)
        on_stack.discard(node)
        done.add(node)

    visit(start)
    return back


@dataclass
class Box:
    id: str
    label: str
    x: int
    y: int
    w: int
    h: int
    state: str
    note: str = ""
    counters: str = ""
    branch_of: str | None = None
    tone: str = ""
    """"warn" when a guard stage found a problem or the run fell back, "stop" when it was routed away."""


def _tone(node: str, note: str, outcome: str | None) -> str:
    if node == "route" and note in ("escalate", "crisis"):
        return "stop"
    if node == "verify" and note and note != "verdict ok":
        return "warn"
    if node == "retrieve_merge" and note.endswith("withheld"):
        return "warn"
    if node == "decide" and note:
        if note == "crisis":
            return "stop"
        if note.startswith(("fallback", "hand off", "revise")) or outcome in ("fallback", "handoff"):
            return "warn"
    return ""


@dataclass
class Edge:
    x1: int
    y1: int
    x2: int
    y2: int
    kind: str  # "edge" | "conditional" | "loop"
    active: bool = False
    label: str = ""


@dataclass
class Topology:
    width: int
    height: int
    boxes: list[Box]
    edges: list[Edge]


def layout(shape: GraphShape, view: RunView) -> Topology:
    boxes: dict[str, list[Box]] = {}
    row = {n: i for i, n in enumerate(shape.nodes)}
    branches = list(view.branches.values())
    for node in shape.nodes:
        y = MARGIN + row[node] * ROW_H
        state = view.nodes.get(node, "pending")
        if node in FAN_OUT_NODES and branches:
            n = len(branches)
            gap = 6
            w = max(40, min(BOX_W, (WIDTH - 2 * MARGIN - gap * (n - 1)) // n))
            x0 = (WIDTH - (n * w + gap * (n - 1))) // 2
            boxes[node] = []
            for i, b in enumerate(branches):
                bstate = b.retrieve if node == "retrieve" else b.synthesize
                if state == "skipped" and bstate == "pending":
                    bstate = "skipped"
                counters = f"q{b.queries} p{b.pages} e{b.evidences}" if node == "retrieve" else f"e{b.evidences}"
                boxes[node].append(
                    Box(
                        id=f"{node}-{b.subtask_id}",
                        label=f"{node} {b.subtask_id}",
                        x=x0 + i * (w + gap),
                        y=y,
                        w=w,
                        h=BOX_H,
                        state=bstate,
                        counters=counters,
                        branch_of=node,
                        note=b.error or "",
                    )
                )
        else:
            boxes[node] = [
                Box(
                    id=node,
                    label=node,
                    x=(WIDTH - BOX_W) // 2,
                    y=y,
                    w=BOX_W,
                    h=BOX_H,
                    state=state,
                    note=view.node_notes.get(node, ""),
                    tone=_tone(node, view.node_notes.get(node, ""), view.outcome),
                )
            ]
    edges: list[Edge] = []
    for source, target, conditional in shape.edges:
        if source not in boxes or target not in boxes:
            continue
        loop = (source, target) in shape.back
        for s in boxes[source]:
            for t in boxes[target]:
                if loop:
                    x = s.x + s.w + 8
                    edges.append(
                        Edge(
                            x,
                            s.y + s.h // 2,
                            t.x + t.w + 8,
                            t.y + t.h // 2,
                            "loop",
                            view.revisions > 0,
                            label=f"revised ×{view.revisions}" if view.revisions else "",
                        )
                    )
                else:
                    edges.append(
                        Edge(
                            s.x + s.w // 2,
                            s.y + s.h,
                            t.x + t.w // 2,
                            t.y,
                            "conditional" if conditional else "edge",
                            s.state == "done" and t.state != "pending",
                        )
                    )
    height = MARGIN * 2 + len(shape.nodes) * ROW_H
    return Topology(width=WIDTH, height=height, boxes=[b for bs in boxes.values() for b in bs], edges=edges)
