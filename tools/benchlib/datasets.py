"""Benchmark datasets in the normalized QA form.

The sets whose licences allow it ship with the repository in ``benchmarks/data/`` (gzip-compressed;
each folder's README.md gives source, licence and what was trimmed; not part of the wheel). STEM,
whose licence is unknown, does not: it is read from the folder the user gives with
``--stem-path DIR`` or ``$KGMEM_STEM_PATH``.

Normalized form, one JSON object per line:
``{"id", "question", "answer", "passages": [{"title", "text"}], "supporting_titles": [...]}``, and
optionally ``"supporting_passages": [i, ...]``, the gold paragraphs as indices into ``passages``: where
titles repeat (MuSiQue) only these say which passage of a gold title is the gold one. Without it the
gold passages are those with a supporting title.
``--dataset`` takes a name from :data:`DATASETS` or a path to such a JSONL file (``.jsonl.gz`` too).
"""

from __future__ import annotations

import gzip
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from benchlib.api import BenchQuestion

REPO_ROOT = Path(__file__).resolve().parents[2]
STEM_ENV = "KGMEM_STEM_PATH"


@dataclass(frozen=True)
class DatasetSpec:
    file: str                       # path relative to the set's folder (benchmarks/data, or the STEM path)
    pooled_corpus: str | None = None  # a separate retrieval corpus (JSONL of {"title","text"})
    per_question: bool = True       # False: the questions' own passages are not a retrieval corpus
    external: bool = False          # not shipped: read from the path the user gives (STEM)


DATASETS: dict[str, DatasetSpec] = {
    "hotpotqa": DatasetSpec("hotpotqa/dev300.jsonl.gz"),
    "hotpotqa-train100": DatasetSpec("hotpotqa_train100/normalized.jsonl.gz"),
    "musique-train100": DatasetSpec("musique_train100/normalized.jsonl.gz"),
    # STEM's per-question passages hold only the (heuristic) gold blocks: retrieval must run on the
    # pooled corpus of all 4,207 blocks
    "stem": DatasetSpec("normalized.jsonl", pooled_corpus="stem_corpus_chunks.jsonl", per_question=False,
                        external=True),
    "hipporag-sample": DatasetSpec("hipporag_sample/normalized.jsonl.gz"),
}


class DatasetError(Exception):
    """A dataset name, file or line the harness cannot use; the message says what to do."""


def bench_data_dir() -> Path:
    """``$KGMEM_BENCH_DATA`` or the repository's ``benchmarks/data``."""
    env = os.environ.get("KGMEM_BENCH_DATA")
    return Path(env) if env else REPO_ROOT / "benchmarks" / "data"


def use_stem_path(path: str | None) -> None:
    """``--stem-path``: where STEM lives, set in the environment so that ``--fresh-process``
    workers and every later :func:`stem_dir` see it too (nothing when ``path`` is empty)."""
    if path:
        os.environ[STEM_ENV] = path


def stem_dir() -> Path:
    """The folder holding STEM's ``normalized.jsonl`` and ``stem_corpus_chunks.jsonl``."""
    env = os.environ.get(STEM_ENV)
    if not env:
        raise DatasetError(
            "dataset 'stem' is not shipped with the repository (its original licence is unknown): give the folder "
            f"holding normalized.jsonl and stem_corpus_chunks.jsonl with --stem-path DIR or ${STEM_ENV} "
            "(benchmarks/data/README.md says where it comes from)")
    return Path(env)


def spec_file(name: str, relative: str) -> Path:
    """A file of a named set: in ``benchmarks/data``, or under the STEM path; a clear error when missing."""
    spec = DATASETS[name]
    path = (stem_dir() if spec.external else bench_data_dir()) / relative
    if not path.is_file():
        where = (f"the STEM folder given by --stem-path / ${STEM_ENV} ({path.parent})" if spec.external
                 else f"{bench_data_dir()} (the repository's benchmarks/data, or $KGMEM_BENCH_DATA)")
        raise DatasetError(f"dataset {name!r} needs {path}, which is missing: it should be in {where}")
    return path


def is_qa_dataset(name_or_path: str) -> bool:
    return name_or_path in DATASETS or name_or_path.endswith(".jsonl") or Path(name_or_path).is_file()


def dataset_label(name_or_path: str) -> str:
    if name_or_path in DATASETS:
        return name_or_path
    name = Path(name_or_path).name
    return name.removesuffix(".gz").removesuffix(".jsonl") or name


def dataset_file(name_or_path: str) -> Path:
    if name_or_path in DATASETS:
        return spec_file(name_or_path, DATASETS[name_or_path].file)
    path = Path(name_or_path)
    if not path.is_file():
        raise DatasetError(
            f"unknown dataset {name_or_path!r}: give one of {', '.join(DATASETS)} or a path to a JSONL file "
            "in the normalized QA form")
    return path


def open_text(path: Path) -> IO[str]:
    """A data file for reading as text; ``.gz`` files are decompressed on the fly."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{lineno} is not valid JSON ({exc.msg})") from exc
    return rows


def parse_question(row: dict, where: str) -> BenchQuestion:
    missing = [k for k in ("question", "passages") if k not in row]
    if missing:
        raise DatasetError(f"{where}: missing key(s) {missing}; the normalized form needs "
                           "id, question, answer, passages[{title,text}], supporting_titles")
    passages = []
    for i, p in enumerate(row["passages"]):
        if not isinstance(p, dict) or "text" not in p:
            raise DatasetError(f"{where}: passage {i} must be an object with 'title' and 'text'")
        passages.append({"title": str(p.get("title") or f"passage {i}"), "text": str(p["text"])})
    return BenchQuestion(
        id=str(row.get("id") or where), question=str(row["question"]), answer=str(row.get("answer") or ""),
        passages=passages, supporting_titles=[str(t) for t in row.get("supporting_titles") or []],
        supporting_passages=supporting_indices(row, len(passages), where),
        extra={k: v for k, v in row.items()
               if k not in {"id", "question", "answer", "passages", "supporting_titles", "supporting_passages"}})


def supporting_indices(row: dict, n_passages: int, where: str) -> list[int] | None:
    """``supporting_passages`` checked: distinct indices into the question's passages, whose titles are
    the supporting titles (so title and passage grading cannot disagree on what the gold is)."""
    raw = row.get("supporting_passages")
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(i, int) and 0 <= i < n_passages for i in raw) \
            or len(set(raw)) != len(raw):
        raise DatasetError(f"{where}: supporting_passages must be distinct indices into passages "
                           f"(0..{n_passages - 1}), got {raw!r}")
    titles = {str(row["passages"][i].get("title") or f"passage {i}") for i in raw}
    if row.get("supporting_titles") and titles != {str(t) for t in row["supporting_titles"]}:
        raise DatasetError(f"{where}: the titles of supporting_passages {sorted(titles)} are not the "
                           f"supporting_titles {row['supporting_titles']}")
    return list(raw)


def select(total: int, n: int | None, seed: int | None) -> list[int]:
    """Indices of the questions to run: all if ``n`` covers them; else the first ``n`` (``seed``
    None) or a seeded sample kept in file order."""
    if n is None or n >= total:
        return list(range(total))
    if n <= 0:
        raise DatasetError(f"--questions must be positive, got {n}")
    if seed is None:
        return list(range(n))
    return sorted(random.Random(seed).sample(range(total), n))


def load_questions(name_or_path: str, n: int | None = None, seed: int | None = None) -> list[BenchQuestion]:
    path = dataset_file(name_or_path)
    rows = read_jsonl(path)
    if not rows:
        raise DatasetError(f"{path} holds no questions")
    return [parse_question(rows[i], f"{path.name}:{i + 1}") for i in select(len(rows), n, seed)]


def pooled_passages(name_or_path: str, questions: list[BenchQuestion]) -> list[dict[str, str]]:
    """The pooled retrieval corpus: the dataset's own corpus file (STEM), else every passage of
    ``questions`` once (deduplicated on title + text, first occurrence order)."""
    spec = DATASETS.get(name_or_path)
    if spec is not None and spec.pooled_corpus:
        path = spec_file(name_or_path, spec.pooled_corpus)
        rows = [{"title": str(r["title"]), "text": str(r["text"])} for r in read_jsonl(path)]
    else:
        rows = [p for q in questions for p in q.passages]
    seen: dict[tuple[str, str], dict[str, str]] = {}
    for p in rows:
        seen.setdefault((p["title"], p["text"]), p)
    return list(seen.values())


def supports_per_question(name_or_path: str) -> bool:
    spec = DATASETS.get(name_or_path)
    return spec is None or spec.per_question
