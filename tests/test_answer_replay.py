"""tools/answer_replay.py: a bench run's answer-step inputs recorded, then replayed through the
offline answer step as it stands, giving the bench's own answers on unchanged code."""

from __future__ import annotations

import io
import json

import pytest
from bench_helpers import FIXTURE, bench_cache  # noqa: F401  (a fixture; also puts tools/ on sys.path)

import answer_replay  # noqa: E402  (tools/)

import langgraph_kgmem.graphs.catrag.nodes as catrag_nodes


def test_a_recorded_run_replays_to_the_bench_s_own_answers(bench_cache, tmp_path, capsys):
    rec, out, per = tmp_path / "inputs.jsonl", tmp_path / "r.json", tmp_path / "q.jsonl"
    rc = answer_replay.main(["record", str(rec), "--", "--method", "dense,catrag", "--dataset", str(FIXTURE),
                             "--questions", "3", "--passes", "1", "--decider", "offline", "--embeddings", "hash",
                             "--json", str(out), "--per-question", str(per)])
    assert rc == 0
    lines = [json.loads(x) for x in rec.read_text().splitlines()]
    assert [r["method"] for r in lines] == ["dense"] * 3 + ["catrag"] * 3
    assert all(r["evidence"] and {"id", "text"} <= set(r["evidence"][0]) for r in lines)
    bench = [json.loads(x) for x in per.read_text().splitlines()]
    gold = {r["question"]: b["gold_answer"] for r, b in zip(lines, bench)}
    replayed = answer_replay.replay(lines, gold)
    assert [a for _, _, a, _ in replayed] == [b["answer"] for b in bench]
    capsys.readouterr()
    assert answer_replay.main(["replay", str(rec), "--dataset", str(FIXTURE), "--answers"]) == 0
    printed = capsys.readouterr().out
    assert "dense        n=  3" in printed and "catrag       n=  3" in printed


def test_recording_restores_the_answer_step_and_replay_refuses_another_set():
    before = catrag_nodes.answer_with_candidates
    buf = io.StringIO()
    with answer_replay.recording(buf):
        assert catrag_nodes.answer_with_candidates is not before
        catrag_nodes.answer_with_candidates("offline", "Who built it?", [{"id": "a", "text": "Ann Lee built it."}],
                                            ["Ann Lee"], context={"method": "catrag"})
    assert catrag_nodes.answer_with_candidates is before
    line = json.loads(buf.getvalue())
    assert line == {"method": "catrag", "question": "Who built it?", "evidence": [{"id": "a", "text": "Ann Lee built it."}],
                    "path": ["Ann Lee"]}
    with pytest.raises(SystemExit, match="not in the data set"):
        answer_replay.replay([line], {"Another question?": "x"})
