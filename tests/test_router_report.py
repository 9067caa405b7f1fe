"""benchlib.router_report: the router's figures read back from mixed runs' per-question entries."""

from __future__ import annotations

import json

import bench_helpers  # noqa: F401  (puts tools/ on sys.path)
import pytest
from benchlib.router_report import losses, main, part_table, with_router


def _e(method: str, qid: str, part: str, quality: float, *, p: int = 1, calls: int = 0, **extra) -> dict:
    return {"method": method, "pass": p, "qid": qid, "part": part, "quality": quality, "llm_calls": calls, **extra}


ENTRIES = [
    _e("catrag", "h1", "hotpotqa", 1.0, calls=4), _e("remindrag", "h1", "hotpotqa", 0.5, calls=10),
    _e("catrag", "h2", "hotpotqa", 0.0, calls=4), _e("remindrag", "h2", "hotpotqa", 1.0, calls=10),
    _e("catrag", "r1", "beijing-rain", 0.0, calls=2), _e("remindrag", "r1", "beijing-rain", 0.0, calls=30),
    _e("router", "h1", "hotpotqa", 1.0, calls=4, routed_to="catrag", tried=[["catrag", 1.0]]),
    _e("router", "h2", "hotpotqa", 0.5, calls=14, routed_to="catrag", tried=[["catrag", 1.0]]),
    _e("router", "r1", "beijing-rain", 1.0, calls=3, routed_to="kgirag", tried=[["kgirag", 0.9]]),
]


def test_the_table_compares_the_router_with_the_best_single_method_and_the_oracle_per_part():
    table = part_table(ENTRIES)[1]
    hot = table["hotpotqa"]
    # catrag 0.5, remindrag 0.75: the best single method is ReMindRAG; the oracle takes 1.0 on both
    assert hot["best_single"] == "remindrag" and hot["best_quality"] == 0.75 and hot["oracle"] == 1.0
    assert hot["router"] == 0.75 and hot["router_minus_best"] == 0.0 and hot["router_minus_oracle"] == -0.25
    assert table["beijing-rain"]["router_minus_best"] == 1.0
    assert hot["calls"] == {"catrag": 4.0, "remindrag": 10.0, "router": 9.0}
    # calls: router (4 + 14 + 3) / 3 = 7 against ReMindRAG's (10 + 10 + 30) / 3
    assert table["all"]["costliest"] == "remindrag" and table["all"]["router_calls"] == 7.0
    assert table["all"]["calls_vs_costliest"] == round(7 / (50 / 3), 4)


def test_losses_list_the_questions_a_single_method_answered_better_with_the_route():
    lost = losses(ENTRIES)
    assert [(x["qid"], x["routed_to"], x["singles"]["remindrag"]) for x in lost] == [("h2", "catrag", 1.0)]
    assert losses(ENTRIES, parts=("musique",)) == []


def test_a_router_only_run_replaces_the_router_rows_and_must_cover_the_same_questions(tmp_path):
    other = [dict(e, method="router-eager", quality=1.0) for e in ENTRIES if e["method"] == "router"]
    merged = with_router(ENTRIES, other, "router-eager")
    assert part_table(merged)[1]["hotpotqa"]["router"] == 1.0
    with pytest.raises(SystemExit):
        with_router(ENTRIES, other[:1], "router-eager")
    with pytest.raises(SystemExit):
        with_router(ENTRIES, other, "router-other")
    base, run = tmp_path / "base.json", tmp_path / "eager.json"
    base.write_text(json.dumps({"questions": ENTRIES}))
    run.write_text(json.dumps({"questions": other}))
    assert main([str(base), "--router", str(run), "--name", "router-eager", "--losses"]) == 0


def test_the_router_without_its_coverage_step_is_read_from_the_routed_methods_own_ranking():
    rows = [_e("catrag", "h1", "hotpotqa", 0.5), _e("catrag", "h2", "hotpotqa", 1.0),
            _e("router", "h1", "hotpotqa", 1.0, retrieved=["g1", "x", "g2"], uncovered=["g1", "x"], gold=["g1", "g2"]),
            _e("router", "h2", "hotpotqa", 1.0, retrieved=["g3"], uncovered=["y", "z", "g3"], gold=["g3"])]
    hot = part_table(rows)[1]["hotpotqa"]
    # own rankings: h1 0.5, h2 1.0 -> 0.75, the best single method's 0.75; with the coverage step 1.0
    assert hot["router"] == 1.0 and hot["router_uncovered"] == 0.75 and hot["uncovered_minus_best"] == 0.0
    assert "router_uncovered" not in part_table(ENTRIES)[1]["hotpotqa"]     # rows without the field
