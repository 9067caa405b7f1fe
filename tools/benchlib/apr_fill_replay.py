"""Record AutoPrunedRetriever's sentence fill per question, then replay fill rules on the record.

``PYTHONPATH=tools python -m benchlib.apr_fill_replay record --dataset D --questions N --embeddings local --out FILE``
runs the default graph (as ``benchlib.apr_curve`` runs its points) and keeps, per question, what the
sentence ranking saw: the candidate passages and their sentences, each sentence's question cosine,
passage cosine, word share, lead flag and answer-typed share, vector search's passage order and the
fine stage's passage order. ``replay --record FILE [--variant V ...]`` re-ranks and re-fills from the
record (no KG, no model) and grades each variant as ``apr_curve`` grades a point: prompt tokens,
answer in prompt, recall@5, FCR. The default variant reproduces the graph's figures; gold labels
are read by the grading only, after the fill.
"""

from __future__ import annotations

import argparse
import json
import pickle
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np


def _record_question(book: Any, kg: Any, question: str, selected_f: list[str], cache: dict, vectors: dict,
                     passage_scores: Any, dense_k: int, weights: Any) -> dict[str, Any]:
    """The inputs the relevance ranking reads, for one question (the graph's own cached sentences)."""
    from langgraph_kgmem.embeddings.fast import block_cosines
    from langgraph_kgmem.graphs.autopruned.answer_typed import answer_bearing
    from langgraph_kgmem.graphs.autopruned.options import RELEVANCE_WEIGHTS
    from langgraph_kgmem.graphs.autopruned.sentences import passage_sentences, term_overlap
    from langgraph_kgmem.graphs.common import content_words, dense_passages

    from benchlib.api import ranked_passages

    chunks: list[str] = []
    fine_order: list[str] = []
    for rid in selected_f:
        for cid in book.runs[rid].chunks[:1]:
            if cid not in fine_order:
                fine_order.append(cid)
            if passage_sentences(kg, cache, cid) and cid not in chunks:
                chunks.append(cid)
    ids, passage_cos = passage_scores()
    dense_all = dense_passages(kg, question, 30, (ids, passage_cos))
    for cid in dense_all[:dense_k]:
        if passage_sentences(kg, cache, cid) and cid not in chunks:
            chunks.append(cid)
    titles = {c: ((n := kg.node(c)) is not None and n.attrs.get("title")) or "" for c in chunks}
    cands = [(c, i) for c in chunks for i in range(len(cache[c]))]
    q = kg.embed_query(question)
    raw = np.concatenate([vectors[c] for c in chunks]) @ q
    cos = block_cosines(kg.embeddings, q, raw, [False] * len(raw))
    of_passage = {c: float(v) for c, v in zip(ids, passage_cos.tolist()) if c in set(chunks)}
    lead = {c: (n := kg.node(c)) is not None and not n.attrs.get("index") for c in chunks}
    words = [content_words(cache[c][i][1]) for c, i in cands]
    w = {**RELEVANCE_WEIGHTS, **(weights or {})}
    pas = np.array([of_passage.get(c, 0.0) for c, _ in cands])
    terms = term_overlap(question, words)
    leadv = np.array([float(i == 0 and lead[c]) for c, i in cands])
    score = cos + w["passage"] * pas + w["terms"] * terms + w["lead"] * leadv
    order = list(dict.fromkeys(cands[j][0] for j in np.argsort(-score, kind="stable").tolist()))
    share = answer_bearing(question, order, titles, cache, cands)
    return {"question": question, "chunks": chunks, "titles": titles,
            "sentences": {c: [x for _, x in cache[c]] for c in chunks}, "cands": cands,
            "cos": np.asarray(cos, float), "passage": pas, "terms": terms, "lead": leadv,
            "answer": np.asarray(share, float), "dense": [c for c in dense_all],
            "fine": fine_order, "keys": {c: (ranked_passages(kg, [c]).keys or [""])[0] for c in chunks + dense_all}}


@contextmanager
def recording(recs: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """While open, every AutoPrunedRetriever sentence fill (``nodes.ranked_sentences``) appends its
    question's record to ``recs`` (what :func:`replay_one` reads, and the ``groups`` it showed)."""
    from langgraph_kgmem.graphs.autopruned import nodes
    from langgraph_kgmem.graphs.autopruned import sentences as sent

    original = sent.ranked_sentences

    def wrapped(book, kg_, question, selected_f, shown, cache, vectors, budget, rankings, bridges, dense_k,
                words, weights, passage_scores, *rest):
        out = original(book, kg_, question, selected_f, shown, cache, vectors, budget, rankings, bridges, dense_k,
                       words, weights, passage_scores, *rest)
        rec = _record_question(book, kg_, question, list(selected_f), cache, vectors, passage_scores, dense_k, weights)
        cover, dense_places, answer_cover, max_tokens, clip = (list(rest) + [0, 0, 0, None, None])[:5]
        rec["options"] = {"budget": budget, "bridges": bridges, "clip": clip, "rankings": tuple(rankings),
                          "weights": dict(weights or {}), "others": (cover, dense_places, answer_cover, max_tokens)}
        rec["groups"] = [{"chunk": g["chunk"], "place": g["place"], "sentences": g["sentences"]} for g in out]
        recs.append(rec)
        return out

    nodes.ranked_sentences = wrapped
    try:
        yield recs
    finally:
        nodes.ranked_sentences = original


def record(args: argparse.Namespace) -> None:
    """Run the default graph over the questions and pickle each question's fill record."""
    import shutil
    import tempfile

    from benchlib import corpus as corpora
    from benchlib.api import gold_passage_keys
    from benchlib.apr_curve import measure
    from benchlib.codebook_cache import synced_copy
    from benchlib.datasets import load_questions, pooled_passages

    from langgraph_kgmem.embeddings import get_embeddings

    emb = get_embeddings(args.embeddings)
    qs = load_questions(args.dataset, args.questions, None)
    built = corpora.build_corpus(pooled_passages(args.dataset, qs), emb, log=print)
    wd = Path(tempfile.mkdtemp(prefix="apr-fill-"))
    kg = synced_copy(built, wd, emb, log=print, phrase_facts="always")
    recs: list[dict[str, Any]] = []
    try:
        _, store = kg.persistence()
        with recording(recs):
            per = measure(kg, store, qs, settings={"default": {}}, hipporag2=False)
    finally:
        kg.close()
        shutil.rmtree(wd, ignore_errors=True)
    if len(recs) != len(qs) or any(r["question"] != q.question for r, q in zip(recs, qs)):
        raise RuntimeError("the fill was not recorded once per question, in order")
    for r, q, d, a in zip(recs, qs, per["dense-5"], per["default"]):
        r["gold"], r["gold_keys"] = q.answer, gold_passage_keys(q)
        r["dense_row"], r["graph_row"] = d, a
    Path(args.out).write_bytes(pickle.dumps(recs))
    print(f"recorded {len(recs)} questions to {args.out}")


# ---------------------------------------------------------------- replay

def replay_one(r: dict[str, Any], v: dict[str, Any]) -> tuple[list[dict[str, Any]], list[tuple[str, int]]]:
    """The groups (chunk, title, place, sentences) variant ``v`` shows for record ``r``, and its fill order.

    ``v`` (all optional): ``weights`` (relevance weights over the recorded ones), ``budget``,
    ``clip``, ``bridges``; ``extra(r, cands, base)`` adds to the fill score; ``refill(r, cands,
    filling, score)`` returns another fill order. The passage places stay the ranking without the
    answer term, as in ``ranked_sentences``. Records made with a sentence cover, dense places, an
    answer cover or a token cap, or a ranking other than ``("relevance",)``, are refused."""
    from langgraph_kgmem.graphs.autopruned.options import RELEVANCE_WEIGHTS
    from langgraph_kgmem.graphs.autopruned.sentences import clip_sentence, fill_budget

    opts = r["options"]
    if opts["others"] != (0, 0, 0, None) or opts["rankings"] != ("relevance",):
        raise ValueError(f"replay covers the relevance ranking without cover, places or caps; recorded {opts}")
    w = {**RELEVANCE_WEIGHTS, **opts["weights"], **v.get("weights", {})}
    cands = [tuple(x) for x in r["cands"]]
    base = r["cos"] + w["passage"] * r["passage"] + w["terms"] * r["terms"] + w["lead"] * r["lead"]
    ranked = [cands[j] for j in np.argsort(-base, kind="stable").tolist()]
    score = base + w["answer"] * r["answer"]
    if v.get("extra") is not None:
        score = score + v["extra"](r, cands, base)
    filling = [cands[j] for j in np.argsort(-score, kind="stable").tolist()] if w["answer"] or "extra" in v else ranked
    if v.get("refill") is not None:
        filling = v["refill"](r, cands, filling, score)
    best: dict[str, tuple[str, int]] = {}
    for x in ranked:
        best.setdefault(x[0], x)
    place = {c: n for n, c in enumerate(best)}
    clip = v.get("clip", opts["clip"])
    shown = {c: [(0, clip_sentence(x, clip) if clip else x) for x in r["sentences"][c]] for c in r["chunks"]}
    picked = fill_budget(filling, r["chunks"], r["titles"], shown, v.get("budget", opts["budget"]),
                         v.get("bridges", opts["bridges"]))
    groups = [{"chunk": c, "title": r["titles"][c], "place": place[c],
               "sentences": [shown[c][i][1] for i in sorted(picked[c])]}
              for c in sorted((c for c in r["chunks"] if c in picked), key=place.get)]
    return groups, filling


def grade(r: dict[str, Any], groups: list[dict[str, Any]]) -> dict[str, float]:
    """apr_curve's grading of the prompt these groups make."""
    from benchlib.apr_curve import _point

    from langgraph_kgmem.graphs.autopruned import answer_prompt as apr_prompt
    from langgraph_kgmem.graphs.autopruned.packing import sentence_block
    from langgraph_kgmem.graphs.autopruned.schemas import CHANNEL_SECTION

    packed = "\n".join([f"[{CHANNEL_SECTION['F']}]", sentence_block(groups)]) if groups else ""
    prompt = apr_prompt(r["question"], packed, "sentences")
    keys = list(dict.fromkeys(r["keys"][g["chunk"]] for g in groups if r["keys"][g["chunk"]]))
    texts = [" ".join(g["sentences"]) for g in groups]
    return _point(r["gold"], r["gold_keys"], texts, keys, prompt)


def summary(rows: list[dict[str, float]]) -> dict[str, float]:
    """Mean tokens / AIP / R@5 / FCR."""
    return {k: round(float(np.mean([x[k] for x in rows])), 3) for k in ("tokens", "answer_in_prompt", "recall@5", "fcr")}


def load(path: str) -> list[dict[str, Any]]:
    """The pickled record."""
    return pickle.loads(Path(path).read_bytes())


def main(argv: list[str] | None = None) -> int:
    """``record`` or ``replay`` (the default variant only; other variants are built in Python)."""
    ap = argparse.ArgumentParser(prog="python -m benchlib.apr_fill_replay")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--dataset", required=True)
    rec.add_argument("--questions", type=int, default=100)
    rec.add_argument("--embeddings", default="local")
    rec.add_argument("--out", required=True)
    rep = sub.add_parser("replay")
    rep.add_argument("--record", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "record":
        record(args)
        return 0
    recs = load(args.record)
    rows = [grade(r, replay_one(r, {})[0]) for r in recs]
    print(json.dumps({"replay": summary(rows), "graph": summary([r["graph_row"] for r in recs]),
                      "dense": summary([r["dense_row"] for r in recs])}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
