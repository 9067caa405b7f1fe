"""``tools/bench.py --validate``: leave-one-dataset-out figures of the methods' tuned constants."""

from __future__ import annotations

import json

import pytest
from bench_helpers import FIXTURE  # also puts tools/ on sys.path

from benchlib import corpus as corpora
from benchlib import runner, validate
from benchlib.registry import discover


def test_leave_one_out_chooses_on_the_other_sets_and_reports_the_held_out_figure():
    figures = {"a": {1: 0.9, 2: 0.5, 3: 0.1}, "b": {1: 0.2, 2: 0.6, 3: 0.5}, "c": {1: 0.3, 2: 0.55, 3: 0.6}}
    rows = {r["held_out"]: r for r in validate.lodo(figures, default=1)}
    # held out a: on b and c value 2 (mean 0.575) beats 3 (0.55) and 1 (0.25)
    assert (rows["a"]["chosen_on_others"], rows["a"]["out_of_sample"]) == (2, 0.5)
    assert (rows["a"]["best_on_itself"], rows["a"]["in_sample"], rows["a"]["default_figure"]) == (1, 0.9, 0.9)
    # held out b: on a and c value 1 (0.6) beats 2 (0.525): it earns only 0.2 on b, whose own best is 2
    assert (rows["b"]["chosen_on_others"], rows["b"]["out_of_sample"]) == (1, 0.2)
    assert (rows["b"]["best_on_itself"], rows["b"]["in_sample"]) == (2, 0.6)


def test_ties_go_to_the_shipped_value_and_missing_figures_are_skipped():
    figures = {"a": {1: 0.5, 2: 0.5}, "b": {1: None, 2: 0.4}}
    rows = {r["held_out"]: r for r in validate.lodo(figures, default=2)}
    assert rows["b"]["chosen_on_others"] == 2 and rows["a"]["best_on_itself"] == 2
    assert rows["a"]["chosen_on_others"] == 2          # value 1 has no figure on b


def test_grid_spec_is_parsed_and_a_malformed_one_is_an_error():
    grid = validate.parse_grid("catrag:beta=1.5,2.5; catrag:dense_fusion=false,true;remindrag:lam=0.5")
    assert [(c.method, c.option, c.values) for c in grid] == [
        ("catrag", "beta", (1.5, 2.5)), ("catrag", "dense_fusion", (False, True)), ("remindrag", "lam", (0.5,))]
    assert validate.parse_grid(None) == validate.TUNED
    with pytest.raises(validate.ValidateError, match="METHOD:OPTION=V1,V2"):
        validate.parse_grid("catrag=0.1")


def test_the_shipped_value_comes_from_the_adapter_or_the_factory():
    reg = discover()
    assert validate.shipped_value(reg.get("catrag"), "passage_weight") == 0.05
    assert validate.shipped_value(reg.get("hipporag2"), "anchoring") is False
    assert validate.shipped_value(reg.get("autopruned"), "fine_m") == 20
    with pytest.raises(validate.ValidateError, match="no option 'nope'"):
        validate.shipped_value(reg.get("catrag"), "nope")
    twin = validate.variant(reg.get("catrag"), "beta", 1.0)
    assert twin.options["beta"] == 1.0 and "beta" not in reg.get("catrag").options and twin.name == "catrag[beta=1.0]"


def test_validate_runs_every_value_on_every_set(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(corpora, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(validate, "SHIPPED_QA", ())
    rows = FIXTURE.read_text().splitlines()
    sets = []
    for name, lines in (("first", rows[:2]), ("last", rows[2:])):
        p = tmp_path / f"{name}.jsonl"
        p.write_text("\n".join(lines) + "\n")
        sets.append(str(p))
    out = tmp_path / "v.json"
    rc = runner.main(["--validate", "--validate-grid", "catrag:passage_weight=0.01,0.05", "--embeddings", "hash",
                      "--validate-data", sets[0], "--validate-data", sets[1], "--json", str(out)])
    assert rc == 0
    report = json.loads(out.read_text())
    assert report["datasets"] == ["first", "last"] and report["metric"] == "recall@5"
    (c,) = report["constants"]
    assert c["default"] == 0.05 and set(c["figures"]) == {"first", "last"}
    assert all(0.0 <= f <= 1.0 for fs in c["figures"].values() for f in fs.values())
    assert [r["held_out"] for r in c["lodo"]] == ["first", "last"]
    assert "| catrag | passage_weight | 0.05 | first |" in capsys.readouterr().out
