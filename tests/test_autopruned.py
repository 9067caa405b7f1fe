"""AutoPrunedRetriever: codebook, runs, coarse→fine retrieval, selection, packing, memory, consolidation."""

from __future__ import annotations

import doctest
import json
import math

import numpy as np
import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs import autopruned
from langgraph_kgmem.graphs.autopruned import (
    FineScoring,
    create_autopruned_graph,
    decode_knowledge,
    default_selection_policy,
    encode_knowledge,
)
from langgraph_kgmem.graphs.autopruned import scoring, sentences
from langgraph_kgmem.graphs.autopruned.deps import AutoprunedDeps
from langgraph_kgmem.graphs.autopruned.codebook import LEGACY_PAGE, PAGE, Codebook, phrase_triples, segment_runs
from langgraph_kgmem.testing import ScriptedChatModel

STABLE_KEYS = ("answer", "evidence", "packed_prompt", "encoding", "selected_runs", "candidates", "coarse",
               "query_triples", "reused", "memorized", "codebook_size", "selection", "prompt_tokens_packed")


def _app(kg, store, **opts):
    # most tests here test the codebook's triple machinery (the paper's prompt); the default reader
    # (show="sentences") has tests of its own, which name it
    opts.setdefault("show", "triples")
    return create_autopruned_graph(kg, model=opts.pop("model", "offline"), **opts).compile(store=store)


def test_offline_run_returns_contract_fields(kg, store):
    out = _app(kg, store).invoke({"question": "Where was Marie Curie born?"})
    assert out["method"] == "autopruned"
    assert out["encoding"] in ("words", "ids", "matrix")
    assert out["prompt_tokens_packed"] == out["encoding_tokens"][out["encoding"]] > 0
    assert out["evidence"] and all(e["kind"] == "fact" and e["text"] and e["id"] for e in out["evidence"])
    # fact evidence carries the passage chunk it came from
    chunk = kg.node(out["evidence"][0]["chunks"][0])
    assert chunk is not None and chunk.kind == "chunk"
    assert any("born in Warsaw" in e["text"] for e in out["evidence"])
    assert "Warsaw" in out["answer"]
    assert out["codebook_size"]["fact_runs"] > 0 and out["codebook_size"]["documents"] == 4
    assert out["usage"]["llm_calls"] == 0
    assert set(out["selected_runs"]) == {"F", "Q", "A"}


def test_output_is_deterministic_across_fresh_stores(kg):
    questions = ["Where was Marie Curie born?", "Which river flows into the Baltic Sea?",
                 "Where was Marie Curie born?"]
    runs = []
    for _ in range(2):
        app = _app(kg, InMemoryStore())
        runs.append([{k: out.get(k) for k in STABLE_KEYS} for out in (app.invoke({"question": q}) for q in questions)])
    assert json.dumps(runs[0], sort_keys=True) == json.dumps(runs[1], sort_keys=True)


def test_indexify_extends_dictionaries_only_for_new_symbols():
    book = Codebook("t")
    first = book.indexify([("Marie Curie", "born in", "Warsaw"), ("Warsaw", "capital of", "Poland")])
    sizes = (len(book.ent_text), len(book.rel_text), len(book.edge_hrt))
    assert sizes == (3, 2, 2) and first == [0, 1]
    assert book.indexify([("marie curie", "born in", "Warsaw")]) == [0]      # same symbols, any case
    assert (len(book.ent_text), len(book.rel_text), len(book.edge_hrt)) == sizes
    book.indexify([("Marie Curie", "born in", "Paris")])                       # one new entity, one new edge
    assert (len(book.ent_text), len(book.rel_text), len(book.edge_hrt)) == (4, 2, 3)
    assert book.ent_text == ["Marie Curie", "Warsaw", "Poland", "Paris"]       # first-seen order
    assert book.indexify([("", "x", "y"), ("a | b", "r\nq", "c")]) == [3]      # separators never stored
    assert book.triple(3) == ("a / b", "r q", "c")


def test_consolidation_merges_aliases_without_growing_and_keeps_runs_valid():
    kg = KnowledgeGraph.in_memory(name="cons")
    book = Codebook("cons")
    # word order does not change a hashing embedding: "Curie Marie" is an alias of "Marie Curie"
    e = book.indexify([("Marie Curie", "born in", "Warsaw"), ("Curie Marie", "born in", "Warsaw"),
                       ("Curie Marie", "won", "Nobel Prize"), ("Warsaw", "capital of", "Poland")])
    book.add_run("F", [e[0], e[1], e[2]], chunks=["c1"])
    book.add_run("F", [e[1]], chunks=["c2"])
    book.add_run("Q", [e[2], e[3]])
    before = book.size()
    lengths = {r.id: len(r.edges) for r in book.runs.values()}
    report = book.consolidate(kg, alias_threshold=0.93)
    after = book.size()
    assert report["aliases_layer1"] == 1 and report["edges_dropped"] == 1
    assert after["entities"] == before["entities"] - 1
    assert after["edges"] == before["edges"] - 1
    assert after["runs"] <= before["runs"]
    assert all(len(r.edges) <= lengths[r.id] for r in book.runs.values())
    assert book.validate() == []
    assert book.triple(e[2]) == ("Marie Curie", "won", "Nobel Prize")
    # an alias seen again maps to its representative, adding nothing
    assert book.indexify([("Curie Marie", "born in", "Warsaw")]) == [e[0]]
    assert book.size()["edges"] == after["edges"]
    # layer 2 with the floor off (-1): merges down to the budget; counts only shrink, runs stay valid
    report2 = book.consolidate(kg, entity_budget=2, layer2_min_cos=-1.0)
    assert report2["merged_layer2"] >= 1 and report2["over_budget"] == 0
    final = book.size()
    assert final["entities"] == 2 and final["edges"] <= after["edges"] and final["runs"] <= after["runs"]
    assert book.validate() == []


_UNRELATED = ["Ada Lund", "Bo Moss", "Cy Nash", "Di Orr", "Ed Penn", "Fay Quay", "Gus Roe", "Hal Sze", "Ivy Tate",
              "Jo Udo", "Kai Vance", "Lu Wren"]


def _entity_cos(book, kg, a, b):
    v = book.entity_vectors(kg)
    return float(v[book.ent_index[a.lower()]] @ v[book.ent_index[b.lower()]])


def test_layer2_never_merges_unrelated_entities_and_the_budget_is_not_forced():
    """A budget far below the number of unrelated entities merges none of them (they are all below
    the floor): the codebook stays over its budget and says by how much."""
    kg = KnowledgeGraph.in_memory(name="floor")
    book = Codebook("floor")
    book.indexify([(a, "knows", b) for a, b in zip(_UNRELATED, _UNRELATED[1:])])
    v = book.entity_vectors(kg)
    cos = v @ v.T
    assert cos[~np.eye(len(cos), dtype=bool)].max() < autopruned.LAYER2_FLOOR  # the premise: all unrelated
    before = book.size()["entities"]
    report = book.consolidate(kg, entity_budget=2)
    assert report["merged_layer2"] == 0 and report["aliases_layer1"] == 0
    assert book.size()["entities"] == before and report["over_budget"] == before - 2
    assert all(book.resolve_entity(i) == i for i in range(len(book.ent_text)))
    # asked again with nothing new: no k-means rerun, the same answer
    assert book.consolidate(kg, entity_budget=2)["over_budget"] == before - 2


def test_layer2_merges_only_above_the_floor_most_similar_first_and_stops_at_the_budget():
    kg = KnowledgeGraph.in_memory(name="floor2")
    book = Codebook("floor2")
    pairs = [("Nobel Prize in Physics", "Nobel Prize Physics"), ("University of Paris", "Paris University")]
    book.indexify([(a, "is", b) for a, b in pairs] + [(a, "knows", b) for a, b in zip(_UNRELATED, _UNRELATED[1:])])
    sims = [_entity_cos(book, kg, a, b) for a, b in pairs]
    # the premise (hashing embedding): both pairs between the floor and layer 1's alias threshold
    assert all(autopruned.LAYER2_FLOOR <= c < 0.93 for c in sims) and sims[0] > sims[1]
    n = book.size()["entities"]
    # one over budget: one merge, the most similar pair's newer symbol into its older one
    report = book.consolidate(kg, entity_budget=n - 1)
    assert report["merged_layer2"] == 1 and report["over_budget"] == 0
    nobel = book.ent_index["nobel prize physics"]
    assert book.resolve_entity(nobel) == book.ent_index["nobel prize in physics"]
    assert book.resolve_entity(book.ent_index["paris university"]) == book.ent_index["paris university"]
    # a budget of 1: only the other pair still clears the floor; the rest stays, over budget
    report = book.consolidate(kg, entity_budget=1)
    assert report["merged_layer2"] == 1 and report["over_budget"] == n - 2 - 1
    assert book.resolve_entity(book.ent_index["paris university"]) == book.ent_index["university of paris"]
    assert book.validate() == []
    assert book.triple(book.indexify([("Nobel Prize Physics", "is", "Paris University")])[0]) == \
        ("Nobel Prize in Physics", "is", "University of Paris")


def _check_codebook_invariants(book, kg):
    assert book.validate() == []
    live = [e for e in range(len(book.edge_hrt)) if book.edge_rep[e] == e]
    keys = [book.edge_hrt[e] for e in live]
    assert len(set(keys)) == len(keys), "two live edges share a key"
    for e, key in zip(live, keys):
        assert book.resolve_edge(book.edge_index[key]) == e
    facts = [tuple(r.edges) for r in book.runs_of("F")]
    assert len(set(facts)) == len(facts), "two identical fact runs"
    # consolidation's lookups, kept up to date incrementally: every live edge is listed under both
    # its entities, and edge → runs equals a fresh build
    edges_of, runs_with = book._edge_lookup(), book._run_lookup()
    assert all(e in edges_of[book.edge_hrt[e][0]] and e in edges_of[book.edge_hrt[e][2]] for e in live)
    book._runs_with = None
    assert {e: rs for e, rs in runs_with.items() if rs} == book._run_lookup()
    # the vectorised run index (re-derived and appended to since the last build, then built afresh)
    # holds, per run, exactly its resolved edges, entities and relations
    kept, fresh = book.run_index(kg), _fresh_index(book, kg)
    assert kept["ids"] == fresh["ids"]   # same rows in the same order: ties break alike
    for key in ("ent", "rel", "edg", "ent_ptr", "rel_ptr", "edg_ptr"):
        assert np.array_equal(kept[key], fresh[key]), key
    for index in (kept, fresh):
        for pos, rid in enumerate(index["ids"]):
            run = book.runs[rid]
            edges = {book.resolve_edge(e) for e in run.edges}
            ents = {book.resolve_entity(x) for e in edges for x in (book.edge_hrt[e][0], book.edge_hrt[e][2])}
            rels = {book.edge_hrt[e][1] for e in edges}
            for name, want in (("edg", edges), ("ent", ents), ("rel", rels)):
                ptr = index[name + "_ptr"]
                assert set(index[name][ptr[pos]:ptr[pos + 1]].tolist()) == want
        assert set(index["ids"]) == {r.id for r in book.runs.values() if r.edges}


def test_layer1_reuses_the_coarse_stage_cosines_with_the_same_merges():
    """The cosines the coarse stage computes for a question's new entities
    (``entity_similarities``) are kept and topped up by the next consolidation's layer 1 with the
    entities added since: the merges equal those of a codebook that kept nothing."""
    kg = KnowledgeGraph.in_memory(name="reuse")
    names = [f"{a} {b}" for a, b in zip(["Ada", "Bo", "Cy", "Di", "Ed", "Fay"], ["Lund", "Moss", "Nash", "Orr", "Penn", "Quay"])]
    books = [Codebook("reuse"), Codebook("reuse")]
    for book in books:
        book.indexify([(names[i], "knows", names[i + 1]) for i in range(5)])
        book.consolidate(kg)
    for rnd in range(3):
        fresh_q = [(" ".join(reversed(names[rnd].split())), "met", f"Stranger {rnd}")]   # an alias, a new name
        later = [(f"Stranger {rnd}", "wrote to", " ".join(reversed(names[rnd + 2].split())))]
        for kept, book in zip((True, False), books):
            q_ents = sorted({book.resolve_entity(x) for e in book.indexify(fresh_q) for x in book.edge_hrt[e][::2]})
            if kept:   # the coarse stage's product; the rows of the unchecked entities stay
                sims = book.entity_similarities(kg, q_ents)
                assert sims.shape == (len(q_ents), len(book.ent_text)) and book._sim_rows
            book.indexify(later)    # more entities arrive before consolidation (an answer's)
            report = book.consolidate(kg)
            assert not book._sim_rows
        assert books[0].ent_rep == books[1].ent_rep and report["aliases_layer1"] > 0
    assert books[0].edge_rep == books[1].edge_rep


def test_stacked_lines_are_each_runs_lines_in_turn():
    kg = KnowledgeGraph.in_memory(name="stack")
    book = Codebook("stack")
    runs = [book.add_run("F", book.indexify([(f"A{i}", "knows", f"B{j}") for j in range(i % 4 + 1)])) for i in range(7)]
    runs.append(book.add_run("Q", []))
    flat, lens = book.stacked_lines(kg, runs)
    assert lens.tolist() == [len(r.edges) for r in runs]
    assert np.array_equal(flat, np.concatenate([book.line_vectors(kg, r.edges) for r in runs if r.edges]))
    q = book.line_vectors(kg, runs[2].edges)
    cfg = FineScoring()
    assert np.array_equal(autopruned.stacked_fine_scores(q, flat, lens, cfg),
                          autopruned.fine_scores(q, [book.line_vectors(kg, r.edges) for r in runs], cfg))
    assert book.stacked_lines(kg, [])[1].shape == (0,)


def test_a_question_saves_the_codebook_once_and_a_repeated_one_not_at_all(kg):
    """memorize saves what a question adds (one batch); consolidation saves only when it merged or
    dropped something; asking a stored question again with the same answer writes nothing. On the
    KG's own store (SQLite, and PostgreSQL in the integration run)."""
    _, store = kg.persistence()
    app = _app(kg, store)
    app.invoke({"question": "Where was Marie Curie born?"})
    rev = Codebook.stored_revision(store, kg.name)
    out = app.invoke({"question": "Which river flows into the Baltic Sea?"})
    merged = any(out["consolidation"][k] for k in ("aliases_layer1", "merged_layer2", "edges_dropped", "runs_dropped"))
    assert out["memorized"] and Codebook.stored_revision(store, kg.name) == rev + 1 + merged
    rev = Codebook.stored_revision(store, kg.name)
    again = app.invoke({"question": "Which river flows into the Baltic Sea?"})
    assert again["memorized"] == [] and Codebook.stored_revision(store, kg.name) == rev
    history = Codebook.load(store, kg.name).history
    assert history[-1]["runs"] == Codebook.load(store, kg.name).size()["runs"]   # the growth curve's last point


def test_a_graph_given_its_store_reads_the_codebook_when_built_not_at_its_first_question(kg, monkeypatch):
    """Loading a stored codebook is O(codebook): a served graph does it at start-up, so its first
    question costs about what a later one does. Without the store (the compiled graph's) or with a
    per-tenant scope the codebook is known only at run time, and the first question loads it."""
    from langgraph_kgmem.graphs.autopruned import sync_codebook

    _, store = kg.persistence()
    sync_codebook(kg, store)
    loads = []
    real = Codebook.load.__func__
    monkeypatch.setattr(Codebook, "load", classmethod(lambda cls, *a, **k: loads.append(a[1:]) or real(cls, *a, **k)))
    app = create_autopruned_graph(kg, model="offline", store=store).compile(store=store)
    assert loads == [(kg.name, ())]
    filled = []                            # the entity table was made with the graph: the question
    real_of = Codebook._vectors_of         # reads the vectors of its own new entities only
    monkeypatch.setattr(Codebook, "_vectors_of", lambda self, kg_, todo, *a: filled.append((len(todo), a[-1])) or
                        real_of(self, kg_, todo, *a))
    scans = []                             # checked against the KG with the graph: no row read again
    real_docs = kg._store.documents
    monkeypatch.setattr(kg._store, "documents", lambda: scans.append(1) or real_docs())
    app.invoke({"question": "Where was Marie Curie born?"})
    assert len(loads) == 1 and filled and scans == []
    assert max(n for n, space in filled if space == "nodes") < len(real(Codebook, store, kg.name).ent_text) // 2
    create_autopruned_graph(kg, model="offline").compile(store=store)
    create_autopruned_graph(kg, model="offline", store=store, memory_scope=["{user_id}"]).compile(store=store)
    assert len(loads) == 1


def test_a_first_sync_writes_its_provenance_index_in_bounded_batches(kg, monkeypatch):
    """A first sync of a large KG writes one index entry per document: PostgreSQL takes at most
    65,535 values in the one statement a store batch becomes (a 20,000-passage KG failed there),
    so the entries go in bounded batches before the codebook's own pages, which stay one batch."""
    from langgraph.store.base import PutOp
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem.graphs.autopruned import codebook, sync_codebook

    batches = []

    class Spy(InMemoryStore):
        def batch(self, ops):
            ops = list(ops)
            if ops and all(isinstance(op, PutOp) for op in ops):   # the writes
                batches.append(["codebook" if "codebook" in op.namespace else
                                "index" if "provenance_index" in op.namespace else "other" for op in ops])
            return super().batch(ops)

    monkeypatch.setattr(codebook, "INDEX_OPS_PER_BATCH", 2)
    store = Spy()
    sync_codebook(kg, store)
    saves = [b for b in batches if "codebook" in b]
    assert len(saves) == 1 and "index" not in saves[0]
    index = [b for b in batches if "index" in b]
    assert sum(b.count("index") for b in index) >= 3 and max(len(b) for b in index) <= 2
    assert batches.index(saves[0]) > max(batches.index(b) for b in index)        # entries first
    assert Codebook.load(store, kg.name).indexed_docs


def _fresh_index(book, kg):
    book._index_cache, book._rep_cache, book._hrt_np = None, {}, None
    return book.run_index(kg)


def test_repeated_consolidation_keeps_the_codebook_consistent():
    """Rounds of new facts (with word-order aliases, which the hashing embedding maps to one vector)
    and consolidation, with and without an entity budget: sizes never grow through consolidation,
    edges stay unique, old keys resolve, and the run index (appended to after every run, patched by
    every consolidation) equals a fresh build."""
    kg = KnowledgeGraph.in_memory(name="rounds")
    book = Codebook("rounds")
    rng = np.random.default_rng(3)
    names = [f"{a} {b}" for a, b in zip(["Ada", "Bo", "Cy", "Di", "Ed", "Fay", "Gus", "Hal", "Ivy", "Jo"],
                                          ["Lund", "Moss", "Nash", "Orr", "Penn", "Quay", "Roe", "Sze", "Tate", "Udo"])]
    rels = ["knows", "met", "wrote to", "works with"]
    for rnd in range(6):
        for _ in range(4):
            trips = []
            for _ in range(int(rng.integers(1, 4))):
                h, t = (names[i] for i in rng.choice(len(names), 2, replace=False))
                if rng.random() < 0.4:  # the alias: same words, other order
                    h = " ".join(reversed(h.split()))
                trips.append((h, rels[int(rng.integers(len(rels)))], t))
            edges = book.indexify(trips)
            if edges:
                book.add_run("F" if rng.random() < 0.7 else "Q", edges, chunks=[f"c{rnd}"])
            book.run_index(kg)  # appended to after every run (in place, behind the last rows)
        before = book.size()
        # the floor off (-1): layer 2 must merge here, to exercise the remapping
        book.consolidate(kg, alias_threshold=0.93, entity_budget=8 if rnd >= 4 else None, layer2_min_cos=-1.0)
        after = book.size()
        assert after["entities"] <= before["entities"] and after["edges"] <= before["edges"]
        assert after["runs"] <= before["runs"]
        _check_codebook_invariants(book, kg)
    assert book.size()["entities"] <= 8
    # a triple over aliases of merged entities maps onto a live edge
    e = book.indexify([(" ".join(reversed(names[0].split())), "knows", names[1])])
    assert book.edge_rep[e[0]] == e[0]


def _same_book(a, b):
    assert (a.ent_text, a.ent_kg, a.ent_rep, a.rel_text) == (b.ent_text, b.ent_kg, b.ent_rep, b.rel_text)
    assert (a.edge_hrt, a.edge_kg, a.edge_rep) == (b.edge_hrt, b.edge_kg, b.edge_rep)
    assert [r.to_json() for r in a.runs.values()] == [r.to_json() for r in b.runs.values()]
    assert (a.indexed_docs, a.run_counter, a.checked_entities, a.size()) == \
        (b.indexed_docs, b.run_counter, b.checked_entities, b.size())
    assert a.validate() == [] and b.validate() == []


def test_codebook_persists_and_reloads_identically(kg, store):
    _app(kg, store).invoke({"question": "Where was Marie Curie born?"})
    book = Codebook.load(store, kg.name)
    assert book.size()["question_runs"] == 1
    _same_book(book, Codebook.load(store, kg.name))
    # incremental saves write only what changed: a new question run touches no document list
    class Recording:  # the store, with the keys each save writes (the codebook's own in one batch)
        def __init__(self):
            self.keys, self.batches = [], 0

        def batch(self, ops):
            ops = list(ops)
            own = [op.key for op in ops if "codebook" in op.namespace]
            self.batches += bool(own)
            self.keys += own
            return store.batch(ops)

    rec = Recording()
    book.add_run("Q", book.indexify([("Warsaw", "capital of", "?")]), text="Capital?")
    book.save(rec)
    assert "docs" not in rec.keys and any(k.startswith("runs:") for k in rec.keys) and rec.batches == 1
    _same_book(book, Codebook.load(store, kg.name))
    # a removed document changes the document lists: they are written, and reload the same
    kg.delete_document(next(iter(book.indexed_docs)))
    book.sync_facts(kg)
    rec.keys.clear()
    book.save(rec)
    assert "docs" in rec.keys
    _same_book(book, Codebook.load(store, kg.name))


def test_codebook_keeps_the_page_size_it_was_written_with(kg):
    """Codebooks saved before the page size was recorded (pages of LEGACY_PAGE rows, no "page" in
    their meta) reload identically and keep writing pages of that size; new ones use PAGE. On the
    KG's own store (SQLite, and PostgreSQL in the integration run), where a save is one batch."""
    from langgraph_kgmem.memory import namespace

    n = PAGE + PAGE // 2
    assert n < LEGACY_PAGE
    (_, store), old = kg.persistence(), Codebook("legacy")
    old.page = LEGACY_PAGE
    for i in range(n):
        old.add_run("F", old.indexify([(f"entity {i}", "near", f"place {i}")]), chunks=[f"c{i}"])
    old.save(store)
    ns = namespace("legacy", "codebook")
    meta = dict(store.get(ns, "meta").value)
    del meta["page"]   # as an older version wrote it
    store.put(ns, "meta", meta)
    assert sorted(k for k in (it.key for it in store.search(ns, limit=100)) if k.startswith("E:")) == ["E:000000"]
    book = Codebook.load(store, "legacy")
    assert book.page == LEGACY_PAGE
    _same_book(old, book)
    book.add_run("Q", book.indexify([("entity 1", "near", "?")]), text="near?")
    book.save(store)
    assert sorted(k for k in (it.key for it in store.search(ns, limit=100)) if k.startswith(("E:", "runs:"))) == \
        ["E:000000", "runs:000000"]
    _same_book(book, Codebook.load(store, "legacy"))
    # a new codebook pages by PAGE, and reloads the same
    fresh, store2 = Codebook("fresh"), store
    for i in range(n):
        fresh.add_run("F", fresh.indexify([(f"entity {i}", "near", f"place {i}")]), chunks=[f"c{i}"])
    fresh.save(store2)
    keys = [it.key for it in store2.search(namespace("fresh", "codebook"), limit=100)]
    assert {"E:000000", "E:000001", "runs:000000", "runs:000001"} <= set(keys)
    loaded = Codebook.load(store2, "fresh")
    assert loaded.page == PAGE
    _same_book(fresh, loaded)


@pytest.mark.parametrize("encoding", ["words", "ids", "matrix"])
def test_packed_prompt_round_trips(encoding):
    triples = {"F": [("Marie Curie", "born in", "Warsaw"), ("Warsaw", "capital of", "Poland"),
                     ("2019", "is", "a year")],
               "A": [("Marie Curie", "born in", "Warsaw")],
               "Q": [("Marie Curie", "born in", "?")]}
    packed = encode_knowledge(triples)[encoding]
    assert decode_knowledge(packed) == triples


def test_graph_packed_prompt_decodes_to_selected_triples(kg, store):
    app = _app(kg, store)
    app.invoke({"question": "Where was Marie Curie born?"})
    out = app.invoke({"question": "Where was Marie Curie born?"})
    book = Codebook.load(store, kg.name)
    expected = {}
    for c in ("F", "A", "Q"):
        edges = [e for r in out["selected_runs"][c] for e in book.runs[r].edges]
        if edges:
            expected[c] = [book.triple(e) for e in dict.fromkeys(edges)]
    assert decode_knowledge(out["packed_prompt"]) == expected
    for enc in ("ids", "matrix"):  # the other encodings carry the same content
        forced = _app(kg, InMemoryStore(), encodings=(enc,)).invoke({"question": "Where was Marie Curie born?"})
        assert forced["encoding"] == enc
        assert decode_knowledge(forced["packed_prompt"]) == decode_knowledge(
            encode_knowledge(decode_knowledge(forced["packed_prompt"]))["words"])


def test_follow_up_question_reuses_stored_question_and_answer_runs(kg, store):
    app = _app(kg, store)
    first = app.invoke({"question": "Where was Marie Curie born?"})
    assert first["reused"] == [] and first["memorized"]
    q_runs = [r for r in first["memorized"] if r.startswith("Q")]
    a_runs = [r for r in first["memorized"] if r.startswith("A")]
    assert q_runs and a_runs
    # a new session (fresh graph object) over the same store: the stored runs are retrieval atoms
    follow = _app(kg, store).invoke({"question": "In which city was Marie Curie born?"})
    assert set(q_runs) <= set(follow["reused"]) and set(a_runs) <= set(follow["reused"])
    assert follow["selected_runs"]["A"] and decode_knowledge(follow["packed_prompt"])["A"]
    # ... but a rephrased question is another question: nothing is replayed as its answer
    assert follow["replayed_answer"] is None and follow["answer_memory"] != "replayed"
    # the stored answer run knows where its facts came from, who gave it and to which question
    book = Codebook.load(store, kg.name)
    answer_run = book.runs[a_runs[0]]
    assert answer_run.chunks and all(kg.node(c) is not None for c in answer_run.chunks)
    assert answer_run.links[0] == q_runs[0] and answer_run.by.startswith("offline")
    # the follow-up's question run is its own, linked to the answer it got (the same answer run
    # when it found the same answer in the same passages)
    follow_q = [r for r in follow["memorized"] if r.startswith("Q")]
    assert follow_q and follow_q != q_runs and book.runs[follow_q[0]].text == "In which city was Marie Curie born?"
    assert [book.runs[a].text for a in book.runs[follow_q[0]].links] == [follow["answer"]]


def test_selection_policy_is_pluggable_and_validated(kg, store):
    seen = []

    def facts_only(channel, runs, features):
        seen.append((channel, len(runs), features["query_lines"]))
        return "all" if channel == "F" else "none"

    app = _app(kg, store, selection_policy=facts_only)
    app.invoke({"question": "Where was Marie Curie born?"})
    out = app.invoke({"question": "Where was Marie Curie born?"})
    assert out["selection"] == {"F": "all", "Q": "none", "A": "none"}
    assert out["reused"] == [] and out["selected_runs"]["Q"] == []
    assert [c for c, _, _ in seen[:3]] == ["F", "Q", "A"]
    nothing = _app(kg, InMemoryStore(), selection_policy=lambda c, r, f: "none").invoke({"question": "Warsaw?"})
    assert nothing["evidence"] == [] and nothing["answer"] == "no answer" and nothing["packed_prompt"] == ""
    with pytest.raises(KgmemInputError, match="selection_policy returned 'some'"):
        _app(kg, InMemoryStore(), selection_policy=lambda c, r, f: "some").invoke({"question": "Warsaw?"})
    assert default_selection_policy("F", [], {}) == "none"
    assert default_selection_policy("Q", [{"run": "Q1"}], {"channel_sizes": {"A": 1}}) == "none"
    assert default_selection_policy("A", [{"run": "A1"}], {}) == "unique"


def test_token_budget_drops_weakest_runs(kg, store):
    full = _app(kg, InMemoryStore()).invoke({"question": "Where was Marie Curie born?"})
    small = _app(kg, store, max_prompt_tokens=90).invoke({"question": "Where was Marie Curie born?"})
    assert small["prompt_tokens_packed"] <= 90 < full["prompt_tokens_packed"]
    assert small["selected_runs"]["F"][0] == full["selected_runs"]["F"][0]
    # over every budget: the runs kept are the strongest ones, as many as fit, more with more budget
    q = "Where was Marie Curie born?"
    # strength = the rank score runs are ordered by (the fused one under the default dense fusion)
    score = {c["run"]: c.get("fused", c["score"]) for c in full["candidates"]}
    ranked = sorted((r for rs in full["selected_runs"].values() for r in rs), key=lambda r: -score[r])
    counts = []
    for budget in [*range(10, full["prompt_tokens_packed"], 7), full["prompt_tokens_packed"]]:
        out = _app(kg, InMemoryStore(), max_prompt_tokens=budget).invoke({"question": q})
        kept = [r for rs in out["selected_runs"].values() for r in rs]
        assert set(kept) == set(ranked[:len(kept)]) and kept
        assert out["prompt_tokens_packed"] <= budget or len(kept) == 1
        if len(kept) < len(ranked):  # one more run would not have fitted
            more = _app(kg, InMemoryStore(), max_prompt_tokens=10**6, fine_m=len(kept) + 1)
            assert more.invoke({"question": q})["prompt_tokens_packed"] > budget or len(kept) == 1
        counts.append(len(kept))
    assert counts == sorted(counts) and counts[-1] == len(ranked) and counts[0] < counts[-1]


def test_edge_pruning_keeps_each_fact_runs_edges_closest_to_the_question(kg):
    q = "Where was Marie Curie born?"
    full = _app(kg, InMemoryStore()).invoke({"question": q})
    pruned = _app(kg, InMemoryStore(), edges_per_run=1).invoke({"question": q})
    # the same runs are selected; each fact run shows one edge: its line closest to a question line
    assert pruned["selected_runs"] == full["selected_runs"]
    assert all(len(pruned["shown_edges"][r]) == 1 for r in pruned["selected_runs"]["F"])
    book = Codebook.load(InMemoryStore(), kg.name)  # a fresh book numbers the same edges the same way
    book.sync_facts(kg)
    qv = book.line_vectors(kg, book.indexify(pruned["query_triples"]))
    multi = [r for r in full["selected_runs"]["F"] if len(full["shown_edges"][r]) > 1]
    assert multi, "the fixture should give at least one fact run with several edges"
    for r in multi:
        edges = full["shown_edges"][r]
        rel = (book.line_vectors(kg, edges) @ qv.T).max(axis=1)
        assert pruned["shown_edges"][r] == [edges[int(np.argmax(rel))]]
    # the prompt holds exactly the shown edges, and is smaller
    expected = {"F": [book.triple(e) for e in dict.fromkeys(e for r in pruned["selected_runs"]["F"]
                                                             for e in pruned["shown_edges"][r])]}
    assert decode_knowledge(pruned["packed_prompt"]) == expected
    assert pruned["prompt_tokens_packed"] < full["prompt_tokens_packed"]
    assert {e["text"] for e in pruned["evidence"]} == {" ".join(t) for t in expected["F"]}
    assert "Warsaw" in pruned["answer"]
    with pytest.raises(KgmemInputError, match="edges_per_run"):
        create_autopruned_graph(kg, model="offline", edges_per_run=0)


def test_new_documents_are_indexed_incrementally(kg, store):
    app = _app(kg, store)
    before = app.invoke({"question": "Where was Marie Curie born?"})["codebook_size"]
    kg.add_documents([{"title": "Krakow", "text": "Krakow is a city in Poland. Krakow lies on the Vistula."}],
                     model="offline")
    out = app.invoke({"question": "Which city lies on the Vistula?"})
    assert out["codebook_size"]["documents"] == before["documents"] + 1
    assert out["codebook_size"]["fact_runs"] > before["fact_runs"]
    assert any("Krakow" in e["text"] for e in out["evidence"])


def _curie_responder(messages, request):
    """The model of the Marie Curie questions: her birthplace's triples, then "Warsaw" as the answer."""
    if request is not None and request.step == "extract_question_triples":
        return {"triples": [{"subject": "Marie Curie", "relation": "born in", "object": "?"}]}
    if request is not None and request.step == "extract_answer_triples":
        return {"triples": [{"subject": "Marie Curie", "relation": "born in", "object": "Warsaw"}]}
    return "Warsaw"


def test_llm_decisions_are_typed_and_counted(kg, store):
    def responder(messages, request):
        if request is None or request.step not in ("extract_question_triples", "extract_answer_triples"):
            assert "Marie Curie" in messages[-1].content and "Question:" in messages[-1].content
        return _curie_responder(messages, request)

    model = ScriptedChatModel(responder=responder)
    out = _app(kg, store, model=model).invoke({"question": "Where was Marie Curie born?"})
    assert out["answer"] == "Warsaw"
    assert out["query_triples"] == [["Marie Curie", "born in", "?"]]
    assert out["usage"]["llm_calls"] == 3 and set(out["usage"]["by_step"]) == {
        "extract_question_triples", "answer", "extract_answer_triples"}
    answer_call = [c for c in model.calls if c["request"] is not None and c["request"].step == "answer"][0]
    assert answer_call["request"].context["evidence_ids"] == [e["id"] for e in out["evidence"]]
    cheap = ScriptedChatModel(responses=["Warsaw"])
    out2 = _app(kg, InMemoryStore(), model=cheap, extraction="offline").invoke({"question": "Where was Marie Curie born?"})
    assert out2["usage"]["llm_calls"] == 1 and cheap.call_count == 1


def test_with_reuse_a_text_the_model_already_read_is_not_read_again(kg, store):
    def steps(out):
        return sorted(out["usage"].get("by_step", {}))

    model = ScriptedChatModel(responder=_curie_responder)
    app = _app(kg, store, model=model, reuse=True, replay=False, memory_scope=("{user_id}",))
    first = app.invoke({"question": "Where was Marie Curie born?"}, context={"user_id": "a"})
    assert steps(first) == ["answer", "extract_answer_triples", "extract_question_triples"]
    # a rewording: its own wording is read, and it is answered; the answer's text was read before
    again = app.invoke({"question": "Marie Curie was born where?"}, context={"user_id": "a"})
    assert again["answer"] == "Warsaw" and steps(again) == ["answer", "extract_question_triples"]
    assert again["query_triples"] == first["query_triples"]
    # another tenant's texts are read anew: a memo hit says nothing of what others asked
    other = app.invoke({"question": "Marie Curie was born where?"}, context={"user_id": "b"})
    assert steps(other) == ["answer", "extract_answer_triples", "extract_question_triples"]
    # without reuse every text is read
    plain = _app(kg, InMemoryStore(), model=ScriptedChatModel(responder=_curie_responder), replay=False)
    plain.invoke({"question": "Where was Marie Curie born?"})
    assert steps(plain.invoke({"question": "Marie Curie was born where?"})) == [
        "answer", "extract_answer_triples", "extract_question_triples"]


def test_a_fallback_reading_is_not_kept(kg, store):
    asked = []

    def responder(messages, request):
        step = request.step if request is not None else "answer"
        asked.append(step)
        if step == "extract_question_triples":   # malformed twice (one reading, then its retry): the parser's triples
            return "not json" if asked.count(step) <= 2 else {"triples": [{"subject": "Marie Curie",
                                                                              "relation": "born in", "object": "?"}]}
        return {"triples": []} if step.startswith("extract_") else "Warsaw"

    app = _app(kg, store, model=ScriptedChatModel(responder=responder), reuse=True, replay=False)
    out = app.invoke({"question": "Where was Marie Curie born?"})
    assert out["usage"]["fallbacks"][0]["step"] == "extract_question_triples"
    again = app.invoke({"question": "Where was Marie Curie born?"})   # read again: the fallback was not kept
    assert "extract_question_triples" in again["usage"]["by_step"] and not again["usage"].get("fallbacks")
    third = app.invoke({"question": "Where was Marie Curie born?"})   # now the model's own reading is kept
    assert "extract_question_triples" not in third["usage"].get("by_step", {})


def test_malformed_extraction_falls_back_and_is_recorded(kg, store):
    model = ScriptedChatModel(responses=["not json", "still not json", "Warsaw", "{}", "{}"])
    out = _app(kg, store, model=model).invoke({"question": "Where was Marie Curie born?"})
    assert out["answer"] == "Warsaw"
    assert out["usage"]["fallbacks"] and out["usage"]["fallbacks"][0]["step"] == "extract_question_triples"
    assert out["query_triples"]  # the offline parser answered


def test_options_are_validated_at_build_time(kg):
    with pytest.raises(KgmemInputError, match="coarse_k"):
        create_autopruned_graph(kg, model="offline", coarse_k=0)
    with pytest.raises(KgmemInputError, match="encodings"):
        create_autopruned_graph(kg, model="offline", encodings=("base64",))
    with pytest.raises(KgmemInputError, match="selection_policy must be a function"):
        create_autopruned_graph(kg, model="offline", selection_policy="unique")
    with pytest.raises(KgmemInputError, match="fine must be a FineScoring"):
        create_autopruned_graph(kg, model="offline", fine={"top_t": 2})
    with pytest.raises(KgmemInputError, match="question is empty"):
        _app(kg, InMemoryStore()).invoke({"question": "   "})
    assert create_autopruned_graph(kg, model="offline", fine=FineScoring(top_t=1)) is not None


def test_segmentation_joins_chains_and_cuts_topic_changes():
    v = np.eye(4, dtype=np.float32)
    vecs = np.stack([v[0], v[0], v[1], v[1]])
    # same topic → one run; a topic change without continuity → a cut
    assert segment_runs([0, 2, 4, 6], [1, 3, 5, 7], vecs, tau=0.7) == [[0, 1], [2, 3]]
    # the head of triple 2 is the tail of triple 1: the chain bonus keeps it in the run
    assert segment_runs([0, 1, 2], [1, 2, 3], np.stack([v[0], v[0], 0.6 * v[0] + 0.8 * v[1]]), tau=0.7) == [[0, 1, 2]]
    assert segment_runs([], [], np.zeros((0, 4))) == []


def test_phrase_parser_is_deterministic():
    trips = phrase_triples("How does the lineage of the brown bear, Ursus arctos, reflect its name?")
    assert trips[0] == ("lineage", "of the", "brown bear")
    assert ("brown bear", "and", "Ursus arctos") in trips
    assert phrase_triples("Where was Marie Curie born?") == [("Marie Curie", "and", "born")]


def test_docstring_example_runs():
    result = doctest.testmod(autopruned.graph, raise_on_error=False, verbose=False)
    assert result.attempted >= 1 and result.failed == 0


def test_run_context_overrides_the_model_and_sync_codebook_prepares(kg, store):
    from langgraph_kgmem.graphs.autopruned import sync_codebook

    size = sync_codebook(kg, store)
    assert size["documents"] == 4 and size["fact_runs"] > 0
    app = _app(kg, store, extraction="offline")  # built offline ...
    model = ScriptedChatModel(responses=["Warsaw"])
    out = app.invoke({"question": "Where was Marie Curie born?"}, context={"model": model})
    assert out["answer"] == "Warsaw" and model.call_count == 1  # ... answered by the run's model
    events = [e for mode, e in app.stream({"question": "Which river flows into the Baltic Sea?"},
                                          stream_mode=["custom", "values"]) if mode == "custom"]
    assert events == []  # the facts were indexed up front: no sync work left


def test_concurrent_runs_of_one_app_share_the_codebook_safely(kg, store):
    """Runs of one compiled app in parallel threads all grow the same cached codebook (new question
    entities, answer runs): each run sees consistent tables, and every stored run stays valid."""
    app = create_autopruned_graph(kg, model="offline", store=store).compile(store=store)
    names = ["Ada Lovelace", "Niels Bohr", "Lise Meitner", "Alan Turing", "Emmy Noether", "Paul Dirac",
             "Rosalind Franklin", "Enrico Fermi"]
    for round_ in range(3):
        questions = [{"question": f"Did {n} meet Marie Curie in Warsaw in {1890 + round_}?"} for n in names]
        outs = app.batch(questions, config={"max_concurrency": len(questions)})
        assert all(o["answer"].strip() for o in outs)
    book = Codebook.load(store, kg.name)
    n_edges = len(book.edge_hrt)
    assert all(0 <= e < n_edges for run in book.runs.values() for e in run.edges)
    assert len(book.runs_of("Q")) >= len(names)


def _fine_score_reference(q, lines, cfg):
    """The fine score of one run written out plainly (the vectorised fine_scores must equal it)."""
    s = q @ lines.T
    top = float(np.sort(s, axis=None)[::-1][: max(1, cfg.top_t)].mean())
    coverage = float((s.max(axis=1) >= cfg.tau_cov).mean())
    many = float(np.minimum(1.0, (1.0 / (1.0 + np.exp(-(s - cfg.tau_pair) / cfg.temperature))).sum(axis=1)).mean())
    used_q, used_l, one = set(), set(), 0
    for flat_i in np.lexsort((np.arange(s.size), -s.ravel())).tolist():
        if s.ravel()[flat_i] < cfg.tau_pair:
            break
        i, j = divmod(flat_i, s.shape[1])
        if i not in used_q and j not in used_l:
            used_q.add(i)
            used_l.add(j)
            one += 1
    qm, lm = q.mean(axis=0), lines.mean(axis=0)
    whole = float(qm @ lm / ((np.linalg.norm(qm) * np.linalg.norm(lm)) or 1.0))
    gated = whole if (coverage > 0 and whole >= cfg.tau_whole) else 0.0
    return top + cfg.w_cov * coverage + cfg.w_many * many + cfg.w_one * one / s.shape[0] + cfg.w_whole * gated


def test_vectorised_fine_scores_equal_the_per_run_definition():
    rng = np.random.default_rng(7)

    def unit(n, d=16):
        x = rng.normal(size=(n, d))
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    base = unit(4)
    q = base + 0.3 * unit(4)  # query lines close to some run lines, so every term is exercised
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    runs = [unit(n) for n in (1, 2, 5, 12, 3)] + [np.vstack([base[:2], unit(3)]), base.copy(), base[[0, 0, 1]]]
    for cfg in (FineScoring(), FineScoring(top_t=1, tau_cov=0.3, tau_pair=0.2, tau_whole=0.0),
                FineScoring(top_t=40)):
        got = autopruned.fine_scores(q, runs, cfg)
        want = [_fine_score_reference(q, r, cfg) for r in runs]
        assert np.allclose(got, want, atol=1e-12), (got, want)
        assert autopruned.fine_score(q, runs[3], cfg) == pytest.approx(want[3], abs=1e-12)
    assert autopruned.fine_scores(q, [], FineScoring()).shape == (0,)


def test_a_run_that_learns_nothing_writes_nothing(kg, store):
    q = "Where was Marie Curie born?"
    _app(kg, store).invoke({"question": q})          # indexes the facts, stores Q and A runs
    rev = Codebook.stored_revision(store, kg.name)
    again = _app(kg, store).invoke({"question": q})  # the same question and answer: already known
    assert again["memorized"] == [] and "consolidation" not in again
    assert Codebook.stored_revision(store, kg.name) == rev
    _app(kg, store, memorize=False).invoke({"question": "Which river flows into the Baltic Sea?"})
    assert Codebook.stored_revision(store, kg.name) == rev


def test_deleting_a_document_keeps_the_fact_runs_another_document_shares():
    """Consolidation keeps identical fact runs of two documents once; deleting one document must
    not take the other's facts with it."""
    kg = KnowledgeGraph.in_memory(name="shared")
    text = "Warsaw is the capital of Poland. Marie Curie was born in Warsaw."
    kg.add_documents([{"id": "a", "title": "A", "text": text}, {"id": "b", "title": "B", "text": text},
                      {"id": "c", "title": "C", "text": "The Vistula flows into the Baltic Sea near Gdansk."}],
                     model="offline")
    book = Codebook("shared")
    book.sync_facts(kg)
    assert book.consolidate(kg, entity_budget=3, layer2_min_cos=-1.0)["runs_dropped"] > 0  # floor off: merges
    shared = [r for r in book.indexed_docs["b"] if r in book.indexed_docs["a"]]
    assert shared, "the identical runs of a and b were kept once"
    kg.delete_document("a")
    book.sync_facts(kg)
    assert set(book.indexed_docs) == {"b", "c"}
    for rid in book.indexed_docs["b"]:
        run = book.runs[rid]
        assert run.doc == "b" and run.chunks and all(kg.node(c) is not None for c in run.chunks)
    assert book.validate() == []


def test_bench_runs_autopruned_on_any_normalized_qa_dataset(tmp_path, monkeypatch):
    """Not only STEM and HotpotQA: a dataset name the bench knows, or any normalized JSONL file."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    from benchlib import corpus as corpora
    from benchlib import runner
    from benchlib.registry import discover, supports

    reg = discover()
    for name in ("autopruned", "autopruned-m5", "autopruned-pruned"):
        for ds in ("musique-train100", "hotpotqa-train100", "stem", "hotpotqa", str(tmp_path / "mine.jsonl")):
            assert supports(reg.get(name), ds), (name, ds)
    rows = [{"id": f"q{i}", "question": q, "answer": a, "supporting_titles": [t],
             "passages": [{"title": "Warsaw", "text": "Warsaw is the capital of Poland. Marie Curie was born in Warsaw."},
                          {"title": "Vistula", "text": "The Vistula flows into the Baltic Sea near Gdansk."}]}
            for i, (q, a, t) in enumerate([("Where was Marie Curie born?", "Warsaw", "Warsaw"),
                                           ("Where does the Vistula flow into?", "Baltic Sea", "Vistula")])]
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    monkeypatch.setattr(corpora, "CACHE_DIR", tmp_path / "cache")
    out = tmp_path / "out.json"
    rc = runner.main(["--method", "autopruned-pruned", "--dataset", str(path), "--decider", "oracle", "--embeddings",
                      "hash", "--passes", "1", "--json", str(out)])
    assert rc == 0
    row = json.loads(out.read_text())["results"][0]
    assert row["method"] == "autopruned-pruned" and row["questions"] == 2 and not row.get("errors")


def test_sentences_show_the_source_sentence_of_each_shown_edge():
    """show="sentences": the reader sees the sentence a selected edge came from (where a triple
    would drop the words that answer), one line per passage with its title; nothing else of the passage."""
    kg = KnowledgeGraph.in_memory(name="sent")
    kg.add_documents([{"title": "Marie Curie", "text": "Marie Curie was a physicist. She was born in Warsaw in 1867. "
                                                       "Her husband Pierre Curie taught at the Sorbonne."},
                      {"title": "Vistula", "text": "The Vistula flows into the Baltic Sea near Gdansk."}],
                     model="offline")
    out = _app(kg, InMemoryStore(), show="sentences", sentence_budget=None, fine_m=1, edges_per_run=1,
               memorize=False).invoke({"question": "Where did Pierre Curie teach?"})
    assert out["encoding"] == "sentences"
    lines = out["packed_prompt"].splitlines()
    assert lines[0] == "[facts]" and lines[1] == "[Marie Curie] Her husband Pierre Curie taught at the Sorbonne."
    facts = [e for e in out["evidence"] if e["channel"] == "F"]
    assert [e["text"] for e in facts] == ["Her husband Pierre Curie taught at the Sorbonne."]
    assert facts[0]["title"] == "Marie Curie" and facts[0]["kind"] == "sentences"
    prompt = autopruned.answer_prompt("q", out["packed_prompt"], "sentences")
    # sentences and nothing else: the lean reader prompt, no codebook legend, no "[facts]" header
    assert "passage sentences below" in prompt and "codebook" not in prompt and "[facts]" not in prompt
    assert "[Marie Curie] Her husband Pierre Curie taught at the Sorbonne." in prompt
    mixed = out["packed_prompt"] + "\n[known answers]\nPierre Curie | taught at | Sorbonne"
    assert "codebook" in autopruned.answer_prompt("q", mixed, "sentences")  # stored answers: the legend explains them
    triples = _app(kg, InMemoryStore(), fine_m=1, edges_per_run=1, memorize=False).invoke(
        {"question": "Where did Pierre Curie teach?"})
    assert "Sorbonne" not in " ".join(e["text"] for e in triples["evidence"]) or triples["packed_prompt"] != out["packed_prompt"]
    with pytest.raises(KgmemInputError, match="show must be"):
        _app(kg, InMemoryStore(), show="passages")


def _curie_kg(name="budget"):
    kg = KnowledgeGraph.in_memory(name=name)
    kg.add_documents([{"title": "Marie Curie", "text": "Marie Curie was a physicist. She was born in Warsaw in 1867. "
                                                       "Her husband Pierre Curie taught at the Sorbonne."},
                      {"title": "Pierre Curie", "text": "Pierre Curie was a French physicist. "
                                                        "Her husband Pierre Curie taught at the Sorbonne."},
                      {"title": "Vistula", "text": "The Vistula flows into the Baltic Sea near Gdansk."}],
                     model="offline")
    return kg


def test_sentence_budget_fills_the_facts_block_with_the_best_sentences():
    """sentence_budget: the sentences of the selected runs' passages, best first (here the one
    closest to the question), each once, up to the budget; a bigger budget adds the rest."""
    from langgraph_kgmem.llm import count_tokens

    kg = _curie_kg()
    question = {"question": "Where did Pierre Curie teach?"}
    opts = {"show": "sentences", "fine_m": 10, "edges_per_run": 1, "memorize": False, "sentence_rankings": ("question",)}
    small = _app(kg, InMemoryStore(), sentence_budget=20, **opts).invoke(question)
    facts = [e for e in small["evidence"] if e["channel"] == "F"]
    assert [e["text"] for e in facts] == ["Her husband Pierre Curie taught at the Sorbonne."]
    large = _app(kg, InMemoryStore(), sentence_budget=400, **opts).invoke(question)
    block = large["packed_prompt"].splitlines()[1:]
    shown = " ".join(block)
    assert shown.count("Her husband Pierre Curie taught at the Sorbonne.") == 1   # a repeated sentence once
    assert "She was born in Warsaw in 1867." in shown and "Pierre Curie was a French physicist." in shown
    # one line per passage, sentences in text order
    curie = next(x for x in block if x.startswith("[Marie Curie]"))
    assert curie.index("physicist") < curie.index("Warsaw")
    mid = _app(kg, InMemoryStore(), sentence_budget=35, **opts).invoke(question)
    mid_block = mid["packed_prompt"].splitlines()[1:]
    assert 1 < sum(x.count(". ") + 1 for x in mid_block) < sum(x.count(". ") + 1 for x in block)
    assert sum(count_tokens(x) + 1 for x in mid_block) <= 35 + len(mid_block)   # within the budget


def test_sentence_rankings_choose_what_the_budget_keeps():
    """sentence_rankings=("passages",): passage order, text order — the best passage's first sentence
    wins a one-sentence budget; ("question",): the sentence closest to the question."""
    kg = _curie_kg("rank")
    question = {"question": "Where did Pierre Curie teach?"}
    opts = {"show": "sentences", "fine_m": 10, "memorize": False, "sentence_budget": 12}
    by_q = _app(kg, InMemoryStore(), sentence_rankings=("question",), **opts).invoke(question)
    by_p = _app(kg, InMemoryStore(), sentence_rankings=("passages",), **opts).invoke(question)
    assert "taught at the Sorbonne" in by_q["packed_prompt"]
    first = by_p["packed_prompt"].splitlines()[1]
    assert len([e for e in by_p["evidence"] if e["channel"] == "F"]) == 1
    assert first.endswith(("Marie Curie was a physicist.", "Pierre Curie was a French physicist."))
    with pytest.raises(KgmemInputError, match="sentence_budget needs show"):
        _app(kg, InMemoryStore(), sentence_budget=100)
    with pytest.raises(KgmemInputError, match="sentence_rankings"):
        _app(kg, InMemoryStore(), show="sentences", sentence_budget=100, sentence_rankings=("bm25",))
    with pytest.raises(KgmemInputError, match="sentence_budget"):
        _app(kg, InMemoryStore(), show="sentences", sentence_budget=0)


def test_sentence_bridges_bring_the_named_passages_best_sentence():
    """A bridge question: the film's sentence names the actress; with bridges her passage's sentence
    closest to the question follows it even where other sentences are closer to the question."""
    kg = KnowledgeGraph.in_memory(name="bridge")
    kg.add_documents([
        {"title": "Kiss and Tell (1945 film)", "text": "Kiss and Tell is a film in which Shirley Temple portrayed Corliss Archer."},
        {"title": "Meet Corliss Archer", "text": "Corliss Archer is a woman in the film and radio series. "
                                           "The radio series about Corliss Archer held the position for years."},
        {"title": "Shirley Temple", "text": "Shirley Temple was an American actress. "
                                           "She served as Chief of Protocol of the United States."}], model="offline")
    question = {"question": "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"}
    opts = {"show": "sentences", "fine_m": 10, "memorize": False, "sentence_budget": 60}
    with_b = _app(kg, InMemoryStore(), **opts).invoke(question)["packed_prompt"]
    without = _app(kg, InMemoryStore(), sentence_bridges=False, **opts).invoke(question)["packed_prompt"]
    assert "Shirley Temple portrayed Corliss Archer" in with_b and "[Shirley Temple]" in with_b
    assert "[Meet Corliss Archer]" in without and "[Shirley Temple]" not in without  # closest to the question first
    assert "[Meet Corliss Archer]" not in with_b
    assert sentences.title_pattern("Kiss and Tell (1945 film)").search("the film kiss and tell, a comedy")
    assert not sentences.title_pattern("Kiss and Tell (1945 film)").search("kiss and telling")
    assert sentences.title_pattern("It") is None   # too short to name a subject


def test_split_sentences_keeps_offsets_and_closing_quotes():
    text = 'He said "Go." Then 1867 came. It uses e.g. this. (Yes) ok'
    parts = autopruned.split_sentences(text)   # no cut before a lower-case word ("e.g. this")
    assert [t for _, t in parts] == ['He said "Go."', "Then 1867 came.", "It uses e.g. this.", "(Yes) ok"]
    assert all(text[a:].startswith(t) for a, t in parts)


def test_split_sentences_does_not_cut_after_initials_or_list_markers():
    """An initial ("K. A. Applegate") or a bare list marker ("2.") is not a sentence of its own: packed
    alone it would spend a title line on a fragment and part the answer from its sentence."""
    text = ("2. The Hork-Bajir Chronicles is written by K. A. Applegate.  It is the second book. "
            "IV. E. Mavis Hetherington was born in 1926. She scored 2. Then she left.")
    parts = autopruned.split_sentences(text)
    assert [t for _, t in parts] == ["2. The Hork-Bajir Chronicles is written by K. A. Applegate.",
                                     "It is the second book.", "IV. E. Mavis Hetherington was born in 1926.",
                                     "She scored 2.", "Then she left."]
    assert all(text[a:].startswith(t) for a, t in parts)


def test_cover_order_gives_each_question_entity_its_run_first():
    """cover_weight > 0: after the best run on one entity, a run on the question's other entity comes
    before a second, slightly better scored run on the first (a comparison question needs both)."""
    kg = KnowledgeGraph.in_memory(name="cover")
    book = Codebook("cover")
    a1, a2, b1, q = book.indexify([("Lake Tahoe", "lies in", "Sierra Nevada"), ("Lake Tahoe", "depth", "501 metres"),
                                   ("Crater Lake", "lies in", "Oregon"), ("Lake Tahoe", "older than", "Crater Lake")])
    runs = [book.add_run("F", [e]) for e in (a1, a2, b1)]
    scored = [(1.0, runs[0].seq, runs[0]), (0.9, runs[1].seq, runs[1]), (0.8, runs[2].seq, runs[2])]
    order = scoring.cover_order(book, kg, scored, [q], 0.5, 3)
    assert [r.id for _, _, r in order] == [runs[0].id, runs[2].id, runs[1].id]
    assert scoring.cover_order(book, kg, scored, [q], 0.0, 3) == scored  # weight 0: the fine ranking
    kg.add_documents([{"title": "Lake Tahoe", "text": "Lake Tahoe lies in the Sierra Nevada. Lake Tahoe is 501 metres deep."},
                      {"title": "Crater Lake", "text": "Crater Lake lies in Oregon."}], model="offline")
    out = _app(kg, InMemoryStore(), cover_weight=0.5, fine_m=2, memorize=False).invoke(
        {"question": "Is Lake Tahoe older than Crater Lake?"})
    assert {"Lake Tahoe", "Crater Lake"} <= {e.get("title") for e in out["evidence"]}
    with pytest.raises(KgmemInputError, match="cover_weight"):
        _app(kg, InMemoryStore(), cover_weight=-1.0)


def test_consolidation_never_merges_entities_that_differ_in_a_number():
    """Embeddings put "Apollo 11" and "Apollo 12" close (all-MiniLM-L6-v2: 0.93); a different number is
    another thing. The hashing embedding ignores word order, so "11 Apollo" is the word-order alias."""
    kg = KnowledgeGraph.in_memory(name="nums")
    book = Codebook("nums")
    book.indexify([("Apollo 11", "landed on", "Moon"), ("11 Apollo", "landed on", "Moon"),
                   ("Apollo 12", "landed on", "Moon")])
    v = book.entity_vectors(kg)
    ids = [book.ent_index[x] for x in ("apollo 11", "11 apollo", "apollo 12")]
    report = book.consolidate(kg, alias_threshold=0.5, entity_budget=1, layer2_min_cos=-1.0)
    assert float(v[ids[0]] @ v[ids[2]]) >= 0.5  # the premise: close enough for both layers
    assert book.resolve_entity(ids[1]) == ids[0]            # same number: merged
    assert book.resolve_entity(ids[2]) == ids[2]            # another number: never
    assert report["over_budget"] >= 1


def test_chunk_to_fact_run_map_survives_question_runs_and_follows_fact_runs():
    # the map is rebuilt over every fact run: memorizing a question and its answer must not do it
    book = Codebook("cr")
    e = book.add_edge("Ada", "wrote", "Notes")
    book.add_run("F", [e], chunks=["c1"])
    rt = AutoprunedDeps(None, "offline", None)
    first = rt.chunk_runs(book)
    assert first == {"c1": ["F1"]}
    book.add_run("Q", [e], text="Who wrote Notes?")
    book.add_run("A", [e], text="Ada")
    assert rt.chunk_runs(book) is first
    book.add_run("F", [e], chunks=["c2"])
    assert rt.chunk_runs(book) == {"c1": ["F1"], "c2": ["F4"]}
    book.remove_run("F1")
    assert rt.chunk_runs(book) == {"c2": ["F4"]}
    assert AutoprunedDeps(None, "offline", None).chunk_runs(Codebook("other")) == {}


def test_term_overlap_weighs_the_question_words_by_their_rarity_among_the_candidates():
    words = [{"curie", "physicist"}, {"curie", "sorbonne", "taught"}, {"vistula"}]
    got = sentences.term_overlap("Where did Curie teach at the Sorbonne?", words)
    # question words: curie (in 2 of 3), teach (in none), sorbonne (in 1)
    idf = {"curie": math.log(4 / 2.5), "teach": math.log(4 / 0.5), "sorbonne": math.log(4 / 1.5)}
    total = sum(idf.values())
    assert got.tolist() == pytest.approx([idf["curie"] / total, (idf["curie"] + idf["sorbonne"]) / total, 0.0])
    assert sentences.term_overlap("the of", words).tolist() == [0.0, 0.0, 0.0]   # no content word


def test_relevance_ranking_terms_each_decide_and_dense_passages_join_the_candidates():
    """The "relevance" score = question cosine + weighed passage cosine, question-word overlap and
    lead bonus: each term, weighed up alone, decides a one-sentence budget; with no weight the
    ranking is the question cosine's. sentence_dense adds vector search's top passages."""
    kg = _curie_kg("relevance")
    question = {"question": "Where did Pierre Curie teach?"}
    opts = {"show": "sentences", "fine_m": 10, "memorize": False, "sentence_budget": 12, "sentence_dense": 0}

    def first_sentence(**weights):
        out = _app(kg, InMemoryStore(), relevance_weights={"passage": 0.0, "terms": 0.0, "lead": 0.0, **weights},
                   **opts).invoke(question)
        return out["packed_prompt"].splitlines()[1]

    by_q = _app(kg, InMemoryStore(), **{**opts, "sentence_rankings": ("question",)}).invoke(question)
    assert first_sentence() == by_q["packed_prompt"].splitlines()[1]
    assert first_sentence(lead=100.0).endswith(
        ("Marie Curie was a physicist.", "Pierre Curie was a French physicist.", "near Gdansk."))
    assert "taught at the Sorbonne" in first_sentence(terms=100.0)
    ids, cos = kg.similarity_scores(question["question"], ("chunk",))
    best_title = kg.node(ids[int(np.argmax(cos))]).attrs["title"]
    assert first_sentence(passage=100.0).startswith(f"[{best_title}]")
    # fine_m=1: one run's passage; sentence_dense=3 lets vector search's top 3 passages compete too
    wide = {"show": "sentences", "fine_m": 1, "memorize": False, "sentence_budget": 400}
    alone = _app(kg, InMemoryStore(), sentence_dense=0, **wide).invoke(question)
    joined = _app(kg, InMemoryStore(), sentence_dense=3, **wide).invoke(question)
    assert len(alone["packed_prompt"].splitlines()[1:]) == 1 and len(joined["packed_prompt"].splitlines()[1:]) == 3
    # each passage is evidence with a run of its own (a passage vector search added: its first run)
    facts = [e for e in joined["evidence"] if e["channel"] == "F"]
    assert len(facts) == 3 and all(e["run"] for e in facts)
    for bad in ({"sentence_dense": -1}, {"relevance_weights": {"title": 1.0}},
                {"relevance_weights": {"lead": -1.0}}, {"relevance_weights": [("lead", 1.0)]}):
        with pytest.raises(KgmemInputError, match=next(iter(bad))):
            _app(kg, InMemoryStore(), show="sentences", sentence_budget=100, **bad)


def test_sentence_ranking_reuses_the_fine_stages_passage_scores(monkeypatch):
    """Vector search's passage scores are computed once per question and KG version: the fine
    stage's fusion and the "relevance" sentence ranking read the same ones."""
    kg = _curie_kg("once")
    calls = []
    real = kg.similarity_scores

    def counted(query, kinds=None, space="nodes"):
        if kinds is not None and tuple(kinds) == ("chunk",):
            calls.append(query)
        return real(query, kinds, space)

    monkeypatch.setattr(kg, "similarity_scores", counted)
    app = _app(kg, InMemoryStore(), show="sentences", sentence_budget=100, memorize=False)
    app.invoke({"question": "Where did Pierre Curie teach?"})
    assert calls == ["Where did Pierre Curie teach?"]
    app.invoke({"question": "Where was Marie Curie born?"})
    assert len(calls) == 2
    kg.add_documents([{"title": "Sorbonne", "text": "The Sorbonne is in Paris."}], model="offline")
    app.invoke({"question": "Where was Marie Curie born?"})   # the KG changed: scored again
    assert len(calls) == 3


def test_the_default_reader_shows_sentences_within_the_default_budget():
    """The defaults (issue 44): the facts block is the best sentences of the fused ranking's
    passages, SENTENCE_BUDGET tokens at most; a budget is refused only when given with triples."""
    from langgraph_kgmem.graphs.autopruned.options import SENTENCE_BUDGET
    from langgraph_kgmem.llm import count_tokens

    kg = _curie_kg("default")
    app = create_autopruned_graph(kg, model="offline").compile(store=InMemoryStore())
    out = app.invoke({"question": "Where did Pierre Curie teach?"}, context={"memorize": False})
    assert out["encoding"] == "sentences" and "taught at the Sorbonne" in out["packed_prompt"]
    block = out["packed_prompt"].splitlines()[1:]
    assert sum(count_tokens(x) + 1 for x in block) <= SENTENCE_BUDGET + len(block)
    assert create_autopruned_graph(kg, model="offline", show="triples") is not None   # the default budget: no error
    with pytest.raises(KgmemInputError, match="sentence_budget needs show"):
        create_autopruned_graph(kg, model="offline", show="triples", sentence_budget=100)


def test_sentence_cover_puts_the_top_passages_in_the_prompt_and_ranks_evidence_by_them():
    """sentence_cover=N: each of the first N passages (ranked by their best sentence) has its best
    sentence in the prompt even where more sentences of one passage rank higher; evidence (what the
    bench grades) lists the shown passages in that ranking, score 1 / place."""
    kg = KnowledgeGraph.in_memory(name="cover")
    kg.add_documents([
        {"title": "Pierre Curie", "text": "Pierre Curie taught physics. Pierre Curie taught physics in Paris. "
                                          "Pierre Curie taught physics for years. Pierre Curie taught physics well."},
        {"title": "Sorbonne", "text": "The Sorbonne is a university."},
        {"title": "Vistula", "text": "The Vistula flows into the Baltic Sea near Gdansk."}], model="offline")
    question = {"question": "Where did Pierre Curie teach physics?"}
    opts = {"fine_m": 10, "memorize": False, "sentence_dense": 3,
            "relevance_weights": {"passage": 0.0, "lead": 0.0, "terms": 0.0}}

    def shown(**more):
        out = create_autopruned_graph(kg, model="offline", **opts, **more).compile(store=InMemoryStore()).invoke(question)
        facts = [e for e in out["evidence"] if e["channel"] == "F"]
        return [e["title"] for e in facts], [e["score"] for e in facts]

    ranking, scores = shown(sentence_budget=400, sentence_cover=0)   # every passage: the passage ranking
    assert len(ranking) == 3 and scores == sorted(scores, reverse=True) and scores[0] == 1.0
    assert shown(sentence_budget=36, sentence_cover=0)[0] == ranking[:1]   # the best passage's sentences fill it
    assert shown(sentence_budget=36, sentence_cover=2) == (ranking[:2], [1.0, 0.5])
    with pytest.raises(KgmemInputError, match="sentence_cover"):
        create_autopruned_graph(kg, model="offline", sentence_cover=-1)


def test_sentence_dense_places_keeps_vector_searchs_top_passages_first_in_its_order():
    """sentence_dense_places=N: vector search's top N passages hold the first N evidence places in
    its order (with sentence_cover=N each has its best sentence in the prompt), so the fine
    ranking's passages add to them and never push one out; without it, passages are placed by
    their best sentence."""
    from langgraph_kgmem.graphs.common import dense_passages

    kg = KnowledgeGraph.in_memory(name="places")
    kg.add_documents([
        {"title": "Pierre Curie", "text": "Pierre Curie taught physics. He was born in Paris and married Marie. "
                                          "The couple shared a Nobel Prize. Pierre Curie died in 1906."},
        {"title": "Sorbonne", "text": "Where did Pierre Curie teach physics? At the Sorbonne, a university."},
        {"title": "Vistula", "text": "The Vistula flows into the Baltic Sea near Gdansk."},
        {"title": "Physics", "text": "Physics teachers teach physics where physics is taught."}], model="offline")
    q = "Where did Pierre Curie teach physics?"
    opts = {"fine_m": 10, "memorize": False, "sentence_dense": 4, "sentence_budget": 400,
            "relevance_weights": {"passage": 0.0, "lead": 0.0, "terms": 0.0}}

    def shown(**more):
        out = create_autopruned_graph(kg, model="offline", **opts, **more).compile(store=InMemoryStore()).invoke(
            {"question": q})
        return [e["chunks"][0] for e in out["evidence"] if e["channel"] == "F"]

    dense = dense_passages(kg, q, 4)
    by_sentence = shown()
    assert by_sentence[:2] != dense[:2]   # the case: placed by best sentence, vector search's order differs
    assert shown(sentence_dense_places=2)[:2] == dense[:2]
    assert shown(sentence_dense_places=4, sentence_cover=4) == dense
    with pytest.raises(KgmemInputError, match="sentence_dense_places"):
        create_autopruned_graph(kg, model="offline", sentence_dense_places=-1)
