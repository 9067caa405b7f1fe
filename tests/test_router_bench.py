"""The mixed benchmark's bookkeeping: per-part quality, the oracle router (best single method per
question in hindsight) and the summary the router's goals are read from."""

from __future__ import annotations

import argparse

import bench_helpers  # noqa: F401  (puts tools/ on sys.path)
from benchlib.api import BenchQuestion
from benchlib.metrics import QuestionOutcome
from benchlib.mixed import ORACLE_ROUTER, PARTS, oracle_rows, quality, rows_of, summarize

ARGS = argparse.Namespace(decider="oracle")


def _q(part: str, i: int) -> BenchQuestion:
    return BenchQuestion(f"{part}:{i}", f"q{i}", "yes", [], [], extra={"part": part})


def _o(qid: str, *, retrieved=None, gold=(), answer="no", calls=0) -> QuestionOutcome:
    return QuestionOutcome(qid, list(retrieved) if retrieved is not None else None, list(gold), answer, "yes",
                           {"llm_calls": calls}, None, 0.01)


def test_quality_is_recall_at_5_for_passages_and_em_for_records_and_graphs():
    assert quality(_o("a", retrieved=["g1", "x"], gold=["g1", "g2"]), "musique") == 0.5
    assert quality(_o("a", retrieved=None, gold=["g1"]), "hotpotqa") == 0.0     # a records method: a miss
    assert quality(_o("a", answer="Yes"), "beijing-rain") == 1.0
    assert quality(_o("a", answer="no"), "graph-qa") == 0.0


def test_the_oracle_router_takes_each_questions_best_method_and_the_summary_compares():
    qs = [_q("hotpotqa", 0), _q("beijing-rain", 1)]
    runs = {
        "catrag": [_o("h", retrieved=["g"], gold=["g"], calls=4), _o("r", answer="no", calls=4)],
        "kgirag": [_o("h", retrieved=[], gold=["g"], calls=2), _o("r", answer="yes", calls=2)],
        "router": [_o("h", retrieved=["g"], gold=["g"], calls=4), _o("r", answer="yes", calls=3)],
    }
    results = {m: {1: {"outcomes": o}} for m, o in runs.items()}
    rows = [row for m in runs for row in rows_of(m, results[m], qs, ARGS, {})]
    rows += oracle_rows(results, qs, ARGS)
    oracle = {r["part"]: r for r in rows if r["method"] == ORACLE_ROUTER}
    assert oracle["all"]["quality"] == 1.0 and oracle["all"]["llm_calls_per_query"] == 3.0
    assert all(r["parts"] == list(PARTS) for r in rows)
    summary = summarize(rows)["pass 1"]
    assert summary["hotpotqa"]["best_single"] == "catrag" and summary["beijing-rain"]["best_single"] == "kgirag"
    assert summary["all"]["router_quality"] == 1.0 and summary["all"]["best_single_quality"] == 0.5
    assert summary["all"]["costliest"] == "catrag" and summary["all"]["router_calls_vs_costliest"] == 0.875
    assert summary["all"]["router_minus_oracle"] == 0.0


def _routed(qid: str, method: str, *, good: bool, tried: tuple[str, ...] = ()) -> QuestionOutcome:
    o = _o(qid, answer="yes" if good else "no")
    o.extra = {"routed_to": method, "tried": [[m, 0.5] for m in tried or (method,)]}
    return o


def test_feedback_learning_counts_routes_moved_from_a_wrong_method_to_one_that_answers_right():
    from benchlib.mixed import feedback_learning

    qs = [_q("graph-qa", i) for i in range(4)]
    single = {   # pass 2, in hindsight: r3cycle answers q0 and q1, graphcot q1 only, nobody q2
        "r3cycle": [_o("a", answer="yes"), _o("b", answer="yes"), _o("c"), _o("d", answer="yes")],
        "graphcot": [_o("a"), _o("b", answer="yes"), _o("c"), _o("d", answer="yes")],
    }
    results = {m: {2: {"outcomes": o}} for m, o in single.items()}
    results["router"] = {
        1: {"outcomes": [_routed("a", "graphcot", good=False), _routed("b", "graphcot", good=False),
                         _routed("c", "graphcot", good=False), _routed("d", "r3cycle", good=True)]},
        2: {"outcomes": [_routed("a", "r3cycle", good=True), _routed("b", "graphcot", good=False),
                         _routed("c", "r3cycle", good=False), _routed("d", "r3cycle", good=True)]},
    }
    learned = feedback_learning(results, qs)[2]
    assert learned["judged_wrong"] == 3 and learned["improvable"] == 2 and learned["rerouted"] == 2
    assert learned["improved"] == 1            # q0: graphcot -> r3cycle, which answers it; q2: nobody can
    assert learned["now_good"] == 1 and learned["quality_before"] == 0.0 and learned["quality_after"] == 0.3333
    assert learned["all_quality_before"] == 0.25 and learned["all_quality_after"] == 0.5
    assert [r["right"] for r in learned["routes"]] == [["r3cycle"], ["graphcot", "r3cycle"], []]
    assert learned["better_route_existed"] == 2 and learned["routed_better"] == 1


def test_the_learning_goal_counts_only_questions_where_a_method_the_router_had_not_tried_answers():
    """N of K: K, the questions judged wrong where a better route existed (a method the router did not
    try on it the pass before answers it right now); a question answered right on fresh dice by the
    very methods judged wrong, or by nobody, is not one feedback could route better."""
    from benchlib.mixed import feedback_learning

    qs = [_q("graph-qa", i) for i in range(3)]
    single = {   # pass 2 in hindsight: q0 answered by r3cycle only; q1 by both (fresh dice); q2 by graphcot only
        "r3cycle": [_o("a", answer="yes"), _o("b", answer="yes"), _o("c")],
        "graphcot": [_o("a"), _o("b", answer="yes"), _o("c", answer="yes")],
    }
    results = {m: {2: {"outcomes": o}} for m, o in single.items()}
    results["router"] = {   # q1: graphcot first, escalated to r3cycle, both judged wrong with it
        1: {"outcomes": [_routed("a", "graphcot", good=False), _routed("b", "r3cycle", good=False,
                                                                        tried=("graphcot", "r3cycle")),
                         _routed("c", "graphcot", good=False)]},
        2: {"outcomes": [_routed("a", "r3cycle", good=True), _routed("b", "r3cycle", good=True),
                         _routed("c", "r3cycle", good=False)]},
    }
    learned = feedback_learning(results, qs)[2]
    assert learned["judged_wrong"] == 3 and learned["improvable"] == 3
    assert learned["better_route_existed"] == 1        # q0 only: q1's answerers were both tried, q2's was judged wrong
    assert learned["routed_better"] == 1
    assert [r["better"] for r in learned["routes"]] == [["r3cycle"], [], []]
    assert [r["tried"] for r in learned["routes"]][1] == ["graphcot", "r3cycle"]


def test_the_router_oracle_gives_each_routed_method_its_own_adapters_responder(monkeypatch, tmp_path):
    """Common random numbers: a routed method meets the responder (and dice) its own adapter gives the
    question on the parts it was built for, and an LLM without the right data elsewhere."""
    import benchlib.methods.router as bench_router
    from benchlib.api import BenchContext

    made = []
    monkeypatch.setattr(bench_router, "_own_oracle",
                        lambda ctx, q, method: made.append(method) or (lambda messages, request: f"from {method}"))
    ctx = BenchContext(kg=None, store=None, checkpointer=None, decider="oracle", dataset="mixed", workdir=tmp_path,
                       options={"noise": 0.0})
    respond = bench_router.router_oracle(ctx, _q("graph-qa", 0))
    request = argparse.Namespace(step="answer", schema=None, context={})
    for running, said in (("r3cycle", "from r3cycle"), ("graphcot", "from graphcot"), ("catrag", "no answer"),
                          ("r3cycle", "from r3cycle")):
        monkeypatch.setattr(bench_router, "running_method", lambda m=running: m)
        assert respond([], request) == said
    assert made == ["r3cycle", "graphcot"]    # one responder per method and question, kept across its calls


def test_the_running_method_is_read_from_the_subgraphs_checkpoint_namespace(monkeypatch):
    import langgraph.config

    from benchlib.methods.router import running_method

    for ns, method in (("run_hipporag2:ab12|filter_facts:cd34", "hipporag2"), ("route_question:ef56", None), ("", None)):
        monkeypatch.setattr(langgraph.config, "get_config", lambda ns=ns: {"configurable": {"checkpoint_ns": ns}})
        assert running_method() == method


def test_the_eager_router_variant_builds_the_router_with_its_options_and_runs_only_when_named(monkeypatch, tmp_path):
    import benchlib.methods.router as bench_router
    from benchlib.api import BenchContext

    built = {}

    class Graph:
        def compile(self, store=None):
            return "app"

    monkeypatch.setattr(bench_router, "sync_codebook", lambda *a, **k: None)
    monkeypatch.setattr(bench_router, "create_router_graph", lambda kg, **kw: built.update(kw) or Graph())
    by_name = {a.name: a for a in bench_router.ADAPTERS}
    ctx = BenchContext(kg=None, store=None, checkpointer=None, decider="oracle", dataset="mixed", workdir=tmp_path,
                       options={})
    by_name["router-eager"].setup(ctx)
    assert built["escalate_below"] == 1.0 and ctx.cache["router"] == "app"
    built.clear()
    by_name["router"].setup(ctx)
    assert "escalate_below" not in built
    assert [n for n, a in by_name.items() if a.in_default_run] == ["router"]
