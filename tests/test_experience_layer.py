"""The experience layer's provenance and its distractor penalty: every credit record names the
documents and versions its item rests on and is indexed under them, so a replace or a delete
invalidates it in the same call (counted in ``IngestReport.memories_invalidated``, in every
tenant, on SQLite and PostgreSQL), and a store the KG does not know reads a stale record as
absent; a passage marked wrong in several runs and useful in none is demoted for any question."""

from __future__ import annotations

import numpy as np
import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem import KnowledgeGraph, create_catrag_graph, give_feedback
from langgraph_kgmem.memory import INDEX_KIND, list_items, namespace
from langgraph_kgmem.memory.experience import ExperienceMemory, distractor_penalty
from langgraph_kgmem.memory.provenance import holds

ULM_V1 = {"id": "ulm", "text": "Albert Einstein was born in Ulm. Ulm is a city on the Danube."}
ULM_V2 = {"id": "ulm", "text": "Albert Einstein was born in Ulm. Ulm is a city on the Rhine."}
WARSAW = {"id": "warsaw", "text": "Marie Curie was born in Warsaw. Warsaw is a city on the Vistula."}
QUESTION = "Which river flows through the city where Albert Einstein was born?"
TENANTS = ("alice", "bob")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def stored_kg(request, tmp_path):
    """Two documents, memory in LangGraph's SqliteStore (a KG directory) or PostgresStore."""
    if request.param == "sqlite":
        g = KnowledgeGraph.open(tmp_path / "kg", name="exp", embeddings="hash")
    else:
        g = KnowledgeGraph.open(request.getfixturevalue("new_database")(), name="exp", embeddings="hash")
    g.add_documents([ULM_V1, WARSAW], model="offline")
    yield g
    g.close()


def chunk_of(kg, doc):
    return next(n.id for n in kg.nodes("chunk") if n.attrs["doc_id"] == doc)


def experience(store, kg, tenant):
    return {it.key: it.value for it in list_items(store, namespace(kg.name, "experience", (tenant,)))}


def test_credit_rests_on_its_documents_and_goes_with_them_in_every_tenant(stored_kg):
    kg = stored_kg
    _, store = kg.persistence()
    app = create_catrag_graph(kg, model="offline", top_passages=2, experience=True,
                              memory_scope=("{user_id}",)).compile(store=store)
    ulm, warsaw = chunk_of(kg, "ulm"), chunk_of(kg, "warsaw")
    for tenant in TENANTS:
        out = app.invoke({"question": QUESTION}, context={"user_id": tenant})
        assert {ulm, warsaw} <= {e["id"] for e in out["evidence"]}
        give_feedback(kg, out["run_id"], useful=[ulm], wrong=[warsaw], store=store, scope=(tenant,))
        records = experience(store, kg, tenant)
        assert records[ulm]["provenance"] == [{"doc": "ulm", "hash": kg.document("ulm")["content_hash"]}]
        assert records[warsaw]["provenance"][0]["doc"] == "warsaw"
        # indexed under its document in the batch that wrote it
        label_ns = namespace(kg.name, INDEX_KIND, (tenant,))
        index = [it for it in store.search(label_ns, limit=1000) if it.value["kind"] == "experience"]
        assert {(it.value["doc"], it.value["key"]) for it in index} == {("ulm", ulm), ("warsaw", warsaw)}
    # per tenant: the run record, the feedback record and the ulm passage's credit rest on ulm
    report = kg.add_documents([ULM_V2], model="offline")
    assert report.documents_replaced == 1 and report.memories_invalidated == 3 * len(TENANTS)
    for tenant in TENANTS:
        records = experience(store, kg, tenant)
        assert ulm not in records and warsaw in records            # the other document's credit stays
        assert all(holds(kg, r.get("provenance")) for r in records.values())
        assert not list_items(store, namespace(kg.name, "feedback", (tenant,)))
    counts = kg.delete_document("warsaw")
    assert counts["memories_invalidated"] == len(TENANTS)           # the warsaw credit of each tenant
    assert all(experience(store, kg, t) == {} for t in TENANTS)


def test_a_store_the_kg_does_not_know_reads_stale_credit_as_absent():
    kg = KnowledgeGraph.in_memory(name="exp", embeddings="hash")
    kg.add_documents([ULM_V1, WARSAW], model="offline")
    store = InMemoryStore()   # built apart: no invalidation reaches it
    entity = next(n.id for n in kg.nodes("entity") if n.text == "Ulm")   # an id that outlives a replace
    q = kg.embed_query(QUESTION)
    mem = ExperienceMemory(store, kg.name, ("alice",), kg=kg)
    mem.add([entity], (), q)
    assert mem.credit([entity], q)[0] > 0.5
    assert kg.add_documents([ULM_V2], model="offline").memories_invalidated == 0
    assert kg.node(entity) is not None and store.get(mem.ns, entity) is not None   # still stored ...
    assert mem.credit([entity], q)[0] == 0.0                                        # ... never read
    mem.add([entity], (), q)                  # credited again: learnt from nothing on the new version
    again = store.get(mem.ns, entity).value
    assert again["n"] == 1 and holds(kg, again["provenance"])
    # without the KG, the layer cannot check (and says so in its docstring): the record is read
    assert ExperienceMemory(store, kg.name, ("alice",)).credit([entity], q)[0] > 0.5
    kg.close()


def test_the_distractor_penalty_counts_runs_and_useful_marks_cancel():
    assert distractor_penalty(1.0, 0.0, 2) == 0.0
    assert distractor_penalty(2.0, 0.0, 2) == 0.5 and distractor_penalty(3.0, 0.0, 2) == 0.75
    assert distractor_penalty(3.0, 1.0, 2) == 0.0            # a useful mark cancels two wrong ones
    assert distractor_penalty(50.0, 0.0, 2) < 1.0 and distractor_penalty(9.0, 0.0, 0) == 0.0
    store = InMemoryStore()
    mem = ExperienceMemory(store, "exp", ("alice",))
    asked, other = np.eye(8)[0], np.eye(8)[5]               # an unrelated question: cosine 0
    mem.add((), ["chk-a"], asked)
    assert mem.credit(["chk-a"], other)[0] == 0.0            # one wrong mark: only for questions like it
    mem.add((), ["chk-a"], asked)
    assert mem.credit(["chk-a"], other)[0] == pytest.approx(-0.5, abs=1e-6)   # two: for any question
    assert ExperienceMemory(store, "exp", ("bob",)).credit(["chk-a"], other)[0] == 0.0   # not another tenant's
    assert ExperienceMemory(store, "exp", ("alice",), distractor_after=0).credit(["chk-a"], other)[0] == 0.0
    for _ in range(20):
        mem.add((), ["chk-a"], asked)
    assert -1.0 <= mem.credit(["chk-a"], asked)[0] < -0.9     # bounded however often it is marked


def test_catrag_demotes_a_passage_marked_wrong_in_two_runs_for_a_new_question():
    kg = KnowledgeGraph.in_memory(name="exp", embeddings="hash")
    kg.add_documents([ULM_V1, WARSAW], model="offline")
    store = InMemoryStore()
    app = create_catrag_graph(kg, model="offline", top_passages=1, experience=True,
                              experience_weight=1.0).compile(store=store)
    new_question = "Where was Albert Einstein born?"
    before = app.invoke({"question": new_question})["passages"]
    first = before[0]["id"]
    for question in ("Einstein's birthplace river?", "Which city on the Danube?"):
        out = create_catrag_graph(kg, model="offline", top_passages=2).compile(store=store).invoke(
            {"question": question})
        assert first in {e["id"] for e in out["evidence"]}
        give_feedback(kg, out["run_id"], wrong=[first], store=store)
    after = app.invoke({"question": new_question})
    assert after["ppr"]["experience"] == {first: pytest.approx(-0.5, abs=1e-3)}
    old, new = (next(p for p in ranking if p["id"] == first) for ranking in (before, after["passages"]))
    assert new["dense"] == pytest.approx(old["dense"] - 0.5, abs=1e-3) and new["ppr"] < old["ppr"]
    off = create_catrag_graph(kg, model="offline", top_passages=1, experience=True, experience_weight=1.0,
                              experience_distractor_after=0).compile(store=store)
    assert off.invoke({"question": new_question})["passages"] == before   # no penalty, and the marks were for other questions
    kg.close()


def test_the_split_marks_gold_useful_and_other_passages_wrong_and_dense_reads_the_layer():
    from bench_helpers import offline_kg  # noqa: I001  (puts tools/ on sys.path)
    from benchlib.feedback_split import DenseReader, marks, ranked_ids

    kg = offline_kg([{"title": "Ulm", "text": ULM_V1["text"]}, {"title": "Warsaw", "text": WARSAW["text"]}])
    ulm, warsaw = (next(n.id for n in kg.nodes("chunk") if n.attrs["title"] == t) for t in ("Ulm", "Warsaw"))
    entity = next(n.id for n in kg.nodes("entity"))
    evidence = [{"id": ulm}, {"id": warsaw}, {"id": entity}, {"id": "run-a", "chunks": [ulm]}]
    assert marks(kg, evidence, {ulm}) == ([ulm, "run-a"], [warsaw])   # entities stay unmarked
    assert ranked_ids({"evidence": evidence}) == [ulm, warsaw, entity, "run-a", ulm]
    store = InMemoryStore()
    reader = DenseReader(kg, store, experience=True, options={})
    question = {"question": "Where was Marie Curie born?"}
    assert [p["id"] for p in reader.invoke(question, {"user_id": "u"})["passages"]][0] == warsaw
    mem = ExperienceMemory(store, kg.name, ("u",), kg=kg)
    for asked in ("Curie's river?", "Vistula city?"):          # two runs marked it wrong
        mem.add((), [warsaw], kg.embed_query(asked))
    assert [p["id"] for p in reader.invoke(question, {"user_id": "u"})["passages"]][0] == ulm
    assert [p["id"] for p in reader.invoke(question, {"user_id": "v"})["passages"]][0] == warsaw   # per tenant
    kg.close()


def test_catrag_reads_the_layer_by_default_and_the_hipporag2_preset_does_not():
    """The documented defaults (docs/memory.md): on where the held-out figures never lost."""
    from langgraph_kgmem.graphs.registry import METHODS

    kg = KnowledgeGraph.in_memory(name="exp", embeddings="hash")
    kg.add_documents([ULM_V1, WARSAW], model="offline")
    store = InMemoryStore()
    question = "Where was Albert Einstein born?"
    first = create_catrag_graph(kg, model="offline", top_passages=1).compile(store=store).invoke(
        {"question": question})["evidence"][0]["id"]
    mem = ExperienceMemory(store, kg.name, kg=kg)
    for asked in ("Einstein's birthplace river?", "Which city on the Danube?"):
        mem.add((), [first], kg.embed_query(asked))
    catrag = create_catrag_graph(kg, model="offline", top_passages=1).compile(store=store)
    assert catrag.invoke({"question": question})["ppr"]["experience"] == {first: pytest.approx(-0.5, abs=1e-3)}
    hipporag2 = create_catrag_graph(kg, model="offline", top_passages=1, **METHODS["hipporag2"].preset)
    assert "experience" not in hipporag2.compile(store=store).invoke({"question": question})["ppr"]
    kg.close()
