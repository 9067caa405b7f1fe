"""Ids, titles, text, metadata, record names and tenants are checked where they enter the package:
a NUL (PostgreSQL refuses it, SQLite would keep it) or a lone surrogate (no backend can encode it)
is refused with KgmemInputError naming the culprit and its position, the same on both backends,
before anything is written. A batch with one bad document among good ones writes nothing."""

from __future__ import annotations

import pytest
from conftest import SAMPLE_DOCS

from langgraph_kgmem.errors import KgmemInputError

BAD = {"nul": ("a\x00b", "NUL character at character 1"), "surrogate": ("a\ud800b", "lone surrogate .* at character 1")}


def state(kg):
    """What a refused call must leave unchanged: every document row, node and edge."""
    stats = kg.stats()
    return stats["documents"], stats["nodes_by_kind"], stats["edges_by_kind"], \
        sorted((d["id"], d["status"]) for d in kg.documents()), sorted(n.id for n in kg.nodes())


@pytest.fixture
def kg2(make_kg):
    g = make_kg("test")
    g.add_documents(SAMPLE_DOCS[:2], model="offline")
    return g


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("field", ["id", "title", "text"])
def test_a_batch_with_one_bad_document_is_refused_whole(kg2, field, bad):
    value, where = BAD[bad]
    before = state(kg2)
    batch = [SAMPLE_DOCS[2], {**SAMPLE_DOCS[3], field: value}]   # the good one first: it is not written either
    with pytest.raises(KgmemInputError, match=where):
        kg2.add_documents(batch, model="offline")
    assert state(kg2) == before
    kg2.add_documents(SAMPLE_DOCS[2:], model="offline")   # the KG still takes good documents
    assert len(kg2.documents()) == 4


@pytest.mark.parametrize("bad", list(BAD))
def test_bad_metadata_is_refused(kg2, bad):
    value, where = BAD[bad]
    before = state(kg2)
    with pytest.raises(KgmemInputError, match=f"metadata .*{where}"):
        kg2.add_documents([{**SAMPLE_DOCS[2], "source": {"nested": [value]}}], model="offline")
    with pytest.raises(KgmemInputError, match=f"metadata .*key.*{where}"):
        kg2.add_documents([{**SAMPLE_DOCS[2], value: 1}], model="offline")
    assert state(kg2) == before


@pytest.mark.parametrize("bad", list(BAD))
def test_deleting_a_bad_document_id_is_refused(kg2, bad):
    value, where = BAD[bad]
    before = state(kg2)
    with pytest.raises(KgmemInputError, match=f"document id .*{where}"):
        kg2.delete_document(value)
    assert state(kg2) == before


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("part", ["subject", "source", "title", "text"])
def test_add_triples_refuses_bad_names(kg2, part, bad):
    value, where = BAD[bad]
    before = state(kg2)
    triple = (value if part == "subject" else "Oslo", "capital of", "Norway")
    kwargs = {part: value} if part != "subject" else {}
    with pytest.raises(KgmemInputError, match=where):
        kg2.add_triples([triple], **kwargs)
    assert state(kg2) == before


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("part", ["location", "column", "event_name"])
def test_add_records_refuses_bad_names(kg2, part, bad):
    value, where = BAD[bad]
    before = state(kg2)
    col = value if part == "column" else "rain"
    rows = [{"time": f"2024-05-01 {h:02d}:00", "location": value if part == "location" else "Pier", col: h % 2}
            for h in range(4)]
    kwargs = {"event_name": value} if part == "event_name" else {}
    with pytest.raises(KgmemInputError, match=where):
        kg2.add_records(rows, event_rule=f"{col} > 0" if part != "column" else (lambda row: False), **kwargs)
    assert state(kg2) == before


@pytest.mark.parametrize("bad", list(BAD))
def test_a_bad_tenant_is_refused_before_the_store_is_touched(kg2, bad):
    from langgraph_kgmem.memory import EdgeMemory, RecordMemory, memory_scope

    value, _ = BAD[bad]
    store = kg2.persistence()[1]
    with pytest.raises(KgmemInputError, match="memory scope label"):
        RecordMemory(store, kg2.name, "trajectories", (value,))
    with pytest.raises(KgmemInputError, match="memory scope label"):
        EdgeMemory(store, kg2.name, 8, ("ok", value))
    with pytest.raises(KgmemInputError, match="memory scope label"):
        memory_scope(("{user_id}",), {"configurable": {"user_id": value}})
    with pytest.raises(KgmemInputError, match="memory scope label"):
        kg2.reset_memory(scope=[value])
    assert kg2.memory() == []


def test_plain_names_still_pass(kg2):
    """The checks refuse only what cannot be stored: accents, CJK, emoji, tabs and newlines pass."""
    doc = {"id": "doc-é-中-😀", "title": "Zoë\tand 中文", "text": "Zoë was born in Łódź.\nShe moved to 東京."}
    kg2.add_documents([doc], model="offline")
    assert kg2.document("doc-é-中-😀")["status"] == "done"
    kg2.delete_document("doc-é-中-😀")


@pytest.mark.parametrize("bad", list(BAD))
def test_the_low_level_writes_refuse_bad_ids_and_text(kg2, bad):
    from langgraph_kgmem.kg.types import Edge

    value, where = BAD[bad]
    before = state(kg2)
    with pytest.raises(KgmemInputError, match=f"node id .*{where}"):
        kg2.add_node("entity", "Oslo", id=value)
    with pytest.raises(KgmemInputError, match=f"text of node .*{where}"):
        kg2.add_node("entity", value)
    a, b = sorted(n.id for n in kg2.nodes("entity"))[:2]
    with pytest.raises(KgmemInputError, match=f"text of edge .*{where}"):
        kg2.add_edges([Edge("rel-x", a, b, "relation", value)])
    with pytest.raises(KgmemInputError, match=f"text of edge .*{where}"):
        kg2.add_edge(a, b, "relation", text=value)
    assert state(kg2) == before
