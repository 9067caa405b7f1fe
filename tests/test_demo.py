"""`make demo` end to end: examples/demo.py in a new process (offline, hashing embedding for speed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from langgraph_kgmem.graphs.registry import summaries

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.integration
def test_demo_runs_every_method_and_shows_memory(tmp_path):
    env = dict(os.environ, KGMEM_DEMO_DIR=str(tmp_path / "demo"), KGMEM_EMBEDDINGS="hash",
               KGMEM_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("KGMEM_MODEL", None)
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "model: offline" in out
    flat = " ".join(out.split())   # the explanations are wrapped to the terminal's width
    for method in ("remindrag", "catrag", "hipporag2", "autopruned", "r3cycle", "kgirag"):
        assert f"method: {method}" in out, method
        assert summaries()[method] in flat, method        # each method named and explained
    # readable: no Python reprs of dicts or lists, no line wider than the banner
    assert "{'" not in out and "['" not in out
    assert max(len(line) for line in out.splitlines() if "answer: " not in line) <= 100   # answers print whole
    assert out.count("second asking") >= 10
    # the second asking of a ReMindRAG question replays memory instead of starting from nothing
    remind = out.split("method: remindrag")[1].split("method: catrag")[0]
    assert re.search(r"memory replay followed \d+ remembered edge\(s\): \S.* — .+ →", flat.split(
        "method: remindrag")[1]), remind[:2000]
    # KG-IRAG answers the generated temporal questions exactly (offline judge = exact rule scan)
    temporal = out.split("method: kgirag")[1]
    truths = re.findall(r"ground truth from the records: (.+)", temporal)
    answers = re.findall(r"\[kgirag\] answer: '([^']*)'", temporal)
    assert len(truths) == 3 and answers == truths
    page = tmp_path / "demo" / "kg.html"
    html = page.read_text(encoding="utf-8")
    assert '<svg id="view"' in html and '"hl": true' in html  # the first ReMindRAG run is highlighted
    assert '"step": 1' in html                                # its path numbered in the order walked
