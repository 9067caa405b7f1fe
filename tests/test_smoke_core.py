from langgraph_kgmem.tools import create_kgmem_tools


def test_offline_ingest_builds_typed_graph(kg):
    st = kg.stats()
    assert st["documents"] == 4
    assert st["nodes_by_kind"]["chunk"] == 4 and st["nodes_by_kind"]["anchor"] == 4
    assert st["edges_by_kind"]["relation"] > 0 and st["edges_by_kind"]["context"] > 0
    names = {n.text for n in kg.nodes("entity")}
    assert {"Marie Curie", "Warsaw", "Vistula", "Poland"} <= names


def test_tools_answer_unknown_ids_with_observations(kg):
    tools = {t.name: t for t in create_kgmem_tools(kg)}
    assert "does not exist" in tools["NodeFeature"].invoke({"node_id": "ent-missing", "feature": "name"})
    hit = tools["RetrieveNode"].invoke({"keyword": "Warsaw"})
    assert "Warsaw" in hit
