"""``python -m benchlib.feedback_reach``: what first-half feedback touched of the second half.

Feedback can move a ranking only through the items it touched. On the split that
``tools/bench.py --feedback-split`` uses (one pooled corpus, the first half's runs marked by the
gold-playing user, the second half asked after), this module counts, per method, how many of the
second half's gold passages that the cold ranking misses (outside its top 5: the only ones whose
rise raises R@5) any first-half mark reached, by each channel a mechanism could read:

- ``passage``: the missed gold passage was itself marked (useful or wrong) in a first-half run;
- ``entity``: it shares an entity with a passage marked useful (credit propagated from a marked
  passage to its entities' other passages);
- ``edge``: one of its entities is a relation neighbour of an entity of a useful passage (one
  hop further);
- ``relation``: it states a relation type (an edge text between its entities that its document
  contributed) that a useful passage states (relation-type credit);

and the R@5 each channel could give at most: every reached missed gold passage put into the top
5, nothing else moved (``ceiling_*``; a bound no method can reach honestly;
``ceiling_*_in_depth`` counts only those the cold ranking holds within ``DEPTH``, all a
re-ranking prior could lift). ``gold_marked_useful`` / ``gold_marked_wrong``: the second half's
gold passages, missed or not, that a first-half run marked useful / wrong. ``reach_ratio_*`` is
the share of reached passages among the missed gold ones over the same share among the
non-gold passages of the cold ranking's depth: below 1, crediting that channel raises more
wrong passages than right ones.

``propagate`` then tries the entity channel as a ranking would: each second-half ranking (the
cold order, ``DEPTH`` deep) is re-scored as 1/(60 + rank) + w · (share of a passage's entities
that are entities of a passage marked useful for a first-half question within cosine ``gate`` of
it) − w · (the same for passages marked wrong, when ``penalise``). Its rows name each constant;
choose them on one set and read the others as held out.
"""

from __future__ import annotations

if __name__ == "__main__":   # run as a script: make `benchlib` and `langgraph_kgmem` importable
    import sys
    from pathlib import Path as _Path

    sys.path[:0] = [str(_Path(__file__).resolve().parents[1]), str(_Path(__file__).resolve().parents[2])]

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from langgraph.store.memory import InMemoryStore

from benchlib.api import BenchQuestion, gold_chunk_ids, gold_passage_keys
from benchlib.feedback_bound import METHODS, on_split, recall, sets_main
from benchlib.feedback_split import K, marks, ranked_ids, target_app

from langgraph_kgmem.graphs.catrag import kg_index, prepare_catrag_kg

DEPTH = 50
RRF = 60
WEIGHTS = (0.001, 0.003, 0.01, 0.03)
GATES = (None, 0.3, 0.5)


@dataclass
class Taught:
    """What the first half's feedback touched: per first-half question, the passages marked
    useful and wrong, and the question's embedding."""

    useful: list[set[str]] = field(default_factory=list)
    wrong: list[set[str]] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)

    def marked(self) -> set[str]:
        """Every passage any first-half run marked."""
        return set().union(*self.useful, *self.wrong)


def teach_marks(kg: Any, ents: "Entities", app: Any, first: Sequence[BenchQuestion],
                vectors: Sequence[np.ndarray]) -> Taught:
    """Run the first half cold and record the gold-playing user's marks (as ``teach`` gives them),
    as passages (document keys)."""
    out = Taught()
    for q, v in zip(first, vectors):
        evidence = app.invoke({"question": q.question}, context={"user_id": "u"}).get("evidence", [])
        useful, wrong = marks(kg, evidence, gold_chunk_ids(kg, q))
        items = {e["id"]: [e["id"], *e.get("chunks", [])] for e in evidence}
        out.useful.append(ents.docs([p for i in useful for p in items[i]]))
        out.wrong.append(ents.docs([p for i in wrong for p in items[i]]))
        out.vectors.append(v)
    return out


class Entities:
    """Passages as documents (a chunk and its anchor are one passage, as R@5 counts them) and their
    entity neighbourhoods, read once each."""

    def __init__(self, kg: Any) -> None:
        self.kg, self._of, self._near, self._rel = kg, {}, {}, {}
        self.nodes: dict[str, list[str]] = {}
        for kind in ("chunk", "anchor"):
            for node in kg.nodes(kind):
                if node.attrs.get("doc_id"):
                    self.nodes.setdefault(str(node.attrs["doc_id"]), []).append(node.id)

    def doc(self, nid: str) -> str | None:
        """The passage (document key) a chunk or anchor id belongs to."""
        node = self.kg.node(nid)
        return str(node.attrs["doc_id"]) if node is not None and node.attrs.get("doc_id") else None

    def docs(self, ids: Sequence[str]) -> set[str]:
        """The passages of ``ids``."""
        return {d for i in ids if (d := self.doc(i)) is not None}

    def of(self, doc: str) -> set[str]:
        """The entities a passage mentions (through any of its chunks and anchors)."""
        if doc not in self._of:
            self._of[doc] = {nb.id for nid in self.nodes.get(doc, []) for _, nb in self.kg.neighbors(nid)
                             if nb.kind == "entity"}
        return self._of[doc]

    def relations(self, doc: str) -> set[str]:
        """The relation types (edge texts, lower-cased) the passage states: relation edges between
        its entities that the passage's document contributed."""
        if doc not in self._rel:
            mine = self.of(doc)
            self._rel[doc] = {e.text.lower() for ent in mine for e, nb in self.kg.neighbors(ent)
                              if nb.kind == "entity" and nb.id in mine and e.text
                              and doc in self.kg.sources_of(e.id)}
        return self._rel[doc]

    def near(self, entity: str) -> set[str]:
        """The entities one relation edge away from ``entity``."""
        if entity not in self._near:
            self._near[entity] = {nb.id for _, nb in self.kg.neighbors(entity) if nb.kind == "entity"}
        return self._near[entity]


def keys(ents: Entities, ranked: Sequence[str]) -> list[str]:
    """A ranking's passages in order, a passage once (its first unit's place)."""
    return list(dict.fromkeys(d for i in ranked if (d := ents.doc(i)) is not None))


def reach(taught: Taught, second: Sequence[BenchQuestion], cold: Sequence[Sequence[str]],
          ents: Entities) -> dict[str, Any]:
    """The reach counts and ceilings of the module docstring for one method's cold second half
    (``taught`` and ``cold`` as passages: document keys)."""
    useful = set().union(*taught.useful) if taught.useful else set()
    useful_entities = {e for p in useful for e in ents.of(p)}
    edge_entities = useful_entities | {n for e in useful_entities for n in ents.near(e)}
    useful_relations = {r for p in useful for r in ents.relations(p)}
    marked = taught.marked()
    channel = {"passage": lambda p: p in marked,
               "entity": lambda p: bool(ents.of(p) & useful_entities),
               "edge": lambda p: bool(ents.of(p) & edge_entities),
               "relation": lambda p: bool(ents.relations(p) & useful_relations)}
    n = max(1, len(second))
    golds = [set(gold_passage_keys(q)) for q in second]
    tops = [set(r[:K]) for r in cold]
    row: dict[str, Any] = {"recall@5_cold": round(100 * sum(len(g & t) / len(g) for g, t in zip(golds, tops)) / n, 2)}
    missed = [(i, p) for i, g in enumerate(golds) for p in sorted(g - tops[i])]
    non_gold = [p for g, r in zip(golds, cold) for p in r if p not in g]
    row["gold_passages"] = sum(len(g) for g in golds)
    every_gold = set().union(*golds) if golds else set()
    wrong = set().union(*taught.wrong) if taught.wrong else set()
    row["gold_marked_useful"], row["gold_marked_wrong"] = len(every_gold & useful), len(every_gold & wrong)
    row["marked_useful"], row["marked_wrong"] = len(useful), len(wrong)
    row["gold_missed"] = len(missed)
    row["gold_missed_outside_depth"] = sum(p not in cold[i] for i, p in missed)
    for name, hit in channel.items():
        reached = {(i, p) for i, p in missed if hit(p)}
        gain = sum(sum((i, p) in reached for p in g) / len(g) for i, g in enumerate(golds))
        row[f"reached_{name}"] = len(reached)
        row[f"ceiling_{name}"] = round(100 * gain / n, 2)
        inside = sum(sum((i, p) in reached and p in cold[i] for p in g) / len(g) for i, g in enumerate(golds))
        row[f"ceiling_{name}_in_depth"] = round(100 * inside / n, 2)
        gold_share = len(reached) / max(1, len(missed))
        other_share = sum(hit(p) for p in non_gold) / max(1, len(non_gold))
        row[f"reach_ratio_{name}"] = round(gold_share / other_share, 2) if other_share else None
    return row


def propagate(taught: Taught, second: Sequence[BenchQuestion], cold: Sequence[Sequence[str]],
              vectors: Sequence[np.ndarray], ents: Entities, *, weight: float, gate: float | None,
              penalise: bool) -> float:
    """Second-half R@5 with entity credit propagated from the first half's marks (docstring);
    ``cold`` as passages (document keys)."""
    total = 0.0
    for q, ranked, v in zip(second, cold, vectors):
        near = [j for j, u in enumerate(taught.vectors) if gate is None or float(u @ v) >= gate]
        good = {e for j in near for p in taught.useful[j] for e in ents.of(p)}
        bad = {e for j in near for p in taught.wrong[j] for e in ents.of(p)} if penalise else set()

        def score(rank: int, p: str) -> float:
            mine = ents.of(p)
            share = (len(mine & good) - len(mine & bad)) / max(1, len(mine))
            return 1 / (RRF + rank) + weight * share

        order = sorted(range(len(ranked)), key=lambda r: -score(r, ranked[r]))
        gold = set(gold_passage_keys(q))
        total += len(gold & {ranked[r] for r in order[:K]}) / len(gold)
    return round(100 * total / max(1, len(second)), 2)


def unit(vectors: Sequence[Sequence[float]]) -> list[np.ndarray]:
    """Rows as unit vectors (cosine by dot product)."""
    out = []
    for v in vectors:
        a = np.asarray(v, dtype=float)
        out.append(a / (np.linalg.norm(a) or 1.0))
    return out


def reach_rows(kg: Any, emb: Any, dataset: str, first: Sequence[BenchQuestion], second: Sequence[BenchQuestion],
               methods: Sequence[str] = METHODS) -> list[dict[str, Any]]:
    """One row per method: reach and ceilings, and R@5 under every ``propagate`` setting."""
    prepare_catrag_kg(kg)
    kg_index(kg)
    ents = Entities(kg)
    qv1 = unit(emb.embed_documents([q.question for q in first]))
    qv2 = unit(emb.embed_documents([q.question for q in second]))
    rows = []
    for method in methods:
        opts = {"calibration": False}
        taught = teach_marks(kg, ents, target_app(kg, method, InMemoryStore(), experience=False, options=opts),
                             first, qv1)
        deep = target_app(kg, method, InMemoryStore(), experience=False, options={**opts, "rank_depth": DEPTH})
        runs = [deep.invoke({"question": q.question}, context={"user_id": "u"}) for q in second]
        check = [recall(kg, ranked_ids(out), q) for out, q in zip(runs, second)]
        cold = [keys(ents, ranked_ids(out)) for out in runs]
        row = {"dataset": dataset, "method": method, "second_half": len(second), **reach(taught, second, cold, ents)}
        row["recall@5_check"] = round(100 * sum(check) / max(1, len(second)), 2)
        row["propagate"] = {f"w={w} gate={g} penalise={p}": propagate(taught, second, cold, qv2, ents, weight=w,
                                                                     gate=g, penalise=p)
                            for w in WEIGHTS for g in GATES for p in (False, True)}
        rows.append(row)
    return rows


def run(dataset: str, n: int | None, embeddings: str, workdir: Path, methods: Sequence[str] = METHODS) -> list[dict[str, Any]]:
    """The rows of one data set, on the split and pooled corpus ``--feedback-split`` uses."""
    return on_split(dataset, n, embeddings, workdir,
                    lambda kg, emb, first, second: reach_rows(kg, emb, dataset, first, second, methods))


def main(argv: Sequence[str] | None = None) -> int:
    """Print one JSON row per data set and method."""
    return sets_main(argv, __doc__.split("\n\n")[0], "feedback-reach-", run)


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["DEPTH", "GATES", "METHODS", "RRF", "WEIGHTS", "Entities", "Taught", "keys", "main", "propagate",
           "reach", "reach_rows", "run", "teach_marks", "unit"]
