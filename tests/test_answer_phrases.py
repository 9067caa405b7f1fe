"""The offline answer step's wider candidates (graphs/answer_phrases.py): a kind asked with a
common noun, a rank's ordinal, and a part of a place with its direction word."""

from __future__ import annotations

from langgraph_kgmem.graphs.answer_phrases import asks_part, kind_asked, kind_phrases, ordinals, with_direction
from langgraph_kgmem.graphs.answering import candidates, offline_answer


def test_a_kind_question_is_answered_with_the_kind_not_a_named_one():
    question = "What kind of university did the author of Lindmere Tales attend?"
    evidence = [{"id": "a", "title": "Ann Lee",
                 "text": "Ann Lee, the author of Lindmere Tales, attended Marlow University."},
                {"id": "b", "title": "Marlow University",
                 "text": "Marlow University is the state's sole land-grant university."}]
    assert kind_asked(question) == "university"
    assert offline_answer(question, evidence).answer == "land-grant university"


def test_a_kind_phrase_keeps_its_modifiers_and_stops_at_function_words_and_capitals():
    sentence = "It is the state's sole land-grant university and one of two public universities near Marlow University."
    assert [p[0] for p in kind_phrases("university", sentence)] == ["land-grant university", "public universities"]
    assert kind_phrases("", sentence) == []
    assert kind_asked("Which university did Ann Lee attend?") == ""


def test_a_rank_question_is_answered_with_an_ordinal_not_a_count():
    question = "What is the population ranking of the city where Ann Lee was born?"
    evidence = [{"id": "a", "title": "Ann Lee", "text": "Ann Lee was born in Marlow."},
                {"id": "b", "title": "Marlow",
                 "text": "With a population of 853,382, Marlow is the 12th most populous city in Elbonia."}]
    out = offline_answer(question, evidence)
    assert (out.type.kind, out.type.head, out.answer) == ("number", "ranking", "12th")
    assert [o[0] for o in ordinals("the 1st, 22nd and 3rd of 40 runners")] == ["1st", "22nd", "3rd"]


def test_a_part_question_takes_the_direction_the_evidence_writes_before_the_place():
    question = "What part of the state where Ann Lee was born are the badlands?"
    evidence = [{"id": "a", "title": "Ann Lee", "text": "Ann Lee was born in a town in North Dakota."},
                {"id": "b", "title": "Badlands",
                 "text": "The badlands are the part of the state in western North Dakota."}]
    assert asks_part(question) and not asks_part("Which state is Marlow in?")
    assert offline_answer(question, evidence).answer == "western North Dakota"
    sentence = "The badlands lie in western North Dakota."
    at = sentence.index("North")
    assert with_direction(sentence, at, "North Dakota") == (at - 8, "western North Dakota")
    assert with_direction("They lie in North Dakota.", 12, "North Dakota") == (12, "North Dakota")


def test_a_sentence_ranking_built_on_the_candidates_keeps_the_rules_before_these():
    # AutoPrunedRetriever's answer term calls candidates() without focus: no kind phrase, no
    # direction, and a capitalised head still marks the name after it, so its retrieval is unchanged
    question = "What kind of university did Ann Lee attend?"
    evidence = [{"id": "a", "text": "Ann Lee attended Marlow University, the state's sole land-grant university."}]
    assert "land-grant university" in [c.text for c in candidates(question, evidence, focus=True)]
    assert "land-grant university" not in [c.text for c in candidates(question, evidence)]
    county = [{"id": "b", "text": "Marlow is a city in Dunmore County, Halden, Elbonia."}]
    ask = "In what county is Marlow?"
    strict = {c.text: c.score for c in candidates(ask, county, focus=True)}
    loose = {c.text: c.score for c in candidates(ask, county)}
    assert strict["Halden"] < strict["Dunmore County"] and loose["Halden"] == loose["Dunmore County"]
