"""Concurrent LLM extraction: the same documents ingested with 1, 8 and 16 chunks in flight, by a
scripted extraction model that waits ``--extraction-latency`` seconds per call (a hosted model's
latency, without one): ``add_documents`` (threads) and ``aadd_documents`` (coroutines on one event
loop). Reports wall time per setting, its ratio to the serial run, and whether every setting built
the same KG (node and edge ids)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from benchlib.common import log

NAMES = ["Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Ken", "Dennis", "Niklaus", "John"]


def _documents(n_docs: int) -> list[dict[str, str]]:
    """``n_docs`` documents of five long paragraphs each (several 750-token chunks per document)."""
    docs = []
    for d in range(n_docs):
        paras = []
        for c in range(5):
            i = d * 5 + c
            sentence = f"{NAMES[i % 10]} met {NAMES[(i + 3) % 10]} in Town{i}. {NAMES[(i + 5) % 10]} wrote Book{i}. "
            paras.append(sentence * 60)
        docs.append({"id": f"doc{d}", "text": "\n\n".join(paras)})
    return docs


def run_extraction(args: Any) -> int:
    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.testing import scripted_extraction_model

    docs = _documents(args.extraction_docs)
    rows, shapes = [], {}
    for mode, workers in (("sync", 1), ("sync", 8), ("sync", 16), ("async", 8), ("async", 16)):
        kg = KnowledgeGraph.in_memory(name=f"extract{workers}", embeddings="hash")
        model = scripted_extraction_model(args.extraction_latency)
        t0 = time.perf_counter()
        if mode == "sync":
            report = kg.add_documents(docs, model=model, max_concurrency=workers)
        else:
            report = asyncio.run(kg.aadd_documents(docs, model=model, max_concurrency=workers))
        seconds = time.perf_counter() - t0
        shapes[mode, workers] = (sorted(n.id for n in kg.nodes()), sorted(e.id for e in kg.edges()))
        rows.append({"mode": mode, "max_concurrency": workers, "chunks": report.chunks,
                     "llm_calls": report.usage["llm_calls"], "seconds": round(seconds, 1)})
        log(f"extraction: {rows[-1]}")
    for r in rows:
        r["ratio_to_serial"] = round(r["seconds"] / rows[0]["seconds"], 3)
    out = {"latency_s": args.extraction_latency, "documents": len(docs), "rows": rows,
           "same_kg": all(shape == shapes["sync", 1] for shape in shapes.values())}
    print(json.dumps(out, indent=2))
    return 0 if out["same_kg"] else 1
