"""What every part of the harness shares: where output goes, the progress log, the error that
stops a run, and the run's embedding model.

The runner dispatches to the performance suites and those suites write where the runner writes;
both import these from here rather than from each other.
"""

from __future__ import annotations

import sys
from typing import Any

from benchlib.datasets import REPO_ROOT

OUTPUT_DIR = REPO_ROOT / "bench_output"


class BenchError(Exception):
    """A run that cannot start (bad option, missing data, unknown method); exit status 2."""


def log(msg: str) -> None:
    """One progress line on stderr (stdout carries the report)."""
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def make_embeddings(spec: str) -> Any:
    """The embedding model a run's ``--embeddings`` names: ``local``, ``fast`` or ``hash[:DIM]``."""
    from langgraph_kgmem.embeddings import get_embeddings

    if spec not in ("local", "fast", "hash") and not spec.startswith("hash:"):
        raise BenchError(f"--embeddings must be 'local', 'fast' or 'hash', got {spec!r}")
    return get_embeddings(spec)
