"""Node positions for the HTML view (:mod:`langgraph_kgmem.view.html`), readable from a few dozen
nodes to a few thousand.

One force layout over a whole KG draws a hairball: every passage ties to the entities it names,
and the disconnected pieces are flung to the edges with empty space between them. So the layout
works in three steps:

1. *leaves* (nodes with one neighbour, which itself has more: an anchor beside its passage, an
   entity named once) are taken out; they add no structure, only crowding;
2. each connected component of the rest is laid out alone (networkx's Fruchterman-Reingold spring
   layout, seeded, so an export is reproducible), turned so that its long axis runs across the
   window, and scaled so that its nodes sit :data:`SPACING` units from their nearest neighbour, the
   same density in every component;
3. the leaves are hung on a short ring around their neighbour, on the side facing away from the
   rest of its component, and the components are packed in rows, largest first, into a box of
   about the window's shape.

Coordinates are in view units: the page draws nodes and labels at a fixed size on screen, so the
spacing decides how many labels fit before zooming in.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

SPACING = 26.0     # view units between a node and its nearest neighbour
LEAF_RING = 0.75   # a leaf's distance from its neighbour, in SPACING
GAP = 2.5          # space between packed components, in SPACING
ASPECT = 1.45      # width / height of the packed drawing (a landscape browser window)
SPREAD = 1.8       # the spring layout's ideal edge length, in networkx's default (1/sqrt(n))


def _component_positions(g: object, nodes: list[str], seed: int) -> dict[str, np.ndarray]:
    """Positions of one connected component, scaled to :data:`SPACING` between neighbours."""
    import networkx as nx

    if len(nodes) == 1:
        return {nodes[0]: np.zeros(2)}
    if len(nodes) == 2:
        return {nodes[0]: np.array([-SPACING / 2, 0.0]), nodes[1]: np.array([SPACING / 2, 0.0])}
    sub = g.subgraph(nodes)  # type: ignore[attr-defined]
    iterations = 100 if len(nodes) <= 400 else 50 if len(nodes) <= 3000 else 25
    # a longer ideal edge than networkx's 1/sqrt(n) spreads the dense middle of a large component
    raw = nx.spring_layout(sub, seed=seed, iterations=iterations, k=SPREAD / math.sqrt(len(nodes)))
    pts = np.array([raw[n] for n in nodes], dtype=np.float64)
    pts -= pts.mean(axis=0)
    # the long axis turned horizontal: a chain-like component then runs along a landscape window
    _, vecs = np.linalg.eigh(np.cov(pts.T))
    pts = pts @ vecs[:, ::-1]
    diff = pts[:, None, :] - pts[None, :, :] if len(nodes) <= 3000 else None
    if diff is not None:
        dist = np.sqrt((diff ** 2).sum(-1))
        np.fill_diagonal(dist, np.inf)
        nearest = float(np.median(dist.min(axis=1)))
    else:   # a very large component: the typical spacing of points spread evenly over their box
        span = pts.max(axis=0) - pts.min(axis=0)
        nearest = float(math.sqrt(max(span[0] * span[1], 1e-12) / len(nodes)))
    pts *= SPACING / max(nearest, 1e-9)
    return {n: p for n, p in zip(nodes, pts)}


def _hang_leaves(pos: dict[str, np.ndarray], leaves: dict[str, str], centre: np.ndarray) -> None:
    """Place each leaf on a ring around its neighbour, fanned out on the side away from ``centre``."""
    by_parent: dict[str, list[str]] = {}
    for leaf, parent in sorted(leaves.items()):
        by_parent.setdefault(parent, []).append(leaf)
    for parent, kids in by_parent.items():
        p = pos[parent]
        away = p - centre
        base = math.atan2(away[1], away[0]) if np.hypot(*away) > 1e-9 else 0.0
        fan = min(math.pi * 1.5, 0.7 * len(kids))   # a wider fan for more leaves, never a full circle
        radius = SPACING * LEAF_RING * (1 + 0.15 * max(0, len(kids) - 4))
        for i, leaf in enumerate(kids):
            angle = base + (fan * (i / (len(kids) - 1) - 0.5) if len(kids) > 1 else 0.0)
            pos[leaf] = p + radius * np.array([math.cos(angle), math.sin(angle)])


def _pack(groups: list[dict[str, np.ndarray]]) -> dict[str, tuple[float, float]]:
    """Components side by side in rows (largest first), in a box of about :data:`ASPECT`."""
    boxes = []
    for grp in groups:
        pts = np.array(list(grp.values()))
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        boxes.append((grp, lo, hi - lo + SPACING * GAP))
    area = sum(float(size[0] * size[1]) for _, _, size in boxes)
    width = max(math.sqrt(area * ASPECT), max(float(size[0]) for _, _, size in boxes))
    out: dict[str, tuple[float, float]] = {}
    x = y = row_height = 0.0
    for grp, lo, size in boxes:   # already largest first
        if x > 0 and x + size[0] > width:
            x, y, row_height = 0.0, y + row_height, 0.0
        for n, p in grp.items():
            out[n] = (round(float(p[0] - lo[0] + x), 2), round(float(p[1] - lo[1] + y), 2))
        x += float(size[0])
        row_height = max(row_height, float(size[1]))
    return out


def graph_layout(node_ids: Sequence[str], pairs: Iterable[tuple[str, str]], *,
                 seed: int = 7) -> dict[str, tuple[float, float]]:
    """(x, y) in view units for every id of ``node_ids``, given the edges ``pairs`` between them
    (see the module docstring). Deterministic for a given graph and ``seed``."""
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(sorted(node_ids))
    g.add_edges_from(sorted((a, b) for a, b in pairs if a != b and a in g and b in g))
    leaves = {n: next(iter(g[n])) for n in g if g.degree(n) == 1 and g.degree(next(iter(g[n]))) > 1}
    core = g.subgraph([n for n in g if n not in leaves])
    groups = []
    for comp in sorted(nx.connected_components(core), key=lambda c: (-len(c), min(c))):
        nodes = sorted(comp)
        pos = _component_positions(core, nodes, seed)
        centre = np.mean([pos[n] for n in nodes], axis=0)
        _hang_leaves(pos, {leaf: p for leaf, p in leaves.items() if p in comp}, centre)
        groups.append(pos)
    # largest first: by the space a component takes, its leaves included
    groups.sort(key=lambda grp: -len(grp))
    return _pack(groups) if groups else {}
