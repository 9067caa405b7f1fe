"""The benchmark harness (tools/bench.py): loaders, metrics, baselines, deciders, the JSON contract.

Runs on a tiny hand-made fixture (tests/fixtures/bench_tiny.jsonl) with the hashing embedding;
nothing here needs the benchmark data.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from bench_helpers import FIXTURE, bench_cache, offline_kg  # noqa: F401  (a fixture; puts tools/ on sys.path)

from benchlib import datasets, metrics, runner
from benchlib.api import BenchContext, BenchQuestion, MethodResult, titles_of
from benchlib.registry import discover
import fusion_rules  # noqa: E402  (tools/, put on the path by bench_helpers)


def make_ctx(passages, decider="offline"):
    kg = offline_kg(passages)
    cp, store = kg.persistence()
    return BenchContext(kg=kg, store=store, checkpointer=cp, decider=decider, dataset="tiny", workdir=Path("."))


# ------------------------------------------------------------------------------------ loaders


def test_load_questions_reads_the_normalized_form():
    qs = datasets.load_questions(str(FIXTURE))
    assert [q.id for q in qs] == ["q1", "q2", "q3"]
    assert qs[0].answer == "Vistula"
    assert qs[0].supporting_titles == ["Warsaw", "Vistula"]
    assert qs[0].passages[1] == {"title": "Vistula", "text": qs[0].passages[1]["text"]}


def test_question_selection_first_n_or_seeded_sample():
    assert [q.id for q in datasets.load_questions(str(FIXTURE), 2)] == ["q1", "q2"]
    a = [q.id for q in datasets.load_questions(str(FIXTURE), 2, seed=7)]
    assert a == [q.id for q in datasets.load_questions(str(FIXTURE), 2, seed=7)]  # reproducible
    assert a == sorted(a, key=["q1", "q2", "q3"].index)  # file order kept


def test_pooled_corpus_deduplicates_on_title_and_text():
    qs = datasets.load_questions(str(FIXTURE))
    pooled = datasets.pooled_passages(str(FIXTURE), qs)
    # q2's "Warsaw" repeats q1's exactly; q3's "Danube"/"Vistula" have other texts and stay
    assert len(pooled) == 10
    assert [p["title"] for p in pooled].count("Warsaw") == 1
    assert [p["title"] for p in pooled].count("Danube") == 2


def test_missing_bench_data_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("KGMEM_BENCH_DATA", str(tmp_path))
    with pytest.raises(datasets.DatasetError, match=r"hotpotqa.*missing.*benchmarks/data"):
        datasets.load_questions("hotpotqa", 3)
    with pytest.raises(datasets.DatasetError, match="unknown dataset 'nope'"):
        datasets.load_questions("nope")


def test_malformed_jsonl_line_names_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "q?", "passages": []}\n{not json}\n')
    with pytest.raises(datasets.DatasetError, match=r"bad.jsonl:2 is not valid JSON"):
        datasets.load_questions(str(bad))
    bad.write_text('{"id": "a", "question": "q?"}\n')
    with pytest.raises(datasets.DatasetError, match=r"missing key\(s\) \['passages'\]"):
        datasets.load_questions(str(bad))


# ------------------------------------------------------------------------------------ metrics


def test_recall_and_full_chain_on_hand_computed_cases():
    gold = ["A", "B"]
    assert metrics.recall_at_k(["A", "C", "B"], gold, 2) == 0.5
    assert metrics.recall_at_k(["A", "C", "B"], gold, 5) == 1.0
    assert metrics.recall_at_k(["C", "D"], gold, 5) == 0.0
    assert metrics.full_chain(["C", "A", "D", "E", "B"], gold) == 1.0
    assert metrics.full_chain(["C", "A", "D", "E", "F", "B"], gold) == 0.0


def test_exact_match_and_f1_hotpotqa_normalisation():
    assert metrics.exact_match("The Vistula.", "vistula") == 1.0
    assert metrics.exact_match("Vistula river", "Vistula") == 0.0
    # pred tokens {vistula, river}, gold {vistula}: P=1/2, R=1 → F1=2/3
    assert metrics.f1_score("the Vistula river", "Vistula") == pytest.approx(2 / 3)
    assert metrics.f1_score("yes", "no") == 0.0
    assert metrics.f1_score("no answer", "Vistula") == 0.0


def test_aggregate_reports_null_for_metrics_that_do_not_apply():
    o = metrics.QuestionOutcome("q", None, ["A"], None, "x", {"llm_calls": 2, "llm_seconds": 0.5}, None, 1.5)
    row = metrics.aggregate([o], method="m", decider="oracle", dataset="d", pass_no=1)
    assert row["recall@2"] is None and row["fcr"] is None  # no passage retrieval in the method: n/a, not 0
    assert row["retrieval"] == "n/a" and "| n/a | n/a | n/a |" in metrics.markdown_table([row])
    assert row["em"] is None and row["f1"] is None          # no answer produced
    assert row["retrieved_per_query"] is None
    assert row["recall_all"] is None and row["passages_per_query"] is None
    assert row["llm_calls_per_query"] == 2.0
    assert row["wall_ms_median"] == 1500.0 and row["non_llm_ms_median"] == 1000.0
    assert row["embed_ms_median"] == 0.0 and row["core_ms_median"] == 1000.0


def test_embedding_time_is_split_out_of_the_non_llm_time():
    runs = [(1.5, 0.5, 0.25), (1.0, 0.0, 0.5), (0.3, 0.1, 0.0)]  # (wall, llm, embedding) seconds
    outcomes = [metrics.QuestionOutcome(f"q{i}", [], ["A"], None, "x", {"llm_seconds": llm}, None, wall,
                                        embed_seconds=emb) for i, (wall, llm, emb) in enumerate(runs)]
    row = metrics.aggregate(outcomes, method="m", decider="oracle", dataset="d", pass_no=1)
    assert row["non_llm_ms_median"] == 1000.0        # median of 1000, 1000, 200
    assert row["core_ms_median"] == 500.0            # median of 750, 500, 200
    assert row["embed_ms_median"] == 250.0


def test_aggregate_averages_and_merges_numeric_extras():
    a = metrics.QuestionOutcome("a", ["A", "B"], ["A", "B"], "1903", "1903", {}, 5, 0.1, extra={"hops": 2, "tag": "x"})
    b = metrics.QuestionOutcome("b", ["C", "A"], ["A", "B"], "no", "1903", {}, 3, 0.3, extra={"hops": 4})
    row = metrics.aggregate([a, b], method="m", decider="offline", dataset="d", pass_no=2)
    assert row["recall@2"] == 0.75 and row["fcr"] == 0.5 and row["em"] == 0.5
    assert row["retrieved_per_query"] == 4.0 and row["hops"] == 3.0 and "tag" not in row


# ------------------------------------------------------------------------------------ baselines


@pytest.mark.parametrize("name", ["dense", "bm25"])
def test_baselines_rank_the_matching_passage_first(name):
    reg = discover()
    adapter = reg.get(name)
    passages = [
        {"title": "Bears", "text": "The brown bear eats salmon and berries in Alaska."},
        {"title": "Volcanoes", "text": "A volcano erupts lava, ash and volcanic gases. Mount Etna erupts most often."},
        {"title": "Chess", "text": "Chess is a board game played by two players on a checkered board."},
    ]
    ctx = make_ctx(passages)
    adapter.setup(ctx)
    q = BenchQuestion("x", "Which volcano erupts most often?", "Mount Etna", passages, ["Volcanoes"])
    res = adapter.run(ctx, q, "offline")
    assert titles_of(ctx.kg, res.retrieved_ids)[0] == "Volcanoes"
    assert res.usage["llm_calls"] == 0 and res.usage["prompt_tokens"] > 50  # would-be prompt counted
    assert res.retrieved_count == len(res.retrieved_ids) <= 3
    assert res.answer == "Mount Etna"  # the methods' short offline answer


def test_bm25_reports_no_passage_without_a_shared_term():
    adapter = discover().get("bm25")
    ctx = make_ctx([{"title": "Chess", "text": "Chess is a board game."}])
    adapter.setup(ctx)
    res = adapter.run(ctx, BenchQuestion("x", "volcanic eruption?", "", [], []), "offline")
    assert res.retrieved_ids == []


def test_oracle_decider_builds_a_scripted_model_from_the_adapter():
    from langgraph_kgmem.testing import ScriptedChatModel

    adapter = discover().get("dense")
    q = datasets.load_questions(str(FIXTURE))[1]
    ctx = make_ctx(q.passages, decider="oracle")
    adapter.setup(ctx)
    model = runner.make_model("oracle", adapter, ctx, q)
    assert isinstance(model, ScriptedChatModel)
    res = adapter.run(ctx, runner.blinded(q), model)
    assert res.answer == "1903"  # the gold answer is in the retrieved evidence
    assert model.call_count == 1 and res.usage["llm_calls"] == 1
    assert res.usage["prompt_tokens"] > 50 and res.usage["completion_tokens"] >= 1
    assert runner.make_model("offline", adapter, ctx, q) == "offline"


# ------------------------------------------------------------------------------------ registry & runs


def test_unknown_method_lists_registered_ones(capsys):
    assert runner.main(["--method", "nope", "--dataset", str(FIXTURE), "--embeddings", "hash"]) == 2
    err = capsys.readouterr().err
    assert "unknown method 'nope'" in err
    listed = err.split("registered: ")[1].split(";")[0].strip().split(", ")
    assert {"bm25", "dense"} <= set(listed) and listed == sorted(listed)


def test_a_broken_adapter_module_is_reported_not_fatal(tmp_path, monkeypatch):
    pkg = tmp_path / "fakemethods"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "good.py").write_text(textwrap.dedent("""
        class A:
            name, corpus, datasets = "good", "per-question", None
            def setup(self, ctx): pass
            def run(self, ctx, q, model): pass
            def oracle(self, ctx, q): pass
        ADAPTERS = [A()]
    """))
    (pkg / "broken.py").write_text("import not_a_real_module_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = discover("fakemethods")
    assert reg.names() == ["good"]
    assert "ModuleNotFoundError" in reg.broken["broken"]
    with pytest.raises(Exception, match=r"unknown method 'broken'.*failed to import"):
        reg.get("broken")


def test_run_writes_contract_json_and_markdown(bench_cache, tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = runner.main(["--method", "dense,bm25", "--decider", "oracle", "--dataset", str(FIXTURE), "--questions", "3",
                      "--passes", "2", "--json", str(out), "--embeddings", "hash"])
    assert rc == 0
    data = json.loads(out.read_text())
    rows = data["results"]
    assert [(r["method"], r["pass"]) for r in rows] == [("dense", 1), ("dense", 2), ("bm25", 1), ("bm25", 2)]
    for r in rows:
        assert list(r)[:len(metrics.ROW_KEYS)] == list(metrics.ROW_KEYS)
        assert r["questions"] == 3 and r["decider"] == "oracle" and r["dataset"] == "bench_tiny"
        assert 0.0 <= r["recall@2"] <= r["recall@5"] <= 1.0
        assert r["llm_calls_per_query"] == 1.0 and r["peak_rss_mb"] > 0
    assert "| dense | oracle | bench_tiny |" in capsys.readouterr().out
    # the second run reuses the cached KGs
    assert data["meta"]["kg"]["per-question"]["kgs"] == 3
    runner.main(["--method", "bm25", "--dataset", str(FIXTURE), "--json", str(out), "--embeddings", "hash",
                 "--passes", "1"])
    assert json.loads(out.read_text())["meta"]["kg"]["per-question"]["from_cache"] is True


def test_per_question_records_feed_the_offline_fusion_rules(bench_cache, tmp_path, capsys):
    out, rec = tmp_path / "r.json", tmp_path / "q.jsonl"
    rc = runner.main(["--method", "dense,catrag-adaptive", "--dataset", str(FIXTURE), "--questions", "3",
                      "--passes", "1", "--json", str(out), "--embeddings", "hash", "--per-question", str(rec)])
    assert rc == 0
    rows = [json.loads(x) for x in rec.read_text().splitlines()]
    assert [r["method"] for r in rows] == ["dense"] * 3 + ["catrag-adaptive"] * 3
    assert all(r["dataset"] == "bench_tiny" and r["pass"] == 1 and r["gold"] for r in rows)
    fused = [r["extra"]["fusion"] for r in rows[3:] if "fusion" in r["extra"]]
    assert all({"confidence", "share", "own_keys", "dense_keys"} <= set(f) for f in fused)
    assert fusion_rules.main(["--tune", str(rec)]) == 0
    assert "| catrag |" in capsys.readouterr().out


def test_per_question_records_say_what_the_after_method_lent(bench_cache, tmp_path):
    """``--after M --per-question``: M's own runs come first as pass 0 (``then`` names the method
    asked after it), and each run of the measured method says what it was lent and whether the
    lent answer was given again (docs/memory.md reads the issue-40 cells from these)."""
    out, rec = tmp_path / "r.json", tmp_path / "q.jsonl"
    rc = runner.main(["--method", "hipporag2", "--after", "catrag", "--reuse", "--decider", "oracle",
                      "--dataset", str(FIXTURE), "--questions", "3", "--passes", "1", "--json", str(out),
                      "--embeddings", "hash", "--per-question", str(rec)])
    assert rc == 0
    rows = [json.loads(x) for x in rec.read_text().splitlines()]
    assert [(r["method"], r["pass"], r.get("then")) for r in rows] == \
        [("catrag", 0, "hipporag2")] * 3 + [("hipporag2", 1, None)] * 3
    first = {r["qid"]: r for r in rows[:3]}
    lent = [r for r in rows[3:] if r["extra"].get("reused")]
    assert lent and all(r["extra"]["reused"]["method"] == "catrag" and r["extra"]["reused"]["passages"] for r in lent)
    assert {r["qid"] for r in lent} == {q for q, r in first.items() if r["answer"] != "no answer"}
    for r in rows[3:]:   # the answer call is counted by step, and only where no lent answer was given again
        given = (r["extra"].get("reused") or {}).get("answer_given", False)
        assert r["calls_by_step"].get("answer", 0) == (0 if given else 1)
        assert sum(r["calls_by_step"].values()) == r["llm_calls"]


class _MemoryProbe:
    """An adapter that writes one store item per question and reports how many it found."""

    name, corpus, datasets = "probe", "pooled", None

    def setup(self, ctx):
        ctx.cache["setups"] = ctx.cache.get("setups", 0) + 1

    def run(self, ctx, q, model):
        assert q.supporting_titles == [] and q.answer == ""  # gold is blinded for methods
        ns = ("kgmem", "bench", "probe")
        seen = len(ctx.store.search(ns, limit=100))
        ctx.store.put(ns, q.id, {"pass": ctx.options["pass"]})
        return MethodResult(retrieved_ids=None, answer=None, extra={"memories_seen": seen})

    def oracle(self, ctx, q):
        return lambda messages, request: "{}"


def test_passes_share_kg_and_store_so_memory_shows(bench_cache, tmp_path):
    args = runner.parse_args(["--dataset", str(FIXTURE), "--embeddings", "hash", "--passes", "2"])
    emb = runner.make_embeddings("hash")
    plan = runner.plan_methods(args, [_MemoryProbe()], emb)[0]
    assert plan.mode == "pooled" and len(plan.corpora) == 1
    res = runner.run_plan(plan, [1, 2], tmp_path / "run", emb, args, None, reopen=False)
    rows = runner.rows_for(plan, res, args)
    assert [r["memories_seen"] for r in rows] == [1.0, 3.0]  # pass 1: 0,1,2 → mean 1; pass 2: 3 each
    assert rows[0]["recall@5"] is None and rows[0]["em"] is None


def test_fresh_process_passes_reopen_the_persisted_store(bench_cache, tmp_path):
    out = tmp_path / "fp.json"
    rc = runner.main(["--method", "remindrag", "--dataset", str(FIXTURE), "--questions", "2", "--passes", "2",
                      "--fresh-process", "--corpus", "pooled", "--json", str(out), "--embeddings", "hash"])
    assert rc == 0
    rows = json.loads(out.read_text())["results"]
    assert [r["pass"] for r in rows] == [1, 2]
    # pass 2 runs in a new process: it replays the edge memory pass 1 wrote to the persisted store
    assert rows[0]["replayed_nodes"] == 0 < rows[1]["replayed_nodes"]
    assert rows[1]["hops"] < rows[0]["hops"]
    assert not any((bench_cache / "runs").iterdir())  # run directory cleaned up


def test_perf_suite_ppr_agrees_with_networkx_on_a_small_graph():
    from benchlib.perf import ppr_suite

    (row,) = ppr_suite((1000,), seed=3)
    assert row["edges"] == 1000 and row["nodes"] == 200
    assert row["max_abs_score_diff_vs_networkx"] < 1e-6
    for key in ("snapshot_build_ms", "ppr_median_ms", "ppr_with_100_overrides_median_ms", "kg_ppr_median_ms",
                "networkx_pagerank_median_ms"):
        assert row[key] > 0


def test_recall_over_everything_retrieved_counts_titles_past_the_top_five():
    a = metrics.QuestionOutcome("a", ["C", "D", "E", "F", "G", "A", "B"], ["A", "B"], None, "x", {}, 7, 0.1)
    b = metrics.QuestionOutcome("b", ["A", "C"], ["A", "B"], None, "x", {}, 2, 0.1)
    row = metrics.aggregate([a, b], method="m", decider="oracle", dataset="d", pass_no=1)
    assert row["recall@5"] == 0.25 and row["recall_all"] == 0.75   # a: 0 and 1; b: 0.5 and 0.5
    assert row["passages_per_query"] == 4.5


def test_offline_answer_prompt_is_counted_only_offline():
    from benchlib.api import answer_prompt, with_offline_answer_prompt

    prompt = answer_prompt("Where?", [{"id": "c1", "kind": "chunk", "title": "Warsaw", "text": "Warsaw is in Poland."}])
    assert "[Warsaw] Warsaw is in Poland." in prompt and prompt.endswith("Question: Where?\nAnswer:")
    usage = {"llm_calls": 0, "prompt_tokens": 0}
    off = with_offline_answer_prompt(usage, "offline", prompt)
    assert off["prompt_tokens"] > 20 and off["llm_calls"] == 0 and usage["prompt_tokens"] == 0  # copy, not mutated
    assert with_offline_answer_prompt(usage, object(), prompt) == usage          # real calls are counted already
    assert with_offline_answer_prompt(usage, "offline", lambda: None) == usage   # no answer prompt would be sent


def test_every_answering_qa_adapter_counts_its_offline_answer_prompt():
    reg = discover()
    q = datasets.load_questions(str(FIXTURE))[0]
    for name in ("remindrag", "catrag", "hipporag2"):
        adapter = reg.get(name)
        ctx = make_ctx(q.passages)
        adapter.setup(ctx)
        res = adapter.run(ctx, runner.blinded(q), "offline")
        assert res.usage["llm_calls"] == 0 and res.usage["prompt_tokens"] > 50, name
        ctx.kg.close()


def test_autopruned_variants_have_explicit_options():
    reg = discover()
    opts = {n: reg.get(n).options for n in ("autopruned", "autopruned-m5", "autopruned-pruned")}
    assert [(o["fine_m"], o["edges_per_run"], o["phrase_facts"]) for o in opts.values()] == [
        (20, None, "always"), (5, None, "always"), (10, 1, "always")]
    from langgraph_kgmem.graphs.autopruned import SENTENCES_PRESET

    sentences = reg.get("autopruned-sentences").options
    assert {k: sentences[k] for k in SENTENCES_PRESET} == SENTENCES_PRESET and sentences["phrase_facts"] == "always"


def test_autopruned_sentences_preset_answers_from_sentences_within_its_budget():
    from langgraph_kgmem.graphs.autopruned import SENTENCES_PRESET

    reg = discover()
    q = datasets.load_questions(str(FIXTURE))[0]
    adapter = reg.get("autopruned-sentences")
    ctx = make_ctx(q.passages)
    adapter.setup(ctx)
    out = ctx.cache["autopruned-sentences"].invoke({"question": q.question})
    assert out["encoding"] == "sentences" and 0 < out["prompt_tokens_packed"] <= SENTENCES_PRESET["sentence_budget"] + 10   # + the [facts] header
    res = adapter.run(ctx, runner.blinded(q), "offline")
    assert res.usage["llm_calls"] == 0 and res.usage["prompt_tokens"] > out["prompt_tokens_packed"]
    assert res.retrieved_ids
    ctx.kg.close()


def test_unknown_corpus_mode_is_an_error(bench_cache):
    class Odd(_MemoryProbe):
        name, corpus = "odd", "none"

    args = runner.parse_args(["--dataset", str(FIXTURE), "--embeddings", "hash"])
    with pytest.raises(runner.BenchError, match="corpus 'none'"):
        runner.plan_methods(args, [Odd()], runner.make_embeddings("hash"))


def test_markdown_table_takes_any_columns():
    table = metrics.markdown_table([{"a": 1.23456, "b": None}], ["a", ("b", "B")])
    assert table.splitlines() == ["| a | B |", "|---|---|", "| 1.235 | – |"]


def test_apr_curve_measures_dense_k_and_apr_settings_side_by_side():
    """benchlib.apr_curve: per question and point, prompt tokens, answer in prompt and gold coverage;
    dense top-k prompts grow with k; a sentence_budget setting stays near its budget."""
    from benchlib import apr_curve

    qs = datasets.load_questions(str(FIXTURE))
    kg = offline_kg([p for q in qs for p in q.passages])
    _, store = kg.persistence()
    settings = {n: apr_curve.SETTINGS[n] for n in ("apr-pruned", "sb100-m10-q")}
    per_point = apr_curve.measure(kg, store, qs, settings=settings, hipporag2=True, log=lambda *_: None)
    rows = {r["point"]: r for r in apr_curve.summarize(per_point)}
    assert set(rows) == {"dense-1", "dense-2", "dense-3", "dense-5", "hipporag2-prompt", "apr-pruned", "sb100-m10-q"}
    assert all(r["questions"] == len(qs) for r in rows.values())
    dense = [rows[f"dense-{k}"]["prompt_tokens"] for k in apr_curve.DENSE_K]
    assert dense == sorted(dense) and rows["hipporag2-prompt"]["prompt_tokens"] > rows["dense-5"]["prompt_tokens"]
    assert all(0.0 <= r["answer_in_prompt"] <= 1.0 and 0.0 <= r["gold_coverage"] <= 1.0 for r in rows.values())
    assert rows["sb100-m10-q"]["prompt_tokens"] < rows["dense-5"]["prompt_tokens"]
    # R@5 and FCR grade dense's ranking at 5 whatever k its prompt holds
    assert len({(rows[f"dense-{k}"]["recall@5"], rows[f"dense-{k}"]["fcr"]) for k in apr_curve.DENSE_K}) == 1
    assert all(0.0 <= r["fcr"] <= r["recall@5"] <= 1.0 for r in rows.values())
    kg.close()


def test_apr_curve_lodo_picks_per_held_out_set_among_settings_that_meet_the_goals():
    """A setting qualifies on a set only at <= half of dense top-5's tokens with R@5 and FCR >= dense's;
    each held-out set gets the qualifying setting with the best answer-in-prompt on the others."""
    from benchlib import apr_curve

    def row(point, tokens, aip, r5, fcr):
        return {"point": point, "prompt_tokens": tokens, "answer_in_prompt": aip, "recall@5": r5, "fcr": fcr}

    def summary(big_aip):
        return [row("dense-5", 700, 0.5, 0.6, 0.3), row("hipporag2-prompt", 800, 0.5, 0.6, 0.3),
                row("small", 340, 0.55, 0.6, 0.3), row("big", 380, big_aip, 0.7, 0.4),
                row("weak", 300, 0.9, 0.5, 0.3)]

    figs = apr_curve.feasible_figures(summary(0.6))
    assert figs == {"small": 0.55, "big": None, "weak": None}   # big: over half the tokens; weak: R@5 below dense
    rows = apr_curve.lodo_choice({"a": summary(0.6), "b": summary(0.6)}, "small")
    assert [(r["held_out"], r["chosen_on_others"], r["out_of_sample"]) for r in rows] == [("a", "small", 0.55),
                                                                                         ("b", "small", 0.55)]


def test_apr_curve_lodo_prefers_a_setting_meeting_the_goals_on_more_of_the_other_sets():
    """Missing the goals on a set never helps a setting: held out c, "partial" (R@5 under dense on b)
    loses to "steady" (goals met on a and b) though its answer-in-prompt on a is higher; held out b,
    both meet the goals on a and c and the higher answer-in-prompt wins."""
    from benchlib import apr_curve

    def summary(partial_r5):
        return [{"point": "dense-5", "prompt_tokens": 700, "answer_in_prompt": 0.5, "recall@5": 0.6, "fcr": 0.3},
                {"point": "steady", "prompt_tokens": 340, "answer_in_prompt": 0.55, "recall@5": 0.6, "fcr": 0.3},
                {"point": "partial", "prompt_tokens": 340, "answer_in_prompt": 0.7, "recall@5": partial_r5,
                 "fcr": 0.3}]

    rows = apr_curve.lodo_choice({"a": summary(0.6), "b": summary(0.5), "c": summary(0.6)}, "steady")
    assert {r["held_out"]: r["chosen_on_others"] for r in rows} == {"a": "steady", "b": "partial", "c": "steady"}


def test_apr_curve_grades_dense_coverage_by_passage_not_by_title():
    """MuSiQue repeats titles: a distractor sharing the gold passage's title is not gold. The
    distractor here matches the question's words, so dense top-1 retrieves it and covers nothing."""
    from benchlib import apr_curve

    gold = {"title": "Lake Tahoe", "text": "The basin drains north through the Truckee River toward Pyramid Lake."}
    twin = {"title": "Lake Tahoe", "text": "Which county holds the lake? Lake Tahoe county lake holds which question."}
    other = {"title": "Reno", "text": "Reno is a city in Nevada with casinos and a university."}
    q = BenchQuestion("q1", "Which county holds the lake Lake Tahoe?", "Truckee River", [gold, twin, other],
                      ["Lake Tahoe"], supporting_passages=[0])
    kg = offline_kg(q.passages)
    _, store = kg.persistence()
    rows = {r["point"]: r for r in apr_curve.summarize(apr_curve.measure(kg, store, [q], settings={},
                                                                         log=lambda *_: None))}
    assert rows["dense-1"]["gold_coverage"] == 0.0, "the title twin was graded as the gold passage"
    assert rows["dense-5"]["gold_coverage"] == 1.0
    kg.close()


def test_a_row_says_how_many_decisions_the_model_made_and_why_the_rest_fell_back():
    from langgraph_kgmem.llm import call_usage, decision_usage, fallback_record, merge_usage

    made = merge_usage(decision_usage("function_calling"), call_usage("x", 10, 2, 0.1, reported=True))
    fell = merge_usage(decision_usage("prompt"), call_usage("x", 10, 2, 0.1))
    fell["fallbacks"] = [fallback_record("x", "malformed", "not JSON")]
    outcomes = [metrics.QuestionOutcome("q1", ["a"], ["a"], "x", "x", made, 1, 0.5),
                metrics.QuestionOutcome("q2", ["a"], ["a"], "x", "x", fell, 1, 0.7)]
    row = metrics.aggregate(outcomes, method="m", decider="local-llm", dataset="d", pass_no=1)
    assert (row["model_decisions"], row["decisions_fell_back"], row["fallback_share"]) == (2, 1, 0.5)
    assert row["fallbacks_by_kind"] == {"malformed": 1}
    assert row["structured_output"] == {"function_calling": 1, "prompt": 1}
    assert row["tokens_source"] == "server 1 calls, counted 1"
    offline = metrics.aggregate([metrics.QuestionOutcome("q1", ["a"], ["a"], "x", "x", {}, 1, 0.5)],
                                method="m", decider="offline", dataset="d", pass_no=1)
    assert "model_decisions" not in offline     # no model, no decision figures
