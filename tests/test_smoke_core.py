import pytest

from langgraph_kgmem.agent_tools import create_kgmem_tools


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


def test_option_checks_name_the_option_and_the_allowed_range():
    from langgraph_kgmem.errors import KgmemInputError, check_int, check_number

    check_int("k", 3, 1)
    check_int("k", None, 1, optional=True)
    check_number("x", 0.5, 0.0, 1.0, low_open=True)
    check_number("x", None, 0.0, optional=True)
    for call, message in [
        (lambda: check_int("k", 0, 1), "k must be an integer >= 1, got 0"),
        (lambda: check_int("k", True, 0), "k must be an integer >= 0, got True"),
        (lambda: check_int("k", 2.5, 1), "k must be an integer >= 1, got 2.5"),
        (lambda: check_int("k0", 4, 1, 3, optional=True), r"k0 must be an integer in \[1, 3\] or None, got 4"),
        (lambda: check_number("x", 0.0, 0.0, 1.0, low_open=True), r"x must be in \(0, 1\], got 0.0"),
        (lambda: check_number("x", 1.0, 0.0, 1.0, high_open=True), r"x must be in \[0, 1\), got 1.0"),
        (lambda: check_number("x", float("nan"), 0.0), "x must be a finite number >= 0, got nan"),
        (lambda: check_number("x", "0.5", 0.0, 1.0), r"x must be in \[0, 1\], got '0.5'"),
    ]:
        with pytest.raises(KgmemInputError, match=message):
            call()
