"""benchlib.router_replay: the bridge-or-chain what-if replayed from a mixed run's entries."""

from __future__ import annotations

import json

import bench_helpers  # noqa: F401  (puts tools/ on sys.path)
from benchlib import router_replay
from benchlib.router_replay import fused, is_chain, replay

TEXTS = {"hotpotqa:h1": "Are both Elko Regional Airport and Gerald R. Ford International Airport in Michigan?",
         "hotpotqa:h2": "What British singer-songwriter hosted the 16th Annual Young Hollywood Awards?",
         "musique:m1": "Who was in charge of the country where the composer of Aschenbrodel was a citizen?"}


def _e(method: str, qid: str, quality: float, retrieved: list[str], gold: list[str], p: int = 1) -> dict:
    return {"method": method, "pass": p, "qid": qid, "part": qid.split(":")[0], "quality": quality,
            "retrieved": retrieved, "gold": gold}


ENTRIES = [
    # h1: the router found one gold passage of two in its top 5, AutoPrunedRetriever the other at its first place
    _e("router", "hotpotqa:h1", 0.5, ["a", "x1", "x2", "x3", "x4"], ["a", "b"]),
    _e("catrag", "hotpotqa:h1", 0.5, ["a", "x1", "x2", "x3", "x4"], ["a", "b"]),
    _e("autopruned", "hotpotqa:h1", 0.5, ["b", "y1", "y2", "y3", "y4"], ["a", "b"]),
    _e("router", "hotpotqa:h2", 1.0, ["c", "d", "x1"], ["c", "d"]),
    _e("catrag", "hotpotqa:h2", 1.0, ["c", "d", "x1"], ["c", "d"]),
    _e("autopruned", "hotpotqa:h2", 0.0, ["y1", "y2", "y3"], ["c", "d"]),
    # m1 reads as a chain: the router's own result stands, though interleaving would have lost a gold passage
    _e("router", "musique:m1", 1.0, ["e", "x1", "x2", "x3", "f"], ["e", "f"]),
    _e("catrag", "musique:m1", 1.0, ["e", "x1", "x2", "x3", "f"], ["e", "f"]),
    _e("autopruned", "musique:m1", 0.0, ["y1", "y2", "y3"], ["e", "f"]),
]


def test_the_chain_signal_reads_nested_relation_nouns_not_bridge_or_comparison_questions():
    assert is_chain(TEXTS["musique:m1"]) and is_chain("Who was the first president of Damerjog's country?")
    assert not is_chain(TEXTS["hotpotqa:h1"]) and not is_chain(TEXTS["hotpotqa:h2"])
    assert not is_chain("Which genus has more species, Xanthoceras or Ehretia?")


def test_fusion_interleaves_the_routers_ranking_first():
    assert fused(ENTRIES[0], ENTRIES[2]) == 1.0          # a, b, x1, y1, x2
    assert fused(ENTRIES[3], ENTRIES[5]) == 1.0          # c, y1, d, ...
    assert fused(ENTRIES[6], ENTRIES[8]) == 0.5          # e, y1, x1, y2, x2: f falls out


def test_the_what_if_fuses_only_the_questions_that_do_not_read_as_a_chain(tmp_path, monkeypatch):
    table = replay(ENTRIES, TEXTS)[1]
    hot, mus = table["hotpotqa"], table["musique"]
    # HotpotQA: catrag 0.75, autopruned 0.25; the router 0.75, with the what-if (1.0 + 1.0) / 2
    assert hot["best_single"] == "catrag" and hot["chain"] == 0
    assert hot["router_minus_best"] == 0.0 and hot["fused_minus_best"] == 0.25 and hot["fused_minus_oracle"] == 0.25
    assert mus["chain"] == 1 and mus["router_minus_best"] == mus["fused_minus_best"] == 0.0
    # with the signal off every question is fused, and the chain question loses its second gold passage
    every = replay(ENTRIES, TEXTS, chain=lambda q: False)[1]
    assert every["musique"]["chain"] == 0 and every["musique"]["fused_minus_best"] == -0.5
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"questions": ENTRIES}))
    monkeypatch.setattr(router_replay, "question_texts", lambda n, seed: TEXTS)
    assert router_replay.main([str(run), "--seed", "0"]) == 0


def test_the_cover_replay_moves_a_passage_that_names_a_missing_question_word_into_the_top_five():
    from benchlib.router_replay import cover_replay

    q = "hotpotqa:h1"
    texts = {q: "Which airline flies from Elko Regional Airport to Michigan?"}
    passages = {"a": "Elko Regional Airport is in Nevada.", "x1": "Elko is a city.", "x2": "Elko Regional Airport.",
                "x3": "Regional airports.", "x4": "Airport codes.", "b": "Delta, an airline, flies to Michigan."}
    rows = [_e("router", q, 0.5, ["a", "x1", "x2", "x3", "x4", "z"], ["a", "b"]),
            _e("catrag", q, 0.5, ["a", "x1", "x2", "x3", "x4"], ["a", "b"]),
            _e("remindrag", q, 0.5, ["b", "y1"], ["a", "b"])]
    rows[0].update(routed_to="catrag", tried=[["catrag", 0.25], ["remindrag", 0.2]])
    out = cover_replay(rows, texts, passages, keep=3, top=5)[1]["hotpotqa"]
    # ReMindRAG's first passage names "airline", "flies" and "michigan", which CatRAG's top three miss
    assert out["router_minus_best"] == 0.0 and out["covered_minus_best"] == 0.5
    # without the escalated run's ranking nothing names those words: the method's order stands
    rows[0]["tried"] = [["catrag", 1.0]]
    assert cover_replay(rows, texts, passages, keep=3, top=5)[1]["hotpotqa"]["covered_minus_best"] == 0.0
