"""Grade adaptive-fusion thresholds offline from the benchmark's per-question records.

A run of the ``*-adaptive`` bench adapters with ``--per-question FILE`` records, per question, each
method's own ranking, vector search's ranking (passage keys) and the signals behind its confidence.
Every candidate rule (the signal read as the confidence, a ``weak`` and a ``strong`` threshold) is
applied to those rankings here with the library's own :func:`~langgraph_kgmem.ranking.shared_turns`,
without running the methods again, and graded by passage as the benchmark grades (R@2, R@5, FCR).

Choose on some data sets, report on others:

    python tools/fusion_rules.py --tune A.jsonl B.jsonl --report C.jsonl D.jsonl

prints, per method, the best thresholds on the pooled tuning questions (the objective: mean R@5 +
FCR, then the larger share of questions left to the method) and the figures of dense retrieval, the
method's ranking alone, the fixed rule re-enacted, and the chosen rule on every file, tuning and
held-out sets apart. Unfused
figures come from the recorded own ranking (its first ten passages), so they can differ slightly
from a ``-nofusion`` run's (whose evidence also holds passages a walk added after its tenth).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langgraph_kgmem.ranking import dense_led, interleave, shared_turns, trust_share  # noqa: E402

K = 5   # evidence passages: Recall@5 and FCR read the first five
GRID = [round(x * 0.05, 2) for x in range(21)] + [1.01]

# the confidence each method's code computes from its recorded signals
CONFIDENCE: dict[str, Callable[[dict[str, Any]], float]] = {
    "catrag": lambda f: f["concentration"] if f["seeds"] > 0 else 0.0,
    "hipporag2": lambda f: f["concentration"] if f["seeds"] > 0 else 0.0,
    "remindrag": lambda f: f["agreement"],
    "autopruned": lambda f: f["agreement"],
}


def load(paths: Sequence[str]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """dataset → method (the ``-adaptive`` suffix dropped) → its questions."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for path in paths:
        for line in Path(path).read_text().splitlines():
            row = json.loads(line)
            if row.get("error") or not row.get("gold"):
                continue
            out[row["dataset"]][row["method"].removesuffix("-adaptive")].append(row)
    return out


def grade(ranking: Sequence[str], gold: Sequence[str]) -> tuple[float, float, float]:
    g = set(gold)
    return (len(g & set(ranking[:2])) / len(g), len(g & set(ranking[:K])) / len(g), float(g <= set(ranking[:K])))


def fused(row: dict[str, Any], method: str, weak: float | None, strong: float | None) -> list[str]:
    """The question's ranking under a rule (``weak`` None: the method's own ranking alone); a
    question the method answered without fusing (a fallback to vector search) keeps its ranking."""
    f = row["extra"].get("fusion")
    if not f:
        return row["retrieved"]
    if weak is None:
        return list(dict.fromkeys(f["own_keys"]))
    share = trust_share(CONFIDENCE[method](f), weak=weak, strong=strong, k=K)
    return [x for x, _ in shared_turns(f["own_keys"], f["dense_keys"], K, share=share)]


def fixed(row: dict[str, Any], method: str) -> list[str]:
    """The question's ranking under the fixed rule, re-enacted on the recorded passage rankings:
    PPR and vector search in turns (CatRAG, HippoRAG 2), or vector search's best first, then turns
    (ReMindRAG; AutoPrunedRetriever, whose real fusion orders runs, so this is an estimate)."""
    f = row["extra"].get("fusion")
    if not f:
        return row["retrieved"]
    merge = interleave([f["own_keys"], f["dense_keys"]]) if method in ("catrag", "hipporag2") else \
        dense_led(f["own_keys"], f["dense_keys"])
    return [x for x, _ in merge]


def figures(rows: Sequence[dict[str, Any]], rank: Callable[[dict[str, Any]], list[str]]) -> tuple[float, ...]:
    scores = [grade(rank(r), r["gold"]) for r in rows]
    return tuple(round(sum(s[i] for s in scores) / max(1, len(scores)), 4) for i in range(3))


def choose(rows: Sequence[dict[str, Any]], method: str) -> tuple[float, float]:
    best: tuple[Any, ...] | None = None
    for weak in GRID:
        for strong in (s for s in GRID if s >= weak):
            r2, r5, fcr = figures(rows, lambda r: fused(r, method, weak, strong))
            key = (round(r5 + fcr, 4), round(r2, 4), -weak, -strong)
            if best is None or key > best[0]:
                best = (key, weak, strong)
    assert best is not None
    return best[1], best[2]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tune", nargs="+", required=True, help="per-question JSONL files the thresholds are chosen on")
    ap.add_argument("--report", nargs="*", default=[], help="held-out per-question JSONL files, only reported")
    args = ap.parse_args(argv)
    tune, held = load(args.tune), load(args.report)
    methods = sorted({m for d in tune.values() for m in d if m in CONFIDENCE})
    chosen = {m: choose([r for d in tune.values() for r in d.get(m, [])], m) for m in methods}
    print("| method | weak | strong |\n|---|---|---|")
    for m, (w, s) in chosen.items():
        print(f"| {m} | {w} | {s} |")
    for label, data in (("tuning", tune), ("held-out", held)):
        print(f"\n{label}: R@2 / R@5 / FCR\n| set | method | dense | own ranking | fixed (re-enacted) | adaptive "
              "| shares 1/5, 1/2, 1 |\n|---|---|---|---|---|---|---|")
        for ds, by in sorted(data.items()):
            dense = {r["qid"]: r for r in by.get("dense", [])}
            for m in methods:
                rows = [r for r in by.get(m, []) if r["qid"] in dense]
                if not rows:
                    continue
                w, s = chosen[m]
                shares = [trust_share(CONFIDENCE[m](r["extra"]["fusion"]), weak=w, strong=s, k=K)
                          for r in rows if r["extra"].get("fusion")]
                mix = "/".join(str(sum(abs(x - v) < 1e-9 for x in shares)) for v in (1 / K, 0.5, 1.0))
                d = figures([dense[r["qid"]] for r in rows], lambda r: r["retrieved"])
                print(f"| {ds} | {m} | {d} | {figures(rows, lambda r: fused(r, m, None, None))} | "
                      f"{figures(rows, lambda r: fixed(r, m))} | {figures(rows, lambda r: fused(r, m, w, s))} "
                      f"| {mix} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
