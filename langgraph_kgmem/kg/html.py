"""A self-contained interactive HTML view of a KG (no CDN, works offline).

Positions come from networkx's spring layout (computed once, in Python); the page draws an SVG
that fills the window below its header, with pan/zoom, hover tooltips, a legend of the node kinds
present, a search box, edges drawn thicker and green by how often ReMindRAG's memory updated them,
and the highlighted traversal path of a run (nodes and edges of ``highlight``) drawn on top with the
question it answered.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph

KIND_COLORS = {"entity": "#4e79a7", "chunk": "#f28e2b", "anchor": "#59a14f", "time": "#b07aa1",
               "location": "#76b7b2", "event": "#e15759"}

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
 html, body {{ height:100%; }}
 body {{ margin:0; font-family: system-ui, sans-serif; background:#fafafa; display:flex; flex-direction:column;
        overflow:hidden; }}
 header {{ padding:8px 12px; background:#222; color:#eee; display:flex; flex-wrap:wrap; gap:6px 16px;
          align-items:center; flex:0 0 auto; }}
 header input {{ padding:4px 8px; }}
 #legend span {{ margin-right:10px; }}
 #question {{ color:#ff9896; }}
 svg {{ flex:1 1 auto; min-height:0; width:100%; display:block; cursor:grab; }}
 .edge {{ stroke:#bbb; stroke-width:0.6; }}
 .edge.mem {{ stroke:#2ca02c; }}
 .edge.hl {{ stroke:#d62728; stroke-width:3; }}
 .node {{ stroke:#fff; stroke-width:0.8; }}
 .node.hl {{ stroke:#d62728; stroke-width:3; }}
 .node.match {{ stroke:#000; stroke-width:3; }}
 .label {{ font-size:9px; fill:#333; pointer-events:none; }}
 #tip {{ position:fixed; background:#fff; border:1px solid #999; padding:6px; max-width:420px;
        font-size:12px; display:none; pointer-events:none; white-space:pre-wrap; }}
</style></head>
<body>
<header><b>{title}</b><span id="counts"></span><span id="legend"></span>
<input id="q" placeholder="search nodes..."><span id="question"></span></header>
<svg id="view" viewBox="{view}" preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg"><g id="edges"></g><g id="nodes"></g></svg>
<div id="tip"></div>
<script>
const DATA = {data};
const COLORS = {colors};
const svg = document.getElementById('view'), eg = document.getElementById('edges'), ng = document.getElementById('nodes');
const NS = 'http://www.w3.org/2000/svg', tip = document.getElementById('tip');
const pos = {{}};
DATA.nodes.forEach(n => pos[n.id] = n);
document.getElementById('counts').textContent = DATA.nodes.length + ' nodes, ' + DATA.edges.length + ' edges' + (DATA.truncated ? ' (largest part shown)' : '');
document.getElementById('legend').innerHTML = Object.entries(COLORS).map(([k,c]) => '<span style="color:'+c+'">&#9679; '+k+'</span>').join('')
  + (DATA.memory_edges ? '<span style="color:#2ca02c">&#9473; remembered edge (' + DATA.memory_edges + ')</span>' : '');
if (DATA.question) document.getElementById('question').textContent = 'highlighted: the path that answered \\u201c' + DATA.question + '\\u201d';
DATA.edges.forEach(e => {{
  const a = pos[e.src], b = pos[e.dst]; if (!a || !b) return;
  const l = document.createElementNS(NS, 'line');
  l.setAttribute('x1', a.x); l.setAttribute('y1', a.y); l.setAttribute('x2', b.x); l.setAttribute('y2', b.y);
  l.setAttribute('class', 'edge' + (e.mem ? ' mem' : '') + (e.hl ? ' hl' : ''));
  if (e.mem && !e.hl) l.setAttribute('style', 'stroke-width:' + (0.8 + Math.log2(1 + e.mem)).toFixed(2));
  l.addEventListener('mousemove', ev => show(ev, e.kind + (e.text ? ': ' + e.text : '')
    + (e.mem ? '\\nmemory: updated ' + e.mem + ' time(s)' : '')));
  l.addEventListener('mouseout', hide);
  eg.appendChild(l);
}});
DATA.nodes.forEach(n => {{
  const c = document.createElementNS(NS, 'circle');
  c.setAttribute('cx', n.x); c.setAttribute('cy', n.y); c.setAttribute('r', n.hl ? 7 : (n.kind === 'entity' ? 4 : 5));
  c.setAttribute('fill', COLORS[n.kind] || '#999'); c.setAttribute('class', 'node' + (n.hl ? ' hl' : ''));
  c.dataset.text = (n.text || '').toLowerCase();
  c.addEventListener('mousemove', ev => show(ev, '[' + n.kind + '] ' + n.id + '\\n' + n.text));
  c.addEventListener('mouseout', hide);
  ng.appendChild(c);
  if (n.hl || n.kind === 'entity' && DATA.nodes.length < 150) {{
    const t = document.createElementNS(NS, 'text');
    t.setAttribute('x', n.x + 6); t.setAttribute('y', n.y + 3); t.setAttribute('class', 'label');
    t.textContent = n.text.slice(0, 40); ng.appendChild(t);
  }}
}});
function show(ev, text) {{ tip.style.display = 'block'; tip.style.left = (ev.clientX + 12) + 'px'; tip.style.top = (ev.clientY + 12) + 'px'; tip.textContent = text; }}
function hide() {{ tip.style.display = 'none'; }}
document.getElementById('q').addEventListener('input', ev => {{
  const q = ev.target.value.toLowerCase();
  ng.querySelectorAll('circle').forEach(c => c.classList.toggle('match', q.length > 1 && c.dataset.text.includes(q)));
}});
let vb = DATA.view.slice(), drag = null;
function setVB() {{ svg.setAttribute('viewBox', vb.join(' ')); }}
svg.addEventListener('wheel', ev => {{ ev.preventDefault(); const f = ev.deltaY > 0 ? 1.15 : 1/1.15;
  const r = svg.getBoundingClientRect(), mx = vb[0] + (ev.clientX - r.left) / r.width * vb[2], my = vb[1] + (ev.clientY - r.top) / r.height * vb[3];
  vb = [mx - (mx - vb[0]) * f, my - (my - vb[1]) * f, vb[2] * f, vb[3] * f]; setVB(); }});
svg.addEventListener('mousedown', ev => drag = [ev.clientX, ev.clientY]);
window.addEventListener('mouseup', () => drag = null);
window.addEventListener('mousemove', ev => {{ if (!drag) return; const r = svg.getBoundingClientRect();
  vb[0] -= (ev.clientX - drag[0]) / r.width * vb[2]; vb[1] -= (ev.clientY - drag[1]) / r.height * vb[3]; drag = [ev.clientX, ev.clientY]; setVB(); }});
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


def export_html(kg: "KnowledgeGraph", path: str | Path, *, highlight: Iterable[str] = (), max_nodes: int = 1500,
                title: str | None = None, seed: int = 7, question: str | None = None,
                memory: Mapping[str, int] | None = None) -> Path:
    """Write the interactive view to ``path``. ``highlight``: node and/or edge ids (a run's path,
    its evidence) drawn in red, with ``question`` (the question that run answered) in the header;
    the view keeps them even when the graph is cut to ``max_nodes``. ``memory``: edge id → updates
    (:func:`langgraph_kgmem.memory.edge_memory_counts`), drawn as green edges whose width grows with the count."""
    import networkx as nx

    hl = set(highlight)
    hl_nodes = {i for i in hl if kg.node(i) is not None}
    for i in hl:
        e = kg.edge(i)
        if e is not None:
            hl_nodes.update((e.src, e.dst))
    nodes = kg.nodes()
    truncated = len(nodes) > max_nodes
    if truncated:
        by_degree = sorted(nodes, key=lambda n: (-len(kg.edges_of(n.id)), n.id))
        keep = set(list(hl_nodes)[:max_nodes])
        for n in by_degree:
            if len(keep) >= max_nodes:
                break
            keep.add(n.id)
        nodes = [n for n in nodes if n.id in keep]
    keep_ids = {n.id for n in nodes}
    edges = [e for e in kg.edges() if e.src in keep_ids and e.dst in keep_ids]
    g = nx.Graph()
    g.add_nodes_from(sorted(keep_ids))
    g.add_edges_from((e.src, e.dst) for e in edges)
    layout = nx.spring_layout(g, seed=seed, iterations=50 if len(keep_ids) < 3000 else 20) if keep_ids else {}
    memory = memory or {}
    points = [(500 + 460 * float(layout[i][0]), 500 + 460 * float(layout[i][1])) for i in keep_ids]
    view = [0.0, 0.0, 1000.0, 1000.0]
    if points:   # the drawing's bounding box plus a margin (labels run to the right), so it fills the window
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        w, h = max(max(xs) - min(xs), 50.0), max(max(ys) - min(ys), 50.0)
        view = [round(min(xs) - 0.05 * w, 2), round(min(ys) - 0.05 * h, 2), round(1.2 * w, 2), round(1.1 * h, 2)]
    data: dict[str, Any] = {
        "truncated": truncated, "view": view, "question": (question or "")[:300],
        "memory_edges": sum(1 for e in edges if memory.get(e.id)),
        "nodes": [{"id": n.id, "kind": n.kind, "text": n.text[:300], "hl": n.id in hl_nodes,
                   "x": round(500 + 460 * float(layout[n.id][0]), 2), "y": round(500 + 460 * float(layout[n.id][1]), 2)}
                  for n in nodes],
        "edges": [{"src": e.src, "dst": e.dst, "kind": e.kind, "text": e.text[:120], "mem": int(memory.get(e.id, 0)),
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
                               colors=json.dumps(colors), view=" ".join(map(str, view))), encoding="utf-8")
    return out
