"""The benchmark's KGs built by a model extractor: cached apart from the offline KG of the same
passages, with what the extraction cost recorded beside the KG."""

from __future__ import annotations

from bench_helpers import TOOLS  # noqa: F401  (puts tools/ on sys.path)
from benchlib import corpus as corpora

from langgraph_kgmem.testing import scripted_extraction_model

PASSAGES = [
    {"title": "Marie Curie", "text": "Marie Curie was born in Warsaw. Curie studied in Paris."},
    {"title": "Warsaw", "text": "Warsaw is the capital of Poland. Warsaw lies on the Vistula."},
]


def test_model_extractor_keys_its_own_cache_and_records_its_cost(tmp_path):
    offline = corpora.build_corpus(PASSAGES, "hash", cache_dir=tmp_path)
    calls = []

    def extractor():
        calls.append(1)
        return scripted_extraction_model()

    built = corpora.build_corpus(PASSAGES, "hash", cache_dir=tmp_path, extractor=extractor,
                                 extractor_label="scripted")
    assert built.key != offline.key and not built.cached
    fig = built.stats["extraction"]
    assert fig["chunks"] == 2 and fig["llm_calls"] >= 2 and fig["calls_per_chunk"] == fig["llm_calls"] / 2
    assert fig["decisions"]["asked"] >= 2 and fig["decisions"]["fell_back"] == 0
    assert "extraction" in offline.stats and offline.stats["extraction"]["llm_calls"] == 0
    again = corpora.build_corpus(PASSAGES, "hash", cache_dir=tmp_path, extractor=extractor,
                                 extractor_label="scripted")
    assert again.cached and again.key == built.key and len(calls) == 1  # a cached KG starts no model
