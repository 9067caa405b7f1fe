"""The kgirag/singlepass bench adapters on a hand-made metro-like file (not the shipped one).

Three weeks of hourly westbound volume at one site: a fixed daily profile, plus +500 spikes at a
few hours of the second week (the only rows above the 85th percentile for their hour of the week);
every hour of the first day is written twice (one row per weather condition, like the real file).
"""

from __future__ import annotations

import csv
import gzip
from datetime import datetime, timedelta
from pathlib import Path

import bench_helpers  # noqa: F401  (puts tools/ on sys.path)
import pytest

from benchlib import runner
from benchlib.api import BenchContext
from benchlib.methods import kgirag as adapter_module

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.testing import ScriptedChatModel

PROFILE = [300, 200, 150, 150, 400, 1500, 4500, 5500, 5000, 4300, 4200, 4400,
           4600, 4700, 4900, 5300, 5600, 5200, 4100, 3200, 2800, 2400, 1500, 800]
SPIKES = {(8, 6), (8, 7), (8, 8), (9, 15), (10, 10), (10, 11), (11, 17), (12, 2), (12, 3), (12, 4)}


@pytest.fixture
def metro_dir(tmp_path, monkeypatch):
    folder = tmp_path / "metro_traffic"
    folder.mkdir()
    start = datetime(2016, 3, 1)
    with gzip.open(folder / "metro_traffic_volume.csv.gz", "wt", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["holiday", "temp", "rain_1h", "snow_1h", "clouds_all", "weather_main", "weather_description",
                    "date_time", "traffic_volume"])
        for i in range(21 * 24):
            t = start + timedelta(hours=i)
            vol = PROFILE[t.hour] + (500 if (t.day, t.hour) in SPIKES else 0)
            w.writerow(["None", 280.0, 0.0, 0.0, 40, "Clouds", "few clouds", t.strftime("%Y-%m-%d %H:%M:%S"), vol])
            if i < 24:
                w.writerow(["None", 280.0, 0.0, 0.0, 90, "Mist", "mist", t.strftime("%Y-%m-%d %H:%M:%S"), vol])
    monkeypatch.setenv("KGMEM_BENCH_DATA", str(tmp_path))
    adapter_module._OBS.clear()
    yield tmp_path
    adapter_module._OBS.clear()


def _ctx(kg, decider="offline"):
    return BenchContext(kg=kg, store=None, checkpointer=None, decider=decider, dataset="metro-traffic",
                        workdir=Path("."))


def test_adapters_answer_generated_metro_questions_exactly(metro_dir):
    obs, desc = adapter_module.observations("metro-traffic")
    assert len(obs) == 21 * 24 and sum(o.abnormal for o in obs) == len(SPIKES)
    assert "85th percentile" in desc
    kgirag, single = adapter_module.ADAPTERS
    assert (kgirag.name, single.name, kgirag.corpus) == ("kgirag", "singlepass", "records")
    qs = kgirag.load_questions("metro-traffic", 9, 0)
    assert [q.id for q in qs] == [q.id for q in single.load_questions("metro-traffic", 9, 0)]
    kg = KnowledgeGraph.in_memory()
    ctx = _ctx(kg)
    kgirag.build_kg(ctx, qs)
    assert kg.nodes("event") and len(kg.nodes("location")) == 1
    kgirag.setup(ctx)
    single.setup(ctx)
    totals = {"kgirag": 0, "singlepass": 0}
    for q in qs:
        for a in (kgirag, single):
            res = a.run(ctx, runner.blinded(q), "offline")
            assert res.answer == q.answer, (a.name, q.question)
            assert res.usage["llm_calls"] == 0 and res.usage["prompt_tokens"] > 50  # would-be answer prompt
            assert "iterations" in res.extra
            scored = a.score(ctx, q, res)  # gold-aware metrics: the full question, after the run
            assert set(scored) >= {"precision", "recall", "hit_rate", "records_read"}
            assert 0.0 <= scored["precision"] <= 1.0 and scored["recall"] > 0.9
            totals[a.name] += res.retrieved_count
        oracle = ScriptedChatModel(responder=kgirag.oracle(ctx, q))
        res = kgirag.run(ctx, runner.blinded(q), oracle)
        assert res.answer == q.answer and res.usage["llm_calls"] >= 3
    assert totals["kgirag"] < totals["singlepass"]


def test_missing_records_file_names_the_path(tmp_path, monkeypatch):
    from benchlib.datasets import DatasetError

    monkeypatch.setenv("KGMEM_BENCH_DATA", str(tmp_path))
    adapter_module._OBS.clear()
    with pytest.raises(DatasetError, match="beijing_air.*missing.*benchmarks/data"):
        adapter_module.observations("beijing-rain")
    adapter_module._OBS.clear()


def test_noisy_judge_verdicts_are_random_valid_and_change_the_run(metro_dir):
    from langgraph_kgmem.graphs.kgirag import JudgeDecision
    from langgraph_kgmem.ingest.records import parse_time, slot_of
    from langgraph_kgmem.llm import DecisionRequest

    kgirag = adapter_module.ADAPTERS[0]
    qs = kgirag.load_questions("metro-traffic", 9, 0)
    kg = KnowledgeGraph.in_memory()
    ctx = _ctx(kg, "oracle")
    kgirag.build_kg(ctx, qs)
    kgirag.setup(ctx)
    q = qs[0]
    judge = DecisionRequest("judge_retrieval", JudgeDecision, {"offline": {"stop": True, "reason": "settled"}})
    ctx.options = {"noise": 0.0, "seed": 0, "pass": 1}
    assert kgirag.oracle(ctx, q)([], judge) == {"stop": True, "reason": "settled"}
    ctx.options = {"noise": 1.0, "seed": 0, "pass": 1}
    noisy = kgirag.oracle(ctx, q)
    verdicts = [JudgeDecision.model_validate(noisy([], judge)) for _ in range(30)]
    start = slot_of(parse_time(q.extra["time"]))
    end = start + q.extra["hours"] + q.extra["horizon"]
    goes = [v for v in verdicts if not v.stop]
    assert goes and len(goes) < 30 and all(start <= slot_of(parse_time(v.next_time)) <= end for v in goes)
    # through the graph: every random verdict is accepted, and the runs differ from the exact oracle's
    runs = {}
    for noise in (0.0, 1.0):
        ctx.options = {"noise": noise, "seed": 0, "pass": 1}
        runs[noise] = [kgirag.run(ctx, runner.blinded(x), ScriptedChatModel(responder=kgirag.oracle(ctx, x)))
                       for x in qs]
    assert all(r.answer == x.answer for r, x in zip(runs[0.0], qs))
    assert [(r.answer, r.retrieved_count) for r in runs[0.0]] != [(r.answer, r.retrieved_count) for r in runs[1.0]]
