"""Leave-one-dataset-out validation of the methods' tuned constants (``tools/bench.py --validate``).

A constant chosen on a dataset and then reported on the same dataset looks better than it is. For
each tuned constant (:data:`TUNED`, or ``--validate-grid``) every candidate value runs on every
dataset (the shipped QA sets, plus each ``--validate-data`` JSONL), offline, on the pooled corpus.
Then, for each dataset held out in turn:

- ``in-sample``: the figure of the value that is best on that dataset itself (what tuning on the
  reported data shows);
- ``out-of-sample``: the figure on it of the value that is best on the *other* datasets (what a
  value chosen without it earns there);
- ``default``: the figure of the value the code ships.

The gap between in-sample and out-of-sample is the optimism of tuning on the reported data; a
default whose figure trails the out-of-sample one was chosen on data it does not generalise from.
"""

from __future__ import annotations

import argparse
import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from benchlib.datasets import dataset_label
from benchlib.metrics import format_cell
from benchlib.registry import Registry, UnknownMethodError

SHIPPED_QA = ("hotpotqa", "hotpotqa-train100", "musique-train100")
DEFAULT_METRIC = "recall@5"


@dataclass(frozen=True)
class Constant:
    """One tuned option of a method's adapter and the values tried for it (the shipped one among them)."""

    method: str
    option: str
    values: tuple[Any, ...]


# the constants a method's docs give as chosen on benchmark figures (damping 0.5 and RRF's 60 are
# published values, not tuned here); each grid brackets the shipped value
TUNED: tuple[Constant, ...] = (
    Constant("catrag", "passage_weight", (0.02, 0.05, 0.1)),
    Constant("catrag", "offline_fact_threshold", (0.1, 0.2, 0.3)),
    Constant("catrag", "anchor_threshold", (0.4, 0.5, 0.6)),
    Constant("catrag", "dense_fusion", (False, True)),
    Constant("hipporag2", "passage_weight", (0.02, 0.05, 0.1)),
    Constant("remindrag", "lam", (0.4, 0.55, 0.7)),
    Constant("autopruned", "tau_run", (0.6, 0.7, 0.8)),
    # the default reader's (issue 44; chosen by answer in prompt at half of dense top-5's tokens with
    # benchlib.apr_curve --lodo, which this harness's R@5 re-checks)
    Constant("autopruned", "sentence_budget", (200, 250, 300)),
    Constant("autopruned", "sentence_cover", (0, 5)),
)


class ValidateError(Exception):
    """A ``--validate-grid`` entry the harness cannot run; the message says what to write."""


def parse_value(text: str) -> Any:
    """``true``/``false``, an int, a float, else the text itself."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text.strip()


def parse_grid(spec: str | None) -> tuple[Constant, ...]:
    """``METHOD:OPTION=V1,V2[;...]`` → constants (None: :data:`TUNED`)."""
    if not spec:
        return TUNED
    out = []
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        head, _, values = part.partition("=")
        method, _, option = head.partition(":")
        if not (method and option and values):
            raise ValidateError(f"--validate-grid entry {part!r}: write METHOD:OPTION=V1,V2 (e.g. catrag:beta=1.5,2.5)")
        out.append(Constant(method.strip(), option.strip(), tuple(parse_value(v) for v in values.split(","))))
    return tuple(out)


def shipped_value(adapter: Any, option: str) -> Any:
    """The value the adapter runs with: its own option, else its method's preset, else the default
    of the method's options model."""
    from langgraph_kgmem.errors import KgmemInputError
    from langgraph_kgmem.graphs.registry import get_method

    if option in adapter.options:
        return adapter.options[option]
    try:
        entry = get_method(adapter.name)
    except KgmemInputError as exc:
        raise ValidateError(f"cannot read the default of {adapter.name}'s {option!r}: {exc}") from exc
    if option in entry.preset:
        return entry.preset[option]
    field = entry.spec.options.model_fields.get(option)
    if field is None or field.is_required():
        raise ValidateError(f"method {adapter.name!r} has no option {option!r} with a default")
    return field.get_default(call_default_factory=True)


def variant(adapter: Any, option: str, value: Any) -> Any:
    """A copy of ``adapter`` running with ``option = value`` (the registered adapter is not changed)."""
    twin = copy.copy(adapter)
    twin.options = {**adapter.options, option: value}
    twin.name = f"{adapter.name}[{option}={value}]"
    return twin


def lodo(figures: dict[str, dict[Any, float | None]], default: Any,
         most_sets_first: bool = False) -> list[dict[str, Any]]:
    """Leave-one-dataset-out rows from ``{dataset: {value: figure}}``: per held-out dataset, the value
    best on the others (mean figure; ties go to the shipped default, then to the first value), its
    figure there (out-of-sample), the value best on the dataset itself and its figure (in-sample),
    and the shipped default's figure. A None figure (the value does not qualify there) is left out
    of the mean; with ``most_sets_first`` the value qualifying on more of the sets wins before the
    mean is read, so missing a set never helps a value."""
    rows = []
    values = list(next(iter(figures.values())))
    for held in figures:
        others = [d for d in figures if d != held]

        def best(on: Sequence[str]) -> Any:
            def score(v: Any) -> tuple[int, float]:
                got = [figures[d][v] for d in on if figures[d][v] is not None]
                return (len(got) if most_sets_first else 0, sum(got) / len(got) if got else float("-inf"))
            top = max(score(v) for v in values)
            tied = [v for v in values if score(v) == top]
            return default if default in tied else tied[0]

        chosen, own = (best(others) if others else None), best([held])
        rows.append({"held_out": held, "chosen_on_others": chosen,
                     "out_of_sample": figures[held][chosen] if others else None,
                     "best_on_itself": own, "in_sample": figures[held][own], "default": default,
                     "default_figure": figures[held].get(default)})
    return rows


def validate(args: argparse.Namespace, reg: Registry, measure: Callable[[Any, str], dict[str, Any]],
             log: Any = print) -> dict[str, Any]:
    """Every constant of the grid, every value, every dataset; then the leave-one-out rows.
    ``measure(adapter, dataset)`` runs one adapter (variant) offline on one dataset's pooled corpus
    and returns its result row (the runner supplies it)."""
    datasets = [*SHIPPED_QA, *(args.validate_data or [])]
    metric = args.validate_metric
    report: dict[str, Any] = {"metric": metric, "datasets": [dataset_label(d) for d in datasets],
                              "questions": args.questions, "embeddings": args.embeddings, "constants": []}
    for c in parse_grid(args.validate_grid):
        try:
            adapter = reg.get(c.method)
        except UnknownMethodError as exc:
            raise ValidateError(str(exc)) from exc
        default = shipped_value(adapter, c.option)
        values = c.values if default in c.values else (*c.values, default)
        figures: dict[str, dict[Any, float | None]] = {}
        for d in datasets:
            figures[dataset_label(d)] = {}
            for v in values:
                fig = measure(variant(adapter, c.option, v), d).get(metric)
                figures[dataset_label(d)][v] = fig
                log(f"validate: {c.method} {c.option}={v} on {dataset_label(d)}: {metric} {format_cell(fig)}")
        report["constants"].append({"method": c.method, "option": c.option, "values": list(values),
                                    "default": default, "figures": {d: {str(v): f for v, f in fs.items()}
                                                                    for d, fs in figures.items()},
                                    "lodo": lodo(figures, default)})
    return report


def validate_markdown(report: dict[str, Any]) -> str:
    head = ("| method | constant | shipped | held-out set | chosen on the others | out-of-sample "
            f"{report['metric']} | best on the set itself | in-sample {report['metric']} | shipped value's |")
    lines = [head, "|" + "---|" * 9]
    for c in report["constants"]:
        for r in c["lodo"]:
            lines.append("| " + " | ".join(str(x) for x in (
                c["method"], c["option"], c["default"], r["held_out"], r["chosen_on_others"],
                format_cell(r["out_of_sample"]), r["best_on_itself"], format_cell(r["in_sample"]),
                format_cell(r["default_figure"]))) + " |")
    return "\n".join(lines)


def write_report(report: dict[str, Any], out: Path) -> None:
    """The JSON report at ``out``, and its table on stdout."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str))
    print(validate_markdown(report))
    print(f"\nwritten to {out}")
