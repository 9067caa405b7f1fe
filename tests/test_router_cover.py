"""The router's passage ranking: the answering method's first places kept, the next ones completed by
the question words they add, from every ranking the run made; nothing fetched, no LLM call."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.graphs.router import create_router_graph
from langgraph_kgmem.graphs.router.cover import cover_ranking, passage_ids

Q = "Which river flows through the birthplace of the author of Silent Pines?"
TEXTS = {
    "a": "Silent Pines is a novel by Anna Berg.",          # author, silent, pines
    "b": "Silent Pines was published in 1987.",
    "c": "A review of Silent Pines praised its author.",
    "d": "Pines grow in the north.",
    "e": "Anna Berg's birthplace is Tromso; the Tana river flows past it.",   # birthplace, river, flows
    "f": "The novel sold well.",
    "x": "The river through Tromso flows north.",          # river, flows (another run's passage)
}


def text(pid: str) -> str:
    return TEXTS[pid]


def ids(ranked):
    return [p["id"] for p in ranked]


def test_places_after_keep_go_to_the_passage_that_names_the_most_missing_question_words():
    own = ["a", "b", "c", "d", "e", "f"]
    ranked = cover_ranking(Q, own, [], text, keep=3, top=5)
    # a, b, c stay; e names birthplace, river, flows (missing from a-c) and moves up over d
    assert ids(ranked)[:4] == ["a", "b", "c", "e"]
    assert [p["by"] for p in ranked[:4]] == ["method", "method", "method", "cover"]
    # place 5: nothing left adds a question word, so the method's own next place
    assert ranked[4] == {"id": "d", "by": "method"}
    assert ids(ranked) == ["a", "b", "c", "e", "d", "f"]


def test_another_runs_passage_fills_a_place_only_by_the_words_it_adds():
    own = ["a", "b", "c", "d", "f"]
    ranked = cover_ranking(Q, own, [["x", "b"]], text, keep=3, top=5)
    assert ids(ranked)[:5] == ["a", "b", "c", "x", "d"]
    assert ranked[3]["by"] == "cover"
    # a passage of another run that adds nothing stays below the method's own places
    plain = cover_ranking(Q, ["a", "b", "c", "d"], [["f"]], text, keep=3, top=5)
    assert ids(plain) == ["a", "b", "c", "d", "f"] and plain[-1]["by"] == "other"


def test_top_at_or_under_keep_leaves_the_methods_ranking_as_it_is():
    own = ["a", "b", "c", "d", "e", "f"]
    for top in (0, 3):
        assert ids(cover_ranking(Q, own, [["x"]], text, keep=3, top=top)) == own + ["x"]
    with pytest.raises(ValueError, match="keep and top"):
        cover_ranking(Q, own, [], text, keep=-1, top=5)


def test_passage_ids_read_each_methods_output_shape():
    assert passage_ids({"passages": [{"id": "c1"}, {"id": "c2"}, {"id": "c1"}]}) == ["c1", "c2"]
    apr = {"evidence": [{"id": "s1", "kind": "sentences", "chunks": ["c3", "c4"]}, {"id": "s2", "chunks": ["c3"]}]}
    assert passage_ids(apr) == ["c3", "c4"]
    walk = {"evidence": [{"id": "ent-1", "kind": "entity"}, {"id": "c5", "kind": "chunk"}, {"id": "rel-1", "kind": "fact"}]}
    assert passage_ids(walk) == ["c5"]
    assert passage_ids({"answer": "yes"}) == []


# passages about the book crowd the top places; the one naming its author ranks last in CatRAG's order
BOOK = {"Silent Pines": "Silent Pines is a novel by Anna Berg.",
        "Silent Pines (film)": "Silent Pines is a film made from the novel Silent Pines.",
        "Silent Pines (album)": "Silent Pines is an album named after Silent Pines.",
        "Silent Lake": "Silent Lake is near the Silent Pines forest.",
        "Tromso": "Tromso, where Anna Berg was born, has the Tana river flowing by it.",
        "Tana": "The Tana river flows through Tromso, the birthplace of Anna Berg.",
        "Berg": "Anna Berg is an author."}


def test_the_router_returns_the_answering_methods_ranking_completed_by_coverage():
    kg = KnowledgeGraph.in_memory(name="cover")
    kg.add_documents([{"title": t, "text": s} for t, s in BOOK.items()], model="offline")
    app = create_router_graph(kg, model="offline", methods=("catrag", "autopruned")).compile(store=InMemoryStore())
    out = app.invoke({"question": Q})
    assert out["route"]["method"] == "catrag"
    own = passage_ids(out["result"] | {"evidence": out["evidence"]})
    title = {p: kg.node(p).attrs["title"] for p in own}
    got = ids(out["passages"])
    assert got[:3] == own[:3] and sorted(got) == sorted(own)          # nothing fetched, nothing lost
    # "author", the one question word CatRAG's first three places miss, brings its passage up to place 4
    assert title[own[-1]] == "Berg" and title[got[3]] == "Berg" and out["passages"][3]["by"] == "cover"
    plain = app.invoke({"question": Q}, context={"cover_top": 0})
    assert ids(plain["passages"]) == passage_ids(plain["result"] | {"evidence": plain["evidence"]})


def test_an_escalated_runs_passages_join_the_pool_of_the_answering_runs_ranking():
    from langgraph_kgmem.graphs.router.nodes import router_passages
    from langgraph_kgmem.graphs.router.options import RouterOptions

    kg = KnowledgeGraph.in_memory(name="cover-pool")
    kg.add_documents([{"title": t, "text": s} for t, s in BOOK.items()], model="offline")
    by_title = {n.attrs["title"]: n.id for n in kg.nodes("chunk")}
    own = [by_title[t] for t in ("Silent Pines", "Silent Pines (film)", "Silent Lake", "Silent Pines (album)")]
    state = {"question": Q, "best": "catrag",
             "rankings": {"catrag": own, "remindrag": [by_title["Tana"], by_title["Berg"]]}}
    got = router_passages(state, RouterOptions.build(), kg)
    # the escalated run's passages name river, flows, birthplace and author, which the first three miss
    assert [p["id"] for p in got][:5] == own[:3] + [by_title["Tana"], by_title["Berg"]]
    assert router_passages({**state, "best": "autopruned"}, RouterOptions.build(), kg) == []


def test_an_escalated_router_run_keeps_both_runs_rankings():
    from langgraph_kgmem.testing import ScriptedChatModel

    def respond(messages, request):   # CatRAG's filter keeps nothing: a weak result, so ReMindRAG runs too
        step = getattr(request, "step", None)
        if step == "filter_facts":
            return {"keep": []}
        if step == "anchor_entities":
            return {"names": []}
        if step == "weight_edges":
            return {"scores": []}
        return "Tana"

    kg = KnowledgeGraph.in_memory(name="cover-esc")
    kg.add_documents([{"title": t, "text": s} for t, s in BOOK.items()], model="offline")
    app = create_router_graph(kg, model=ScriptedChatModel(responder=respond),
                              methods=("catrag", "remindrag")).compile(store=InMemoryStore(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    out = app.invoke({"question": Q}, config)
    assert [t["method"] for t in out["route"]["tried"]] == ["catrag", "remindrag"]
    rankings = app.get_state(config).values["rankings"]
    assert set(rankings) == {"catrag", "remindrag"} and all(rankings.values())
    pool = {p for r in rankings.values() for p in r}
    assert {p["id"] for p in out["passages"]} == pool
