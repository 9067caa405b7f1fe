"""Documents that change (replaced in one transaction, memories on surviving edges kept) and
extraction with several LLM calls in flight (the same KG as a serial run)."""

from __future__ import annotations

import threading

import pytest

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.testing import ScriptedChatModel, scripted_extraction_model

V1 = "Marie Curie was born in Warsaw. Marie Curie married Pierre Curie."
V2 = "Marie Curie was born in Warsaw. Marie Curie worked in Paris."


def structure(kg):
    return sorted(n.id for n in kg.nodes()), sorted((e.id, e.weight) for e in kg.edges())


def test_a_changed_document_replaces_itself(make_kg):
    kg = make_kg("changes")
    kg.add_documents([{"id": "d1", "text": V1}, {"id": "d2", "text": "Pierre Curie was born in Paris."}],
                     model="offline")
    old_edges = set(kg.graph_store.doc_edge_ids("d1"))
    same = kg.add_documents([{"id": "d1", "text": V1}], model="offline")
    assert same.documents_skipped == 1 and same.documents_replaced == 0
    report = kg.add_documents([{"id": "d1", "text": V2}], model="offline")
    assert report.documents_replaced == 1 and report.documents_added == 0
    change = report.changes["d1"]
    new_edges = set(kg.graph_store.doc_edge_ids("d1"))
    assert change["edges_kept"] == len(old_edges & new_edges) > 0
    assert change["edges_removed"] == len(old_edges - new_edges) > 0 and change["edges_added"] > 0
    texts = [n.text for n in kg.nodes("chunk")]
    assert V2 in texts and V1 not in texts
    assert kg.nearest("Paris", 5)                        # the new version's content is searchable
    assert not any("married" in e.text for e in kg.edges("relation"))
    assert any(n.text == "Pierre Curie" for n in kg.nodes("entity"))   # d2 still needs it
    assert {d["id"] for d in kg.graph_store.documents()} == {"d1", "d2"}
    assert kg.graph_store.document("d1")["status"] == "done"
    # every node and fact of the new version kept its vector (re-added after its deletion in the same transaction)
    embedded = [n.id for n in kg.nodes() if n.kind in ("entity", "chunk", "anchor")]
    assert all(kg.vector_index.has("nodes", embedded))
    facts = [e.id for e in kg.edges("relation")]
    assert all(kg.vector_index.has("facts", facts))


def test_a_failed_replacement_keeps_the_old_version(make_kg, monkeypatch):
    kg = make_kg("changes-fail")
    kg.add_documents([{"id": "d1", "text": V1}], model="offline")
    before = structure(kg)
    real = kg.graph_store.put_document

    def fail_on_done(doc_id, **kw):
        if kw.get("status") == "done":
            raise RuntimeError("disk full")
        return real(doc_id, **kw)

    monkeypatch.setattr(kg.graph_store, "put_document", fail_on_done)
    with pytest.raises(RuntimeError, match="disk full"):
        kg.add_documents([{"id": "d1", "text": V2}], model="offline")
    monkeypatch.setattr(kg.graph_store, "put_document", real)
    assert structure(kg) == before and kg.graph_store.document("d1")["status"] == "done"


def corpus(n):
    names = ["Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Ken", "Dennis", "Niklaus", "John"]
    return [{"id": f"doc{i}", "text": f"{names[i % 10]} met {names[(i + 3) % 10]} in Town{i}. "
                                      f"{names[(i + 5) % 10]} wrote Book{i}."} for i in range(n)]


class _CountingModel(ScriptedChatModel):
    """The scripted extraction model, counting how many of its calls are in flight at once."""

    def __init__(self, **kw):
        super().__init__(responder=scripted_extraction_model().responder, **kw)
        object.__setattr__(self, "_counter", {"now": 0, "peak": 0, "lock": threading.Lock()})

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        c = self._counter
        with c["lock"]:
            c["now"] += 1
            c["peak"] = max(c["peak"], c["now"])
        try:
            return super()._generate(messages, stop, run_manager, **kwargs)
        finally:
            with c["lock"]:
                c["now"] -= 1


def test_concurrent_extraction_builds_the_serial_kg_with_calls_in_flight_together(make_kg):
    # concurrency shown by the calls in flight at once, never by wall-clock time (the testing contract)
    docs = corpus(16)
    serial, concurrent = make_kg("serial"), make_kg("concurrent")
    one, many = _CountingModel(latency=0.05), _CountingModel(latency=0.05)
    r1 = serial.add_documents(docs, model=one, max_concurrency=1)
    events = []
    r2 = concurrent.add_documents(docs, model=many, max_concurrency=8, on_progress=events.append)
    assert structure(serial) == structure(concurrent)
    assert r1.usage["llm_calls"] == r2.usage["llm_calls"] == 16 * 3
    assert one._counter["peak"] == 1 and 1 < many._counter["peak"] <= 8
    assert [e["done"] for e in events] == list(range(1, 17)) and events[-1]["total"] == 16
    assert [e["doc_id"] for e in events] == [d["id"] for d in docs]


def test_max_concurrency_is_checked(kg):
    with pytest.raises(KgmemInputError, match="max_concurrency"):
        kg.add_documents(["text"], model="offline", max_concurrency=0)


def test_a_replacement_reports_only_what_is_new_to_the_kg(make_kg):
    kg = make_kg("changes-report")
    kg.add_documents([{"id": "d1", "text": V1}], model="offline")
    report = kg.add_documents([{"id": "d1", "text": V2}], model="offline")
    change = report.changes["d1"]
    new_entities = {n.id for n in kg.nodes("entity")} - {"ent-marie-curie", "ent-warsaw"}
    # Marie Curie and Warsaw were in the old version: deleted and written again, not new
    assert report.entities_added == change["nodes_added"] == 1
    assert report.relations_added == 1 and change["edges_added"] == 2   # the fact plus its context edge
    assert report.change_totals() == change
    text = str(report)
    assert "1 new entities" in text and "1 new relations" in text
    assert (f"gained {change['nodes_added']} and lost {change['nodes_removed']} node(s), gained "
            f"{change['edges_added']} and lost {change['edges_removed']} edge(s), and kept "
            f"{change['edges_kept']} edge(s)") in text
    assert any(kg.node(i).text == "Paris" for i in new_entities)
