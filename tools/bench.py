#!/usr/bin/env python
"""Benchmark harness: the methods and the passage baselines on real QA data, side by side.

    python tools/bench.py --method dense,bm25 --decider offline --dataset hotpotqa \
        --questions 300 --passes 1 --json bench_output/baselines.json
    python tools/bench.py --quick          # a few questions, every registered method (make bench)
    python tools/bench.py --perf           # KG performance suite (PPR, overrides, ingest)
    python tools/bench.py --backends --embeddings hash   # embedded vs PostgreSQL: query ms, ingest, memory
    python tools/bench.py --extraction     # concurrent LLM extraction at a simulated 0.3 s per call
    python tools/bench.py --graph-quality --dataset musique-train100   # gold passages within 1-3 hops

Writes ``{"results": [...]}`` (one row per method × decider × dataset × pass) and prints a
Markdown table. See docs/benchmarks.md and tools/benchlib/api.py for the adapter contract.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
for p in (str(TOOLS), str(TOOLS.parent)):  # `benchlib...` and `tools.benchlib...` imports both work
    if p not in sys.path:
        sys.path.insert(0, p)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LANGSMITH_TRACING", "false")

from benchlib.runner import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
