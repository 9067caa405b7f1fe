"""AutoPrunedRetriever's answer-typed sentence term (``relevance_weights["answer"]``,
graphs/autopruned/answer_typed.py)."""

from __future__ import annotations

import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.autopruned import RELEVANCE_WEIGHTS, create_autopruned_graph
from langgraph_kgmem.graphs.autopruned.answer_typed import answer_bearing

CURIE = [(0, "When Pierre Curie died, Marie Curie went on teaching physics at the Sorbonne."),
         (1, "The physicist's death came on 19 April 1906 in a street accident."),
         (2, "Pierre Curie taught physics.")]


def _bearing(question: str) -> list[float]:
    cands = [("curie", i) for i in range(len(CURIE))]
    return answer_bearing(question, ["curie"], {"curie": "Pierre Curie"}, {"curie": CURIE}, cands).tolist()


def test_a_sentence_holding_a_span_of_the_asked_type_gets_the_term_and_others_none():
    """"When": only the sentence with a date gets the term (the best candidate's: 1.0); "where":
    the sentence naming a place the question does not; a yes-no question asks for no span."""
    assert _bearing("When did Pierre Curie die?") == [0.0, 1.0, 0.0]
    where = _bearing("Where did Pierre Curie teach physics?")
    assert where[0] == 1.0 and where[2] == 0.0   # the Sorbonne; the sentence of the question's own words: none
    assert _bearing("Did Pierre Curie teach physics?") == [0.0, 0.0, 0.0]


def test_the_answer_weight_lifts_the_answer_sentence_into_a_tight_budget():
    """With a budget of about one sentence, the sentence that restates the question wins by cosine
    and word overlap; the "answer" weight puts the dated sentence (few of the question's words) in
    the prompt instead. Weight 0 (what the term adds: nothing) keeps the old ranking."""
    kg = KnowledgeGraph.in_memory(name="typed")
    kg.add_documents([{"title": "Pierre Curie", "text": " ".join(s for _, s in CURIE)},
                      {"title": "Vistula", "text": "The Vistula flows into the Baltic Sea near Gdansk."}], model="offline")
    question = {"question": "When did Pierre Curie die?"}

    def prompt(answer: float) -> str:
        app = create_autopruned_graph(kg, model="offline", memorize=False, sentence_budget=24, sentence_dense=2,
                                      relevance_weights={"answer": answer})
        return app.compile(store=InMemoryStore()).invoke(question)["packed_prompt"]

    assert "1906" not in prompt(0.0)
    assert "1906" in prompt(5.0)
    default = create_autopruned_graph(kg, model="offline", memorize=False, sentence_budget=24, sentence_dense=2)
    assert "1906" in default.compile(store=InMemoryStore()).invoke(question)["packed_prompt"]   # the default weighs it
    with pytest.raises(KgmemInputError, match="answer"):
        create_autopruned_graph(kg, model="offline", relevance_weights={"answer": -1.0})
    assert "answer" in RELEVANCE_WEIGHTS


def test_the_answer_weight_changes_which_sentences_fill_the_budget_never_the_passage_places():
    """The evidence order (what R@5 grades, each passage placed by its best sentence) stays the
    relevance ranking's: a passage whose sentence holds a date does not move ahead of the passage
    that is about the question's subject; the term only decides which sentences fill the budget."""
    kg = KnowledgeGraph.in_memory(name="places")
    kg.add_documents([{"title": "Pierre Curie", "text": "Pierre Curie died young. Pierre Curie was a physicist."},
                      {"title": "Rue Dauphine", "text": "A street accident on the Rue Dauphine killed Curie on "
                                                        "19 April 1906."}], model="offline")
    question = {"question": "When did Pierre Curie die?"}

    def evidence(answer: float) -> list[str]:
        app = create_autopruned_graph(kg, model="offline", memorize=False, sentence_budget=400, sentence_dense=2,
                                      relevance_weights={"answer": answer})
        return [e["title"] for e in app.compile(store=InMemoryStore()).invoke(question)["evidence"]]

    assert evidence(0.0) == ["Pierre Curie", "Rue Dauphine"]
    assert evidence(5.0) == evidence(0.0)
