"""The router's own overhead per question, offline: the decision (signals, rules, the store read)
and the store I/O it adds (one read and one write batch after the run), on the KG's SQLite memory
store and on LangGraph's InMemoryStore.

    python tools/router_overhead.py --questions 40 --passes 2

Builds a small embedded KG (hash embedding, offline extractor) in a temporary directory, routes
``--questions`` one-hop questions ``--passes`` times (the second pass reads the statistics and the
question records the first wrote) and prints, per store, the median and 90th percentile of
``route["routing_ms"]``, ``route["learning_ms"]`` and ``route["overhead_ms"]`` (their sum per
question), and ``routing_cpu_ms`` / ``overhead_cpu_ms``: the same as this thread's CPU time. Wall-clock
times: on a loaded machine they hold scheduler stalls (the tail, and the median too once most
questions meet one); the CPU times do not, so they show the router's own work under load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langgraph.store.memory import InMemoryStore  # noqa: E402

from langgraph_kgmem import KnowledgeGraph, create_router_graph  # noqa: E402

KEYS = ("routing_ms", "learning_ms", "overhead_ms", "routing_cpu_ms", "overhead_cpu_ms")


def _docs(n: int) -> list[dict[str, str]]:
    return [{"title": f"Person {i}", "text": f"Person {i} was born in City {i}. City {i} is the capital of Land {i}."}
            for i in range(n)]


def measure(kg: KnowledgeGraph, store: object, questions: int, passes: int) -> dict[str, dict[str, float]]:
    """Per timing key: median and 90th percentile (ms) over every routed question of every pass."""
    app = create_router_graph(kg, model="offline", store=store, methods=("hipporag2", "catrag")).compile(store=store)
    seen: dict[str, list[float]] = {k: [] for k in KEYS}
    for _ in range(passes):
        for i in range(questions):
            route = app.invoke({"question": f"Where was Person {i} born?"})["route"]
            for k in KEYS:
                seen[k].append(float(route[k]))
    return {k: {"median": round(statistics.median(v), 3), "p90": round(statistics.quantiles(v, n=10)[-1], 3)}
            for k, v in seen.items()}


def main(argv: list[str] | None = None) -> int:
    """Print the figures as JSON (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=40)
    ap.add_argument("--passes", type=int, default=2)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        kg = KnowledgeGraph.open(Path(tmp) / "kg", name="overhead", embeddings="hash")
        try:
            kg.add_documents(_docs(args.questions), model="offline")
            out = {"sqlite": measure(kg, kg.persistence()[1], args.questions, args.passes),
                   "memory": measure(kg, InMemoryStore(), args.questions, args.passes),
                   "questions": args.questions, "passes": args.passes, "decider": "offline", "embeddings": "hash"}
        finally:
            kg.close()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
