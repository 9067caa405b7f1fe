"""The offline extractor's entities, relations and entity linking (ingest/offline_rules.py).

Each test names one rule and fails when the rule is taken out: clause subjects, pronouns read as
the passage's subject, names cut at punctuation, titles and their bare names, surnames and
possessives linked to the full name, and the KG those make across passages.
"""

from __future__ import annotations

import random
import string

import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.ingest.extract import OfflineExtractor, offline_entities
from langgraph_kgmem.ingest.offline_rules import canonical_name, sentences_of, title_names
from langgraph_kgmem.kg.types import entity_id


def facts(text: str, title: str | None = None, **options) -> set[tuple[str, str, str]]:
    return {(t.subject, t.relation, t.object) for t in OfflineExtractor(**options).extract(text, title).triples}


def pairs(text: str, title: str | None = None, **options) -> set[tuple[str, str]]:
    return {(s, o) for s, _, o in facts(text, title, **options)}


def test_a_pronoun_subject_is_read_as_the_passages_subject():
    text = "Marie Curie was a physicist from Poland. She won the Nobel Prize for Physics in 1903."
    got = facts(text, "Marie Curie")
    assert ("Marie Curie", "won the", "Nobel Prize for Physics") in got
    assert ("Marie Curie", "1903") in {(s, o) for s, _, o in got}


def test_a_possessive_opener_introduces_the_sentences_subject():
    got = facts("Her husband Pierre Curie taught at the Sorbonne. His first book was Radioactivity.", "Marie Curie")
    assert ("Pierre Curie", "taught at the", "Sorbonne") in got
    assert ("Marie Curie", "her husband", "Pierre Curie") in got
    assert ("Marie Curie", "Radioactivity") in {(s, o) for s, _, o in got}


def test_a_pronoun_in_untitled_text_is_read_as_the_last_subject_named():
    got = pairs("Ada Lovelace was a mathematician. She worked with Charles Babbage in London.")
    assert ("Ada Lovelace", "Charles Babbage") in got and ("Ada Lovelace", "London") in got


def test_the_sentence_subject_is_related_to_every_other_entity_not_only_its_neighbour():
    got = facts("Tennessee is bordered by Kentucky and Virginia to the north, North Carolina to the east.", "Tennessee")
    assert ("Tennessee", "is bordered by", "Kentucky") in got
    assert {("Tennessee", "Virginia"), ("Tennessee", "North Carolina")} <= {(s, o) for s, _, o in got}
    # co-occurrence links neighbours instead: Virginia to North Carolina, not Tennessee to it
    chain = pairs("Tennessee is bordered by Kentucky and Virginia to the north, North Carolina to the east.",
                  "Tennessee", relations="cooccurrence")
    assert ("Virginia", "North Carolina") in chain and ("Tennessee", "North Carolina") not in chain


def test_the_subject_follows_an_opening_phrase():
    assert ("Publix", "George W. Jenkins") in pairs(
        "Founded in 1930 by George W. Jenkins, Publix is a private corporation.", "Publix")
    got = pairs("In 1949, Hank Snow moved to Nashville.")
    assert ("Hank Snow", "1949") in got and ("Hank Snow", "Nashville") in got


def test_the_noun_opener_names_the_passages_subject():
    got = pairs('The film stars Shirley Temple and was directed by Richard Wallace.', "Kiss and Tell (1945 film)")
    assert ("Kiss and Tell", "Shirley Temple") in got and ("Kiss and Tell", "Richard Wallace") in got


def test_names_end_at_punctuation_and_at_and():
    names = offline_entities("He moved to Nashville, Tennessee, with Kentucky and Virginia nearby.")
    assert names == ["Nashville", "Tennessee", "Kentucky", "Virginia"]


def test_connectors_join_one_name():
    assert offline_entities("It is published by the Society for the Exploration of Psychotherapy Integration.") == \
        ["Society for the Exploration of Psychotherapy Integration"]
    assert offline_entities("The case Rostker v. Goldberg was decided in 1981.") == ["Rostker v. Goldberg", "1981"]


def test_an_ordinary_capitalised_opener_is_no_entity():
    ex = OfflineExtractor().extract("Locations are found across Florida. The locations are many.", "Publix")
    assert "Locations" not in ex.entities and "Florida" in ex.entities
    assert offline_entities("Founded in 1930, the firm grew.") == ["1930"]


def test_a_question_names_its_entities_in_stored_form():
    assert offline_entities("Who was the first president of the association which published Journal of "
                            "Psychotherapy Integration?") == ["Journal of Psychotherapy Integration"]
    assert offline_entities("Where did Hello Love's performer live?") == ["Hello Love"]
    assert offline_entities("This singer of A Rather Blustery Day voiced what hedgehog?") == ["Rather Blustery Day"]


def test_canonical_names_drop_possessives_articles_and_spell_out_abbreviations():
    assert canonical_name("Snow's") == "Snow"
    assert canonical_name("The Beatles") == "Beatles"
    assert canonical_name("U.S.") == canonical_name("USA") == "United States"


def test_a_title_with_a_disambiguation_is_also_its_bare_name():
    assert title_names("Kiss and Tell (1945 film)") == ["Kiss and Tell (1945 film)", "Kiss and Tell"]
    assert title_names("Warsaw") == ["Warsaw"]
    ex = OfflineExtractor().extract('"Hello Love" is a 1974 single by Hank Snow.', "Hello Love (song)")
    assert ex.entities[:2] == ["Hello Love (song)", "Hello Love"]
    assert ("Hello Love (song)", "is also called", "Hello Love") in {(t.subject, t.relation, t.object) for t in ex.triples}
    assert ("Hello Love", "Hank Snow") in {(t.subject, t.object) for t in ex.triples}


def test_a_surname_and_a_possessive_are_read_as_the_full_name():
    ex = OfflineExtractor().extract("Snow moved to Nashville in 1949. Snow's first single was a hit.", "Hank Snow")
    assert "Snow" not in ex.entities
    assert ("Hank Snow", "Nashville") in {(t.subject, t.object) for t in ex.triples}
    ex = OfflineExtractor().extract("G. Stanley Hall wrote Adolescence. Hall was the first president of the "
                                    "American Psychological Association.")
    assert "Hall" not in ex.entities
    assert ("G. Stanley Hall", "American Psychological Association") in {(t.subject, t.object) for t in ex.triples}
    # a place named from a direction does not swallow its last word
    ex = OfflineExtractor().extract("North Carolina lies east. Carolina is a name.", "Carolina")
    assert "North Carolina" in ex.entities


def test_an_initial_does_not_end_a_sentence():
    assert sentences_of("Founded by George W. Jenkins, Publix grew. It is large.") == [
        "Founded by George W. Jenkins, Publix grew.", "It is large."]


def test_relations_leave_out_parentheses():
    got = facts("Tennessee (Cherokee: Tanasi) is a state located in the United States.", "Tennessee")
    assert ("Tennessee", "is a state located in the", "United States") in got


def test_an_unknown_relations_option_is_refused():
    with pytest.raises(ValueError, match="relations must be 'clauses' or 'cooccurrence'"):
        OfflineExtractor(relations="parse")


def test_passages_link_across_the_kg_by_title_and_surname():
    """The bridge of a two-hop question: the song's passage names its singer, whose own passage
    says where he moved; the KG joins them through one entity, two hops from the song."""
    kg = KnowledgeGraph.in_memory(embeddings="hash")
    kg.add_documents([
        {"title": "Hello Love (song)", "text": '"Hello Love" is a 1974 single by Hank Snow.'},
        {"title": "Hank Snow", "text": "Snow moved to Nashville, Tennessee, in 1949."},
    ], model="offline", merge_threshold=None)
    song, singer = entity_id("Hello Love"), entity_id("Hank Snow")
    assert singer in {n.id for _, n in kg.neighbors(song, kinds=("relation",))}
    chunks_of_singer = {n.attrs.get("title") for _, n in kg.neighbors(singer, kinds=("context",))}
    assert chunks_of_singer == {"Hello Love (song)", "Hank Snow"}
    assert entity_id("Tennessee") in {n.id for _, n in kg.neighbors(singer, kinds=("relation",))}


@pytest.mark.parametrize("seed", range(5))
def test_any_text_extracts_without_error(seed):
    rnd = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + " .,;:()[]\"“”'’-—&!?\n\tÄéßЖᏔ漢"
    for _ in range(200):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 300)))
        title = rnd.choice([None, "", "(x)", "A (b)", text[:20]])
        ex = OfflineExtractor().extract(text or "x", title)
        assert all(t.subject and t.object for t in ex.triples)
        offline_entities(text)
