"""Memory that stays true when documents change (issue 40, item 3): every memory record names the
documents and versions it rests on; a replace or a delete invalidates what rests on the old version
in the same call, in every tenant; and a replay path never serves a record whose version is gone,
even from a store the KG does not know of."""

from __future__ import annotations

import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.graphs.autopruned import create_autopruned_graph
from langgraph_kgmem.graphs.autopruned.codebook import Codebook
from langgraph_kgmem.graphs.catrag import create_catrag_graph
from langgraph_kgmem.graphs.r3cycle import create_r3cycle_graph, load_run
from langgraph_kgmem.graphs.remindrag import create_remindrag_graph
from langgraph_kgmem.memory import EdgeMemory, list_items, memory_namespaces
from langgraph_kgmem.memory.provenance import (INDEX_KIND, Provenance, holds, provenance_for, provenance_of_edges,
                                               put_records, record_holds)
from langgraph_kgmem.testing import ScriptedChatModel

QUESTION = "Which river flows through the city where Albert Einstein was born?"
OLD = "Ulm is a city on the Danube"
ULM_V1 = {"id": "ulm", "text": "Albert Einstein was born in Ulm. Ulm is a city on the Danube."}
ULM_V2 = {"id": "ulm", "text": "Albert Einstein was born in Ulm. Ulm is a city on the Rhine."}
WARSAW = {"id": "warsaw", "text": "Marie Curie was born in Warsaw. Warsaw is a city on the Vistula."}


def user(uid):
    return {"configurable": {"user_id": uid, "thread_id": f"t-{uid}"}}


def two_documents(kg):
    kg.add_documents([ULM_V1, WARSAW], model="offline")
    return kg


@pytest.fixture
def small_kg():
    g = two_documents(KnowledgeGraph.in_memory(name="prov", embeddings="hash"))
    yield g
    g.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def stored_kg(request, tmp_path):
    """The two-document KG with its memory in LangGraph's SqliteStore (a KG directory) or in
    PostgresStore (a KG in a PostgreSQL database)."""
    if request.param == "sqlite":
        g = KnowledgeGraph.open(tmp_path / "kg", name="prov", embeddings="hash")
    else:
        g = KnowledgeGraph.open(request.getfixturevalue("new_database")(), name="prov", embeddings="hash")
    yield two_documents(g)
    g.close()


def evidence_texts(out):
    return [str(e.get("text", "")) for e in out.get("evidence", [])]


def stale_records(kg, store):
    """Every stored record (codebook runs one by one) naming a document version that is gone."""
    stale = []
    for ns in memory_namespaces(store, kg.name):
        if ns[-1] == INDEX_KIND:
            continue
        for it in list_items(store, ns):
            runs = it.value.get("runs") if ns[-1] == "codebook" and it.key.startswith("runs:") else None
            for rec in (runs if isinstance(runs, list) else [it.value]):
                if not holds(kg, rec.get("provenance")):
                    stale.append((ns, it.key, rec.get("id")))
    return stale


# ------------------------------------------------------------------ content hashes

def test_documents_keep_the_hash_of_their_version(small_kg):
    before = small_kg.document("ulm")["content_hash"]
    assert before and small_kg.document("ulm")["meta"] == {}           # lifted out of the row's meta
    small_kg.add_documents([ULM_V1], model="offline")                   # the same version: skipped
    assert small_kg.document("ulm")["content_hash"] == before
    small_kg.add_documents([ULM_V2], model="offline")
    after = small_kg.document("ulm")["content_hash"]
    assert after and after != before
    chunk = next(n.id for n in small_kg.nodes("chunk") if n.attrs["doc_id"] == "ulm")
    assert provenance_for(small_kg, [chunk, "chk-missing"]) == [{"doc": "ulm", "hash": after}]
    assert holds(small_kg, [{"doc": "ulm", "hash": after}]) and not holds(small_kg, [{"doc": "ulm", "hash": before}])
    small_kg.delete_document("ulm")
    assert not holds(small_kg, [{"doc": "ulm", "hash": after}])


def test_a_runs_provenance_reads_only_its_own_documents(stored_kg, monkeypatch):
    """A first question after a write must not read every document row of the KG (O(KG) on the
    question's path); a corpus hash still sees every document."""
    from langgraph_kgmem.kg import graph as kg_graph

    kg = stored_kg

    scans = []
    real = kg._store.documents
    monkeypatch.setattr(kg._store, "documents", lambda: scans.append(1) or real())
    kg.add_documents([{"id": "vienna", "text": "Vienna is a city on the Danube."}], model="offline")
    scans.clear()
    v1 = kg.document("ulm")["content_hash"]
    assert kg.document_hashes(["ulm", "nowhere"]) == {"ulm": v1, "nowhere": None}
    assert kg.document_hashes(["ulm"]) == {"ulm": v1} and scans == []
    before = kg.corpus_hash()
    assert scans == [1]                                               # every row, once per version
    kg.add_documents([ULM_V2], model="offline")
    assert kg.document_hashes(["ulm"])["ulm"] == kg.document("ulm")["content_hash"] != v1
    assert kg.corpus_hash() != before
    scans.clear()
    monkeypatch.setattr(kg_graph, "HASH_READ_ALL", 2)          # many ids in one version: one scan instead
    kg.add_documents([WARSAW | {"text": WARSAW["text"] + " It is large."}], model="offline")
    assert kg.document_hashes(["ulm"])["ulm"] and kg.document_hashes(["warsaw"])["warsaw"]
    assert scans == []
    assert kg.document_hashes(["vienna"])["vienna"] and scans == [1]
    assert kg.document_hashes(["ulm", "nowhere"])["nowhere"] is None and scans == [1]


# ------------------------------------------------------------------ AutoPrunedRetriever: the issue's repro

def test_the_issue_repro_no_replay_of_the_replaced_text_in_any_tenant(stored_kg):
    kg = stored_kg
    checkpointer, store = kg.persistence()
    app = create_autopruned_graph(kg, model="offline", memory_scope=("{user_id}",)).compile(
        checkpointer=checkpointer, store=store)
    for uid in ("alice", "bob"):
        first = app.invoke({"question": QUESTION}, user(uid))
        assert any(OLD in t for t in evidence_texts(first))   # the codebook holds the old fact
    report = kg.add_documents([ULM_V2], model="offline")
    assert report.documents_replaced == 1 and report.memories_invalidated > 0
    assert "invalidated" in str(report)
    assert stale_records(kg, store) == []                     # both tenants, in the same call
    for uid in ("alice", "bob"):
        again = app.invoke({"question": QUESTION}, {"configurable": {"user_id": uid, "thread_id": f"t2-{uid}"}})
        texts = evidence_texts(again)
        assert not any(OLD in t for t in texts) and "Danube" not in str(again["answer"])
        assert any("Rhine" in t for t in texts)


def test_a_replace_invalidates_the_codebook_in_the_same_call(small_kg):
    """Without running the graph again: the stored runs resting on the old version are gone."""
    checkpointer, store = small_kg.persistence()
    app = create_autopruned_graph(small_kg, model="offline").compile(checkpointer=checkpointer, store=store)
    app.invoke({"question": QUESTION}, {"configurable": {"thread_id": "a"}})
    resting = [r for it in list_items(store, ("kgmem", "prov", "codebook")) if it.key.startswith("runs:")
               for r in it.value["runs"] if any(p["doc"] == "ulm" for p in r.get("provenance") or ())]
    assert resting
    # the run's own record (what feedback names it by) rests on the same document
    runs = [it for it in list_items(store, ("kgmem", "prov", "runs"))
            if any(p["doc"] == "ulm" for p in it.value.get("provenance") or ())]
    revision = store.get(("kgmem", "prov", "codebook"), "revision").value["revision"]
    report = small_kg.add_documents([ULM_V2], model="offline")
    assert report.memories_invalidated == len(resting) + len(runs)
    assert stale_records(small_kg, store) == []
    # the codebook moved on, so a process holding the old one reloads it
    assert store.get(("kgmem", "prov", "codebook"), "revision").value["revision"] == revision + 1
    index = store.search(("kgmem", "prov", INDEX_KIND), limit=10_000)   # one namespace per document, below this
    assert index and not [it for it in index if it.value["doc"] == "ulm"]   # nothing rests on the new version yet


def test_a_store_the_kg_does_not_know_is_checked_at_read_time(small_kg):
    store = InMemoryStore()     # built apart: no invalidation reaches it
    app = create_autopruned_graph(small_kg, model="offline", store=store).compile(store=store)
    first = app.invoke({"question": QUESTION})
    assert any(OLD in t for t in evidence_texts(first))
    report = small_kg.add_documents([ULM_V2], model="offline")
    assert report.memories_invalidated == 0 and stale_records(small_kg, store)   # still stored ...
    again = app.invoke({"question": QUESTION})
    assert not any(OLD in t for t in evidence_texts(again)) and "Danube" not in str(again["answer"])
    assert not again.get("replayed_answer")                                     # ... never served
    book = Codebook.load(store, small_kg.name)                                  # the new version indexed
    assert book.doc_hashes["ulm"] == small_kg.document("ulm")["content_hash"] and book.indexed_docs["ulm"]


def test_a_registered_store_is_invalidated_too(small_kg):
    store = InMemoryStore()
    small_kg.add_memory_store(store)
    create_autopruned_graph(small_kg, model="offline", store=store).compile(store=store).invoke({"question": QUESTION})
    assert small_kg.add_documents([ULM_V2], model="offline").memories_invalidated > 0
    assert stale_records(small_kg, store) == []


def test_delete_invalidates_and_counts(small_kg):
    checkpointer, store = small_kg.persistence()
    app = create_autopruned_graph(small_kg, model="offline").compile(checkpointer=checkpointer, store=store)
    app.invoke({"question": QUESTION}, {"configurable": {"thread_id": "a"}})
    counts = small_kg.delete_document("ulm")
    assert counts["nodes_removed"] > 0 and counts["memories_invalidated"] > 0
    assert stale_records(small_kg, store) == []
    again = app.invoke({"question": QUESTION}, {"configurable": {"thread_id": "b"}})
    assert not any("Ulm" in t for t in evidence_texts(again))


# ------------------------------------------------------------------ ReMindRAG's edge memory

def test_remindrag_edge_memory_rests_on_its_edge(small_kg):
    checkpointer, store = small_kg.persistence()
    app = create_remindrag_graph(small_kg, model="offline", memory_scope=("{user_id}",)).compile(
        checkpointer=checkpointer, store=store)
    dim = len(small_kg.embed_query("x"))
    relations = {small_kg.fact_text(e): e.id for e in small_kg.edges("relation")}
    facts = [relations["Albert Einstein was born in Ulm"], relations[OLD]]
    for uid in ("alice", "bob"):
        app.invoke({"question": QUESTION}, user(uid))   # offline, it remembers the walk into Ulm's passage
        # and, as a walk over facts would: the fact both versions state, and the one only the old states
        EdgeMemory(store, "prov", dim, (uid,), guard=Provenance(small_kg, store)).update(
            facts, lambda k, old: old + 0.5, question=QUESTION, credited=facts)
    ns = {uid: ("kgmem", "prov", uid, "edge_memory") for uid in ("alice", "bob")}
    before = {uid: {it.key: it.value for it in list_items(store, n)} for uid, n in ns.items()}
    assert all(before.values()) and all(r.get("provenance") for v in before.values() for r in v.values())
    old_edges = set(small_kg.document_edges("ulm"))
    report = small_kg.add_documents([ULM_V2], model="offline")
    assert report.memories_invalidated > 0 and stale_records(small_kg, store) == []
    replaced = {n.id for n in small_kg.nodes() if n.kind in ("chunk", "anchor") and n.attrs["doc_id"] == "ulm"}
    kept = 0
    for uid, n in ns.items():
        after = {it.key: it.value for it in list_items(store, n)}
        for key, rec in before[uid].items():
            edge = small_kg.edge(key)
            if edge is None or {edge.src, edge.dst} & replaced:
                assert key not in after      # the edge is gone, or leads into the replaced passage
            else:                            # the new version still states it: its memory holds, brought up to date
                kept += key in old_edges
                assert after[key]["v"] == rec["v"] and after[key]["provenance"] == provenance_of_edges(small_kg, [key])
    assert kept == 2                         # "Albert Einstein - born in - Ulm" is in both versions, per tenant
    assert all(facts[1] not in {it.key for it in list_items(store, n)} for n in ns.values())


def test_remindrag_never_replays_a_stale_edge_memory(small_kg):
    store = InMemoryStore()     # unknown to the KG: only the read-time check stands
    app = create_remindrag_graph(small_kg, model="offline", store=store).compile(store=store)
    app.invoke({"question": QUESTION})
    dim = len(small_kg.embed_query("x"))
    keys = EdgeMemory(store, "prov", dim).keys()
    small_kg.add_documents([ULM_V2], model="offline")
    guarded = EdgeMemory(store, "prov", dim, guard=Provenance(small_kg, store)).many(keys)
    raw = EdgeMemory(store, "prov", dim).many(keys)
    stale = [i for i, k in enumerate(keys) if not record_holds(small_kg, store.get(("kgmem", "prov", "edge_memory"), k).value)]
    assert stale and all(raw[i].any() for i in stale) and not any(guarded[i].any() for i in stale)
    again = app.invoke({"question": QUESTION})
    assert not ({e["edge"] if isinstance(e, dict) else e for e in again["replayed"]["edges"]} & {keys[i] for i in stale})


# ------------------------------------------------------------------ R3-Cycle's trajectories and reflections

def _r3(kg, store, **kw):
    return create_r3cycle_graph(kg, model="offline", store=store, **kw).compile(store=store)


def test_r3cycle_records_go_with_the_version_they_rest_on(small_kg):
    checkpointer, store = small_kg.persistence()
    app = create_r3cycle_graph(small_kg, model="offline", memory_scope=("{user_id}",),
                               verifier=lambda q, a, ev: False).compile(checkpointer=checkpointer, store=store)
    runs = {uid: app.invoke({"question": QUESTION}, user(uid))["run_id"] for uid in ("alice", "bob")}
    for uid, run_id in runs.items():
        saved = load_run(store, "prov", run_id, (uid,))
        assert saved["trajectories"] and saved["reflections"]
        assert all(any(p["doc"] == "ulm" for p in r["provenance"]) for r in saved["trajectories"])
    report = small_kg.add_documents([ULM_V2], model="offline")
    assert report.memories_invalidated >= 4 and stale_records(small_kg, store) == []
    for uid, run_id in runs.items():
        assert load_run(store, "prov", run_id, (uid,)) == {"trajectories": [], "reflections": []}


def test_r3cycle_stale_records_read_as_absent(small_kg):
    store = InMemoryStore()
    out = _r3(small_kg, store).invoke({"question": QUESTION})
    assert load_run(store, "prov", out["run_id"], kg=small_kg)["trajectories"]
    small_kg.add_documents([ULM_V2], model="offline")
    assert load_run(store, "prov", out["run_id"])["trajectories"]                  # still stored
    assert load_run(store, "prov", out["run_id"], kg=small_kg)["trajectories"] == []


def test_a_trajectory_rewritten_after_every_step_puts_each_index_entry_once(small_kg):
    """A trajectory is rewritten after every step and rests on every document of a visited hub:
    the index entries its earlier writes put are not put again."""
    from collections import Counter

    from langgraph.store.base import PutOp

    puts, writes = Counter(), Counter()

    class Spy(InMemoryStore):
        def batch(self, ops):
            ops = list(ops)
            for op in ops:
                if isinstance(op, PutOp) and op.value is not None:
                    (puts if INDEX_KIND in op.namespace else writes)[(op.namespace, op.key)] += 1
            return super().batch(ops)

    store = Spy()
    small_kg.add_memory_store(store)
    out = _r3(small_kg, store, max_cycles=0).invoke({"question": QUESTION})
    trajectory = [n for (ns, _), n in writes.items() if ns[-1] == "trajectories"]
    assert trajectory and max(trajectory) >= 2                # rewritten as the attempt grew
    assert puts and max(puts.values()) == 1, puts
    small_kg.add_documents([ULM_V2], model="offline")          # still indexed: the replace takes it along
    assert load_run(store, "prov", out["run_id"])["trajectories"] == []


def test_put_records_skips_only_the_index_entries_already_put(small_kg):
    store = InMemoryStore()
    ulm = provenance_for(small_kg, [next(n.id for n in small_kg.nodes("chunk") if n.attrs["doc_id"] == "ulm")])
    both = provenance_for(small_kg, [n.id for n in small_kg.nodes("chunk")])
    done: dict = {}
    index = ("kgmem", "prov", INDEX_KIND)

    def entries():
        return sorted(it.value["doc"] for it in store.search(index, limit=100))

    put_records(store, "prov", "trajectories", {"t": {"provenance": ulm}}, indexed=done)
    assert entries() == ["ulm"] and done == {"t": {"ulm": ulm[0]["hash"]}}
    for it in store.search(index, limit=100):
        store.delete(tuple(it.namespace), it.key)
    put_records(store, "prov", "trajectories", {"t": {"provenance": both}}, indexed=done)
    assert entries() == ["warsaw"]                           # ulm's entry was already put
    moved = [{**p, "hash": "another version"} if p["doc"] == "ulm" else p for p in both]
    put_records(store, "prov", "trajectories", {"t": {"provenance": moved}}, indexed=done)
    assert entries() == ["ulm", "warsaw"]                    # a new version of ulm: its entry again


# ------------------------------------------------------------------ CatRAG's neighbour summaries

def _catrag_model(summary, log):
    def respond(messages, request):
        step = getattr(request, "step", None)
        log.append(step)
        if step == "filter_facts":
            return {"keep": [1, 2]}
        if step == "anchor_entities":
            return {"names": ["Ulm"]}
        if step == "weight_edges":
            return {"scores": [{"neighbour": n["neighbour"], "score": 9} for n in request.context["neighbours"]]}
        if step == "summarize_neighbour":
            return summary
        return "Rhine"

    return ScriptedChatModel(responder=respond)


def _catrag(kg, store, summary, log):
    app = create_catrag_graph(kg, model=_catrag_model(summary, log), store=store, tau=0, anchoring=False,
                              key_fact_boost=False).compile(store=store)
    return app.invoke({"question": QUESTION})


def test_catrag_summaries_resting_on_a_replaced_document_go(small_kg):
    _, store = small_kg.persistence()
    _catrag(small_kg, store, "summary of version one", [])
    ns = ("kgmem", "prov", "summaries")
    cached = {it.key: it.value for it in list_items(store, ns)}
    on_ulm = {k for k, v in cached.items() if any(p["doc"] == "ulm" for p in v["provenance"])}
    assert on_ulm
    report = small_kg.add_documents([ULM_V2], model="offline")
    assert report.memories_invalidated >= len(on_ulm)
    assert not on_ulm & {it.key for it in list_items(store, ns)} and stale_records(small_kg, store) == []


def test_catrag_regenerates_a_stale_summary_at_read_time(small_kg):
    store = InMemoryStore()
    _catrag(small_kg, store, "summary of version one", [])
    ns = ("kgmem", "prov", "summaries")
    on_ulm = {it.key for it in list_items(store, ns) if any(p["doc"] == "ulm" for p in it.value["provenance"])}
    assert on_ulm
    small_kg.add_documents([ULM_V2], model="offline")
    log: list[str] = []
    _catrag(small_kg, store, "summary of version two", log)
    assert "summarize_neighbour" in log
    assert {it.key for it in list_items(store, ns) if it.value["summary"] == "summary of version two"} >= {
        k for k in on_ulm if small_kg.node(k) is not None and small_kg.sources_of(k)}


# ------------------------------------------------------------------ the shared record format and the cost

def test_any_kind_with_a_provenance_field_is_invalidated(small_kg):
    """The shared experience layer's kinds (feedback, credit ...) use the same format and index."""
    _, store = small_kg.persistence()
    chunk = next(n.id for n in small_kg.nodes("chunk") if n.attrs["doc_id"] == "ulm")
    other = next(n.id for n in small_kg.nodes("chunk") if n.attrs["doc_id"] == "warsaw")
    put_records(store, "prov", "feedback", {"f1": {"useful": [chunk], "provenance": provenance_for(small_kg, [chunk])},
                                            "f2": {"useful": [other], "provenance": provenance_for(small_kg, [other])}},
                scope=("carol",))
    assert small_kg.add_documents([ULM_V2], model="offline").memories_invalidated == 1
    assert store.get(("kgmem", "prov", "carol", "feedback"), "f1") is None
    assert store.get(("kgmem", "prov", "carol", "feedback"), "f2") is not None


class CountingStore(InMemoryStore):
    """Counts the items a caller reads or writes (each op, and each item a search returns)."""

    touched = 0

    def batch(self, ops):
        out = super().batch(ops)
        self.touched += sum(len(r) if isinstance(r, list) else 1 for r in out)
        return out


def test_invalidation_reads_only_what_rests_on_the_changed_document(small_kg):
    store = CountingStore()
    small_kg.add_memory_store(store)
    chunk = next(n.id for n in small_kg.nodes("chunk") if n.attrs["doc_id"] == "ulm")
    other = next(n.id for n in small_kg.nodes("chunk") if n.attrs["doc_id"] == "warsaw")
    unrelated = {f"w{i}": {"provenance": provenance_for(small_kg, [other])} for i in range(2000)}
    put_records(store, "prov", "feedback", {**unrelated, "u1": {"provenance": provenance_for(small_kg, [chunk])}})
    store.touched = 0
    assert small_kg.add_documents([ULM_V2], model="offline").memories_invalidated == 1
    assert store.touched < 20          # the index entry and the one record, not the 2,000 others


def test_the_async_ingest_invalidates_too(small_kg):
    import asyncio

    _, store = small_kg.persistence()
    chunk = next(n.id for n in small_kg.nodes("chunk") if n.attrs["doc_id"] == "ulm")
    put_records(store, "prov", "feedback", {"f1": {"provenance": provenance_for(small_kg, [chunk])}})
    report = asyncio.run(small_kg.aadd_documents([ULM_V2], model="offline"))
    assert report.documents_replaced == 1 and report.memories_invalidated == 1
    assert store.get(("kgmem", "prov", "feedback"), "f1") is None


def test_the_benchmark_touches_the_same_items_at_any_memory_size(tmp_path):
    from bench_helpers import TOOLS  # noqa: F401  (puts tools/ on sys.path)
    from bench_provenance import main

    out = tmp_path / "rows.json"
    assert main(["--store", "memory", "--documents", "4", "--sizes", "30,300", "--changed", "1,2", "--repeat", "1",
                 "--resting", "3", "--json", str(out)]) == 0
    import json

    rows = json.loads(out.read_text())["results"]
    assert [(r["memory_records"], r["documents_changed"], r["records_invalidated"]) for r in rows] == [
        (30, 1, 3), (300, 1, 3), (300, 2, 6)]
    assert rows[0]["items_touched"] == rows[1]["items_touched"] < rows[2]["items_touched"]
    assert rows[1]["full_scan_items"] == 300
