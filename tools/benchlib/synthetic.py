"""Generated inputs of the performance suites: power-law graphs and documents with a known entity.

Both the in-memory suite (``perf.py``) and the PostgreSQL suite (``pg_perf.py``) build on them;
nothing here is stored, every graph is generated in the run from its seed.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np


def power_law_graph(edges: int, rng: np.random.Generator, exponent: float = 2.1) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Chung–Lu: each endpoint drawn with probability ∝ i^(−1/(γ−1)), so degrees follow a power
    law of exponent γ; ids shuffled so hubs do not sit together (no locality for free)."""
    n = max(10, edges // 5)
    cdf = np.cumsum(np.arange(1, n + 1, dtype=np.float64) ** (-1.0 / (exponent - 1.0)))
    cdf /= cdf[-1]
    perm = rng.permutation(n)
    src = perm[np.minimum(np.searchsorted(cdf, rng.random(edges)), n - 1)]
    dst = perm[np.minimum(np.searchsorted(cdf, rng.random(edges)), n - 1)]
    dst = np.where(dst == src, (dst + 1) % n, dst)
    return n, src, dst, rng.uniform(0.5, 1.5, edges)


def seeded_extractions(passages: Sequence[dict[str, str]]) -> Iterator[tuple[dict[str, str], Any, str]]:
    """(passage, offline extraction, entity id of its first triple's subject) for each passage that
    has a triple: the documents the add-one-document-then-query timings write and query from."""
    from langgraph_kgmem.ingest.extract import OfflineExtractor
    from langgraph_kgmem.kg.types import entity_id

    ex = OfflineExtractor()
    for p in passages:
        x = ex.extract(p["text"], p["title"])
        if x.triples:
            yield p, x, entity_id(x.triples[0].subject)
