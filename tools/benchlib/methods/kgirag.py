"""Bench adapters for KG-IRAG (``langgraph_kgmem.graphs.kgirag``) and its single-pass baseline.

Names: ``kgirag`` (iterative retrieval) and ``singlepass`` (one retrieval of the whole horizon
window, same plan and answer step). Corpus "records"; datasets:

- ``beijing-rain``: benchmarks/data/beijing_air/beijing_rain_4stations.csv.gz (the UCI Beijing
  multi-site set's Changping, Dongsi, Huairou and Tiantan stations, trimmed to the time, station,
  RAIN and TEMP columns), hourly; abnormal event = ``RAIN > 0`` ("rain"); horizon L = 12 h.
- ``metro-traffic``: benchmarks/data/metro_traffic/metro_traffic_volume.csv.gz (UCI Metro
  Interstate Traffic Volume, trimmed to date_time, traffic_volume, rain_1h, weather_main), one site;
  repeated hours (one row per weather condition) are merged into one record; abnormal event =
  ``traffic_volume`` above its P-th percentile for that hour of the week ("heavy traffic"),
  P = 85 unless ``$KGMEM_TRAFFIC_PERCENTILE`` says otherwise (fitted on the whole file); L = 9 h.

Questions: :func:`langgraph_kgmem.ingest.temporal_questions.generate_questions` (Q1/Q2/Q3 in
turn, Δt ∈ {1, 2, 3} h, seeded), exact ground truth in ``answer``, the minimal sufficient records
in ``extra["required"]``. The KG holds every station's records within ±(L + 12) h of each question
(the whole 4-year set would be ~600k edges for no benefit: retrieval is local in time).

Extra metrics per question (``precision`` .. ``records_read`` from ``score``, which alone sees the
required records): ``precision`` / ``recall`` (records read at the question's location
vs the required records), ``hit_rate`` (1 when every required record was read), ``iterations``,
``records_read``. ``retrieved_count`` is the number of retrieved triples.

Offline, ``prompt_tokens`` is the would-be ``synthesize_answer`` prompt only (reasoning + records
read + question, when the graph would send one; ``api.with_offline_answer_prompt``): the offline
plan and judge decisions are made without building their prompts, so those cannot be counted.

Oracle (gold used only inside the responder): the plan is the question's true fields; the judge
answers what the exact rule-based scan of the records read so far says (the offline judge is
already exact on these questions); the answer is the gold answer when the records read settle
it, else "no answer". With ``--noise p`` (:class:`benchlib.api.Mistakes`) each judge verdict is,
with probability p, a random one: stop or go on, and when going on, a random hour of the
question's window (departure to departure + trip + horizon) to read next.
"""

from __future__ import annotations

import csv
import os
from typing import Any

from benchlib.api import (BenchContext, BenchQuestion, MethodResult, Mistakes, Responder, mistakes,
                          with_offline_answer_prompt)
from benchlib.datasets import DatasetError, bench_data_dir, open_text

from langgraph_kgmem.graphs.kgirag import (NO_ANSWER, create_kgirag_graph, create_singlepass_graph, default_step,
                                           synthesis_prompt)
from langgraph_kgmem.graphs.kgirag.options import KgiragOptions
from langgraph_kgmem.ingest.records import (HourOfWeekPercentileRule, format_time, normalize_records, parse_time,
                                            slot_of, time_of_slot)
from langgraph_kgmem.ingest.temporal_questions import TASK_OF_KIND as TASKS
from langgraph_kgmem.ingest.temporal_questions import generate_questions

VERSION = "v1"
MARGIN_HOURS = 12
RECORD_FILES = {"beijing-rain": "beijing_air/beijing_rain_4stations.csv.gz",
                "metro-traffic": "metro_traffic/metro_traffic_volume.csv.gz"}
METRO_LOCATION = "I-94 westbound"


def traffic_percentile() -> float:
    return float(os.environ.get("KGMEM_TRAFFIC_PERCENTILE", "85"))


DATASETS: dict[str, dict[str, Any]] = {
    "beijing-rain": {"event": "rain", "horizon": 12, "hours": (1, 2, 3), "rule": "RAIN > 0"},
    "metro-traffic": {"event": "heavy traffic", "horizon": 9, "hours": (1, 2, 3), "rule": None},
}
_OBS: dict[str, tuple[list[Any], str]] = {}


def record_rows(dataset: str) -> list[dict[str, str]]:
    """The CSV rows of a records set in benchmarks/data (``$KGMEM_BENCH_DATA``); a clear error when missing."""
    if dataset not in RECORD_FILES:
        raise ValueError(f"kgirag adapters run on {' or '.join(RECORD_FILES)}, not {dataset!r}")
    path = bench_data_dir() / RECORD_FILES[dataset]
    if not path.is_file():
        raise DatasetError(f"{path} is missing: the {dataset} benchmark reads the repository's benchmarks/data "
                           "(or $KGMEM_BENCH_DATA); benchmarks/data/derive.py rebuilds it from the UCI download")
    with open_text(path) as fh:
        return list(csv.DictReader(fh))


def observations(dataset: str) -> tuple[list[Any], str]:
    """(normalised observations, rule description) of a dataset, parsed once per process."""
    key = f"{dataset}:{traffic_percentile() if dataset == 'metro-traffic' else ''}"
    if key in _OBS:
        return _OBS[key]
    if dataset == "beijing-rain":
        obs, desc = normalize_records(record_rows(dataset), time_col=("year", "month", "day", "hour"),
                                      location_col="station", value_cols=["RAIN", "TEMP"], event_rule="RAIN > 0")
    elif dataset == "metro-traffic":
        obs, desc = normalize_records(record_rows(dataset), time_col="date_time", location_col=None,
                                      location=METRO_LOCATION, value_cols=["traffic_volume", "rain_1h", "weather_main"],
                                      event_rule=HourOfWeekPercentileRule("traffic_volume", traffic_percentile()))
    else:
        raise ValueError(f"kgirag adapters run on beijing-rain or metro-traffic, not {dataset!r}")
    _OBS[key] = (obs, desc)
    return obs, desc


def load_temporal_questions(dataset: str, n: int, seed: int) -> list[BenchQuestion]:
    spec = DATASETS[dataset]
    obs, _ = observations(dataset)
    tag = f"{dataset}-{VERSION}" + (f"-p{traffic_percentile():g}" if dataset == "metro-traffic" else "")
    qs = generate_questions(obs, n=n, seed=seed, event=spec["event"], hours=spec["hours"], horizon=spec["horizon"],
                            prefix=f"{tag}-s{seed}")
    return [BenchQuestion(q.id, q.question, q.answer, [], [], extra=q.to_dict()) for q in qs]


def build_records_kg(ctx: BenchContext, questions: list[BenchQuestion]) -> None:
    dataset = next((d for d in DATASETS if questions and questions[0].id.startswith(d)), None)
    if dataset is None:
        raise ValueError("kgirag build_kg: questions do not come from load_questions")
    spec = DATASETS[dataset]
    obs, desc = observations(dataset)
    reach = spec["horizon"] + max(spec["hours"]) + MARGIN_HOURS
    keep: set[int] = set()
    for q in questions:
        t = slot_of(parse_time(q.extra["time"]))
        keep.update(range(t - reach, t + reach + 1))
    subset = [o for o in obs if o.slot in keep]
    ctx.kg.add_records(subset, event_rule=desc, event_name=spec["event"], source=f"records-{dataset}-{VERSION}",
                       title=f"{dataset} records")


def retrieval_metrics(ctx: BenchContext, q: BenchQuestion, events: list[str]) -> dict[str, float]:
    required = set(q.extra.get("required", []))
    read = set()
    for eid in events:
        node = ctx.kg.node(eid)
        if node is not None and node.attrs.get("location") == q.extra.get("location"):
            read.add(node.attrs.get("time"))
    hit = len(read & required)
    return {"precision": hit / len(read) if read else 0.0, "recall": hit / len(required) if required else 1.0,
            "hit_rate": 1.0 if required <= read else 0.0, "records_read": float(len(read))}


class TemporalAdapter:
    corpus = "records"
    datasets = tuple(DATASETS)

    def __init__(self, name: str, factory: Any, **options: Any) -> None:
        self.name = name
        self.factory = factory
        self.options = options

    def load_questions(self, dataset: str, n: int, seed: int) -> list[BenchQuestion]:
        return load_temporal_questions(dataset, n, seed)

    def build_kg(self, ctx: BenchContext, questions: list[BenchQuestion]) -> None:
        build_records_kg(ctx, questions)

    def setup(self, ctx: BenchContext) -> None:
        ctx.cache[self.name] = self.factory(ctx.kg, model="offline", **self.options).compile()

    def run(self, ctx: BenchContext, q: BenchQuestion, model: Any) -> MethodResult:
        out = ctx.cache[self.name].invoke({"question": q.question}, context={"model": model})
        usage = with_offline_answer_prompt(out.get("usage", {}), model, lambda: self.answer_prompt(ctx, q, out))
        return MethodResult(retrieved_ids=None, answer=out.get("answer"), usage=usage,
                            retrieved_count=int(out.get("retrieved_triples", 0)),
                            extra={"iterations": float(out.get("iterations", 0))},
                            trace={"events": list(out.get("events", []))})

    def score(self, ctx: BenchContext, q: BenchQuestion, result: MethodResult) -> dict[str, float]:
        """Records read vs the question's required records (gold: called by the harness after ``run``)."""
        return retrieval_metrics(ctx, q, result.trace.get("events", []))

    def answer_prompt(self, ctx: BenchContext, q: BenchQuestion, out: dict[str, Any]) -> str | None:
        """The synthesize_answer prompt the graph would send for ``out``; None when its answer
        step answers "no answer" without a prompt (not stopped, κ reached, or no valid plan)."""
        kappa = self.options.get("kappa", KgiragOptions.model_fields["kappa"].default)
        return synthesis_prompt(ctx.kg, q.question, out.get("plan") or {}, out.get("events", []),
                                stopped=bool(out.get("stopped")), n_triples=int(out.get("retrieved_triples", 0)),
                                kappa=kappa)

    def oracle(self, ctx: BenchContext, q: BenchQuestion) -> Responder:
        return temporal_oracle(q, mistakes(ctx, q, self.name))


def random_verdict(gold: dict[str, Any], rng: Any) -> dict[str, Any]:
    """A random valid judge verdict: stop, or read a random hour of the question's window."""
    if rng.random() < 0.5:
        return {"stop": True, "reason": "random verdict"}
    start = slot_of(parse_time(gold["time"]))
    slot = start + rng.randint(0, int(gold["hours"]) + int(gold["horizon"]))
    return {"stop": False, "next_time": format_time(time_of_slot(slot)), "reason": "random verdict"}


def temporal_oracle(q: BenchQuestion, dice: Mistakes | None = None) -> Responder:
    """Decisions from the question's ground truth (see the module docstring)."""
    gold = q.extra
    dice = dice or Mistakes(0.0)

    def respond(messages: list[Any], request: Any) -> Any:
        step = getattr(request, "step", None)
        ctx = getattr(request, "context", {}) or {}
        if step == "plan_query":
            return {"task": TASKS[gold["kind"]],
                    "location": gold["location"], "departure_time": gold["time"], "trip_hours": gold["hours"],
                    "horizon_hours": gold["horizon"], "k0": 1,
                    "step_hours": default_step(TASKS[gold["kind"]], int(gold["hours"])),
                    "reasoning": ""}
        if step == "judge_retrieval":
            return random_verdict(gold, dice.rng) if dice.wrong() else ctx["offline"]
        if step == "synthesize_answer":
            return q.answer if ctx.get("offline_answer") not in (None, NO_ANSWER) else NO_ANSWER
        return NO_ANSWER

    return respond


ADAPTERS = [TemporalAdapter("kgirag", create_kgirag_graph), TemporalAdapter("singlepass", create_singlepass_graph)]
