"""The router's passage ranking: the answering method's own ranking, its places after the first
``keep`` completed by question coverage over every ranking the run made.

Why: on the mixed set no question signal tells a bridge question (two passages, each naming one of
the question's things) from a composed chain, and the method that ranks best differs between them
from sample to sample (docs/methods/router.md). What the router can read without guessing the
question's type is whether its top places *cover* the question: a top five that never mentions one
of the things the question names has probably missed a passage. So the first ``keep`` places stay
the answering method's; each further place up to ``top`` goes to the candidate that names the most
question words the places above it do not (the answering method's lower places and any other
method the router ran on the question, interleaved); when no candidate adds a word, the answering
method's next place. Below ``top`` the answering method's order follows, then the other runs'
passages. Nothing is fetched: only passages some run already ranked can move up, and no LLM call
is made.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from langgraph_kgmem.graphs.common import content_words


def passage_ids(out: Mapping[str, Any]) -> list[str]:
    """A method's ranking of passage (chunk) ids, best first, from its output: CatRAG's / HippoRAG 2's
    ``passages``, AutoPrunedRetriever's evidence ``chunks``, else the ids of its ``chunk`` evidence.
    Repeats are dropped; a method that ranks no passage gives ``[]``."""
    if out.get("passages"):
        ids = [str(p["id"]) for p in out["passages"] if "id" in p]
    else:
        ids = []
        for e in out.get("evidence") or []:
            if e.get("chunks"):
                ids.extend(str(c) for c in e["chunks"])
            elif e.get("kind") == "chunk" and "id" in e:
                ids.append(str(e["id"]))
    return list(dict.fromkeys(ids))


def _interleaved(lists: Sequence[Sequence[str]], skip: set[str]) -> list[str]:
    out: list[str] = []
    seen = set(skip)
    for j in range(max((len(x) for x in lists), default=0)):
        for x in lists:
            if j < len(x) and x[j] not in seen:
                seen.add(x[j])
                out.append(x[j])
    return out


def cover_ranking(question: str, own: Sequence[str], others: Sequence[Sequence[str]],
                  text: Callable[[str], str], *, keep: int, top: int) -> list[dict[str, Any]]:
    """The router's ranking of passage ids: ``own`` (the answering method's ranking) with places
    ``keep + 1`` to ``top`` completed by question coverage (module docstring) from ``own``'s lower
    places and ``others`` (the other runs' rankings). ``text(id)`` gives a passage's text (its title
    included). Returns ``[{"id", "by"}]`` best first, ``by`` being ``"method"`` (``own``'s place),
    ``"cover"`` (moved up for the question words it adds) or ``"other"`` (another run's passage
    below ``top``)."""
    if keep < 0 or top < 0:
        raise ValueError(f"keep and top must be >= 0, got keep={keep}, top={top}")
    own = list(dict.fromkeys(own))
    asked = content_words(question)
    placed = [{"id": p, "by": "method"} for p in own[:keep]]
    covered: set[str] = set()
    words: dict[str, set[str]] = {}

    def named(pid: str) -> set[str]:
        if pid not in words:
            words[pid] = content_words(text(pid)) & asked
        return words[pid]

    for p in own[:keep]:
        covered |= named(p)
    pool = _interleaved([own[keep:], *others], {p["id"] for p in placed})
    own_rest = [p for p in own[keep:] if p in pool]
    while len(placed) < top and pool:
        gains = [len(named(p) - covered) for p in pool]
        best = max(gains)
        nxt = own_rest[0] if own_rest else pool[0]      # what the method's own order puts here
        pick = pool[gains.index(best)] if best > 0 else nxt
        placed.append({"id": pick, "by": "method" if pick == nxt and pick in own_rest else
                       "cover" if best > 0 else "other"})
        covered |= named(pick)
        pool.remove(pick)
        if pick in own_rest:
            own_rest.remove(pick)
    placed += [{"id": p, "by": "method"} for p in own_rest]
    placed += [{"id": p, "by": "other"} for p in pool if p not in own_rest]
    return placed
