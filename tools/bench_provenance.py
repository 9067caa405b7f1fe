#!/usr/bin/env python
"""What invalidating memory costs when documents change (issue 40, provenance): the time and the
store items a replace touches, against the memory's size and the number of documents replaced.

    python tools/bench_provenance.py                       # SQLite store (a KG directory), default sizes
    python tools/bench_provenance.py --store memory --sizes 100,10000 --changed 1,4 --json out.json

A KG of ``--documents`` short documents (offline extraction, hashing embedding: no model at all)
gets a memory of N records (the shared record format: each names one document and its version),
of which ``--resting`` rest on each document that will change and the rest on the other documents.
Each row replaces ``changed`` documents with new text in one ``add_documents`` call and reports
the records invalidated, the store items the invalidation read or wrote, and its time (the
``invalidate_memory`` step only; the ingest itself is not counted; the median of ``--repeat`` runs). A full scan of the memory,
what an invalidation without the index would read, is shown beside it for scale.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LANGSMITH_TRACING", "false")

from langgraph_kgmem import KnowledgeGraph  # noqa: E402
from langgraph_kgmem.ingest.pipeline import add_documents as ingest  # noqa: E402
from langgraph_kgmem.memory import list_items  # noqa: E402
from langgraph_kgmem.memory.provenance import invalidate_documents, provenance_for, put_records  # noqa: E402


class CountingStore:
    """A store wrapper counting the items its callers read or write (one per op of a batch, one
    per item a search returns)."""

    def __init__(self, store):
        self.store, self.items = store, 0

    def batch(self, ops):
        out = self.store.batch(ops)
        self.items += sum(len(r) if isinstance(r, list) else 1 for r in out)
        return out

    def __getattr__(self, name):
        return getattr(self.store, name)

    def get(self, namespace, key, **kw):
        self.items += 1
        return self.store.get(namespace, key, **kw)

    def put(self, namespace, key, value, **kw):
        self.items += 1
        return self.store.put(namespace, key, value, **kw)

    def delete(self, namespace, key):
        self.items += 1
        return self.store.delete(namespace, key)

    def search(self, namespace, **kw):
        found = self.store.search(namespace, **kw)
        self.items += max(len(found), 1)
        return found


def document(i: int, version: int = 1) -> dict:
    river = ["Danube", "Rhine", "Elbe", "Oder"][version % 4]
    return {"id": f"doc-{i}", "text": f"Person {i} was born in Town {i}. Town {i} is a city on the {river}."}


def one_row(store_kind: str, documents: int, size: int, changed: int, resting: int, workdir: Path) -> dict:
    kg = KnowledgeGraph.open(workdir / f"kg-{size}-{changed}", name="bench", embeddings="hash") \
        if store_kind == "sqlite" else KnowledgeGraph.in_memory(name="bench", embeddings="hash")
    try:
        kg.add_documents([document(i) for i in range(documents)], model="offline")
        store = kg.persistence()[1]
        chunk = {n.attrs["doc_id"]: n.id for n in kg.nodes("chunk")}
        prov = {d: provenance_for(kg, [c]) for d, c in chunk.items()}
        targets = [f"doc-{i}" for i in range(changed)]
        others = [d for d in sorted(prov) if d not in targets]
        records = {f"r{k}-{d}": {"note": "x", "provenance": prov[d]} for d in targets for k in range(resting)}
        for k in range(size - len(records)):
            records[f"o{k}"] = {"note": "x", "provenance": prov[others[k % len(others)]]}
        ids = sorted(records)
        for i in range(0, len(ids), 500):
            put_records(store, kg.name, "feedback", {k: records[k] for k in ids[i:i + 500]}, scope=("tenant",))
        t0 = time.perf_counter()
        scanned = len(list_items(store, ("kgmem", kg.name, "tenant", "feedback")))
        scan_ms = (time.perf_counter() - t0) * 1000.0
        # the replace (the ingest alone), then the invalidation step KnowledgeGraph.add_documents
        # runs after it, on a counting wrapper of the same store
        report = ingest(kg, [document(i, version=2) for i in range(changed)], model="offline")
        counting = CountingStore(store)
        t0 = time.perf_counter()
        invalidated = invalidate_documents(kg, counting, sorted(report.changes))
        ms = (time.perf_counter() - t0) * 1000.0
        left = len(list_items(store, ("kgmem", kg.name, "tenant", "feedback")))
        assert invalidated == changed * resting and left == size - invalidated, (invalidated, left)
        return {"store": store_kind, "memory_records": size, "documents_changed": changed,
                "records_invalidated": invalidated, "items_touched": counting.items,
                "invalidate_ms": round(ms, 2), "full_scan_items": scanned, "full_scan_ms": round(scan_ms, 2)}
    finally:
        kg.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", choices=("sqlite", "memory"), default="sqlite")
    ap.add_argument("--documents", type=int, default=20)
    ap.add_argument("--sizes", default="100,1000,10000", help="memory records, comma-separated")
    ap.add_argument("--changed", default="1,2,4,8", help="documents replaced, at the largest size")
    ap.add_argument("--resting", type=int, default=10, help="records resting on each replaced document")
    ap.add_argument("--repeat", type=int, default=3, help="runs per row; times are their median")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    rows = []
    plan = [(size, 1) for size in sizes] + [(max(sizes), int(x)) for x in args.changed.split(",") if int(x) != 1]
    for size, changed in plan:
        runs = []
        for _ in range(args.repeat):   # a fresh KG and memory each time: the invalidation deletes what it measures
            with tempfile.TemporaryDirectory() as tmp:
                runs.append(one_row(args.store, args.documents, size, changed, args.resting, Path(tmp)))
        row = dict(runs[0])
        for k in ("invalidate_ms", "full_scan_ms"):
            row[k] = round(statistics.median(r[k] for r in runs), 2)
        rows.append(row)
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
