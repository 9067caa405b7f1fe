"""The HTML view in a real browser: headless Debian chromium renders the page; the screenshot shows
the graph with a run's path in the highlight colour, and the DOM holds one circle per node.

`make browser` (a dependency of `make test`) installs chromium when it is missing and we are root.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

QUESTION = "Where was Marie Curie born?"
HIGHLIGHT_RGB = (0xD6, 0x27, 0x28)  # #d62728, .hl strokes in view/html.py
BACKGROUND_RGB = (0xFA, 0xFA, 0xFA)
MEMORY_RGB = (0x2C, 0xA0, 0x2C)     # #2ca02c, .edge.mem
WINDOW = (1200, 900)


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    pytest.skip("chromium is not installed: run `make browser` (apt-get install chromium) to enable this test")


def run_chromium(args: list[str], tmp: Path, url: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args, url]
    return subprocess.run(cmd, capture_output=True, timeout=60, check=False)


def screenshot(page: Path, tmp: Path) -> np.ndarray:
    png = tmp / f"{page.stem}.png"
    proc = run_chromium([f"--screenshot={png}", f"--window-size={WINDOW[0]},{WINDOW[1]}"], tmp, page.as_uri())
    assert png.exists(), proc.stderr.decode(errors="replace")[-2000:]
    return read_png(png)


def read_png(path: Path) -> np.ndarray:
    """RGB pixels of an 8-bit, non-interlaced RGB/RGBA PNG (what chromium writes), decoded with zlib."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, f"unsupported PNG {header}"
    bpp = 3 if color == 2 else 4
    stride = width * bpp
    rows = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8).reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        kind, line = int(rows[y, 0]), rows[y, 1:]
        if kind == 0:  # None
            cur = line.copy()
        elif kind == 1:  # Sub: running sum per channel
            cur = np.cumsum(line.reshape(width, bpp), axis=0, dtype=np.uint64).astype(np.uint8).reshape(-1)
        elif kind == 2:  # Up
            cur = line + prev
        else:  # Average (3) and Paeth (4) depend on the reconstructed left byte: byte by byte
            buf, up = bytearray(line.tobytes()), prev.tobytes()
            for i in range(stride):
                a = buf[i - bpp] if i >= bpp else 0
                b = up[i]
                if kind == 3:
                    buf[i] = (buf[i] + ((a + b) >> 1)) & 0xFF
                else:
                    c = up[i - bpp] if i >= bpp else 0
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    buf[i] = (buf[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
            cur = np.frombuffer(bytes(buf), dtype=np.uint8)
        out[y] = cur
        prev = out[y]
    return out.reshape(height, width, bpp)[:, :, :3]


def near(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 60) -> np.ndarray:
    return np.abs(img.astype(np.int32) - np.array(rgb)).sum(axis=-1) < tol


def page_data(page: Path) -> dict:
    match = re.search(r"const DATA = (\{.*?\});\n", page.read_text())
    return json.loads(match.group(1))


def path_nodes(kg, run: dict) -> set[str]:
    """The nodes of the path that answered: its evidence, each hop's nodes and its edge's ends."""
    ids = {ev["id"] for ev in run["evidence"]}
    for hop in run.get("path", []):
        ids.update(hop[k] for k in ("from", "to") if hop.get(k))
        if hop.get("edge"):
            edge = kg.edge(hop["edge"])
            ids.update((edge.src, edge.dst))
    return {i for i in ids if kg.node(i) is not None}


@pytest.fixture(scope="module")
def exported_run(tmp_path_factory):
    """A KG on disk, one offline method run, and the view exported by `kgmem export --html --run`:
    (page with the run, page without it, node count, the run's path nodes, every node id)."""
    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.cli import main

    from conftest import SAMPLE_DOCS
    from method_cases import compile_method

    tmp_path = tmp_path_factory.mktemp("view")
    sample_docs = [dict(d) for d in SAMPLE_DOCS]
    kg_dir = tmp_path / "kg"
    kg = KnowledgeGraph.open(kg_dir, name="view", embeddings="hash", vector_backend="memory")
    try:
        kg.add_documents(sample_docs, model="offline")
        # a path to highlight, and edge memory in the KG's own store to draw
        run = compile_method("remindrag", kg, store=kg.persistence()[1]).invoke({"question": QUESTION})
        nodes = kg.node_count()
        on_path = path_nodes(kg, run)
        every = {n.id for n in kg.nodes()}
    finally:
        kg.close()
    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps({"question": QUESTION, "evidence": run["evidence"], "path": run.get("path", []),
                                    "replayed": run.get("replayed")}, default=str))
    page = tmp_path / "view.html"
    assert main(["export", "--kg", str(kg_dir), "--name", "view", "--embeddings", "hash",
                 "--html", str(page), "--run", str(run_file)]) == 0
    plain = tmp_path / "plain.html"
    assert main(["export", "--kg", str(kg_dir), "--name", "view", "--embeddings", "hash", "--html", str(plain)]) == 0
    return page, plain, nodes, on_path, every, run


@pytest.fixture(scope="module")
def run_page(exported_run):
    """The exported pages, for the browser tests (skipped before any work when there is no browser)."""
    chromium()
    return exported_run


def test_the_highlight_is_exactly_the_runs_path(exported_run):
    """Highlighted: the nodes of the path that answered, and nothing else; edges only between them."""
    page, plain, _, on_path, every, _ = exported_run
    data = page_data(page)
    assert len(data["nodes"]) == len(every)   # nothing cut: every node's flag is in the page
    highlighted = {n["id"] for n in data["nodes"] if n["hl"]}
    assert on_path and on_path < every        # a path that leaves nodes out, so the check can fail
    assert highlighted == on_path
    hl_edges = [e for e in data["edges"] if e["hl"]]
    assert hl_edges and all(e["src"] in on_path and e["dst"] in on_path for e in hl_edges)
    without_run = page_data(plain)
    assert not any(n["hl"] for n in without_run["nodes"]) and not any(e["hl"] for e in without_run["edges"])


def test_page_renders_every_node_in_chromium(run_page, tmp_path):
    page, _, nodes, on_path, *_ = run_page
    proc = run_chromium(["--dump-dom"], tmp_path, page.as_uri())
    dom = proc.stdout.decode()
    assert f'data-rendered="{nodes}"' in dom, proc.stderr.decode(errors="replace")[-1500:]
    circles = [c for c in re.findall(r"<circle\b[^>]*>", dom) if 'class="node' in c]
    assert len(circles) == nodes
    assert sum('class="node hl"' in c for c in circles) == len(on_path)  # the run's nodes, and only they, are marked
    assert len(re.findall(r"<line\b[^>]*class=\"edge", dom)) == len(page_data(page)["edges"])


def test_screenshot_shows_the_graph_and_the_highlighted_run_path(run_page, tmp_path):
    page, plain, *_ = run_page
    img = screenshot(page, tmp_path)
    shutil.copy(tmp_path / f"{page.stem}.png", page.with_name("last_screenshot.png"))  # for a human look
    assert img.shape == (WINDOW[1], WINDOW[0], 3)

    # not blank: many non-background pixels and several colours (nodes by kind, edges, labels)
    header = int(np.argmax(~near(img[:, 0], (0x22, 0x22, 0x22), 10)))  # rows of the dark header bar
    assert 20 < header < 120
    canvas = img[header:]
    drawn = ~near(canvas, BACKGROUND_RGB, 12)
    assert drawn.mean() > 0.002, "the graph area is blank"
    assert len(np.unique(canvas[drawn].reshape(-1, 3), axis=0)) > 20

    # the highlight colour is drawn, and where the highlighted nodes are
    red = near(canvas, HIGHLIGHT_RGB)
    assert red.sum() > 50, "no highlight-coloured pixels"
    height = WINDOW[1] - header
    vx, vy, vw, vh = page_data(page)["view"]      # the drawing's box, preserveAspectRatio xMidYMid meet
    scale = min(WINDOW[0] / vw, height / vh)
    ox, oy = (WINDOW[0] - vw * scale) / 2 - vx * scale, (height - vh * scale) / 2 - vy * scale
    ys, xs = np.nonzero(red)
    hl_nodes = [n for n in page_data(page)["nodes"] if n["hl"]]
    assert hl_nodes
    for n in hl_nodes:
        px, py = ox + n["x"] * scale, oy + n["y"] * scale
        assert (np.hypot(xs - px, ys - py) < 12).any(), f"highlighted node {n['id']} is not drawn in red"

    # the drawing fills the window: drawn pixels span most of the canvas one way or the other
    ys_all, xs_all = np.nonzero(drawn)
    assert (xs_all.max() - xs_all.min()) > 0.6 * WINDOW[0] or (ys_all.max() - ys_all.min()) > 0.6 * height

    # edge memory is drawn green; the legend lists only the kinds present; the question is shown
    data = page_data(page)
    assert data["memory_edges"] > 0
    assert data["question"] == QUESTION and "the path that answered" in page.read_text()
    colors = json.loads(re.search(r"const COLORS = (\{.*?\});\n", page.read_text()).group(1))
    assert set(colors) == {n["kind"] for n in data["nodes"]} and "time" not in colors

    # control: the same graph without a run has no highlight colour, and its remembered edges
    # (the run's, red above) are drawn green
    plain_img = screenshot(plain, tmp_path)
    plain_header = int(np.argmax(~near(plain_img[:, 0], (0x22, 0x22, 0x22), 10)))   # no question line here
    plain_canvas, plain_height = plain_img[plain_header:], WINDOW[1] - plain_header
    assert near(plain_canvas, HIGHLIGHT_RGB).sum() == 0
    # each remembered edge is drawn green along its segment (however short the layout draws it)
    pdata = page_data(plain)
    pvx, pvy, pvw, pvh = pdata["view"]
    pscale = min(WINDOW[0] / pvw, plain_height / pvh)
    pox, poy = ((WINDOW[0] - pvw * pscale) / 2 - pvx * pscale,
                (plain_height - pvh * pscale) / 2 - pvy * pscale)
    where = {n["id"]: (pox + n["x"] * pscale, poy + n["y"] * pscale) for n in pdata["nodes"]}
    gys, gxs = np.nonzero(near(plain_canvas, MEMORY_RGB, 40))
    remembered = [e for e in pdata["edges"] if e["mem"]]
    assert remembered
    for e in remembered:
        (ax, ay), (bx, by) = where[e["src"]], where[e["dst"]]
        t = np.clip(((gxs - ax) * (bx - ax) + (gys - ay) * (by - ay)) / max((bx - ax) ** 2 + (by - ay) ** 2, 1e-9),
                    0.0, 1.0)
        off = np.hypot(gxs - (ax + t * (bx - ax)), gys - (ay + t * (by - ay)))   # distance to the segment
        assert (off < 4).sum() >= 3, f"remembered edge {e['src']}-{e['dst']} is not drawn green"


# ------------------------------------------------------------------ the answering path, labels, layout

def test_the_path_is_drawn_as_numbered_steps_in_walk_order(exported_run):
    from langgraph_kgmem.view.html import run_route

    page, plain, *_, run = exported_run
    route = run_route(run)
    assert route, "the offline run walked no edge: nothing to number"
    data = page_data(page)
    assert [(s["from"], s["to"]) for s in data["route"]] == [(h["from"], h["to"]) for h in route]
    assert [s["step"] for s in data["route"]] == list(range(1, len(route) + 1))
    numbered = {(e["src"], e["dst"]): e["step"] for e in data["edges"] if e["step"]}
    assert sorted(numbered.values()) == list(range(1, len(route) + 1))
    assert all(e["hl"] for e in data["edges"] if e["step"])
    assert page_data(plain)["route"] == []


def test_every_node_has_a_label_naming_it():
    from langgraph_kgmem.view.html import node_label
    from langgraph_kgmem.kg.types import Node

    assert node_label(Node("ent-a", "entity", "Marie Curie", {})) == "Marie Curie"
    passage = Node("chk-a", "chunk", "Marie   Curie was\nborn in Paris.", {})
    assert node_label(passage) == "¶ Marie Curie was born in Paris."
    assert node_label(Node("anc-a", "anchor", "Marie Curie", {})) == "Marie Curie"
    long = node_label(Node("chk-b", "chunk", "word " * 40, {}))
    assert len(long) <= 32 and long.endswith("…")


def test_layout_hangs_leaves_by_their_neighbour_and_packs_components():
    from langgraph_kgmem.view.layout import SPACING, graph_layout

    # a ring of 12 with one leaf on each node, and three separate pairs
    ring = [(f"r{i}", f"r{(i + 1) % 12}") for i in range(12)] + [(f"r{i}", f"leaf{i}") for i in range(12)]
    pairs = ring + [(f"p{i}a", f"p{i}b") for i in range(3)]
    ids = sorted({x for p in pairs for x in p})
    pos = graph_layout(ids, pairs)
    assert set(pos) == set(ids) and graph_layout(ids, pairs) == pos      # every node, deterministically
    xy = {k: np.array(v) for k, v in pos.items()}
    for i in range(12):
        assert np.linalg.norm(xy[f"leaf{i}"] - xy[f"r{i}"]) <= 1.01 * SPACING
    # neighbours on the ring sit about SPACING apart, not crushed into a point or flung apart
    gaps = [np.linalg.norm(xy[a] - xy[b]) for a, b in ring[:12]]
    assert 0.5 * SPACING < float(np.median(gaps)) < 4 * SPACING

    def box(names):
        pts = np.array([xy[n] for n in names])
        return pts.min(axis=0), pts.max(axis=0)

    boxes = [box([n for n in ids if n.startswith("r") or n.startswith("leaf")])] + \
        [box([f"p{i}a", f"p{i}b"]) for i in range(3)]
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            (alo, ahi), (blo, bhi) = boxes[i], boxes[j]
            assert (ahi < blo).any() or (bhi < alo).any(), "two components overlap"
    span = np.array(list(pos.values())).max(axis=0) - np.array(list(pos.values())).min(axis=0)
    assert 0.5 < span[0] / span[1] < 4     # packed near the window's shape, not one long row


FIRST = ["Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Ken", "Dennis", "Niklaus", "John", "Marie",
         "Pierre", "Lise", "Emmy", "Kurt", "Emil", "Rosalind", "Dorothy", "Tim", "Srinivasa"]
LAST = ["Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Thompson", "Ritchie", "Wirth", "Backus",
        "Curie", "Meitner", "Noether", "Ramanujan", "Goedel", "Post", "Franklin", "Hodgkin", "Berners", "Shannon"]
CITIES = ["Warsaw", "Paris", "London", "Vienna", "Zurich", "Berlin", "Madras", "Boston", "Leiden", "Geneva",
          "Prague", "Oslo", "Rome", "Lyon", "Munich"]
ORGS = ["Bell Labs", "Cambridge", "Princeton", "Sorbonne", "ETH", "MIT", "Stanford", "Oxford", "CERN", "Harvard"]


def people_docs(n: int) -> list[dict]:
    """``n`` short biographies over shared cities and institutions (seeded): a KG of about
    ``4.6 n`` nodes whose hubs tie it into one large component, as real corpora do."""
    import random

    r = random.Random(1)
    docs = []
    for i in range(n):
        a, b = f"{r.choice(FIRST)} {r.choice(LAST)}", f"{r.choice(FIRST)} {r.choice(LAST)}"
        docs.append({"id": f"d{i}", "title": f"{a} ({i})",
                     "text": f"{a} was born in {r.choice(CITIES)}. {a} worked at {r.choice(ORGS)}. "
                             f"{a} met {b} in {r.choice(CITIES)}."})
    return docs


@pytest.fixture(scope="module")
def sized_pages(tmp_path_factory):
    """Views of a KG of about 50 and about 500 nodes, each with a ReMindRAG run drawn on it."""
    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.view.html import export_html, run_highlight, run_route
    from langgraph_kgmem.memory import edge_memory_counts

    from method_cases import compile_method

    tmp = tmp_path_factory.mktemp("sized")
    pages = {}
    for label, n_docs in (("50", 9), ("500", 110)):
        kg = KnowledgeGraph.in_memory(name=f"people{label}", embeddings="hash")
        docs = people_docs(n_docs)
        kg.add_documents(docs, model="offline")
        store = kg.persistence()[1]
        question = f"Where was {docs[0]['title'].split(' (')[0]} born?"
        run = compile_method("remindrag", kg, store=store).invoke({"question": question})
        pages[label] = export_html(kg, tmp / f"kg-view-{label}.html", question=question, highlight=run_highlight(run),
                                   route=run_route(run), memory=edge_memory_counts(store, kg.name),
                                   title=f"kgmem view: {kg.node_count()} nodes")
        kg.close()
    return pages


def screen_points(data: dict, header: int) -> np.ndarray:
    """Node centres in screen pixels in the first view (the SVG's viewBox, xMidYMid meet)."""
    height = WINDOW[1] - header
    vx, vy, vw, vh = data["view"]
    scale = min(WINDOW[0] / vw, height / vh)
    ox, oy = (WINDOW[0] - vw * scale) / 2 - vx * scale, (height - vh * scale) / 2 - vy * scale
    return np.array([[ox + n["x"] * scale, oy + n["y"] * scale] for n in data["nodes"]])


@pytest.mark.parametrize("size", ["50", "500"])
def test_views_of_50_and_500_nodes_are_readable(sized_pages, size, tmp_path):
    """Screenshots of both sizes (copied to $KGMEM_VIEW_SCREENSHOTS when set, for the docs): labels
    of every node kind shown without overlap, nodes apart, the path numbered on top."""
    chromium()
    page = sized_pages[size]
    data = page_data(page)
    assert (40 <= len(data["nodes"]) <= 60) if size == "50" else (450 <= len(data["nodes"]) <= 560)
    img = screenshot(page, tmp_path)
    import os

    if os.environ.get("KGMEM_VIEW_SCREENSHOTS"):
        target = Path(os.environ["KGMEM_VIEW_SCREENSHOTS"])
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / f"{page.stem}.png", target / f"{page.stem}.png")
    header = int(np.argmax(~near(img[:, 0], (0x22, 0x22, 0x22), 10)))
    window = f"--window-size={WINDOW[0]},{WINDOW[1]}"
    dom = run_chromium(["--dump-dom", window], tmp_path, page.as_uri()).stdout.decode()
    labels = re.findall(r'<text class="label[^"]*" data-kind="(\w+)"[^>]*visibility="(\w+)"', dom)
    assert len(labels) == len(data["nodes"])                       # every node carries a label
    shown = [kind for kind, vis in labels if vis == "visible"]
    kinds = {n["kind"] for n in data["nodes"]}
    if size == "50":
        assert set(shown) == kinds and len(shown) >= 0.45 * len(data["nodes"])   # every kind named, many nodes
    else:
        assert len(shown) >= 60 and {"entity", "chunk"} <= set(shown)
    # nodes stay apart: few sit within 6 px of another in the first view
    pts = screen_points(data, header)
    dist = np.sqrt(((pts[:, None] - pts[None]) ** 2).sum(-1))
    np.fill_diagonal(dist, np.inf)
    assert (dist.min(axis=1) < 6).mean() < 0.1
    # the path's step badges are drawn on top, in the highlight colour
    assert data["route"] and len(re.findall(r'class="route"', dom)) == len(data["route"])
    assert near(img[header:], HIGHLIGHT_RGB).sum() > 50
