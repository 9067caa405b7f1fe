"""Method specs: every registered method reaches every consumer (exports, CLI help, served graphs,
langgraph.json, agents, docs), options validate at build and per run, served graphs build once."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
from pathlib import Path

import pytest
from method_cases import QUESTION

import langgraph_kgmem
from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.registry import METHODS, method_specs
from langgraph_kgmem.graphs.spec import REQUIREMENTS, MethodOptions

ROOT = Path(__file__).resolve().parents[1]
NAMES = list(METHODS)


def test_every_method_package_has_a_spec():
    packages = sorted(p.name for p in (ROOT / "langgraph_kgmem" / "graphs").iterdir()
                      if (p / "__init__.py").is_file())
    assert packages == sorted(spec.name for spec in method_specs())
    for spec in method_specs():
        assert issubclass(spec.options, MethodOptions)
        assert set(spec.requirements) <= set(REQUIREMENTS)
        assert spec.summary and "\n" not in spec.summary and spec.description and spec.agent_description


@pytest.mark.parametrize("spec", method_specs(), ids=lambda s: s.name)
def test_factory_is_exported_by_the_package(spec):
    assert spec.export in langgraph_kgmem.__all__
    assert getattr(langgraph_kgmem, spec.export) is spec.factory


@pytest.mark.parametrize("name", NAMES)
def test_cli_help_names_the_method(name):
    from langgraph_kgmem.cli import build_parser

    ask = build_parser()._subparsers._group_actions[0].choices["ask"]
    assert name in ask.format_help().replace("\n", " ").replace("  ", " ")


def test_langgraph_json_serves_every_method_with_its_summary():
    graphs = json.loads((ROOT / "langgraph.json").read_text())["graphs"]
    assert list(graphs) == NAMES, "langgraph.json must list every registered method (and preset), in registry order"
    spec = importlib.util.spec_from_file_location("served_specs", ROOT / "graphs" / "served.py")
    served = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(served)
    for name, entry in graphs.items():
        assert entry == {"path": f"./graphs/served.py:{name}", "description": METHODS[name].summary}
        assert name in served.__dict__


@pytest.mark.parametrize("name", NAMES)
def test_agents_describe_the_method(name):
    from langgraph_kgmem.agents import METHOD_DESCRIPTIONS, RECORD_METHODS

    assert METHOD_DESCRIPTIONS[name] == METHODS[name].agent_description
    assert (name in RECORD_METHODS) == ("records" in METHODS[name].spec.requirements)


@pytest.mark.parametrize("spec", method_specs(), ids=lambda s: s.name)
def test_docs_page_exists_once_there_are_docs(spec):
    docs = ROOT / "docs"
    if docs.is_dir():   # the docs site is written in parallel: required once it exists
        assert (docs / "methods" / f"{spec.name}.md").is_file(), f"docs/methods/{spec.name}.md is missing"


@pytest.mark.parametrize("spec", method_specs(), ids=lambda s: s.name)
def test_the_factory_restates_no_option(spec):
    # an option's default lives only in the options model: the factory's own parameters are the KG,
    # the model, the store and the retry policy, and every option comes through **options
    params = inspect.signature(spec.factory).parameters
    restated = sorted(set(params) & set(spec.options.model_fields) - {"model"})
    assert not restated, f"{spec.export} declares options of its own (defaults twice): {restated}"


@pytest.mark.parametrize("name", NAMES)
def test_output_keys_are_in_the_output_schema(name, tiny_kg):
    entry = METHODS[name]
    app = entry.factory(tiny_kg, model="offline", **entry.preset).compile()
    channels = app.output_channels
    assert set(entry.spec.output_keys) <= set([channels] if isinstance(channels, str) else channels)


@pytest.fixture
def tiny_kg():
    kg = KnowledgeGraph.in_memory(name="specs")
    kg.add_documents([{"title": "Warsaw", "text": "Warsaw is the capital of Poland. Marie Curie was born in Warsaw."},
                      {"title": "Curie", "text": "Marie Curie studied in Paris. Pierre Curie was her husband."}],
                     model="offline")
    return kg


# ------------------------------------------------------------------------------------ options


def test_unknown_and_out_of_range_options_fail_at_build(tiny_kg):
    from langgraph_kgmem import create_catrag_graph

    with pytest.raises(KgmemInputError, match="no option 'top_k'.*top_passages"):
        create_catrag_graph(tiny_kg, model="offline", top_k=3)
    with pytest.raises(KgmemInputError, match="rank_depth"):
        create_catrag_graph(tiny_kg, model="offline", top_passages=30)


def test_catrag_options_override_per_run_with_tenant_ids(tiny_kg):
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem import create_catrag_graph

    app = create_catrag_graph(tiny_kg, model="offline").compile(store=InMemoryStore())
    default = app.invoke({"question": QUESTION})
    one = app.invoke({"question": QUESTION}, context={"top_passages": 1, "rank_depth": 1, "user_id": "alice"})
    assert len(default["passages"]) > 1 and len(one["passages"]) == 1
    with pytest.raises(KgmemInputError, match="top_passages"):
        app.invoke({"question": QUESTION}, context={"top_passages": 0})
    with pytest.raises(KgmemInputError, match="anchoring is fixed when the graph is built"):
        app.invoke({"question": QUESTION}, context={"anchoring": False})


def test_catrag_checks_that_read_two_options_see_the_build_values_under_the_run(tiny_kg):
    from langgraph_kgmem import create_catrag_graph

    # LangGraph gives a run's context to the graph with the options it leaves out at their class
    # defaults (rank_depth 20), not at the values the graph was built with (30)
    app = create_catrag_graph(tiny_kg, model="offline", rank_depth=30).compile()
    app.invoke({"question": QUESTION}, context={"top_passages": 25})
    with pytest.raises(KgmemInputError, match="rank_depth"):
        app.invoke({"question": QUESTION}, context={"top_passages": 31})


def test_kgirag_options_override_per_run():
    from langgraph_kgmem import create_kgirag_graph

    kg = KnowledgeGraph.in_memory(name="rain")
    rows = [{"time": f"2025-01-01 {h:02d}:00", "location": "Pier", "rain": r}
            for h, r in enumerate([0, 0, 1.2, 0.4, 0, 0])]
    kg.add_records(rows, event_rule="rain > 0", event_name="rain")
    app = create_kgirag_graph(kg, model="offline").compile()
    q = ("I would meet rain at Pier on a 2-hour trip leaving at 2025-01-01 01:00. What is the earliest "
         "departure time after then, at most 4 hours later, that avoids rain for the whole trip?")
    assert app.invoke({"question": q})["answer"] == "2025-01-01 04:00"
    short = app.invoke({"question": q}, context={"t_max": 1})
    assert short["iterations"] == 1 and short["answer"] == "no answer"


def test_autopruned_options_override_per_run(tiny_kg):
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem import create_autopruned_graph

    store = InMemoryStore()
    app = create_autopruned_graph(tiny_kg, model="offline", show="triples").compile(store=store)
    wide = app.invoke({"question": QUESTION}, context={"memorize": False})
    narrow = app.invoke({"question": QUESTION}, context={"fine_m": 1, "memorize": False})
    assert len(wide["selected_runs"]["F"]) > 1 and len(narrow["selected_runs"]["F"]) == 1
    assert len(narrow["evidence"]) < len(wide["evidence"])
    assert wide["answer_memory"] == narrow["answer_memory"] == "off"   # memorize=False held for the run alone
    assert app.invoke({"question": QUESTION})["answer_memory"] != "off"
    # a check across options reads the build's options with the run's on top, not the run's alone
    shown = app.invoke({"question": QUESTION}, context={"show": "sentences", "sentence_budget": 5, "memorize": False})
    assert shown["encoding"] == "sentences"
    sentences = create_autopruned_graph(tiny_kg, model="offline", show="sentences").compile(store=store)
    assert sentences.invoke({"question": QUESTION}, context={"sentence_budget": 5})["encoding"] == "sentences"
    with pytest.raises(KgmemInputError, match="fine_m must be an integer >= 1, got 0"):
        app.invoke({"question": QUESTION}, context={"fine_m": 0})
    with pytest.raises(KgmemInputError, match="sentence_budget needs show='sentences'"):
        app.invoke({"question": QUESTION}, context={"sentence_budget": 5})
    with pytest.raises(KgmemInputError, match="consolidate is fixed when the graph is built"):
        app.invoke({"question": QUESTION}, context={"consolidate": False})
    with pytest.raises(KgmemInputError, match="fine_m"):
        create_autopruned_graph(tiny_kg, model="offline", fine_m=0)


def test_r3cycle_options_override_per_run(tiny_kg):
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem import create_r3cycle_graph

    app = create_r3cycle_graph(tiny_kg, model="offline").compile(store=InMemoryStore())
    default = app.invoke({"question": QUESTION})
    assert default["attempts"][0]["budget"] == 10
    halted = app.invoke({"question": QUESTION}, context={"max_steps": 1})   # a halted attempt is retried
    assert [(a["budget"], a["outcome"]) for a in halted["attempts"]][0] == (1, "halted")
    assert len(halted["attempts"]) == 2
    short = app.invoke({"question": QUESTION}, context={"max_steps": 1, "max_cycles": 0})
    assert [(a["budget"], a["outcome"], len(a["steps"])) for a in short["attempts"]] == [(1, "halted", 1)]
    # top_n: RetrieveNode lists several nodes for this run only
    wide = app.invoke({"question": QUESTION}, context={"top_n": 3})
    assert wide["attempts"][0]["steps"][0]["observation"].count("ent-") == 3
    assert app.invoke({"question": QUESTION})["attempts"][0]["steps"][0]["observation"].count("ent-") == 1
    with pytest.raises(KgmemInputError, match="max_steps must be an integer >= 1, got 0"):
        app.invoke({"question": QUESTION}, context={"max_steps": 0})
    with pytest.raises(KgmemInputError, match="reflection is fixed when the graph is built"):
        app.invoke({"question": QUESTION}, context={"reflection": False})


def test_remindrag_options_override_per_run(tiny_kg):
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem import create_remindrag_graph

    graph = create_remindrag_graph(tiny_kg, model="offline")
    walked = graph.compile(store=InMemoryStore()).invoke({"question": QUESTION})
    assert len(walked["path"]) > 2 and walked["stop_reason"] == "sufficient"
    capped = graph.compile(store=InMemoryStore()).invoke({"question": QUESTION}, context={"max_hops": 2})
    assert len(capped["path"]) == 2 and capped["stop_reason"] == "max_hops"
    # the walk's passages alone (no fusion with the dense ranking) for this run
    app = graph.compile(store=InMemoryStore())
    fused = app.invoke({"question": QUESTION}, context={"max_hops": 0})
    alone = app.invoke({"question": QUESTION}, context={"max_hops": 0, "dense_fusion": False})
    assert len(alone["evidence"]) < len(fused["evidence"])
    with pytest.raises(KgmemInputError, match="lam"):
        app.invoke({"question": QUESTION}, context={"lam": 2.0})
    with pytest.raises(KgmemInputError, match="synonym_threshold is fixed when the graph is built"):
        app.invoke({"question": QUESTION}, context={"synonym_threshold": 0.9})


def test_tenant_ids_in_context_fill_the_memory_scope(tiny_kg):
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem import create_remindrag_graph

    store = InMemoryStore()
    app = create_remindrag_graph(tiny_kg, model="offline", memory_scope=("{user_id}",)).compile(store=store)
    with pytest.raises(KgmemInputError, match="user_id"):
        app.invoke({"question": QUESTION})
    out = app.invoke({"question": QUESTION}, context={"user_id": "alice"})
    assert out["answer"]
    with pytest.raises(KgmemInputError, match="human_in_the_loop is fixed when the graph is built"):
        app.invoke({"question": QUESTION}, context={"user_id": "alice", "human_in_the_loop": True})


# ------------------------------------------------------------------------------------ served graphs


def test_served_graph_is_built_once_per_process(tmp_path, monkeypatch):
    from langgraph_kgmem import serve
    from langgraph_kgmem.graphs import registry

    kg = KnowledgeGraph.open(tmp_path / "kg", name="served", embeddings="hash", vector_backend="memory")
    kg.add_documents([{"title": "Warsaw", "text": "Warsaw is the capital of Poland."}], model="offline")
    kg.close()
    monkeypatch.setenv("KGMEM_KG_DIR", str(tmp_path / "kg"))
    monkeypatch.setenv("KGMEM_EMBEDDINGS", "hash")
    monkeypatch.delenv("KGMEM_MODEL", raising=False)
    calls = []
    real = registry.get_factory

    def counting(name):
        factory, preset = real(name)

        def wrapped(*a, **k):
            calls.append(name)
            return factory(*a, **k)

        return wrapped, preset

    monkeypatch.setattr(registry, "get_factory", counting)
    serve.close_served()
    try:
        graph = serve.graph_factory("catrag")
        first = asyncio.run(graph({}))
        second = asyncio.run(graph({"configurable": {"thread_id": "x"}}))
        assert first is second and calls == ["catrag"]
        asyncio.run(graph({"configurable": {"model": "offline"}}))   # the same model named: no rebuild
        assert calls == ["catrag"]
    finally:
        serve.close_served()
