#!/usr/bin/env python
"""Rebuild this folder's benchmark files from the original downloads (see each set's README.md).

    python benchmarks/data/derive.py SOURCE_DIR

``SOURCE_DIR`` holds the sets as downloaded and normalized: ``hotpotqa/dev300.jsonl``,
``hotpotqa_train100/normalized.jsonl``, ``musique_train100/normalized.jsonl``,
``hipporag_sample/normalized.jsonl``, ``beijing_air/PRSA_Data_<Station>_20130301-20170228.csv``
and ``metro_traffic/Metro_Interstate_Traffic_Volume.csv``. The QA sets are copied as they are,
gzip-compressed; the temporal records keep only the rows and columns the benchmark reads.
"""

from __future__ import annotations

import csv
import gzip
import io
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


def derive(source: Path, target: Path = HERE) -> None:
    for src, dst in QA_SETS.items():
        write_gzip(target / dst, (source / src).read_text(encoding="utf-8"))
    beijing: list[dict[str, str]] = []
    for st in BEIJING_STATIONS:
        with (source / "beijing_air" / f"PRSA_Data_{st}_20130301-20170228.csv").open(newline="") as fh:
            beijing.extend(csv.DictReader(fh))
    write_gzip(target / "beijing_air" / "beijing_rain_4stations.csv.gz", trimmed_csv(beijing, BEIJING_COLUMNS))
    with (source / "metro_traffic" / "Metro_Interstate_Traffic_Volume.csv").open(newline="") as fh:
        metro = list(csv.DictReader(fh))
    write_gzip(target / "metro_traffic" / "metro_traffic_volume.csv.gz", trimmed_csv(metro, METRO_COLUMNS))


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit(__doc__)
    derive(Path(sys.argv[1]))
    shutil.rmtree(HERE / "__pycache__", ignore_errors=True)
