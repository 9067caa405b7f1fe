"""A self-contained interactive HTML view of a KG (no CDN, works offline).

Positions come from :func:`~langgraph_kgmem.view.layout.graph_layout` (computed once, in Python);
the page draws an SVG that fills the window below its header, with pan/zoom, hover tooltips, a
legend of the node kinds present, a search box, a label on every node (shown where it does not
overlap another, the answering path's and the best connected first; zoom in for more), edges drawn
thicker and green by how often ReMindRAG's memory updated them, and a run's answering path: its
edges as numbered red arrows in the order walked, its nodes and evidence ringed in red, with the
question it answered in the header.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph
    from langgraph_kgmem.kg.types import Node

KIND_COLORS = {"entity": "#4e79a7", "chunk": "#f28e2b", "anchor": "#59a14f", "time": "#b07aa1",
               "location": "#76b7b2", "event": "#e15759"}
KIND_NAMES = {"entity": "entity", "chunk": "passage", "anchor": "section title", "time": "time",
              "location": "location", "event": "event"}
LABEL_CHARS = 32   # a label is cut here (the tooltip holds the whole text)
FIT_WINDOW = (980, 800)   # the drawing area (pixels, less the label margin) the first view is sized for

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
 html, body {{ height:100%; }}
 body {{ margin:0; font-family: system-ui, sans-serif; background:#fafafa; display:flex; flex-direction:column;
        overflow:hidden; }}
 header {{ padding:8px 12px; background:#222; color:#eee; display:flex; flex-wrap:wrap; gap:6px 16px;
          align-items:center; flex:0 0 auto; font-size:14px; }}
 header input {{ padding:4px 8px; }}
 #legend span {{ margin-right:10px; }}
 #question {{ color:#ff9896; }}
 svg {{ flex:1 1 auto; min-height:0; width:100%; display:block; cursor:grab; }}
 .edge {{ stroke:#c8c8c8; stroke-width:0.6; vector-effect:non-scaling-stroke; }}
 .edge.relation {{ stroke:#9a9a9a; stroke-width:0.9; }}
 .edge.mem {{ stroke:#2ca02c; }}
 .edge.hl {{ stroke:#d62728; stroke-width:2; }}
 .route {{ stroke:#d62728; stroke-width:4; vector-effect:non-scaling-stroke; fill:none; }}
 .node {{ stroke:#fff; stroke-width:1; vector-effect:non-scaling-stroke; }}
 .node.hl {{ stroke:#d62728; stroke-width:3; }}
 .node.match {{ stroke:#000; stroke-width:3; }}
 .label {{ fill:#222; pointer-events:none; paint-order:stroke; stroke:#fafafa; stroke-width:3px;
          stroke-linejoin:round; }}
 .label.hl {{ fill:#a31515; font-weight:600; }}
 .step circle {{ fill:#d62728; stroke:#fff; stroke-width:1; vector-effect:non-scaling-stroke; }}
 .step text {{ fill:#fff; font-weight:700; text-anchor:middle; dominant-baseline:central; pointer-events:none; }}
 #tip {{ position:fixed; background:#fff; border:1px solid #999; padding:6px; max-width:420px;
        font-size:12px; display:none; pointer-events:none; white-space:pre-wrap; }}
</style></head>
<body>
<header><b>{title}</b><span id="counts"></span><span id="legend"></span>
<input id="q" placeholder="search nodes..."><span id="question"></span></header>
<svg id="view" viewBox="{view}" preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="4" markerHeight="4" orient="auto-start-reverse">
<path d="M0,0 L10,5 L0,10 z" fill="#d62728"/></marker></defs>
<g id="edges"></g><g id="routes"></g><g id="nodes"></g><g id="labels"></g><g id="steps"></g></svg>
<div id="tip"></div>
<script>
const DATA = {data};
const COLORS = {colors};
const NAMES = {names};
const svg = document.getElementById('view'), eg = document.getElementById('edges'), ng = document.getElementById('nodes');
const lg = document.getElementById('labels'), rg = document.getElementById('routes'), sg = document.getElementById('steps');
const NS = 'http://www.w3.org/2000/svg', tip = document.getElementById('tip');
const pos = {{}};
DATA.nodes.forEach(n => pos[n.id] = n);
document.getElementById('counts').textContent = DATA.nodes.length + ' nodes, ' + DATA.edges.length + ' edges' + (DATA.truncated ? ' (largest part shown)' : '');
document.getElementById('legend').innerHTML = Object.entries(COLORS).map(([k,c]) => '<span style="color:'+c+'">&#9679; '+(NAMES[k]||k)+'</span>').join('')
  + (DATA.memory_edges ? '<span style="color:#2ca02c">&#9473; remembered edge (' + DATA.memory_edges + ')</span>' : '')
  + (DATA.route.length ? '<span style="color:#ff9896">&#10122;&#10123;&#10124; the path, in order</span>' : '');
if (DATA.question) document.getElementById('question').textContent = 'highlighted: the path that answered \\u201c' + DATA.question + '\\u201d';
function el(tag, attrs, parent) {{ const e = document.createElementNS(NS, tag); for (const k in attrs) e.setAttribute(k, attrs[k]); parent.appendChild(e); return e; }}
// many edges drawn at full strength hide the nodes: the more edges, the fainter the plain ones
eg.style.opacity = Math.max(0.3, Math.min(1, 400 / Math.max(1, DATA.edges.length))).toFixed(2);
DATA.edges.forEach(e => {{
  const a = pos[e.src], b = pos[e.dst]; if (!a || !b) return;
  const l = el('line', {{x1: a.x, y1: a.y, x2: b.x, y2: b.y,
    class: 'edge ' + e.kind + (e.mem ? ' mem' : '') + (e.hl ? ' hl' : '')}}, eg);
  if (e.mem && !e.hl) l.setAttribute('style', 'stroke-width:' + (0.8 + Math.log2(1 + e.mem)).toFixed(2));
  l.addEventListener('mousemove', ev => show(ev, e.kind + (e.text ? ': ' + e.text : '') + (e.step ? '\\nstep ' + e.step + ' of the path' : '')
    + (e.mem ? '\\nmemory: updated ' + e.mem + ' time(s)' : '')));
  l.addEventListener('mouseout', hide);
}});
const steps = DATA.route.map(h => {{
  const a = pos[h.from], b = pos[h.to]; if (!a || !b) return null;
  el('line', {{x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: 'route', 'marker-end': 'url(#arrow)', 'data-step': h.step}}, rg);
  const g = el('g', {{class: 'step'}}, sg);
  return {{g: g, c: el('circle', {{}}, g), t: Object.assign(el('text', {{}}, g), {{textContent: h.step}}), a: a, b: b}};
}}).filter(Boolean);
const circles = DATA.nodes.map(n => {{
  const c = el('circle', {{cx: n.x, cy: n.y, fill: COLORS[n.kind] || '#999', class: 'node' + (n.hl ? ' hl' : ''), 'data-kind': n.kind}}, ng);
  c.dataset.text = ((n.label || '') + ' ' + (n.text || '')).toLowerCase();
  c.addEventListener('mousemove', ev => show(ev, '[' + (NAMES[n.kind] || n.kind) + '] ' + n.id + ' (' + n.deg + ' edges)\\n' + n.text));
  c.addEventListener('mouseout', hide);
  return c;
}});
const labels = DATA.nodes.map(n => Object.assign(el('text', {{class: 'label' + (n.hl ? ' hl' : ''), 'data-kind': n.kind}}, lg), {{textContent: n.label}}));
const ORDER = DATA.nodes.map((n, i) => i).sort((i, j) => DATA.nodes[i].rank - DATA.nodes[j].rank);
// nodes, labels and step badges keep their size on screen at every zoom; labels are shown in rank
// order (the path first, then the best-connected nodes) wherever they do not overlap a shown one
function draw() {{
  const r = svg.getBoundingClientRect(); if (!r.width || !r.height) return;
  const s = Math.max(vb[2] / r.width, vb[3] / r.height);
  const ox = vb[0] - (r.width * s - vb[2]) / 2, oy = vb[1] - (r.height * s - vb[3]) / 2;
  DATA.nodes.forEach((n, i) => circles[i].setAttribute('r', ((n.hl ? 6.5 : 3.5) + Math.min(4, Math.log2(1 + n.deg) * 0.8)) * s));
  steps.forEach(st => {{ const mx = (st.a.x + st.b.x) / 2, my = (st.a.y + st.b.y) / 2;
    st.c.setAttribute('cx', mx); st.c.setAttribute('cy', my); st.c.setAttribute('r', 8 * s);
    st.t.setAttribute('x', mx); st.t.setAttribute('y', my); st.t.setAttribute('font-size', 11 * s); }});
  const taken = new Map(), CELL = 64; let shown = 0;
  const free = (b, mark) => {{
    for (let gx = Math.floor(b[0] / CELL); gx <= Math.floor(b[2] / CELL); gx++)
      for (let gy = Math.floor(b[1] / CELL); gy <= Math.floor(b[3] / CELL); gy++) {{
        const k = gx + ',' + gy, list = taken.get(k) || [];
        if (!mark) {{ if (list.some(o => o[0] < b[2] && b[0] < o[2] && o[1] < b[3] && b[1] < o[3])) return false; }}
        else {{ list.push(b); taken.set(k, list); }}
      }}
    return true; }};
  for (const i of ORDER) {{
    const n = DATA.nodes[i], t = labels[i], sx = (n.x - ox) / s, sy = (n.y - oy) / s;
    const box = [sx + 6, sy - 9, sx + 10 + n.label.length * 6.4, sy + 5];
    const fits = n.label && box[2] > 0 && box[0] < r.width && box[3] > 0 && box[1] < r.height && free(box, false);
    t.setAttribute('visibility', fits ? 'visible' : 'hidden');
    if (!fits) continue;
    free(box, true); shown++;
    t.setAttribute('x', n.x + 8 * s); t.setAttribute('y', n.y + 4 * s); t.setAttribute('font-size', 11 * s);
  }}
  document.body.dataset.labels = shown;
}}
function show(ev, text) {{ tip.style.display = 'block'; tip.style.left = (ev.clientX + 12) + 'px'; tip.style.top = (ev.clientY + 12) + 'px'; tip.textContent = text; }}
function hide() {{ tip.style.display = 'none'; }}
document.getElementById('q').addEventListener('input', ev => {{
  const q = ev.target.value.toLowerCase();
  circles.forEach(c => c.classList.toggle('match', q.length > 1 && c.dataset.text.includes(q)));
}});
let vb = DATA.view.slice(), drag = null;
function setVB() {{ svg.setAttribute('viewBox', vb.join(' ')); draw(); }}
svg.addEventListener('wheel', ev => {{ ev.preventDefault(); const f = ev.deltaY > 0 ? 1.15 : 1/1.15;
  const r = svg.getBoundingClientRect(), mx = vb[0] + (ev.clientX - r.left) / r.width * vb[2], my = vb[1] + (ev.clientY - r.top) / r.height * vb[3];
  vb = [mx - (mx - vb[0]) * f, my - (my - vb[1]) * f, vb[2] * f, vb[3] * f]; setVB(); }});
svg.addEventListener('mousedown', ev => drag = [ev.clientX, ev.clientY]);
window.addEventListener('mouseup', () => drag = null);
window.addEventListener('mousemove', ev => {{ if (!drag) return; const r = svg.getBoundingClientRect();
  vb[0] -= (ev.clientX - drag[0]) / r.width * vb[2]; vb[1] -= (ev.clientY - drag[1]) / r.height * vb[3]; drag = [ev.clientX, ev.clientY]; setVB(); }});
window.addEventListener('resize', draw);
draw();
document.body.dataset.rendered = DATA.nodes.length;
</script></body></html>
"""


def run_highlight(run: Mapping[str, Any]) -> list[str]:
    """The node and edge ids a method's output names: its evidence and every hop of its ``path``."""
    ids: list[str] = [ev["id"] for ev in run.get("evidence", [])]
    for hop in run.get("path", []):
        for key in ("node", "to", "from", "edge", "node_id", "edge_id"):
            if isinstance(hop, dict) and isinstance(hop.get(key), str):
                ids.append(hop[key])
    return ids


def run_route(run: Mapping[str, Any]) -> list[dict[str, str]]:
    """The edges a run walked, in order, as ``{"edge", "from", "to"}``: the edges memory replay
    followed, then the walk's forward hops (a backward move jumps to a visited node: no edge).
    Empty for a method without a path."""
    route: list[dict[str, str]] = []
    replayed = run.get("replayed")
    hops = list(replayed.get("edges", [])) if isinstance(replayed, Mapping) else []
    hops += [h for h in run.get("path", []) or [] if isinstance(h, Mapping)]
    for hop in hops:
        if all(isinstance(hop.get(k), str) and hop.get(k) for k in ("edge", "from", "to")):
            route.append({"edge": hop["edge"], "from": hop["from"], "to": hop["to"]})
    return route


def node_label(node: "Node") -> str:
    """The short text drawn beside a node: an entity's (or record node's) name, a section's title,
    a passage's opening words after a pilcrow (its title is its section's label)."""
    text = " ".join(node.text.split())
    if node.kind == "chunk":
        text = "¶ " + text
    return text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1] + "…"


def _route_steps(kg: "KnowledgeGraph", route: Iterable[str | Mapping[str, str]]) -> list[dict[str, Any]]:
    """``route`` (edge ids, or ``{"edge", "from", "to"}`` as :func:`run_route` gives) as numbered
    steps in the direction walked; edges the KG does not hold are left out."""
    steps: list[dict[str, Any]] = []
    for hop in route:
        eid = hop if isinstance(hop, str) else hop.get("edge", "")
        e = kg.edge(eid)
        if e is None:
            continue
        a, b = (e.src, e.dst) if isinstance(hop, str) else (hop.get("from", e.src), hop.get("to", e.dst))
        if {a, b} != {e.src, e.dst}:
            a, b = e.src, e.dst
        steps.append({"edge": eid, "from": a, "to": b, "step": len(steps) + 1})
    return steps


def _kept_nodes(kg: "KnowledgeGraph", must: set[str], max_nodes: int) -> tuple[list["Node"], bool]:
    """The nodes drawn: all of them, or the ``must`` ones and then the best connected up to ``max_nodes``."""
    nodes = kg.nodes()
    if len(nodes) <= max_nodes:
        return nodes, False
    by_degree = sorted(nodes, key=lambda n: (-len(kg.edges_of(n.id)), n.id))
    keep = set(sorted(must)[:max_nodes])
    for n in by_degree:
        if len(keep) >= max_nodes:
            break
        keep.add(n.id)
    return [n for n in nodes if n.id in keep], True


def export_html(kg: "KnowledgeGraph", path: str | Path, *, highlight: Iterable[str] = (), max_nodes: int = 1500,
                title: str | None = None, seed: int = 7, question: str | None = None,
                memory: Mapping[str, int] | None = None,
                route: Sequence[str | Mapping[str, str]] = ()) -> Path:
    """Write the interactive view to ``path``. ``highlight``: node and/or edge ids (a run's path,
    its evidence) drawn in red, with ``question`` (the question that run answered) in the header;
    the view keeps them even when the graph is cut to ``max_nodes``. ``route``: the edges the run
    walked, in order (:func:`run_route`), drawn as numbered red arrows. ``memory``: edge id →
    updates (:func:`langgraph_kgmem.memory.edge_memory_counts`), drawn as green edges whose width grows with the count.
    Every node carries a label; the page shows as many as fit without overlapping (the path's
    first, then the best connected) and more on zooming in."""
    from langgraph_kgmem.view.layout import graph_layout

    steps = _route_steps(kg, route)
    hl = set(highlight) | {s["edge"] for s in steps}
    hl_nodes = {i for i in hl if kg.node(i) is not None}
    for i in hl:
        e = kg.edge(i)
        if e is not None:
            hl_nodes.update((e.src, e.dst))
    nodes, truncated = _kept_nodes(kg, hl_nodes, max_nodes)
    keep_ids = {n.id for n in nodes}
    edges = [e for e in kg.edges() if e.src in keep_ids and e.dst in keep_ids]
    steps = [s for s in steps if s["from"] in keep_ids and s["to"] in keep_ids]
    step_of = {s["edge"]: s["step"] for s in steps}
    degree = {i: 0 for i in keep_ids}
    for e in edges:
        degree[e.src] += 1
        degree[e.dst] += 1
    layout = graph_layout(sorted(keep_ids), [(e.src, e.dst) for e in edges], seed=seed)
    memory = memory or {}
    view = [0.0, 0.0, 1000.0, 1000.0]
    if layout:   # the drawing's bounding box plus margins, so it fills the window
        xs, ys = [p[0] for p in layout.values()], [p[1] for p in layout.values()]
        w, h = max(max(xs) - min(xs), 50.0), max(max(ys) - min(ys), 50.0)
        # labels run to the right at a fixed size on screen: the right margin is room for one,
        # in view units at the scale a window of about FIT_WINDOW pixels will draw
        s = max(w / FIT_WINDOW[0], h / FIT_WINDOW[1])
        view = [round(min(xs) - 20 * s, 2), round(min(ys) - 20 * s, 2), round(w + 220 * s, 2), round(h + 40 * s, 2)]
    # label priority: the path's nodes, then by degree (hubs say most about the graph), then id
    ranked = sorted(nodes, key=lambda n: (n.id not in hl_nodes, -degree[n.id], n.kind != "entity", n.id))
    rank = {n.id: r for r, n in enumerate(ranked)}
    data: dict[str, Any] = {
        "truncated": truncated, "view": view, "question": (question or "")[:300],
        "memory_edges": sum(1 for e in edges if memory.get(e.id)),
        "route": [{k: s[k] for k in ("from", "to", "step")} for s in steps],
        "nodes": [{"id": n.id, "kind": n.kind, "label": node_label(n), "text": n.text[:300], "hl": n.id in hl_nodes,
                   "deg": degree[n.id], "rank": rank[n.id], "x": layout[n.id][0], "y": layout[n.id][1]}
                  for n in nodes],
        "edges": [{"src": e.src, "dst": e.dst, "kind": e.kind, "text": e.text[:120], "mem": int(memory.get(e.id, 0)),
                   "step": step_of.get(e.id, 0),
                   "hl": e.id in hl or (e.src in hl_nodes and e.dst in hl_nodes and not (hl - hl_nodes))}
                  for e in edges],
    }
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    # json inside <script>: escape '<' so text can never close the script element
    payload = json.dumps(data).replace("<", "\\u003c")
    present = {n.kind for n in nodes}
    colors = {k: c for k, c in KIND_COLORS.items() if k in present}
    out.write_text(PAGE.format(title=html.escape(title or f"kgmem: {kg.name}"), data=payload,
                               colors=json.dumps(colors), names=json.dumps(KIND_NAMES),
                               view=" ".join(map(str, view))), encoding="utf-8")
    return out
