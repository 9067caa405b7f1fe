"""Where AutoPrunedRetriever's ranking loses to dense retrieval, and where its prompt tokens go.

``PYTHONPATH=tools python -m benchlib.apr_diagnose --dataset hotpotqa-train100 [--questions N]
[--embeddings local] [--show triples|sentences] [--json FILE]``

One pooled KG (the bench's cached corpus), the codebook synced as the bench adapter syncs it
(``phrase_facts="always"``), the graph run offline with ``memorize=False`` (no question sees
another's stored runs). Per question it compares the first 5 passages of the method's ranking (its
evidence, as the bench grades it) with vector search's top 5 and gives every gold passage one of
these fates:

- ``both`` / ``neither``: in both top 5s / in neither;
- ``gained``: in the method's top 5 only (the fine stage — coarse entity/relation search, then
  line similarity — brought it);
- ``lost: no run``: in dense's top 5, but the codebook holds no fact run of the passage (the
  extractor and phrase parser gave it no triple, or consolidation dropped them all);
- ``lost: not selected``: the passage's runs were ranked but none survived the ``unique`` selection
  (a near-duplicate of a run of another passage was kept instead) or the packing budget;
- ``lost: fusion``: selected, but placed after the 5th passage: the fine stage's picks took the
  turns it would have had (dense-led fusion gives every other place to the fine ranking);
- ``lost: sentences``: ``show="sentences"`` only: its runs were selected, but no sentence of it fit
  the sentence budget, so it is not in the prompt.

Token split of the prompt: the instruction text, the question, and the packed block by part — for
the codebook encodings the entity and relation lists, the edge lines and the channel id lists; for
sentences the passage titles and the sentences. ``repeat_share``: the share of the packed edge lines
that repeat an entity pair another shown line already holds. Gold labels are read only here, after
the method has run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from benchlib import corpus as corpora
from benchlib.codebook_cache import synced_copy
from benchlib.api import gold_passage_keys, ranked_passages
from benchlib.datasets import load_questions, pooled_passages
from benchlib.metrics import markdown_table
from benchlib.passage_rag import passage_table, top_indices

from langgraph_kgmem.graphs.autopruned import answer_prompt as apr_prompt
from langgraph_kgmem.graphs.autopruned import create_autopruned_graph, sync_codebook
from langgraph_kgmem.graphs.autopruned.codebook import Codebook
from langgraph_kgmem.llm import count_tokens

FATES = ("both", "gained", "lost: no run", "lost: not selected", "lost: fusion", "lost: sentences", "neither")


def _key_of(kg: Any, cid: str) -> str | None:
    keys = ranked_passages(kg, [cid]).keys
    return keys[0] if keys else None


def gold_fates(kg: Any, book: Codebook, out: dict[str, Any], dense5: list[str], gold: list[str]) -> list[str]:
    """Each gold passage's fate (see the module docstring) for one question's output ``out``."""
    ev_chunks = [c for e in out.get("evidence", []) for c in e.get("chunks", [])]
    mine = ranked_passages(kg, ev_chunks).keys
    top = set(mine[:5])
    with_runs = {_key_of(kg, c) for r in book.runs.values() if r.channel == "F" for c in r.chunks[:1]}
    selected = {_key_of(kg, c) for r in out.get("selected_runs", {}).get("F", []) if r in book.runs
                for c in book.runs[r].chunks[:1]}
    fates = []
    for g in dict.fromkeys(gold):
        if g in top:
            fates.append("both" if g in dense5 else "gained")
        elif g not in dense5:
            fates.append("neither")
        elif g not in with_runs:
            fates.append("lost: no run")
        elif g not in selected:
            fates.append("lost: not selected")
        elif g not in mine:
            fates.append("lost: sentences")
        else:
            fates.append("lost: fusion")
    return fates


def token_split(question: str, out: dict[str, Any]) -> dict[str, int]:
    """The would-be answer prompt's tokens by part (see the module docstring)."""
    packed = out.get("packed_prompt", "")
    enc = out.get("encoding", "words")
    prompt = count_tokens(apr_prompt(question, packed, enc))
    parts: Counter[str] = Counter()
    section = None
    pairs: set[tuple[str, str]] = set()
    lines = repeats = 0
    for line in packed.splitlines():
        if line.startswith("[") and line.split("]")[0][1:] in ("entities", "relations", "edges", "facts",
                                                              "known answers", "earlier questions"):
            section = line.split("]")[0][1:]
            rest = line.split("]", 1)[1].strip()
            parts["id lists" if rest else "headers"] += count_tokens(line)
            continue
        if enc == "sentences" and section == "facts":
            title, _, body = line.partition("] ")
            parts["titles"] += count_tokens(title + "]")
            parts["sentences"] += count_tokens(body)
            continue
        part = {"entities": "entity list", "relations": "relation list"}.get(section or "", "edge lines")
        parts[part] += count_tokens(line)
        if part == "edge lines":
            bits = [b.strip() for b in (line.split("|") if "|" in line else line.split())]
            if len(bits) == 3:
                lines += 1
                pair = (bits[0], bits[2])
                repeats += pair in pairs
                pairs.add(pair)
    block = count_tokens(packed)
    return {"prompt": prompt, "question": count_tokens(question), "block": block,
            "instructions": prompt - block - count_tokens(question), **parts,
            "edge_lines": lines, "repeat_lines": repeats}


def diagnose(kg: Any, store: Any, questions: list[Any], options: dict[str, Any], log: Any = print) -> dict[str, Any]:
    """Per question: dense's top 5, the method's top 5, each gold passage's fate and the token split."""
    table = passage_table(kg)
    mat = kg.embed_texts(table.texts)
    mat = mat / np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-9)
    sync_codebook(kg, store, phrase_facts="always")
    app = create_autopruned_graph(kg, model="offline", store=store, extraction="offline", phrase_facts="always",
                                  memorize=False, consolidate=False, **options).compile(store=store)
    book = Codebook.load(store, kg.name)   # memorize=False: the codebook the runs read is this one
    rows = []
    for i, q in enumerate(questions):
        order = top_indices(mat @ kg.embed_query(q.question), 5)
        dense5 = ranked_passages(kg, [table.ids[j] for j in order]).keys[:5]
        out = app.invoke({"question": q.question})
        gold = gold_passage_keys(q)
        mine = ranked_passages(kg, [c for e in out.get("evidence", []) for c in e.get("chunks", [])]).keys[:5]
        rows.append({"qid": q.id, "gold": gold, "dense5": dense5, "mine5": mine,
                     "fates": gold_fates(kg, book, out, dense5, gold), "tokens": token_split(q.question, out),
                     "runs": len(out.get("selected_runs", {}).get("F", [])),
                     "passages": len(ranked_passages(kg, [c for e in out.get("evidence", [])
                                                          for c in e.get("chunks", [])]).keys)})
        if (i + 1) % 50 == 0:
            log(f"{i + 1}/{len(questions)} questions")
    return {"options": {k: str(v) for k, v in options.items()}, "questions": rows}


def summary(report: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Fate counts (gold passages) and the mean token split per question."""
    rows = report["questions"]
    fates = Counter(f for r in rows for f in r["fates"])
    total = sum(fates.values()) or 1
    fate_rows = [{"fate": f, "gold passages": fates[f], "share": round(fates[f] / total, 3)} for f in FATES]
    keys = list(dict.fromkeys(k for r in rows for k in r["tokens"]))
    tok_rows = [{"part": k, "mean per question": round(float(np.mean([r["tokens"].get(k, 0) for r in rows])), 1)}
                for k in keys]
    tok_rows.append({"part": "passages behind the prompt", "mean per question":
                     round(float(np.mean([r["passages"] for r in rows])), 1)})
    return fate_rows, tok_rows


def main(argv: list[str] | None = None) -> int:
    from langgraph_kgmem.embeddings import get_embeddings

    ap = argparse.ArgumentParser(prog="python -m benchlib.apr_diagnose", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="hotpotqa-train100")
    ap.add_argument("--questions", type=int, default=None)
    ap.add_argument("--embeddings", default="local")
    ap.add_argument("--options", default="{}", help="create_autopruned_graph options as JSON (default: the defaults)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    emb = get_embeddings(args.embeddings)
    qs = load_questions(args.dataset, args.questions, None)
    built = corpora.build_corpus(pooled_passages(args.dataset, qs), emb, log=print)
    wd = Path(tempfile.mkdtemp(prefix="apr-diagnose-"))
    kg = synced_copy(built, wd, emb, log=print, phrase_facts="always")   # the codebook synced once per KG
    try:
        _, store = kg.persistence()
        report = diagnose(kg, store, qs, json.loads(args.options))
    finally:
        kg.close()
        shutil.rmtree(wd, ignore_errors=True)
    fate_rows, tok_rows = summary(report)
    print(markdown_table(fate_rows, list(fate_rows[0])))
    print()
    print(markdown_table(tok_rows, list(tok_rows[0])))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
