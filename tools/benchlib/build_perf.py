"""``bench.py --build-only``: time building a dataset's pooled KG from nothing, per embedding.

For the ingest-speed work: the pooled corpus of the dataset's questions (``--questions N``,
default all; every distinct passage once) goes through ``kg.add_documents(model="offline")`` into
a fresh KG directory, once per embedding in ``--embeddings`` (comma-separated, e.g.
``local,fast``), one after another in the same run so the ratio is taken on one machine state.
The embedding cache is off (a cold build: every text really goes through the model); loading the
model, and distilling ``fast``'s static matrix (once per machine, then read from
``KGMEM_CACHE_DIR``), happen before the clock starts. Reported: wall seconds end to end, seconds
inside the embedding model, nodes/edges, and each build's time relative to the first.

Then the floor: the passages the last ``local``/``fast`` build embedded (each chunk as the KG
embeds it), through all-MiniLM-L6-v2 alone, cold, in the same run. Both embeddings send passages
to that model, so no build with either can be faster on this machine than this figure.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib.corpus import as_documents
from benchlib.datasets import DatasetError, load_questions, pooled_passages
from benchlib.common import OUTPUT_DIR, log


def build_once(docs: list[dict[str, str]], spec: str) -> tuple[dict[str, Any], list[str]]:
    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.embeddings import embeddings_id, get_embeddings

    emb = get_embeddings(spec, cache=False)
    if spec in ("local", "fast"):
        emb.embed_documents(["warm-up"])      # loading the model is not ingest time
    if spec == "fast":
        emb.embed_short_texts(["warm-up"])    # nor is distilling the static matrix (cached per machine)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        kg = KnowledgeGraph.open(Path(tmp) / "kg", name="build", embeddings=emb, vector_backend="memory")
        try:
            e0 = kg.embed_seconds
            kg.add_documents(docs, model="offline", progress=False)
            embed = kg.embed_seconds - e0
            stats = kg.stats()
            passages = [kg.embedding_text(n) for n in kg.nodes("chunk")]
        finally:
            kg.close()
        total = time.perf_counter() - t0
    row = {"embeddings": spec, "embeddings_id": embeddings_id(emb), "passages": len(docs),
           "total_s": round(total, 2), "embedding_s": round(embed, 2), "other_s": round(total - embed, 2),
           "nodes": stats["nodes"], "edges": stats["edges"]}
    log(f"build-only: {row}")
    return row, passages


def passage_floor(passages: list[str]) -> dict[str, Any]:
    """Seconds all-MiniLM-L6-v2 takes for ``passages`` alone (cold, model loaded beforehand)."""
    from langgraph_kgmem.embeddings import LocalSentenceTransformerEmbeddings

    model = LocalSentenceTransformerEmbeddings()
    model.embed_documents(["warm-up"])
    t0 = time.perf_counter()
    model.embed_documents(passages)
    seconds = time.perf_counter() - t0
    row = {"passages": len(passages), "seconds": round(seconds, 2), "per_second": round(len(passages) / seconds, 1)}
    log(f"build-only floor: {row}")
    return row


def run_build_only(args: Any) -> int:
    specs = [s.strip() for s in args.embeddings.split(",") if s.strip()]
    try:
        qs = load_questions(args.dataset)
    except DatasetError as exc:
        print(f"bench: error: {exc}")
        return 2
    if args.questions:
        qs = qs[: args.questions]
    docs = as_documents(pooled_passages(args.dataset, qs))   # a dataset's own corpus file (STEM) included
    log(f"build-only: {len(qs)} questions, {len(docs)} pooled passages, embeddings {', '.join(specs)}")
    built = [build_once(docs, spec) for spec in specs]
    rows = [row for row, _ in built]
    model_passages = [p for (row, p), spec in zip(built, specs) if spec in ("local", "fast")]
    floor = passage_floor(model_passages[-1]) if model_passages else None
    for r in rows:
        r["vs_first"] = round(r["total_s"] / rows[0]["total_s"], 3) if rows[0]["total_s"] else None
    out = Path(args.json) if args.json else OUTPUT_DIR / "build-only.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"build_only": rows, "floor": floor, "dataset": args.dataset, "questions": len(qs)},
                              indent=1))
    print("| embeddings | passages | total s | in the embedding model s | other s | nodes | edges | vs first |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['embeddings']} | {r['passages']} | {r['total_s']} | {r['embedding_s']} | {r['other_s']} "
              f"| {r['nodes']} | {r['edges']} | {r['vs_first']} |")
    if floor:
        print(f"\nfloor: the {floor['passages']} passages alone through all-MiniLM-L6-v2 took {floor['seconds']} s "
              f"({floor['per_second']} a second); no build with local or fast is faster here")
    print(f"\nwritten to {out}")
    return 0
