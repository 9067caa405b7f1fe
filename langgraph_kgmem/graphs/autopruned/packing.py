"""Packing selected runs into a prompt: the three codebook encodings (word triples, id triples,
an edge matrix with edge-id lists), the cheapest of them in tokens, per-run edge pruning and the
evidence items of what was packed."""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np

from langgraph_kgmem.graphs.autopruned.codebook import Codebook
from langgraph_kgmem.graphs.autopruned.options import ENCODINGS, Encoding
from langgraph_kgmem.graphs.autopruned.schemas import CHANNEL_SECTION, PACK_ORDER, SECTION_CHANNEL
from langgraph_kgmem.llm import count_tokens

def channel_triples(book: Codebook, channels: Mapping[str, Sequence[int]]) -> dict[str, list[tuple[str, str, str]]]:
    """Each channel's facts as readable triples, in packing order, duplicates (and aliases of one
    fact) once."""
    return {c: [book.triple(e) for e in dict.fromkeys(book.resolve_edge(x) for x in channels.get(c, []))]
            for c in PACK_ORDER if channels.get(c)}


def encode_knowledge(triples: Mapping[str, Sequence[tuple[str, str, str]]]) -> dict[Encoding, str]:
    """The selected triples per channel in the three encodings (see :func:`decode_knowledge`)."""
    words: list[str] = []
    ents: dict[str, int] = {}
    rels: dict[str, int] = {}
    edges: dict[tuple[int, int, int], int] = {}
    id_lines: list[str] = []
    lists: list[str] = []
    for c in PACK_ORDER:
        trips = triples.get(c)
        if not trips:
            continue
        words.append(f"[{CHANNEL_SECTION[c]}]")
        id_lines.append(f"[{CHANNEL_SECTION[c]}]")
        ids = []
        for h, r, t in trips:
            words.append(f"{h} | {r} | {t}")
            key = (ents.setdefault(h, len(ents)), rels.setdefault(r, len(rels)), ents.setdefault(t, len(ents)))
            id_lines.append("%d %d %d" % key)
            ids.append(str(edges.setdefault(key, len(edges))))
        lists.append(f"[{CHANNEL_SECTION[c]}] " + " ".join(ids))
    if not words:
        return {"words": "", "ids": "", "matrix": ""}
    legend = ["[entities]"] + [f"{i} {e}" for e, i in ents.items()] + ["[relations]"] + [f"{i} {r}" for r, i in rels.items()]
    matrix = legend + ["[edges]"] + ["%d %d %d" % k for k in edges] + lists
    return {"words": "\n".join(words), "ids": "\n".join(legend + id_lines), "matrix": "\n".join(matrix)}


HEADER = re.compile(r"^\[(entities|relations|edges|facts|known answers|earlier questions)\](.*)$")


def decode_knowledge(text: str) -> dict[str, list[tuple[str, str, str]]]:
    """Inverse of :func:`encode_knowledge` for any of the three encodings: channel → triples."""
    ents: dict[int, str] = {}
    rels: dict[int, str] = {}
    edges: list[tuple[int, int, int]] = []
    out: dict[str, list[tuple[str, str, str]]] = {}
    section = None
    symbolic = "[entities]" in text.splitlines()[:1] if text else False
    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            section, rest = m.group(1), m.group(2).strip()
            if section in SECTION_CHANNEL and rest:  # matrix: edge-id list on the header line
                out[SECTION_CHANNEL[section]] = [(ents[h], rels[r], ents[t]) for h, r, t in
                                                 (edges[int(x)] for x in rest.split())]
            elif section in SECTION_CHANNEL:
                out.setdefault(SECTION_CHANNEL[section], [])
            continue
        if section == "entities":
            num, _, name = line.partition(" ")
            ents[int(num)] = name
        elif section == "relations":
            num, _, name = line.partition(" ")
            rels[int(num)] = name
        elif section == "edges":
            h, r, t = (int(x) for x in line.split())
            edges.append((h, r, t))
        elif section in SECTION_CHANNEL:
            if symbolic:
                h, r, t = (int(x) for x in line.split())
                out[SECTION_CHANNEL[section]].append((ents[h], rels[r], ents[t]))
            else:
                h, r, t = line.split(" | ")
                out[SECTION_CHANNEL[section]].append((h, r, t))
    return {c: out[c] for c in PACK_ORDER if c in out}


def cheapest_encoding(encoded: Mapping[str, str], allowed: Sequence[str]) -> tuple[str, dict[str, int]]:
    """The allowed encoding whose text costs the fewest tokens (ties: the more readable one), and
    every allowed encoding's token count."""
    tokens = {name: count_tokens(encoded[name]) for name in ENCODINGS if name in allowed}
    best = min(tokens, key=lambda n: (tokens[n], ENCODINGS.index(n)))  # ties: the more readable one
    return best, tokens


def reused_runs(book: Codebook, selected: Mapping[str, list[str]], candidates: list[dict[str, Any]]) -> list[str]:
    """Stored runs this answer reuses: selected answer runs, the retrieved question runs linked to
    them (the keys that matched), and selected question runs."""
    answers = set(selected.get("A", []))
    keys = [c["run"] for c in candidates if c["channel"] == "Q" and c["run"] in book.runs
            and answers & set(book.runs[c["run"]].links)]
    return list(dict.fromkeys(keys + list(selected.get("Q", [])) + list(selected.get("A", []))))


def evidence_passages(kg: Any, evidence: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(chunk id, text)`` of the KG passages the evidence came from, in evidence order: what an
    answer may cite (a passage no longer in the KG grounds nothing)."""
    out: list[tuple[str, str]] = []
    for cid in dict.fromkeys(c for e in evidence for c in e.get("chunks", [])):
        node = kg.node(cid)
        if node is not None and node.text:
            out.append((cid, node.text))
    return out


def shown_edges(book: Codebook, kg: Any, selected: Mapping[str, list[str]], query_edges: Sequence[int],
                per_run: int | None) -> dict[str, list[int]]:
    """The edges of each selected run that go into the prompt: all of them (``per_run=None``), or
    for fact runs the ``per_run`` edges whose lines are closest to a question line (in run order;
    ties by position). Answer and question runs are stored results, always shown whole."""
    shown = {r: list(book.runs[r].edges) for rs in selected.values() for r in rs}
    if per_run is None or not query_edges:
        return shown
    q = book.line_vectors(kg, query_edges)
    for r in selected.get("F", []):
        edges = shown[r]
        if len(edges) <= per_run:
            continue
        rel = (book.line_vectors(kg, edges) @ q.T).max(axis=1)
        keep = np.lexsort((np.arange(len(edges)), -rel))[:per_run]
        shown[r] = [edges[i] for i in sorted(keep.tolist())]
    return shown


def sentence_block(groups: Sequence[dict[str, Any]]) -> str:
    """The facts block in sentence mode: each group's sentences on one line, after its title."""
    return "\n".join(f"[{g['title']}] " + " ".join(g["sentences"]) if g["title"] else " ".join(g["sentences"])
                     for g in groups)


def packed_evidence(book: Codebook, kg: Any, selected: Mapping[str, list[str]], scores: Mapping[str, float],
                    shown: Mapping[str, list[int]]) -> list[dict[str, Any]]:
    """The shown triples of the selected fact and answer runs as evidence items (best run first)."""
    items: dict[str, dict[str, Any]] = {}
    ranked = sorted(((scores.get(r, 0.0), book.runs[r].seq, c, r) for c in ("F", "A") for r in selected.get(c, [])),
                    key=lambda x: (-x[0], x[1]))
    for score, _, c, rid in ranked:
        run = book.runs[rid]
        title = ""
        for cid in run.chunks:
            node = kg.node(cid)
            if node is not None and node.attrs.get("title"):
                title = node.attrs["title"]
                break
        for e in shown.get(rid, run.edges):
            e = book.resolve_edge(e)
            key = book.edge_kg[e] or f"apr-m{e}"
            if key in items:
                continue
            item = {"id": key, "kind": "fact", "text": book.line(e), "run": rid, "channel": c,
                    "chunks": list(run.chunks), "score": round(float(score), 6)}
            if title:
                item["title"] = title
            items[key] = item
    return list(items.values())
