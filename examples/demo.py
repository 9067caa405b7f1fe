"""The main job: build a KG from the bundled sample text, answer questions with each method, show
the memory at work (the second asking of a question), answer temporal questions with KG-IRAG over
the bundled sample records, and export the HTML view with a ReMindRAG run highlighted.

Offline by default (no LLM: heuristic decisions, short answers picked from each method's own
evidence and path — labelled as such); set
KGMEM_MODEL (e.g. openai:gpt-4o-mini) to use a real model. Run with `make demo`.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
import time
from importlib import resources
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from langgraph_kgmem import KnowledgeGraph  # noqa: E402
from langgraph_kgmem.graphs.common import normalize_answer  # noqa: E402
from langgraph_kgmem.graphs.registry import get_factory, summaries  # noqa: E402
from langgraph_kgmem.graphs.kgirag import create_kgirag_graph, create_singlepass_graph  # noqa: E402
from langgraph_kgmem.ingest.chunking import split_sentences  # noqa: E402
from langgraph_kgmem.ingest.records import normalize_records  # noqa: E402
from langgraph_kgmem.ingest.temporal_questions import generate_questions  # noqa: E402
from langgraph_kgmem.view.html import export_html, run_highlight, run_route  # noqa: E402
from langgraph_kgmem.memory import edge_memory_counts  # noqa: E402
from langgraph_kgmem.llm import model_label, resolve_model  # noqa: E402
from langgraph_kgmem.memory.view import edge_fact  # noqa: E402

OUT = Path(os.environ.get("KGMEM_DEMO_DIR", "demo_output"))


WIDTH = 100


def banner(text: str, explain: str = "") -> None:
    print("\n" + "=" * WIDTH + f"\n{text}")
    if explain:
        print(textwrap.fill(explain, WIDTH))
    print("=" * WIDTH)


KIND_NAMES = {"chunk": "passage", "relation": "fact", "anchor": "section title"}


def first_sentence(text: str) -> str:
    """A passage's first sentence, whole, and how many more it has (a passage is too long for a
    line; a sentence cut in its middle would read as a different claim)."""
    sentences = split_sentences(" ".join(str(text).split())) or [""]
    more = len(sentences) - 1
    return sentences[0] + (f" (+{more} more sentence{'s' if more > 1 else ''})" if more else "")


def show(out: dict, label: str) -> None:
    u = out.get("usage", {})
    print(f"[{label}] answer: {out.get('answer', '')!r}")
    for ev in out.get("evidence", [])[:3]:
        line = f"evidence ({KIND_NAMES.get(ev['kind'], ev['kind'])}): {first_sentence(ev['text'])}"
        print(textwrap.fill(line, WIDTH, initial_indent="    ", subsequent_indent="      "))
    print(f"    cost: {u.get('llm_calls', 0)} LLM calls, {u.get('prompt_tokens', 0)} prompt tokens, "
          f"{u.get('completion_tokens', 0)} completion tokens, {u.get('offline_decisions', 0)} offline decisions")


def counted(by_kind: dict) -> str:
    """``{"chunk": 6, "entity": 23}`` as ``6 passage, 23 entity``."""
    return ", ".join(f"{n} {KIND_NAMES.get(k, k)}" for k, n in sorted(by_kind.items()))


def memory_notes(kg: KnowledgeGraph, out: dict) -> list[str]:
    """What memory did in a run, in words: edges replayed or written, answers stored or replayed,
    reflections kept."""
    notes = []
    followed = (out.get("replayed") or {}).get("edges", [])
    if followed:
        facts = "; ".join(edge_fact(kg, e["edge"]) for e in followed[:3])
        more = f" and {len(followed) - 3} more" if len(followed) > 3 else ""
        notes.append(f"memory replay followed {len(followed)} remembered edge(s): {facts}{more}")
    updates = out.get("memory_updates") or {}
    if updates.get("enhanced") or updates.get("penalised"):
        notes.append(f"memory written: {updates.get('enhanced', 0)} edge(s) strengthened, "
                     f"{updates.get('penalised', 0)} weakened")
    stored = out.get("replayed_answer")
    if stored:
        notes.append(f"answered from memory: the stored answer to the same question (by {stored.get('decider')}, "
                     f"from {len(stored.get('evidence', []))} cited passage(s)), no retrieval")
    elif out.get("answer_memory") == "stored":
        notes.append("memory written: the answer and its cited passages, replayed when the same question comes again")
    for r in out.get("reflections") or []:
        notes.append(f"reflection after attempt {r.get('attempt')}: {str(r.get('root_cause', '')).rstrip('.')}; "
                     f"advice kept for the next attempt: {r.get('advice', '')}")
    return notes


def sample_documents() -> list[dict]:
    text = resources.files("langgraph_kgmem").joinpath("data/sample.txt").read_text(encoding="utf-8")
    docs = []
    for block in (b.strip() for b in text.split("\n\n")):
        if block:
            title, _, body = block.partition("\n")  # first line of each block is its title
            docs.append({"id": f"sample-{len(docs)}", "title": title.strip(), "text": body.strip()})
    return docs


def sample_questions() -> list[tuple[str, str]]:
    """The bundled questions with the answer the bundled text gives (``question<TAB>answer``)."""
    text = resources.files("langgraph_kgmem").joinpath("data/questions.txt").read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line.strip()]
    return [(q.strip(), a.strip()) for q, a in rows]


def is_right(answer: str, expected: str) -> bool:
    """The answer names the expected one and little else (at most twice its words)."""
    got, want = normalize_answer(answer), normalize_answer(expected)
    return bool(want) and f" {want} " in f" {got} " and len(got.split()) <= 2 * len(want.split())


def text_methods(kg: KnowledgeGraph, model) -> dict:
    """Each text method answers every bundled question (the first two twice, to show memory at
    work) beside the answer the text gives; returns ReMindRAG's first run (for the view)."""
    checkpointer, store = kg.persistence()
    questions = sample_questions()
    first_run: dict = {}
    tally: dict[str, int] = {}
    for method in ("remindrag", "catrag", "hipporag2", "autopruned", "r3cycle"):
        banner(f"method: {method}", summaries()[method])
        factory, preset = get_factory(method)
        app = factory(kg, model=model, **preset).compile(checkpointer=checkpointer, store=store)
        tally[method] = 0
        for i, (q, expected) in enumerate(questions):
            print(f"Q: {q}\n   expected (from the text): {expected}")
            for attempt in ("first asking", "second asking")[:2 if i < 2 else 1]:
                t0 = time.perf_counter()
                out = app.invoke({"question": q}, {"configurable": {"thread_id": f"{method}-{i}-{attempt}"}})
                right = is_right(out.get("answer", ""), expected)
                tally[method] += right and attempt == "first asking"
                show(out, f"{attempt}, {time.perf_counter() - t0:.2f}s, {'right' if right else 'wrong'}")
                if method == "remindrag" and not first_run:
                    first_run = {**out, "question": q}
                for note in memory_notes(kg, out):
                    print(textwrap.fill(note, WIDTH, initial_indent="    ", subsequent_indent="      "))
    print("\nright answers (first asking): " + ", ".join(f"{m} {n}/{len(questions)}" for m, n in tally.items()))
    return first_run


def temporal_method(model) -> None:
    """KG-IRAG over the bundled hourly records (2 stations, rain = abnormal event), next to the
    single-pass baseline that reads the whole horizon at once; ground truth from the records."""
    banner("method: kgirag (temporal KG from the bundled sample records)", summaries()["kgirag"])
    path = resources.files("langgraph_kgmem").joinpath("data/sample_records.csv")
    kg = KnowledgeGraph.open(OUT / "records_kg", name="demo-records")
    report = kg.add_records(str(path), location_col="station", event_rule="rain_mm > 0", event_name="rain")
    print(textwrap.fill(f"records: {report}", WIDTH, subsequent_indent="    "))
    observations, _ = normalize_records(str(path), location_col="station", event_rule="rain_mm > 0")
    questions = generate_questions(observations, n=3, seed=1, event="rain", hours=(2,), horizon=6)
    iterative = create_kgirag_graph(kg, model=model).compile()
    single = create_singlepass_graph(kg, model=model).compile()
    for q in questions:
        print(textwrap.fill(f"Q ({q.kind}): {q.question}", WIDTH, subsequent_indent="    "))
        print(f"    ground truth from the records: {q.answer}")
        for label, app in (("kgirag", iterative), ("single-pass", single)):
            out = app.invoke({"question": q.question})
            u = out["usage"]
            print(f"    [{label}] answer: {out['answer']!r}; {out.get('iterations', 1)} round(s), "
                  f"{out.get('retrieved_triples', 0)} triples retrieved; {u.get('llm_calls', 0)} LLM calls, "
                  f"{u.get('prompt_tokens', 0)} prompt tokens")
            if out.get("no_answer_reason"):
                print(f"        why: {out['no_answer_reason']}")
    kg.close()


def main() -> int:
    model = resolve_model(None, required=False) or "offline"
    banner(f"langgraph_kgmem demo — model: {model_label(model)}")
    if OUT.exists():
        shutil.rmtree(OUT)
    kg = KnowledgeGraph.open(OUT / "kg", name="demo")
    docs = sample_documents()
    report = kg.add_documents(docs, model=model)
    print(textwrap.fill(f"ingest: {report}", WIDTH, subsequent_indent="    "))
    again = kg.add_documents(docs, model=model)
    print(f"re-ingest (idempotent): {again.documents_skipped} skipped, {again.documents_added} added")
    stats = kg.stats()
    print(f"KG: {stats['nodes']} nodes ({counted(stats['nodes_by_kind'])}), "
          f"{stats['edges']} edges ({counted(stats['edges_by_kind'])})")
    run = text_methods(kg, model)
    temporal_method(model)
    page = export_html(kg, OUT / "kg.html", title="langgraph_kgmem demo KG", highlight=run_highlight(run),
                       route=run_route(run), question=run.get("question"),
                       memory=edge_memory_counts(kg.persistence()[1], kg.name))
    print("\n" + textwrap.fill("HTML view of the graph (ReMindRAG's first run: its path as numbered red arrows, "
                               "its evidence ringed in red; remembered edges in green):", WIDTH) + f"\n    {page}")
    kg.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
