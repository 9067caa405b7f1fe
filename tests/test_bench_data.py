"""The benchmark data shipped in benchmarks/data: every named set resolves from the repository
(no ../shared), STEM only from the path the user gives, and none of it goes into the wheel."""

from __future__ import annotations

import gzip
import json
import tomllib
from pathlib import Path

import pytest
from bench_helpers import TOOLS  # noqa: F401  (puts tools/ on sys.path)

from benchlib import corpus as corpora
from benchlib import datasets, runner
from benchlib.methods import kgirag

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "benchmarks" / "data"
SHIPPED = {"hotpotqa": 300, "hotpotqa-train100": 100, "musique-train100": 100, "hipporag-sample": 1}


@pytest.fixture
def repo_data_only(monkeypatch):
    monkeypatch.delenv("KGMEM_BENCH_DATA", raising=False)
    monkeypatch.delenv(datasets.STEM_ENV, raising=False)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_qa_sets_resolve_from_the_repository(name, repo_data_only):
    path = datasets.dataset_file(name)
    assert path.is_relative_to(DATA) and "shared" not in path.parts
    qs = datasets.load_questions(name)
    assert len(qs) == SHIPPED[name]
    assert all(q.question and q.passages and q.supporting_titles for q in qs)


def test_every_shipped_set_has_its_licence_note():
    folders = {p.parent for p in DATA.rglob("*.gz")}
    assert len(folders) == 6
    for folder in folders:
        note = (folder / "README.md").read_text()
        assert "Licence" in note and "Source" in note, folder


@pytest.mark.parametrize("dataset", ["beijing-rain", "metro-traffic"])
def test_records_resolve_from_the_repository_trimmed_to_the_columns_read(dataset, repo_data_only):
    rows = kgirag.record_rows(dataset)
    wanted = {"beijing-rain": {"year", "month", "day", "hour", "station", "RAIN", "TEMP"},
              "metro-traffic": {"date_time", "traffic_volume", "rain_1h", "weather_main"}}[dataset]
    assert set(rows[0]) == wanted
    assert len(rows) == {"beijing-rain": 4 * 35_064, "metro-traffic": 48_204}[dataset]


def test_stem_is_read_only_from_the_path_the_user_gives(tmp_path, repo_data_only, monkeypatch):
    with pytest.raises(datasets.DatasetError, match="not shipped.*--stem-path"):
        datasets.load_questions("stem")
    monkeypatch.setenv(datasets.STEM_ENV, str(tmp_path))
    with pytest.raises(datasets.DatasetError, match="normalized.jsonl, which is missing.*STEM folder"):
        datasets.load_questions("stem")
    row = {"id": "s1", "question": "q?", "answer": "a", "passages": [{"title": "chunk_1", "text": "t"}],
           "supporting_titles": ["chunk_1"]}
    (tmp_path / "normalized.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "stem_corpus_chunks.jsonl").write_text("".join(
        json.dumps({"title": f"chunk_{i}", "text": f"block {i}"}) + "\n" for i in range(3)))
    qs = datasets.load_questions("stem")
    assert [q.id for q in qs] == ["s1"] and len(datasets.pooled_passages("stem", qs)) == 3


def test_stem_path_option_reaches_the_loader(tmp_path, repo_data_only, monkeypatch, capsys):
    monkeypatch.setattr(corpora, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setenv(datasets.STEM_ENV, "")   # restored after the test; main sets it from --stem-path
    rc = runner.main(["--method", "dense", "--dataset", "stem", "--embeddings", "hash", "--stem-path",
                      str(tmp_path / "nowhere")])
    assert rc == 2 and "stem" in capsys.readouterr().err


def test_a_fresh_clone_runs_the_hotpotqa_benchmark(tmp_path, repo_data_only, monkeypatch, capsys):
    monkeypatch.setattr(corpora, "CACHE_DIR", tmp_path / "cache")
    out = tmp_path / "r.json"
    rc = runner.main(["--method", "dense,bm25", "--dataset", "hotpotqa", "--questions", "3", "--passes", "1",
                      "--embeddings", "hash", "--json", str(out)])
    rows = json.loads(out.read_text())["results"]
    assert rc == 0 and [r["questions"] for r in rows] == [3, 3] and rows[1]["recall@5"] > 0


def test_benchmark_data_stays_out_of_the_wheel():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert cfg["packages"]["find"]["include"] == ["langgraph_kgmem*"]
    assert all(not k.startswith("benchmarks") for k in cfg.get("package-data", {}))
    assert not (REPO / "benchmarks" / "__init__.py").exists() and not (REPO / "MANIFEST.in").exists()


@pytest.mark.may_skip
def test_shipped_files_are_what_derive_makes_from_the_downloads(tmp_path):
    import os

    source = Path(os.environ.get("KGMEM_DATA_SOURCE") or REPO.parent / "shared" / "data")
    if not (source / "beijing_air").is_dir():
        pytest.skip("the original downloads are not at $KGMEM_DATA_SOURCE or ../shared/data")
    import importlib.util

    spec = importlib.util.spec_from_file_location("derive", DATA / "derive.py")
    derive = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(derive)
    derive.derive(source, tmp_path)
    for made in tmp_path.rglob("*.gz"):
        shipped = DATA / made.relative_to(tmp_path)
        assert gzip.decompress(made.read_bytes()) == gzip.decompress(shipped.read_bytes()), shipped
