"""A synthetic GRBench-format domain graph with templated questions and exact answers.

GRBench (Jin et al., 2024, "Graph Chain-of-Thought") asks questions over domain graphs stored as
``{node_type: {node_id: {"features": {...}, "neighbors": {relation: [node_id, ...]}}}}``. Its
graphs are not redistributable here, so :func:`make_domain_graph` builds a seeded graph of the
same shape in a Goodreads-like domain (books, authors, publishers, genres) and
:func:`make_questions` asks templated questions about it at GRBench's three levels:

- ``easy``: one lookup (a feature of a named node, or the name of a one-hop neighbour);
- ``medium``: multi-hop (a feature of a neighbour of a named node);
- ``hard``: counting / degree (how many neighbours along a relation, possibly after a hop).

Every question carries its exact answer and its *gold tool path*: the sequence of tool calls
(RetrieveNode, NeighbourCheck, NodeFeature, NodeDegree, Finish) that answers it, with the real node
ids. The gold path is for oracle agents in tests and benchmarks only.

Schema (node type: features; relations):

- ``book``: title, year, pages, language, rating; ``author``, ``publisher``, ``genre``
- ``author``: name, birth_year, country; ``written_books``
- ``publisher``: name, city, founded; ``published_books``
- ``genre``: name; ``genre_books``

Load a graph into a KG with :func:`langgraph_kgmem.agent_tools.load_grbench`::

    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.agent_tools.graphqa import make_domain_graph, make_questions
    from langgraph_kgmem.agent_tools import load_grbench

    data = make_domain_graph(seed=0)
    kg = KnowledgeGraph.in_memory(name="books")
    load_grbench(kg, data)
    questions = make_questions(data, n=30, seed=0)
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Literal

from langgraph_kgmem.errors import KgmemInputError

Level = Literal["easy", "medium", "hard"]
LEVELS: tuple[Level, ...] = ("easy", "medium", "hard")

_FIRST = ["Mara", "Jonas", "Ilse", "Tomas", "Priya", "Oren", "Lena", "Kofi", "Ada", "Rafael", "Sora", "Nadia",
          "Emil", "Yara", "Bruno", "Hana", "Felix", "Zofia", "Idris", "Clara", "Mateo", "Anouk", "Viktor", "Leila"]
_LAST = ["Ellison", "Varga", "Okafor", "Lindqvist", "Moreau", "Tanaka", "Brandt", "Castellano", "Novak", "Haddad",
         "Ferreira", "Kowalski", "Abara", "Sundberg", "Quint", "Delacroix", "Morrow", "Iyer", "Petrov", "Achebe"]
_ADJ = ["Silent", "Crimson", "Hidden", "Last", "Distant", "Broken", "Golden", "Winter", "Hollow", "Burning",
        "Quiet", "Northern", "Glass", "Paper", "Iron", "Salt", "Midnight", "Wandering", "Secret", "Amber"]
_NOUN = ["River", "Garden", "Harbor", "Mirror", "Orchard", "Lantern", "Archive", "Meadow", "Citadel", "Voyage",
         "Tide", "Letters", "Compass", "Atlas", "Forest", "Station", "Island", "Clockmaker", "Cartographer", "Song"]
_PUB = ["Northwind", "Bluehill", "Larkspur", "Stonebridge", "Redfern", "Ashgrove", "Harrow", "Kestrel", "Marlow",
        "Tidewater"]
_PUB_SUFFIX = ["Press", "Books", "House", "Editions"]
_CITIES = ["Lisbon", "Oslo", "Toronto", "Nairobi", "Kyoto", "Valparaiso", "Krakow", "Dublin", "Hanoi", "Porto"]
_COUNTRIES = ["Portugal", "Norway", "Canada", "Kenya", "Japan", "Chile", "Poland", "Ireland", "Vietnam", "Brazil",
              "Sweden", "Nigeria"]
_GENRES = ["Mystery", "Science Fiction", "Historical Fiction", "Fantasy", "Poetry", "Biography", "Thriller",
           "Romance"]
_LANGUAGES = ["English", "Portuguese", "Norwegian", "Japanese", "Polish", "Spanish"]


def make_domain_graph(*, seed: int = 0, books: int = 60, authors: int = 18, publishers: int = 6,
                      genres: int = 6) -> dict[str, dict[str, Any]]:
    """A seeded GRBench-format graph (see the module docstring for the schema).

    Names are unique within a type; every book has one author, one publisher and one genre, and
    every neighbour list is mirrored (book → author and author → written_books).
    """
    if min(books, authors, publishers, genres) < 1:
        raise KgmemInputError("every node type needs at least one node")
    if (authors > len(_FIRST) * len(_LAST) or books > len(_ADJ) * len(_NOUN)
            or publishers > len(_PUB) * len(_PUB_SUFFIX)):
        raise KgmemInputError("too many nodes for the name pools; lower books/authors/publishers")
    rng = random.Random(seed)
    names = rng.sample([f"{f} {l}" for f in _FIRST for l in _LAST], authors)
    titles = rng.sample([f"The {a} {n}" for a in _ADJ for n in _NOUN], books)
    pubs = rng.sample([f"{p} {s}" for p in _PUB for s in _PUB_SUFFIX], publishers)
    gnames = (_GENRES * (genres // len(_GENRES) + 1))[:genres]
    gnames = [g if i < len(_GENRES) else f"{g} {i // len(_GENRES) + 1}" for i, g in enumerate(gnames)]

    data: dict[str, dict[str, Any]] = {"book": {}, "author": {}, "publisher": {}, "genre": {}}
    for i, name in enumerate(names):
        data["author"][f"author-{i}"] = {"features": {"name": name, "birth_year": str(rng.randint(1920, 1995)),
                                                      "country": rng.choice(_COUNTRIES)},
                                         "neighbors": {"written_books": []}}
    for i, name in enumerate(pubs):
        data["publisher"][f"publisher-{i}"] = {"features": {"name": name, "city": rng.choice(_CITIES),
                                                            "founded": str(rng.randint(1850, 2000))},
                                               "neighbors": {"published_books": []}}
    for i, name in enumerate(gnames):
        data["genre"][f"genre-{i}"] = {"features": {"name": name}, "neighbors": {"genre_books": []}}
    # skewed author productivity so that degree questions have varied answers
    weights = [1.0 / (1 + (i % 7)) for i in range(authors)]
    for i, title in enumerate(titles):
        bid = f"book-{i}"
        aid = f"author-{rng.choices(range(authors), weights)[0]}" if i >= authors else f"author-{i}"
        pid = f"publisher-{rng.randrange(publishers)}"
        gid = f"genre-{rng.randrange(genres)}"
        data["book"][bid] = {"features": {"title": title, "year": str(rng.randint(1950, 2023)),
                                          "pages": str(rng.randint(120, 900)), "language": rng.choice(_LANGUAGES),
                                          "rating": f"{rng.uniform(2.5, 4.9):.1f}"},
                             "neighbors": {"author": [aid], "publisher": [pid], "genre": [gid]}}
        data["author"][aid]["neighbors"]["written_books"].append(bid)
        data["publisher"][pid]["neighbors"]["published_books"].append(bid)
        data["genre"][gid]["neighbors"]["genre_books"].append(bid)
    return data


@dataclass
class GraphQuestion:
    """One templated question with its exact answer and gold tool path."""

    id: str
    question: str
    answer: str
    level: Level
    template: str
    gold_path: list[dict[str, Any]] = field(default_factory=list)   # [{"tool", "args"}], ends with Finish

    def as_dict(self) -> dict[str, Any]:
        """The question as a JSON-native dict (the gold path's steps copied)."""
        return {"id": self.id, "question": self.question, "answer": self.answer, "level": self.level,
                "template": self.template, "gold_path": [dict(s) for s in self.gold_path]}


def _name(data: dict[str, dict[str, Any]], ntype: str, nid: str) -> str:
    feats = data[ntype][nid]["features"]
    return feats.get("name") or feats.get("title")


def _call(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool": tool, "args": args}


def _templates(data: dict[str, dict[str, Any]], rng: random.Random) -> dict[str, Any]:
    book_ids = sorted(data["book"], key=lambda s: int(s.split("-")[1]))
    author_ids = sorted(data["author"], key=lambda s: int(s.split("-")[1]))
    pub_ids = sorted(data["publisher"], key=lambda s: int(s.split("-")[1]))

    def feature_of(ntype: str, ids: list[str], feature: str, text: str):
        """One-hop: a feature of a named node ("{title}" for books, "{name}" otherwise)."""
        def make() -> tuple[str, str, list]:
            n = rng.choice(ids)
            name = _name(data, ntype, n)
            ans = data[ntype][n]["features"][feature]
            return (text.format(title=name, name=name), ans,
                    [_call("RetrieveNode", keyword=name), _call("NodeFeature", node_id=n, feature=feature),
                     _call("Finish", answer=ans)])
        return make

    def book_neighbour(rel: str, ntype: str, feature: str, text: str):
        """Two hops: a feature (or the name) of the book's ``rel`` neighbour."""
        def make() -> tuple[str, str, list]:
            b = rng.choice(book_ids)
            title = _name(data, "book", b)
            other = data["book"][b]["neighbors"][rel][0]
            ans = _name(data, ntype, other) if feature == "name" else data[ntype][other]["features"][feature]
            return (text.format(title=title), ans,
                    [_call("RetrieveNode", keyword=title), _call("NeighbourCheck", node_id=b, relation=rel),
                     _call("NodeFeature", node_id=other, feature=feature), _call("Finish", answer=ans)])
        return make

    def degree(ntype: str, ids: list[str], rel: str, text: str):
        def make() -> tuple[str, str, list]:
            n = rng.choice(ids)
            name = _name(data, ntype, n)
            ans = str(len(data[ntype][n]["neighbors"][rel]))
            return (text.format(name=name), ans,
                    [_call("RetrieveNode", keyword=name), _call("NodeDegree", node_id=n, relation=rel),
                     _call("Finish", answer=ans)])
        return make

    def hop_degree(text: str):
        def make() -> tuple[str, str, list]:
            b = rng.choice(book_ids)
            title = _name(data, "book", b)
            a = data["book"][b]["neighbors"]["author"][0]
            ans = str(len(data["author"][a]["neighbors"]["written_books"]))
            return (text.format(title=title), ans,
                    [_call("RetrieveNode", keyword=title), _call("NeighbourCheck", node_id=b, relation="author"),
                     _call("NodeDegree", node_id=a, relation="written_books"), _call("Finish", answer=ans)])
        return make

    return {
        "easy": {
            "book_year": feature_of("book", book_ids, "year", 'In which year was the book "{title}" published?'),
            "book_pages": feature_of("book", book_ids, "pages", 'How long is the book "{title}" in pages?'),
            "book_author": book_neighbour("author", "author", "name", 'Who is the author of the book "{title}"?'),
            "book_publisher": book_neighbour("publisher", "publisher", "name",
                                             'Which publisher released the book "{title}"?'),
            "author_country": feature_of("author", author_ids, "country", "Which country is the writer {name} from?"),
        },
        "medium": {
            "author_country_of_book": book_neighbour(
                "author", "author", "country", 'Which country is the author of the book "{title}" from?'),
            "author_birth_of_book": book_neighbour(
                "author", "author", "birth_year", 'In which year was the author of the book "{title}" born?'),
            "publisher_city_of_book": book_neighbour(
                "publisher", "publisher", "city", 'In which city is the publisher of the book "{title}" based?'),
            "genre_of_book": book_neighbour("genre", "genre", "name", 'What is the genre of the book "{title}"?'),
        },
        "hard": {
            "author_degree": degree("author", author_ids, "written_books", "How many books has {name} written?"),
            "publisher_degree": degree("publisher", pub_ids, "published_books",
                                       "How many books has the publisher {name} published?"),
            "author_degree_of_book": hop_degree('How many books has the author of "{title}" written in total?'),
        },
    }


def make_questions(data: dict[str, dict[str, Any]], *, n: int = 30, seed: int = 0,
                   levels: tuple[Level, ...] = LEVELS) -> list[GraphQuestion]:
    """``n`` templated questions spread evenly over ``levels`` (round-robin over the templates),
    each with its exact answer and gold tool path; no question text repeats."""
    unknown = [lv for lv in levels if lv not in LEVELS]
    if unknown or not levels:
        raise KgmemInputError(f"unknown levels {unknown or levels}; choose from {LEVELS}")
    rng = random.Random(seed)
    templates = _templates(data, rng)
    out: list[GraphQuestion] = []
    seen: set[str] = set()
    turn = 0
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > 50 * n + 100:
            raise KgmemInputError(f"the graph is too small for {n} distinct questions")
        level = levels[turn % len(levels)]
        names = sorted(templates[level])
        tname = names[(turn // len(levels)) % len(names)]
        text, answer, path = templates[level][tname]()
        turn += 1
        if text in seen:   # a small template pool ran dry: move on to the next template
            continue
        seen.add(text)
        out.append(GraphQuestion(id=f"gqa-{seed}-{len(out)}", question=text, answer=answer, level=level,
                                 template=tname, gold_path=path))
    return out


__all__ = ["make_domain_graph", "make_questions", "GraphQuestion"]
