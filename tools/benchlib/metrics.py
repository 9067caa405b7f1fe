"""Per-question scores and their aggregation into one result row per (method, decider, dataset, pass).

Retrieval is graded by passage, not by title (MuSiQue repeats titles, and a distractor sharing a
gold title must not count as the gold paragraph). A ranking is the list of passage keys of the text
units a method retrieved, best first, one per unit, so a passage split into several chunks repeats:
Recall@k = share of a question's gold passages among the passages of its first k units (the units an
answer prompt of k passages holds); FCR (full-chain retrieval) = 1 when every gold passage is in the
first 5. An empty ranking scores 0. ``questions`` counts the questions that ran; ``errors`` those
whose run raised (left out of every figure). Answers: HotpotQA-style exact match and token F1 on
normalised strings. A metric that does not apply to a run (no gold passages, a method without passage
retrieval, whose ranking is None, or no answers) is ``None``, never 0.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from benchlib.api import normalize_answer
from langgraph_kgmem.llm import decision_summary, merge_usage

ROW_KEYS = ("method", "decider", "dataset", "pass", "questions", "errors", "recall@2", "recall@5", "fcr", "em", "f1",
            "llm_calls_per_query", "prompt_tokens_per_query", "completion_tokens_per_query",
            "retrieved_per_query", "non_llm_ms_median", "wall_ms_median")


def recall_at_k(retrieved: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Share of the ``gold`` passage keys among the first ``k`` entries of ``retrieved`` (cut before
    repeats are merged: k counts retrieved units, not distinct passages)."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("recall needs at least one gold passage")
    return len(gold_set & set(retrieved[:k])) / len(gold_set)


def full_chain(retrieved: Sequence[str], gold: Sequence[str], k: int = 5) -> float:
    return float(set(gold) <= set(retrieved[:k])) if gold else 0.0


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    """Token F1 as in the HotpotQA evaluation (yes/no/noanswer must match exactly)."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if (pred in {"yes", "no", "noanswer"} or ref in {"yes", "no", "noanswer"}) and pred != ref:
        return 0.0
    pt, rt = pred.split(), ref.split()
    common = Counter(pt) & Counter(rt)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pt), same / len(rt)
    return 2 * precision * recall / (precision + recall)


@dataclass
class QuestionOutcome:
    """One question's result under one (method, decider, pass)."""

    qid: str
    retrieved: list[str] | None   # passage keys of the retrieved units, best first; None: retrieval n/a
    gold: list[str]               # passage keys of the gold supporting passages
    answer: str | None
    gold_answer: str
    usage: dict[str, Any]
    retrieved_count: int | None
    wall_seconds: float
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    embed_seconds: float = 0.0   # inside the embedding model during the run (part of the non-LLM time)
    retrieved_titles: list[str] = field(default_factory=list)   # the units' titles, for reading reports
    gold_titles: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"qid": self.qid, "retrieved_titles": self.retrieved_titles[:10], "gold_titles": self.gold_titles,
                "retrieved": (self.retrieved or [])[:10], "gold": self.gold,
                "answer": self.answer, "gold_answer": self.gold_answer, "retrieved_count": self.retrieved_count,
                "wall_seconds": round(self.wall_seconds, 4), "llm_calls": int(self.usage.get("llm_calls", 0)),
                "prompt_tokens": int(self.usage.get("prompt_tokens", 0)), "error": self.error,
                "calls_by_step": {k: int(v.get("llm_calls", 0)) for k, v in (self.usage.get("by_step") or {}).items()
                                  if v.get("llm_calls")},
                "extra": self.extra}


def _mean(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def median_ms(xs: Sequence[float], digits: int = 2) -> float | None:
    """Median of durations in seconds, in milliseconds rounded to ``digits``; None when empty."""
    return round(statistics.median(xs) * 1000.0, digits) if xs else None


def aggregate(outcomes: Sequence[QuestionOutcome], *, method: str, decider: str, dataset: str,
              pass_no: int, peak_rss_mb: float | None = None, more: dict[str, Any] | None = None) -> dict[str, Any]:
    """The result row (contract keys first, then ``peak_rss_mb``, ``more``, and extras)."""
    ok = [o for o in outcomes if o.error is None]
    # an empty ranking is a miss (0); only a method without passage retrieval (None) is not graded
    graded = [o for o in ok if o.gold and o.retrieved is not None]
    answered = [o for o in ok if o.answer is not None and o.gold_answer]
    counts = [o.retrieved_count for o in ok if o.retrieved_count is not None]
    non_llm = [max(0.0, o.wall_seconds - float(o.usage.get("llm_seconds", 0.0) or 0.0)) for o in ok]
    row: dict[str, Any] = {
        "method": method, "decider": decider, "dataset": dataset, "pass": pass_no, "questions": len(ok),
        # questions whose run raised: left out of every figure, so a row must say how many there were
        "errors": len(outcomes) - len(ok),
        "recall@2": _mean([recall_at_k(o.retrieved, o.gold, 2) for o in graded]),
        "recall@5": _mean([recall_at_k(o.retrieved, o.gold, 5) for o in graded]),
        "fcr": _mean([full_chain(o.retrieved, o.gold, 5) for o in graded]),
        "em": _mean([exact_match(o.answer or "", o.gold_answer) for o in answered]),
        "f1": _mean([f1_score(o.answer or "", o.gold_answer) for o in answered]),
        "llm_calls_per_query": _mean([float(o.usage.get("llm_calls", 0) or 0) for o in ok]),
        "prompt_tokens_per_query": _mean([float(o.usage.get("prompt_tokens", 0) or 0) for o in ok]),
        "completion_tokens_per_query": _mean([float(o.usage.get("completion_tokens", 0) or 0) for o in ok]),
        "retrieved_per_query": _mean([float(c) for c in counts]),
        "non_llm_ms_median": median_ms(non_llm),
        "wall_ms_median": median_ms([o.wall_seconds for o in ok]),
        "peak_rss_mb": peak_rss_mb,
        # "n/a": the method has no passage retrieval to grade (tables print n/a, not a missing figure)
        "retrieval": "graded" if graded else "n/a" if ok and all(o.retrieved is None for o in ok) else "none",
        # the non-LLM time without the embedding model (query embedding, offline answer sentences)
        "core_ms_median": median_ms([max(0.0, n - o.embed_seconds) for n, o in zip(non_llm, ok)]),
        "embed_ms_median": median_ms([o.embed_seconds for o in ok]),
        # recall over every unit the method returned: for ranked methods (dense, BM25, CatRAG) their
        # ranking depth (20; the prompt holds the top 5), for AutoPruned the passages its selected runs
        # come from (all of them in its prompt)
        "recall_all": _mean([recall_at_k(o.retrieved, o.gold, len(o.retrieved)) for o in graded]),
        "passages_per_query": _mean([float(len(set(o.retrieved))) for o in graded]),
    }
    total = None
    for o in ok:
        total = merge_usage(total, o.usage)
    decided = decision_summary(total)
    if decided["asked"]:   # a model decided: how often it did, how often the heuristics stood in, and why
        kinds = Counter(str(f.get("kind")) for f in total["fallbacks"])
        reported, counted = total["tokens_reported"], total["tokens_counted"]
        row.update({"model_decisions": decided["asked"], "decisions_fell_back": decided["fell_back"],
                    "fallback_share": decided["fallback_share"], "fallbacks_by_kind": dict(sorted(kinds.items())),
                    "structured_output": dict(sorted(total["structured_output"].items())),
                    "tokens_source": "server" if reported and not counted else "counted" if counted and not reported
                    else f"server {reported} calls, counted {counted}",
                    "seconds_per_query": _mean([o.wall_seconds for o in ok])})
    failed = [o.error for o in outcomes if o.error is not None]
    if failed:
        row["first_error"] = failed[0]
    row.update(more or {})
    extras: dict[str, list[float]] = {}
    for o in ok:
        for k, v in (o.extra or {}).items():
            if isinstance(v, (int, float)):  # bool is an int: True/False average as 1/0
                extras.setdefault(k, []).append(float(v))
    for k, vals in extras.items():
        key = k if k not in row else f"extra_{k}"
        row[key] = _mean(vals)
    return row


ROW_COLUMNS = (("method", "method"), ("decider", "decider"), ("dataset", "dataset"), ("corpus", "corpus"),
               ("pass", "pass"), ("questions", "n"), ("errors", "errors"), ("recall@2", "R@2"), ("recall@5", "R@5"),
               ("fcr", "FCR"),
               ("em", "EM"), ("f1", "F1"), ("llm_calls_per_query", "LLM calls/q"),
               ("prompt_tokens_per_query", "prompt tok/q"), ("completion_tokens_per_query", "compl. tok/q"),
               ("retrieved_per_query", "retrieved/q"), ("non_llm_ms_median", "non-LLM ms (med)"),
               ("core_ms_median", "of it w/o embedding (med)"), ("wall_ms_median", "wall ms (med)"),
               ("peak_rss_mb", "peak RSS MB"))


def format_cell(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


RETRIEVAL_KEYS = ("recall@2", "recall@5", "fcr", "recall_all")


def row_cell(row: dict[str, Any], key: str) -> str:
    """One table cell: a retrieval figure of a method without passage retrieval prints "n/a"."""
    if key in RETRIEVAL_KEYS and row.get(key) is None and row.get("retrieval") == "n/a":
        return "n/a"
    return format_cell(row.get(key))


def markdown_table(rows: Sequence[dict[str, Any]], cols: Sequence[str | tuple[str, str]] = ROW_COLUMNS) -> str:
    """A Markdown table of ``rows``; ``cols`` are keys or (key, header) pairs (default: the result
    row columns). Missing values and None print as "–", retrieval figures of methods without passage
    retrieval as "n/a"."""
    pairs = [(c, c) if isinstance(c, str) else c for c in cols]
    lines = ["| " + " | ".join(h for _, h in pairs) + " |", "|" + "---|" * len(pairs)]
    lines += ["| " + " | ".join(row_cell(r, k) for k, _ in pairs) + " |" for r in rows]
    return "\n".join(lines)
