"""The router's figures on the mixed set, read back from ``tools/bench.py --dataset mixed`` JSON files
(their ``questions`` entries): per pass and part the router minus the best single method (and,
where the router's rows carry the routed method's own ranking, ``uncovered``, the same without the
router's coverage step), the oracle router, the router's LLM calls against always running the costliest method, and per question where
the router lost to a single method, what it ran and with what confidence.

    cd tools && python -m benchlib.router_report RUN.json [RUN2.json ...] [--losses]
    cd tools && python -m benchlib.router_report RUN.json --router OTHER.json --name router-eager

``--router`` takes the router rows of another run over the same questions (a router-only run such as
``--method router-eager``) and compares them with the single methods of ``RUN.json``: the single
methods do not depend on the router (under the oracle decider each question's dice are seeded by the
method's name, the question and the pass), so a router variant needs no rerun of the singles.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from benchlib.metrics import recall_at_k

ROUTER = "router"
DOCUMENT_PARTS = ("hotpotqa", "musique")
TOP = 5                  # the passage parts' quality is recall@5


def load_entries(path: str | Path) -> list[dict[str, Any]]:
    """A mixed run's per-question entries (``questions`` of its JSON)."""
    data = json.loads(Path(path).read_text())
    if "questions" not in data:
        raise SystemExit(f"{path}: no per-question entries (not a --dataset mixed run)")
    return list(data["questions"])


def with_router(base: list[dict[str, Any]], other: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """``base``'s single methods with ``other``'s ``name`` entries as the router's (renamed ``router``).
    Refuses runs over different questions."""
    mine = [dict(e, method=ROUTER) for e in other if e["method"] == name]
    if not mine:
        raise SystemExit(f"no {name!r} entries in the router run")
    keys = {(e["qid"], e["pass"]) for e in base if e["method"] != ROUTER}
    if {(e["qid"], e["pass"]) for e in mine} != keys:
        raise SystemExit(f"the {name!r} run and the base run cover different questions or passes")
    return [e for e in base if e["method"] != ROUTER] + mine


def _grid(entries: Iterable[dict[str, Any]]) -> dict[tuple[int, str, str], dict[str, dict[str, Any]]]:
    grid: dict[tuple[int, str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for e in entries:
        grid[(e["pass"], e["part"], e["qid"])][e["method"]] = e
    return grid


def part_table(entries: list[dict[str, Any]]) -> dict[int, dict[str, dict[str, Any]]]:
    """Per pass and part: ``best_single`` and its quality, ``router``, ``router_minus_best``, ``oracle``
    (per question the best single method in hindsight), ``router_minus_oracle`` and ``calls`` (each
    method's mean LLM calls a question of the part); per pass ``all``
    adds the mean LLM calls a question of the router and of the costliest single method, and their
    ratio ``calls_vs_costliest``. Qualities are means over the part's questions."""
    grid = _grid(entries)
    out: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for p in sorted({k[0] for k in grid}):
        at = {k: v for k, v in grid.items() if k[0] == p}
        for part in sorted({k[1] for k in at}):
            cells = [v for k, v in at.items() if k[1] == part]
            singles = sorted({m for c in cells for m in c if m != ROUTER})
            mean = {m: sum(c[m]["quality"] for c in cells if m in c) / len(cells) for m in singles}
            best = max(singles, key=lambda m: mean[m])
            oracle = sum(max(c[m]["quality"] for m in singles if m in c) for c in cells) / len(cells)
            calls = {m: round(sum(c[m].get("llm_calls", 0) for c in cells if m in c) / len(cells), 2)
                     for m in sorted({m for c in cells for m in c})}
            row = {"questions": len(cells), "best_single": best, "best_quality": round(mean[best], 4),
                   "oracle": round(oracle, 4), "calls": calls}
            if all(ROUTER in c for c in cells):
                router = sum(c[ROUTER]["quality"] for c in cells) / len(cells)
                row.update(router=round(router, 4), router_minus_best=round(router - mean[best], 4),
                           router_minus_oracle=round(router - oracle, 4))
                if part in DOCUMENT_PARTS and all("uncovered" in c[ROUTER] for c in cells):
                    # the routed method's own ranking: the router without its coverage step (exact in pass 1;
                    # in later passes the verdicts, and so the routes, followed the covered ranking)
                    plain = sum(recall_at_k(c[ROUTER]["uncovered"], c[ROUTER]["gold"], TOP) for c in cells) / len(cells)
                    row.update(router_uncovered=round(plain, 4), uncovered_minus_best=round(plain - mean[best], 4))
            out[p][part] = row
        calls: dict[str, list[int]] = defaultdict(list)
        for c in at.values():
            for m, e in c.items():
                calls[m].append(int(e.get("llm_calls", 0)))
        mean_calls = {m: sum(v) / len(v) for m, v in calls.items()}
        costliest = max((m for m in mean_calls if m != ROUTER), key=lambda m: mean_calls[m])
        row = {"costliest": costliest, "costliest_calls": round(mean_calls[costliest], 2)}
        if ROUTER in mean_calls:
            row["router_calls"] = round(mean_calls[ROUTER], 2)
            row["calls_vs_costliest"] = (round(mean_calls[ROUTER] / mean_calls[costliest], 4)
                                         if mean_calls[costliest] else None)
        out[p]["all"] = row
    return dict(out)


def losses(entries: list[dict[str, Any]], parts: Iterable[str] = DOCUMENT_PARTS) -> list[dict[str, Any]]:
    """Questions of ``parts`` where a single method scored more than the router: the router's route
    (``routed_to``, ``tried`` with each run's confidence) and every single method's quality."""
    out = []
    for (p, part, qid), cell in sorted(_grid(entries).items()):
        if part not in parts or ROUTER not in cell:
            continue
        singles = {m: e["quality"] for m, e in cell.items() if m != ROUTER}
        if singles and max(singles.values()) > cell[ROUTER]["quality"]:
            r = cell[ROUTER]
            out.append({"pass": p, "part": part, "qid": qid, "router": r["quality"], "routed_to": r.get("routed_to"),
                        "tried": r.get("tried"), "singles": singles})
    return out


def main(argv: list[str] | None = None) -> int:
    """Print each run's table (and with ``--losses`` its lost questions) as JSON lines."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="tools/bench.py --dataset mixed JSON files")
    ap.add_argument("--router", default=None, help="take the router rows from this run instead (one base run)")
    ap.add_argument("--name", default=ROUTER, help="--router: the adapter name of its router rows")
    ap.add_argument("--losses", action="store_true", help="also list the questions the router lost")
    args = ap.parse_args(argv)
    if args.router and len(args.runs) != 1:
        ap.error("--router compares with one base run")
    for path in args.runs:
        entries = load_entries(path)
        if args.router:
            entries = with_router(entries, load_entries(args.router), args.name)
        print(json.dumps({"run": str(path), "table": part_table(entries)}))
        if args.losses:
            for lost in losses(entries):
                print(json.dumps(lost))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
