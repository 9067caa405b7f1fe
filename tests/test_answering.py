"""The shared answer step (graphs/answering.py): question types, typed candidates, chain hops,
the path as a tie-break only, the seed passage, comparisons, "no answer" with a reason, and a model's reply checked against the
evidence."""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from langgraph_kgmem.graphs.answering import (NO_ANSWER, answer_type, answer_with_candidates, candidate_prompt,
                                              candidates, offline_answer)
from langgraph_kgmem.graphs.grounding import cite_passages
from langgraph_kgmem.llm.prompts import DATA_OPEN

EVIDENCE = [
    {"id": "c1", "title": "Orchard Observatory",
     "text": "The Orchard Observatory was founded in 1898 above the town of Lindmere. Its first director was the "
             "astronomer Helena Varga. The observatory's great refractor was built by the Halden Instrument Works."},
    {"id": "c2", "title": "Helena Varga",
     "text": "Helena Varga was born in 1861 in the city of Szeged. She catalogued 4,000 variable stars."},
    {"id": "c3", "title": "Szeged",
     "text": "Szeged is a city on the river Tisza in southern Hungary. The Tisza flows into the Danube."},
    {"id": "c4", "title": "Tomas Reyes",
     "text": "Tomas Reyes succeeded Helena Varga as director of the Orchard Observatory in 1912."},
]


@pytest.mark.parametrize("question, kind, head", [
    ("Who succeeded Helena Varga as director?", "person", ""),
    ("Where was Helena Varga born?", "place", ""),
    ("Which river flows through the city where Albert Einstein was born?", "place", "river"),
    ("Which academy gave Helena Varga a medal?", "entity", "academy"),
    ("When was the Orchard Observatory founded?", "date", ""),
    ("In what year was the Orchard Observatory founded?", "date", ""),
    ("How many variable stars did Helena Varga catalogue?", "number", ""),
    ("Is Szeged in Hungary?", "yesno", ""),
    ("Who was born first, Helena Varga or Tomas Reyes?", "choice", ""),
])
def test_the_answer_type_comes_from_the_question_words(question, kind, head):
    t = answer_type(question)
    assert (t.kind, t.head) == (kind, head)


def test_a_comparison_names_its_options_and_which_one_it_wants():
    t = answer_type("Which was founded earlier, the Orchard Observatory or Lindmere Academy?")
    assert t.kind == "choice" and t.order == "early"
    assert t.options == ("Orchard Observatory", "Lindmere Academy")


def test_a_multi_hop_question_is_answered_with_the_span_at_the_end_of_the_chain():
    out = offline_answer("On which river is the birthplace of the Orchard Observatory's first director?", EVIDENCE)
    assert out.answer == "Tisza"
    assert out.sentence == "Szeged is a city on the river Tisza in southern Hungary."
    assert out.evidence_id == "c3"
    assert "Helena Varga" not in [c.text for c in out.candidates][:1]


def test_bridge_entities_named_in_the_question_are_never_the_answer():
    out = offline_answer("Who succeeded Helena Varga as director?", EVIDENCE)
    assert out.answer == "Tomas Reyes"
    assert all(c.text != "Helena Varga" for c in out.candidates)


def test_dates_and_numbers_answer_when_and_how_many():
    assert offline_answer("When was the Orchard Observatory founded?", EVIDENCE).answer == "1898"
    assert offline_answer("How many variable stars did Helena Varga catalogue?", EVIDENCE).answer == "4,000"


def test_a_comparison_picks_the_option_with_the_earlier_date():
    out = offline_answer("Which was founded earlier, the Orchard Observatory or Lindmere Academy?",
                         EVIDENCE + [{"id": "c5", "title": "Lindmere Academy",
                                      "text": "The Lindmere Academy was founded in 1850 by Arthur Penn."}])
    assert out.answer == "Lindmere Academy" and out.evidence_id == "c5"


def test_the_method_path_breaks_a_tie_between_equally_supported_names():
    evidence = [{"id": "p", "text": "Ann Lee received the prize. Bo Chan received the prize."}]
    question = "Who received the prize?"
    assert candidates(question, evidence)[0].text == "Ann Lee"          # ties: alphabetical
    assert offline_answer(question, evidence, path=["Bo Chan"]).answer == "Bo Chan"


def test_no_answer_says_why():
    empty = offline_answer("Who founded the observatory?", [])
    assert empty.answer == NO_ANSWER and "no evidence" in empty.reason
    dateless = offline_answer("When did Tomas Reyes die?", [{"id": "x", "text": "Tomas Reyes liked stars."}])
    assert dateless.answer == NO_ANSWER and "date" in dateless.reason


def test_a_grounded_model_answer_stands_and_an_invented_one_gives_the_offline_answer():
    question = "Who succeeded Helena Varga as director?"
    text, usage = answer_with_candidates(FakeListChatModel(responses=["Tomas Reyes"]), question, EVIDENCE)
    assert text == "Tomas Reyes" and usage["llm_calls"] == 1 and not usage["fallbacks"]
    text, usage = answer_with_candidates(FakeListChatModel(responses=["Marie Curie"]), question, EVIDENCE)
    assert text == "Tomas Reyes"
    assert [f["kind"] for f in usage["fallbacks"]] == ["ungrounded"]
    assert cite_passages("Marie Curie", [(e["id"], e["text"]) for e in EVIDENCE]) is None


def test_the_prompt_offers_the_candidates_inside_the_fence():
    question = "Who succeeded Helena Varga as director?"
    prompt = candidate_prompt(question, EVIDENCE, offline_answer(question, EVIDENCE))
    offered = prompt.split("Likely answers:")[1]
    assert DATA_OPEN in offered and "Tomas Reyes" in offered
    assert prompt.rstrip().endswith("Answer:")


def test_a_claim_about_two_subjects_is_checked_in_each_subjects_evidence():
    evidence = [{"id": "a", "title": "Ann Lee", "text": "Ann Lee is an American painter."},
                {"id": "b", "title": "Bo Chan", "text": "Bo Chan is a Chinese sculptor."}]
    assert offline_answer("Are Ann Lee and Bo Chan both painters?", evidence).answer == "no"
    both = evidence[:1] + [{"id": "c", "title": "Bo Chan", "text": "Bo Chan is a painter from Canada."}]
    assert offline_answer("Are Ann Lee and Bo Chan both painters?", both).answer == "yes"


ULM = [{"id": "ulm", "text": "Albert Einstein was born in Ulm. Ulm is a city on the Danube."},
       {"id": "warsaw", "text": "Marie Curie was born in Warsaw. Warsaw is a city on the Vistula."}]
RIVER = "Which river flows through the city where Albert Einstein was born?"


def test_a_river_named_without_the_word_river_is_the_answer_not_the_city_it_flows_through():
    # "a city on the Danube": the river has no "river" beside it; the evidence calls Ulm a city,
    # which the question names for the bridge, and Ulm's own sentence is the chain's next hop
    out = offline_answer(RIVER, ULM)
    assert out.answer == "Danube" and out.sentence == "Ulm is a city on the Danube."
    rhine = [{"id": "ulm", "text": "Albert Einstein was born in Ulm. Ulm is a city on the Rhine."}] + ULM[1:]
    assert offline_answer(RIVER, rhine).answer == "Rhine"


@pytest.mark.parametrize("factory", ["catrag", "hipporag2", "remindrag", "autopruned"])
def test_every_graph_method_answers_the_river_question_on_the_two_document_kg(factory):
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.graphs.registry import get_factory

    kg = KnowledgeGraph.in_memory(name="ulm", embeddings="hash")
    try:
        kg.add_documents(ULM, model="offline")
        create, preset = get_factory(factory)
        app = create(kg, model="offline", **preset).compile(store=InMemoryStore())
        out = app.invoke({"question": RIVER}, {"configurable": {"thread_id": "river"}})
        assert out["answer"] == "Danube"
    finally:
        kg.close()


def test_a_name_the_evidence_calls_a_category_the_question_names_for_a_hop_is_demoted():
    said = [{"id": "a", "text": "Albert Einstein was born in Ulm. Ulm is a city."}]
    unsaid = [{"id": "a", "text": "Albert Einstein was born in Ulm. Ulm has a minster."}]
    score = {e[0]["text"]: {c.text: c.score for c in candidates(RIVER, e)}["Ulm"] for e in (said, unsaid)}
    assert score[said[0]["text"]] < 0.5 * score[unsaid[0]["text"]]


def test_a_river_question_takes_the_name_after_on_the_over_the_place_after_in():
    evidence = [{"id": "a", "text": "Albert Einstein was born in Ulm, a town on the Danube."}]
    assert [c.text for c in candidates(RIVER, evidence)][0] == "Danube"


def test_without_titles_the_sentence_about_the_entity_a_supported_sentence_reached_is_the_next_hop():
    evidence = [{"id": "a", "text": "Albert Einstein was born in Ulm."},
                {"id": "c", "text": "Paris is a city on the Seine."},
                {"id": "b", "text": "Ulm is a city on the Danube."}]
    assert offline_answer(RIVER, evidence).answer == "Danube"


def test_a_name_the_question_itself_describes_is_not_taken_for_a_hop():
    # "... is an American animated television series": the answer's own description, no hop
    question = "Which show of Tara Strong is an American animated television series?"
    evidence = [{"id": "a", "text": "Tara Strong voiced characters in Rugrats and in Drawn Together. Drawn Together "
                                    "is an American animated television series."}]
    assert offline_answer(question, evidence).answer == "Drawn Together"


def test_a_hop_the_question_gives_with_an_indefinite_article_is_demoted_too():
    question = "2014 S/S is the debut album of a South Korean boy group that was formed by who?"
    evidence = [{"id": "a", "text": "2014 S/S is the debut album of Winner. Winner is a South Korean boy group "
                                    "formed by YG Entertainment."}]
    assert offline_answer(question, evidence).answer == "YG Entertainment"


def test_a_mention_in_the_passage_the_question_names_is_the_chains_start_not_its_end():
    # "the director of Jump for Glory" is found in Jump for Glory's own passage (the bridge); the
    # answer is in the passage of the bridge, which the question does not name
    evidence = [{"id": "a", "title": "Jump for Glory", "text": "Jump for Glory is a 1937 film by the director Raoul Walsh."},
                {"id": "b", "title": "Raoul Walsh",
                 "text": "Walsh was married to the actress Miriam Cooper, his spouse from 1916 to 1926. Miriam Cooper "
                         "was his first spouse."}]
    out = offline_answer("Who is the spouse of the director of Jump for Glory?", evidence)
    assert out.answer == "Miriam Cooper" and out.evidence_id == "b"


def test_the_path_breaks_ties_only_and_never_outweighs_the_evidence():
    # the PPR ranking's first names are the question's seeds' neighbours (here the bridge, Ann
    # Lee), not the answer: a name on the path gains nothing over a better-supported one
    evidence = [{"id": "p", "text": "Ann Lee founded the Halden prize of 1990. Bo Chan won the Halden prize of 1990."}]
    out = offline_answer("Who won the Halden prize of 1990?", evidence, path=["Ann Lee", "Halden"])
    assert out.answer == "Bo Chan"


def test_a_capitalised_head_that_ends_another_name_does_not_mark_the_name_after_it():
    # "in Dunmore County, Halden": "County" ends the county's own name; Halden is no county
    evidence = [{"id": "a", "title": "Ann Lee", "text": "Ann Lee was born in Marlow."},
                {"id": "b", "title": "Marlow", "text": "Marlow is a city in Dunmore County, Halden, Elbonia."}]
    out = offline_answer("In what county is the city where Ann Lee was born?", evidence)
    assert out.answer == "Dunmore County"
    airport = [{"id": "c", "title": "Marlow Regional Airport",
                "text": "Marlow Regional Airport (IATA: MRL) is a public airport near Marlow."}]
    assert offline_answer("What is the name of the airport in Marlow?", airport).answer == "Marlow Regional Airport"
    # an office titles the name after it: "Vice President Ann Lee" marks a vice president
    question = "Bo Chan served under which vice president?"
    score = {}
    for written in ("Vice President", "the vice president"):
        office = [{"id": "d", "text": f"Bo Chan served under {written} Ann Lee, beside Tomas Reyes."}]
        score[written] = {c.text: c.score for c in candidates(question, office)}["Ann Lee"]
    assert score["Vice President"] == score["the vice president"]


def test_a_name_its_head_noun_opens_answers_a_which_head_question():
    # "Treaty on the Functioning of ..." is a treaty: the head opens the name, before its own "on";
    # the place in the better-supported sentence is no treaty
    evidence = [{"id": "c", "title": "Union Confederation",
                 "text": "The Union Confederation's jurisdiction began in Valletta with the signing of an accord."},
                {"id": "x", "title": "Accord", "text": "An accord is an agreement between parties."},
                {"id": "t", "title": "Treaties", "text": "Its jurisdiction rests on the Treaty on the Functioning of the Union."}]
    question = "The Union Confederation's jurisdiction began with the signing of what treaty?"
    assert offline_answer(question, evidence).answer == "Treaty on the Functioning of the Union"
