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
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

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
    from benchlib.apr_curve import grade_point

    from langgraph_kgmem.graphs.autopruned import answer_prompt as apr_prompt
    from langgraph_kgmem.graphs.autopruned.packing import sentence_block
    from langgraph_kgmem.graphs.autopruned.schemas import CHANNEL_SECTION

    packed = "\n".join([f"[{CHANNEL_SECTION['F']}]", sentence_block(groups)]) if groups else ""
    prompt = apr_prompt(r["question"], packed, "sentences")
    keys = list(dict.fromkeys(r["keys"][g["chunk"]] for g in groups if r["keys"][g["chunk"]]))
    texts = [" ".join(g["sentences"]) for g in groups]
    return grade_point(r["gold"], r["gold_keys"], texts, keys, prompt)


def summary(rows: list[dict[str, float]]) -> dict[str, float]:
    """Mean tokens / AIP / R@5 / FCR."""
    return {k: round(float(np.mean([x[k] for x in rows])), 3) for k in ("tokens", "answer_in_prompt", "recall@5", "fcr")}


def load(path: str) -> list[dict[str, Any]]:
    """The pickled record."""
    return pickle.loads(Path(path).read_bytes())


# ---------------------------------------------------------------- named variants (gold-free fill rules)

_PAREN = re.compile(r"\s*\([^()\d]*\)")   # a parenthesis without a digit: pronunciations, translations


def _greedy(penalty: Callable[[dict[str, Any], tuple[str, int], dict[str, Any]], float]) -> Callable[..., list]:
    """A fill order re-ranked greedily: each next sentence the best by fill score less ``penalty``
    given what the order already holds (its passages' counts and content words)."""
    from langgraph_kgmem.graphs.common import content_words

    def refill(r: dict[str, Any], cands: list, filling: list, score: np.ndarray) -> list:
        of = {c: float(score[j]) for j, c in enumerate(cands)}
        left, out = list(filling), []
        state: dict[str, Any] = {"passages": {}, "words": set(), "question": content_words(r["question"])}
        while left:
            nxt = max(left, key=lambda x: of[x] - penalty(r, x, state))
            left.remove(nxt)
            out.append(nxt)
            state["passages"][nxt[0]] = state["passages"].get(nxt[0], 0) + 1
            state["words"] |= content_words(r["sentences"][nxt[0]][nxt[1]])
        return out
    return refill


def _novelty(lam: float) -> Callable[..., float]:
    from langgraph_kgmem.graphs.common import content_words

    def pen(r: dict[str, Any], x: tuple[str, int], st: dict[str, Any]) -> float:
        words = content_words(r["sentences"][x[0]][x[1]])
        return lam * (1 - len(words - st["question"] - st["words"]) / len(words)) if words else lam
    return pen


def _covered(lam: float) -> Callable[..., float]:
    from langgraph_kgmem.graphs.common import content_words

    def pen(r: dict[str, Any], x: tuple[str, int], st: dict[str, Any]) -> float:
        held = content_words(r["sentences"][x[0]][x[1]]) & st["question"]
        return lam * len(held & st["words"]) / max(len(st["question"]), 1)
    return pen


def _answer_share(maxc: int, focus: bool) -> Callable[..., np.ndarray]:
    """The answer term recomputed with ``maxc`` candidates (the answer step keeps 8) and the answer
    step's own ``focus`` rules, over the passages in the ranking's order."""
    from langgraph_kgmem.graphs import answering
    from langgraph_kgmem.graphs.autopruned.answer_typed import UNTYPED

    def extra(r: dict[str, Any], cands: list, base: np.ndarray) -> np.ndarray:
        out = np.zeros(len(cands))
        kind = answering.answer_type(r["question"])
        if kind.kind in UNTYPED:
            return out
        order = list(dict.fromkeys(cands[j][0] for j in np.argsort(-base, kind="stable").tolist()))
        ev = [{"id": c, "title": r["titles"].get(c, ""), "text": " ".join(r["sentences"][c])} for c in order]
        old, answering.MAX_CANDIDATES = answering.MAX_CANDIDATES, maxc
        try:
            found = answering.candidates(r["question"], ev, qtype=kind, focus=focus)
        finally:
            answering.MAX_CANDIDATES = old
        top = found[0].score if found else 0.0
        pats = [(re.compile(r"(?<!\w)" + re.escape(f.text) + r"(?!\w)", re.I), f.score / top)
                for f in found if top > 0 and f.text.strip()]
        for j, (c, i) in enumerate(cands):
            out[j] = max((sh for pat, sh in pats if pat.search(r["sentences"][c][i])), default=0.0)
        return out
    return extra


def variant(name: str) -> dict[str, Any]:
    """A named fill rule for :func:`replay_one`: ``default``; ``b<B>`` budget B; ``lead<W>`` the
    lead weight W; ``ans<M>[f]-w<W>`` the answer term from M candidates (``f``: the answer step's
    focus rules) at weight W; ``pdecay<D>`` D off a sentence per sentence of its passage already in
    the order; ``novel<L>`` L × the share of its content words the question and the order already
    hold; ``qcover<L>`` L × the question words it holds that the order already holds, as a share of
    the question's; ``nobridge``; ``paren`` parentheses without a digit dropped from what is shown."""
    num = r"(\d+(?:\.\d+)?)"
    if name == "default":
        return {}
    if name == "nobridge":
        return {"bridges": False}
    if name == "paren":
        return {"pre": lambda r: {**r, "sentences": {c: [_drop_parens(x) for x in xs] for c, xs in r["sentences"].items()}}}
    for pattern, make in ((rf"b{num}", lambda v: {"budget": int(float(v))}),
                          (rf"lead{num}", lambda v: {"weights": {"lead": float(v)}}),
                          (rf"pdecay{num}", lambda v: {"refill": _greedy(lambda r, x, st: float(v) * st["passages"].get(x[0], 0))}),
                          (rf"novel{num}", lambda v: {"refill": _greedy(_novelty(float(v)))}),
                          (rf"qcover{num}", lambda v: {"refill": _greedy(_covered(float(v)))})):
        if (m := re.fullmatch(pattern, name)):
            return make(m.group(1))
    if (m := re.fullmatch(rf"ans(\d+)(f?)-w{num}", name)):
        share, w = _answer_share(int(m.group(1)), bool(m.group(2))), float(m.group(3))
        return {"weights": {"answer": 0.0}, "extra": lambda r, cands, base: w * share(r, cands, base)}
    raise ValueError(f"unknown fill variant {name!r}")


def _drop_parens(text: str) -> str:
    prev = None
    while prev != text:
        prev, text = text, _PAREN.sub("", text)
    return text


def replay(recs: list[dict[str, Any]], name: str) -> dict[str, float]:
    """A named variant's mean tokens / AIP / recall@5 / FCR over the records."""
    v = variant(name)
    return summary([grade(r, replay_one(v["pre"](r) if "pre" in v else r, v)[0]) for r in recs])


def main(argv: list[str] | None = None) -> int:
    """``record`` a data set, or ``replay`` named variants on a record."""
    ap = argparse.ArgumentParser(prog="python -m benchlib.apr_fill_replay")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--dataset", required=True)
    rec.add_argument("--questions", type=int, default=100)
    rec.add_argument("--embeddings", default="local")
    rec.add_argument("--out", required=True)
    rep = sub.add_parser("replay")
    rep.add_argument("--record", required=True)
    rep.add_argument("--variants", default="default", help="comma-separated names (see variant())")
    args = ap.parse_args(argv)
    if args.cmd == "record":
        record(args)
        return 0
    recs = load(args.record)
    out = {"dense-5": summary([r["dense_row"] for r in recs]), "graph": summary([r["graph_row"] for r in recs])}
    out.update({n: replay(recs, n) for n in args.variants.split(",")})
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
