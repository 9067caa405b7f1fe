#!/usr/bin/env python
"""Each method's first-question and steady per-question latency as the KG grows.

    python tools/method_scale.py --sizes 2000,20000 --questions 6
    python tools/method_scale.py --sizes 2000,20000,100000 --methods autopruned,catrag --json scale.json

One KG (embedded backend, numpy vectors, ``--embeddings``: hash by default) grows through the sizes
with the one-sentence documents of ``tools/ingest_scale.py`` (each names a new person, an
organisation and a year), ingested offline. At each size, per method: its setup outside any
question (AutoPrunedRetriever: ``sync_codebook``, the step meant to follow ingestion), then a graph
compiled anew over the KG's own store (a codebook is loaded from it as a new process would) with
the KG's PPR snapshots dropped, the first question timed, then ``--questions`` more whose median
is the steady per-question time. Questions ask about documents spread over the whole KG ("In
which year did Kalo Venrith join the Harbor Guild?"). Every decision is offline (no LLM), so the
figures are the methods' own work. The token encoder is loaded once before any timing: a
per-process cost every method shares, not a question's.

The last line is JSON: ``rows`` (method, passages, setup_s, build_ms: building and compiling the
graph, first_ms, steady_ms, first_over_steady)
and ``ratio`` (per method, steady time at the largest size over the smallest). A benchmark, not a
test: figures depend on the machine and its load, so compare ratios taken within one run.
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

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LANGSMITH_TRACING", "false")
HERE = Path(__file__).resolve().parent
for p in (HERE.parent, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from ingest_scale import _ORGS, _VERBS, document, person  # noqa: E402

# the methods that answer over documents (KG-IRAG answers over time-stamped records)
DEFAULT_METHODS = ("autopruned", "catrag", "hipporag2", "remindrag", "r3cycle", "graphcot")


def question(i: int) -> str:
    """A question only document ``i`` answers."""
    verb = _VERBS[i % len(_VERBS)].replace("joined", "join").replace("left", "leave").replace(
        "founded", "found").replace("worked", "work").replace("advised", "advise").replace("wrote", "write")
    return f"In which year did {person(i)} {verb} the {_ORGS[i % len(_ORGS)]}?"


def measure(kg, store, method: str, passages: int, n_questions: int) -> dict:
    """Setup, first question and steady questions of ``method`` on ``kg`` as it is now."""
    from langgraph_kgmem.graphs.autopruned import sync_codebook
    from langgraph_kgmem.graphs.registry import registered

    reg = registered()[method]
    t0 = time.perf_counter()
    if reg.spec.name == "autopruned":
        sync_codebook(kg, store)
    setup = time.perf_counter() - t0
    kg.drop_snapshots()
    t0 = time.perf_counter()
    app = reg.factory(kg, model="offline", store=store, **dict(reg.preset)).compile(store=store)
    build = time.perf_counter() - t0    # a graph's one-time work (a served graph's start-up)
    # spread over the KG, a different set per size and method so no answer is remembered
    step = max(1, passages // (n_questions + 1))
    ids = [(k * step + 7 * len(method) + passages // 3) % passages for k in range(n_questions + 1)]
    times = []
    for i in ids:
        t = time.perf_counter()
        app.invoke({"question": question(i)})
        times.append((time.perf_counter() - t) * 1000)
    steady = statistics.median(times[1:])
    return {"method": method, "passages": passages, "setup_s": round(setup, 2), "build_ms": round(build * 1000, 1),
            "first_ms": round(times[0], 1),
            "steady_ms": round(steady, 1), "first_over_steady": round(times[0] / steady, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2000,20000", help="KG sizes in passages, ascending (default 2000,20000)")
    ap.add_argument("--methods", default=",".join(DEFAULT_METHODS))
    ap.add_argument("--questions", type=int, default=6, help="steady questions per method and size (default 6)")
    ap.add_argument("--embeddings", default="hash")
    ap.add_argument("--batch", type=int, default=2000, help="documents per add_documents call")
    ap.add_argument("--json", default=None, help="also write the result here")
    args = ap.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]

    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.llm import count_tokens

    count_tokens("load the token encoder once, before any timing")
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        kg = KnowledgeGraph.open(str(Path(tmp) / "kg"), name="scale", embeddings=args.embeddings,
                                 vector_backend="memory")
        try:
            _, store = kg.persistence()
            have = 0
            for size in sizes:
                t0 = time.perf_counter()
                for start in range(have, size, args.batch):
                    kg.add_documents([document(i) for i in range(start, min(start + args.batch, size))],
                                     model="offline", progress=False)
                have = size
                print(f"{size} passages ingested in {time.perf_counter() - t0:.0f} s "
                      f"({kg.node_count()} nodes, {kg.edge_count()} edges)", flush=True)
                for m in methods:
                    rows.append(measure(kg, store, m, size, args.questions))
                    print(json.dumps(rows[-1]), flush=True)
        finally:
            kg.close()
    ratio = {}
    for m in methods:
        by = {r["passages"]: r["steady_ms"] for r in rows if r["method"] == m}
        ratio[m] = round(by[sizes[-1]] / by[sizes[0]], 2) if len(by) == len(sizes) and by[sizes[0]] else None
    out = {"embeddings": args.embeddings, "sizes": sizes, "questions": args.questions, "rows": rows, "ratio": ratio}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
