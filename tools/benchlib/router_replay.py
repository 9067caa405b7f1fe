"""What-ifs for the router's document questions, replayed from a mixed run's per-question entries:

- ``--fuse M`` (the default, M = autopruned): on every question that does not read as a chain, the
  router's ranking interleaved with another method's;
- ``--cover``: the router's ranking run through its coverage step
  (:func:`langgraph_kgmem.graphs.router.cover.cover_ranking`; the rule this replay chose, now in the
  router) over the rankings of the runs it made, read from the single methods' rows (ten places each,
  as the rows keep them; the router itself reads every place a run reports).

    cd tools && python -m benchlib.router_replay RUN.json --seed S [--questions 40] [--fuse autopruned]
    cd tools && python -m benchlib.router_replay RUN.json --seed S --cover [--keep 3] [--top 5]

Give ``--cover`` a run taken before the router had its coverage step (or its rows' ``uncovered``
ranking is what is replayed: see :func:`router_ranking`).

The question signal (:func:`is_chain`) tells a MuSiQue-type composed chain ("the country where the
composer of X was a citizen", "Damerjog's country") from a HotpotQA-type bridge or comparison
question by a relation noun that opens a nested description. It is the candidate measured in
docs/methods/router.md and is not one of the router's rules: on the held-out seeds it moved points
from MuSiQue to HotpotQA rather than meeting the goal on both.

Pass 1 is exact: under the oracle decider each method's dice are seeded by its name, the question
and the pass, and offline every method is deterministic, so a single method's own run is what the
routed run would have been. Pass 2 is approximate: the router's pass-2 runs followed the verdicts
its pass-1 answers got, which the replayed answers might not have got.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from typing import Any, Callable, Iterable, Mapping

from benchlib.metrics import recall_at_k
from benchlib.router_report import DOCUMENT_PARTS, ROUTER, load_entries

from langgraph_kgmem.ranking import interleave

TOP = 5
# relation nouns that open a nested description in a composed (MuSiQue-type) question; chosen on
# seeds 0 and 1 of the mixed set (19 of 20 HotpotQA questions not matched, 20 of 20 MuSiQue matched)
CHAIN_NOUNS = ("country state city continent birthplace county province nation spouse husband wife author composer "
               "performer creator producer director founder owner predecessor successor team").split()
_NOUNS = "|".join(CHAIN_NOUNS)
CHAIN = re.compile(rf"\b(?:{_NOUNS})\s+(?:where|of|containing|with|that|in which|which)\b|\w+'s\s+(?:{_NOUNS})\b", re.I)


def is_chain(question: str) -> bool:
    """Whether ``question`` reads as a composed chain: a relation noun followed by a clause or "of"
    ("the state where ...", "the birthplace of ..."), or a possessive one ("Damerjog's country")."""
    return bool(CHAIN.search(question))


def fused(first: Mapping[str, Any], second: Mapping[str, Any], k: int = TOP) -> float:
    """Recall@``k`` of ``first``'s ranking interleaved with ``second``'s, ``first`` opening each turn."""
    merged = [doc for doc, _ in interleave([first["retrieved"], second["retrieved"]])]
    return recall_at_k(merged, first["gold"], k)


def question_texts(n: int, seed: int | None) -> dict[str, str]:
    """The document questions of the mixed set's sample (``--questions n --seed seed``), by entry id."""
    from benchlib.datasets import load_questions
    from benchlib.mixed import PARTS, SOURCES

    per = max(1, n // len(PARTS))
    return {f"{part}:{q.id}": q.question for part in DOCUMENT_PARTS for q in load_questions(SOURCES[part], per, seed)}


def document_grid(entries: Iterable[dict[str, Any]]) -> dict[tuple[int, str, str], dict[str, dict[str, Any]]]:
    """The document parts' entries by (pass, part, question id), then by method."""
    grid: dict[tuple[int, str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for e in entries:
        if e["part"] in DOCUMENT_PARTS:
            grid[(e["pass"], e["part"], e["qid"])][e["method"]] = e
    return grid


def replay(entries: Iterable[dict[str, Any]], texts: Mapping[str, str], fuse: str = "autopruned",
           chain: Callable[[str], bool] = is_chain) -> dict[int, dict[str, dict[str, Any]]]:
    """Per pass and document part: ``questions``, ``chain`` (how many read as a chain), the best single
    method, ``router_minus_best`` as run and ``fused_minus_best`` with the what-if, and each side's
    gap to the oracle router (the best single method per question)."""
    grid = document_grid(entries)
    out: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for p, part in sorted({(k[0], k[1]) for k in grid}):
        cells = {k[2]: v for k, v in grid.items() if k[:2] == (p, part) and ROUTER in v and fuse in v}
        if not cells:
            continue
        singles = sorted({m for c in cells.values() for m in c if m != ROUTER})
        n = len(cells)
        mean = {m: sum(c[m]["quality"] for c in cells.values() if m in c) / n for m in singles}
        best = max(singles, key=lambda m: mean[m])
        oracle = sum(max(c[m]["quality"] for m in singles if m in c) for c in cells.values()) / n
        router = sum(c[ROUTER]["quality"] for c in cells.values()) / n
        what_if = sum(c[ROUTER]["quality"] if chain(texts[q]) else fused(c[ROUTER], c[fuse])
                      for q, c in cells.items()) / n
        out[p][part] = {"questions": n, "chain": sum(chain(texts[q]) for q in cells), "best_single": best,
                        "router_minus_best": round(router - mean[best], 4),
                        "fused_minus_best": round(what_if - mean[best], 4),
                        "router_minus_oracle": round(router - oracle, 4), "fused_minus_oracle": round(what_if - oracle, 4)}
    return dict(out)


def passage_texts(n: int, seed: int | None) -> dict[str, str]:
    """Every passage of the mixed sample's document questions by document id: title and text, as the
    router reads a passage (its title first)."""
    from benchlib.datasets import load_questions
    from benchlib.mixed import SOURCES

    from langgraph_kgmem.kg.types import document_id

    per = max(1, n // 4)
    out: dict[str, str] = {}
    for part in DOCUMENT_PARTS:
        for q in load_questions(SOURCES[part], per, seed):
            for p in q.passages:
                out[p.get("id") or document_id(p["text"], p["title"])] = f"{p['title']}. {p['text']}"
    return out


def router_ranking(entry: Mapping[str, Any]) -> list[str]:
    """The routed method's own ranking of a router row: ``uncovered`` where the row has it (a run whose
    router already completed its ranking), else ``retrieved``."""
    return list(entry.get("uncovered", entry["retrieved"]))


def cover_replay(entries: Iterable[dict[str, Any]], texts: Mapping[str, str], passages: Mapping[str, str], *,
                 keep: int, top: int) -> dict[int, dict[str, dict[str, Any]]]:
    """Per pass and document part: the router minus the best single method as run, and
    ``covered_minus_best`` with the coverage step over the rankings of the runs the router made (the
    routed method's, and any other it tried, from that method's own row)."""
    from langgraph_kgmem.graphs.router.cover import cover_ranking

    grid = document_grid(entries)
    out: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for p, part in sorted({(k[0], k[1]) for k in grid}):
        cells = {k[2]: v for k, v in grid.items() if k[:2] == (p, part) and ROUTER in v}
        singles = sorted({m for c in cells.values() for m in c if m != ROUTER})
        n = len(cells)
        mean = {m: sum(c[m]["quality"] for c in cells.values() if m in c) / n for m in singles}
        best = max(singles, key=lambda m: mean[m])
        covered = 0.0
        for q, c in cells.items():
            r = c[ROUTER]
            others = [c[m]["retrieved"] for m, _ in r.get("tried") or [] if m != r.get("routed_to") and m in c]
            ranked = cover_ranking(texts[q], router_ranking(r), others, lambda d: passages.get(d, ""), keep=keep, top=top)
            covered += recall_at_k([x["id"] for x in ranked], r["gold"], TOP)
        plain = sum(recall_at_k(router_ranking(c[ROUTER]), c[ROUTER]["gold"], TOP) for c in cells.values()) / n
        out[p][part] = {"questions": n, "best_single": best, "router_minus_best": round(plain - mean[best], 4),
                        "covered_minus_best": round(covered / n - mean[best], 4)}
    return dict(out)


def main(argv: list[str] | None = None) -> int:
    """Print the replay of each run as one JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a tools/bench.py --dataset mixed JSON file with the router and --fuse's rows")
    ap.add_argument("--seed", type=int, required=True, help="the run's --seed (the question texts are read again)")
    ap.add_argument("--questions", type=int, default=40, help="the run's --questions")
    ap.add_argument("--fuse", default="autopruned", help="the method whose ranking is interleaved after the router's")
    ap.add_argument("--cover", action="store_true", help="replay the router's coverage step instead")
    ap.add_argument("--keep", type=int, default=3, help="--cover: places that stay the routed method's")
    ap.add_argument("--top", type=int, default=5, help="--cover: places the coverage step completes")
    args = ap.parse_args(argv)
    texts = question_texts(args.questions, args.seed)
    if args.cover:
        table = cover_replay(load_entries(args.run), texts, passage_texts(args.questions, args.seed),
                             keep=args.keep, top=args.top)
        print(json.dumps({"run": args.run, "cover": {"keep": args.keep, "top": args.top}, "replay": table}))
        return 0
    table = replay(load_entries(args.run), texts, args.fuse)
    print(json.dumps({"run": args.run, "fuse": args.fuse, "replay": table}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
