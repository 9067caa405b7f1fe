#!/usr/bin/env python
"""Rebuild this folder's benchmark files from the original downloads (see each set's README.md).

    python benchmarks/data/derive.py SOURCE_DIR

``SOURCE_DIR`` holds the sets as downloaded and normalized: ``hotpotqa/dev300.jsonl``,
``hotpotqa_train100/normalized.jsonl``, ``musique_train100/normalized.jsonl``,
``hipporag_sample/normalized.jsonl``, ``beijing_air/PRSA_Data_<Station>_20130301-20170228.csv``
and ``metro_traffic/Metro_Interstate_Traffic_Volume.csv``. The QA sets are copied as they are,
gzip-compressed; the temporal records keep only the rows and columns the benchmark reads.

MuSiQue repeats titles (a distractor may share a gold paragraph's title, and two gold paragraphs may
share one), so its normalized rows also get ``supporting_passages``, the gold paragraphs as indices,
from ``musique_train100/supporting_passages.json`` in this folder. That file is read off the
original's ``is_supporting`` flags:

    python benchmarks/data/derive.py --musique-gold musique_train.json

(``musique_train.json``: HippoRAG's ``data/musique_train.json``, the source named in the set's README).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
QA_SETS = {"hotpotqa/dev300.jsonl": "hotpotqa/dev300.jsonl.gz",
           "hotpotqa_train100/normalized.jsonl": "hotpotqa_train100/normalized.jsonl.gz",
           "musique_train100/normalized.jsonl": "musique_train100/normalized.jsonl.gz",
           "hipporag_sample/normalized.jsonl": "hipporag_sample/normalized.jsonl.gz"}
BEIJING_STATIONS = ("Changping", "Dongsi", "Huairou", "Tiantan")
BEIJING_COLUMNS = ("year", "month", "day", "hour", "station", "RAIN", "TEMP")
METRO_COLUMNS = ("date_time", "traffic_volume", "rain_1h", "weather_main")
MUSIQUE = "musique_train100/normalized.jsonl"
MUSIQUE_GOLD = "musique_train100/supporting_passages.json"


def write_gzip(target: Path, text: str) -> None:
    """Deterministic gzip (no file name, no time stamp): the same input gives the same bytes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        gz.write(text.encode("utf-8"))


def trimmed_csv(rows: list[dict[str, str]], columns: tuple[str, ...]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    w.writerows([r[c] for c in columns] for r in rows)
    return buf.getvalue()


def with_gold_passages(jsonl: str, gold: dict[str, list[int]]) -> str:
    """``jsonl`` with each row's ``supporting_passages`` from ``gold`` (by question id), placed after
    ``supporting_titles``; every row must have an entry."""
    out = []
    for line in jsonl.splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row["id"] not in gold:
            raise SystemExit(f"{MUSIQUE_GOLD} has no entry for question {row['id']}: rebuild it with --musique-gold")
        row = {k: v for k, v in row.items() if k != "supporting_passages"}
        keys = list(row)
        at = keys.index("supporting_titles") + 1 if "supporting_titles" in keys else len(keys)
        items = list(row.items())
        items.insert(at, ("supporting_passages", gold[row["id"]]))
        out.append(json.dumps(dict(items), ensure_ascii=False))
    return "\n".join(out) + "\n"


def musique_gold(original: Path) -> str:
    """``supporting_passages.json`` from MuSiQue's original rows (``paragraphs[i].is_supporting``),
    one question per line."""
    rows = json.loads(original.read_text(encoding="utf-8"))
    lines = [f"  {json.dumps(r['id'])}: {json.dumps([i for i, p in enumerate(r['paragraphs']) if p['is_supporting']])}"
             for r in rows]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def derive(source: Path, target: Path = HERE) -> None:
    gold = json.loads((HERE / MUSIQUE_GOLD).read_text(encoding="utf-8"))
    for src, dst in QA_SETS.items():
        text = (source / src).read_text(encoding="utf-8")
        write_gzip(target / dst, with_gold_passages(text, gold) if src == MUSIQUE else text)
    beijing: list[dict[str, str]] = []
    for st in BEIJING_STATIONS:
        with (source / "beijing_air" / f"PRSA_Data_{st}_20130301-20170228.csv").open(newline="") as fh:
            beijing.extend(csv.DictReader(fh))
    write_gzip(target / "beijing_air" / "beijing_rain_4stations.csv.gz", trimmed_csv(beijing, BEIJING_COLUMNS))
    with (source / "metro_traffic" / "Metro_Interstate_Traffic_Volume.csv").open(newline="") as fh:
        metro = list(csv.DictReader(fh))
    write_gzip(target / "metro_traffic" / "metro_traffic_volume.csv.gz", trimmed_csv(metro, METRO_COLUMNS))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--musique-gold":
        (HERE / MUSIQUE_GOLD).write_text(musique_gold(Path(sys.argv[2])), encoding="utf-8")
        sys.exit(0)
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit(__doc__)
    derive(Path(sys.argv[1]))
    shutil.rmtree(HERE / "__pycache__", ignore_errors=True)
