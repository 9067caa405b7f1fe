"""The offline answer step's wider candidates (graphs/answer_phrases.py): a kind asked with a
common noun, a rank's ordinal, and a part of a place with its direction word."""

from __future__ import annotations

from langgraph_kgmem.graphs.answer_phrases import asks_part, kind_asked, kind_phrases, ordinals, with_direction
from langgraph_kgmem.graphs.answering import answer_type, offline_answer


def test_a_kind_question_is_answered_with_the_kind_not_a_named_one():
    question = "What kind of university did the author of Lindmere Tales attend?"
    evidence = [{"id": "a", "title": "Ann Lee", "text": "Ann Lee, the author of Lindmere Tales, attended Marlow University."},
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
    assert (answer_type(question).kind, answer_type(question).head) == ("number", "ranking")
    assert offline_answer(question, evidence).answer == "12th"
    assert [o[0] for o in ordinals("the 1st, 22nd and 3rd of 40 runners")] == ["1st", "22nd", "3rd"]


def test_a_part_question_takes_the_direction_the_evidence_writes_before_the_place():
    question = "What part of the state where Ann Lee was born are the badlands?"
    evidence = [{"id": "a", "title": "Ann Lee", "text": "Ann Lee was born in a town in North Dakota."},
                {"id": "b", "title": "Badlands", "text": "The badlands are the part of the state in western North Dakota."}]
    assert asks_part(question) and not asks_part("Which state is Marlow in?")
    assert offline_answer(question, evidence).answer == "western North Dakota"
    sentence = "The badlands lie in western North Dakota."
    at = sentence.index("North")
    assert with_direction(sentence, at, "North Dakota") == (at - 8, "western North Dakota")
    assert with_direction("They lie in North Dakota.", 12, "North Dakota") == (12, "North Dakota")
