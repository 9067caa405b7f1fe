"""AutoPrunedRetriever's sentence fill (graphs/autopruned/sentences.py): abbreviations in the
splitter, ``sentence_max_tokens``, ``sentence_answer_cover`` and ``sentence_clip``."""

from __future__ import annotations

import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.autopruned import create_autopruned_graph
from langgraph_kgmem.graphs.autopruned.sentences import CLIP_MARK, clip_sentence, fill_budget, split_sentences
from langgraph_kgmem.llm import count_tokens


def test_split_sentences_does_not_cut_after_a_title_before_a_name():
    """"is Hon. Winnie Kiiza." is one sentence: cut after "Hon.", the name (the answer) would be a
    sentence of its own, parted from what it answers. "Jr." may end a sentence and still cuts."""
    text = ("The current Leader of Opposition is Hon. Winnie Kiiza. He climbed Mt. Everest with Dr. Smith. "
            "It ranks No. 5 in the list. Martin Luther King Jr. He spoke.")
    assert [t for _, t in split_sentences(text)] == [
        "The current Leader of Opposition is Hon. Winnie Kiiza.", "He climbed Mt. Everest with Dr. Smith.",
        "It ranks No. 5 in the list.", "Martin Luther King Jr.", "He spoke."]
    assert all(text[a:].startswith(t) for a, t in split_sentences(text))


LONG = "Leaders in 1989: " + ", ".join(f"Minister {i} of the Interior and of Planning" for i in range(30)) + "."
SENTS = {"table": [(0, LONG)], "curie": [(0, "Pierre Curie taught physics at the Sorbonne."),
                                         (1, "He died in Paris in 1906.")]}
TITLES = {"table": "Leaders", "curie": "Pierre Curie"}


def test_sentence_max_tokens_skips_a_long_sentence_and_keeps_it_only_when_nothing_else_fits():
    """Without the cap the best-ranked sentence, a flattened table, is kept even alone over the
    budget and crowds out the short sentences; with it, the short ones fill the budget; a cap that
    no sentence passes keeps the best one, as without the cap."""
    ranked = [("table", 0), ("curie", 0), ("curie", 1)]
    assert count_tokens(LONG) > 100
    assert fill_budget(ranked, list(SENTS), TITLES, SENTS, 60, False) == {"table": {0}}
    assert fill_budget(ranked, list(SENTS), TITLES, SENTS, 60, False, 80) == {"curie": {0, 1}}
    assert fill_budget(ranked, list(SENTS), TITLES, SENTS, 60, False, 3) == {"table": {0}}


def _curie_kg() -> KnowledgeGraph:
    kg = KnowledgeGraph.in_memory(name="answer-cover")
    kg.add_documents([{"title": "Pierre Curie", "text": "Pierre Curie was a physicist who taught at the Sorbonne. "
                                                        "Pierre Curie died in Paris. His death came on 19 April 1906."},
                      {"title": "Vistula", "text": "The Vistula flows into the Baltic Sea near Gdansk."}], model="offline")
    return kg


def test_sentence_answer_cover_puts_the_top_passages_answer_sentence_first():
    """With an answer weight too small to reorder (0.01) and a budget of about one sentence, the
    sentence restating the question fills the budget; ``sentence_answer_cover=1`` puts the first
    passage's answer-typed sentence (the date) in first. The term off (weight 0): no answer-typed
    sentence, nothing changes."""
    kg = _curie_kg()
    question = {"question": "When did Pierre Curie die?"}

    def prompt(**more) -> str:
        opts = {"memorize": False, "sentence_budget": 20, "sentence_dense": 2,
                "relevance_weights": {"answer": 0.01}, **more}
        app = create_autopruned_graph(kg, model="offline", **opts).compile(store=InMemoryStore())
        return app.invoke(question)["packed_prompt"]

    assert "1906" not in prompt()
    assert "1906" in prompt(sentence_answer_cover=1)
    assert "1906" not in prompt(sentence_answer_cover=1, relevance_weights={"answer": 0.0})
    for bad in ({"sentence_answer_cover": -1}, {"sentence_max_tokens": 0}):
        with pytest.raises(KgmemInputError, match=next(iter(bad))):
            create_autopruned_graph(kg, model="offline", **bad)


def test_sentence_max_tokens_reaches_the_graph():
    """The option is read by the graph: a cap under every sentence's length leaves the prompt with
    the one best sentence (the fallback), where without it the budget holds several."""
    kg = _curie_kg()
    question = {"question": "When did Pierre Curie die?"}

    def lines(**more) -> list[str]:
        app = create_autopruned_graph(kg, model="offline", memorize=False, sentence_budget=200, sentence_dense=2,
                                      **more).compile(store=InMemoryStore())
        return app.invoke(question)["packed_prompt"].splitlines()[1:]

    full = lines()
    capped = lines(sentence_max_tokens=2)
    assert sum(x.count(".") for x in full) > 1
    assert len(capped) == 1 and capped[0].count(".") == 1


def test_clip_sentence_cuts_a_long_sentence_at_a_word_and_marks_the_cut():
    """A sentence within the limit is unchanged; a longer one becomes its leading words and " …",
    within the limit, never an empty cut."""
    short = "Pierre Curie taught physics at the Sorbonne."
    assert clip_sentence(short, 60) == short
    cut = clip_sentence(LONG, 30)
    assert cut.endswith(CLIP_MARK) and count_tokens(cut) <= 30 < count_tokens(LONG)
    assert LONG.startswith(cut[: -len(CLIP_MARK)]) and len(cut) > len(CLIP_MARK) + 10
    assert clip_sentence(LONG, 1).split()[0] == LONG.split()[0]


def _table_kg() -> KnowledgeGraph:
    kg = KnowledgeGraph.in_memory(name="clip")
    kg.add_documents([{"title": "Ministers of the Interior", "text": LONG},
                      {"title": "Interior ministry", "text": "The Interior ministry of 1989 was led by Jan Novak."}],
                     model="offline")
    return kg


def test_sentence_clip_reaches_the_graph_and_lets_other_passages_in():
    """A flattened table that ranks first fills a small budget alone when shown whole
    (``sentence_clip=None``); clipped, it leaves room for the other passage's sentence, and the
    evidence text is what the prompt shows. A limit under 1 is refused."""
    kg = _table_kg()
    question = {"question": "Who were the Ministers of the Interior and of Planning in 1989?"}

    def run(**more) -> dict:
        app = create_autopruned_graph(kg, model="offline", memorize=False, sentence_budget=60, sentence_dense=2,
                                      **more).compile(store=InMemoryStore())
        return app.invoke(question)

    whole, clipped = run(sentence_clip=None), run(sentence_clip=30)
    assert "Jan Novak" not in whole["packed_prompt"] and CLIP_MARK not in whole["packed_prompt"]
    assert "Jan Novak" in clipped["packed_prompt"] and CLIP_MARK in clipped["packed_prompt"]
    assert any(e["text"].endswith(CLIP_MARK) for e in clipped["evidence"])
    with pytest.raises(KgmemInputError, match="sentence_clip"):
        create_autopruned_graph(kg, model="offline", sentence_clip=0)
