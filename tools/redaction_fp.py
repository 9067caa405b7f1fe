"""How much ordinary text the secret redaction would hide: every rule of
``langgraph_kgmem.redaction.redact_secrets`` run over the corpora the repository ships (the
benchmark data sets' questions, answers, titles and passages, and the package's sample data), with
every ``<redacted>`` counted as a false positive (none of these texts holds a secret).

    python tools/redaction_fp.py            # a table: per corpus, tokens, redactions, rate
    python tools/redaction_fp.py --recall   # the token rule on simulated random keys instead

The figure goes to docs/reliability.md; the token rule's entropy bound (``MIN_TOKEN_ENTROPY``)
was chosen on these corpora, so it is a measurement on the data it was tuned on, not a held-out one.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import sys
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from langgraph_kgmem.redaction import RANDOM_TOKEN, REDACTED, redact_secrets, token_looks_random  # noqa: E402

# the shipped corpora: JSONL questions with passages, record tables, the package's own sample data
JSONL = ["hotpotqa/dev300.jsonl.gz", "hotpotqa_train100/normalized.jsonl.gz",
         "musique_train100/normalized.jsonl.gz", "hipporag_sample/normalized.jsonl.gz"]
TABLES = ["beijing_air/beijing_rain_4stations.csv.gz", "metro_traffic/metro_traffic_volume.csv.gz"]


def _jsonl_texts(path: Path) -> Iterator[str]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            yield from (str(row.get(k, "")) for k in ("question", "answer"))
            for p in row.get("passages", []):
                yield str(p.get("title", ""))
                yield str(p.get("text", ""))


def _table_texts(path: Path) -> Iterator[str]:
    with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
        for row in csv.reader(fh):
            yield ",".join(row)


def corpora(data: Path, package_data: Path) -> Iterator[tuple[str, Iterator[str]]]:
    """(name, texts) for every shipped corpus, in a fixed order."""
    for rel in JSONL:
        yield rel.split("/")[0], _jsonl_texts(data / rel)
    for rel in TABLES:
        yield rel.split("/")[0], _table_texts(data / rel)
    for f in sorted(package_data.iterdir()):
        yield f"package:{f.name}", iter(io.StringIO(f.read_text(encoding="utf-8")).read().splitlines())


def measure(data: Path = ROOT / "benchmarks" / "data",
            package_data: Path = ROOT / "langgraph_kgmem" / "data") -> list[dict[str, object]]:
    """Per corpus: whitespace tokens, redactions by every rule, by the generic token rule alone,
    and examples of what was hidden."""
    rows = []
    for name, texts in corpora(data, package_data):
        tokens = redacted = by_token = 0
        examples: list[str] = []
        for text in texts:
            tokens += len(text.split())
            out = redact_secrets(text)
            n = out.count(REDACTED) - text.count(REDACTED)
            redacted += n
            hits = [m.group(0) for m in RANDOM_TOKEN.finditer(text) if token_looks_random(m.group(0))]
            by_token += len(hits)
            if n and len(examples) < 5:
                examples.append(_first_change(text, out))
        rows.append({"corpus": name, "tokens": tokens, "redacted": redacted, "by_token_rule": by_token,
                     "per_million_tokens": round(redacted / max(tokens, 1) * 1e6, 2), "examples": examples})
    return rows


def recall(lengths: tuple[int, ...] = (20, 24, 32, 40), n: int = 2000, seed: int = 0) -> dict[str, float]:
    """The share of simulated random keys the token rule recognises: ``n`` base62 strings per
    length (and base64 at 40), drawn with ``random.Random(seed)``."""
    import random
    import string

    rng = random.Random(seed)
    base62 = string.ascii_letters + string.digits
    out = {f"base62-{k}": sum(token_looks_random("".join(rng.choice(base62) for _ in range(k)))
                              for _ in range(n)) / n for k in lengths}
    out["base64-40"] = sum(token_looks_random("".join(rng.choice(base62 + "+/") for _ in range(40)))
                           for _ in range(n)) / n
    return out


def _first_change(before: str, after: str) -> str:
    i = next((k for k, (a, b) in enumerate(zip(before, after)) if a != b), 0)
    return before[max(0, i - 20):i + 40].replace("\n", " ")


def main(argv: list[str] | None = None) -> int:
    """Print the table (``--json`` for the rows)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--recall", action="store_true", help="the token rule's recall on simulated random keys")
    args = ap.parse_args(argv)
    if args.recall:
        for name, share in recall().items():
            print(f"{name}: {share:.1%}")
        return 0
    rows = measure()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    total_t = sum(int(r["tokens"]) for r in rows)
    total_r = sum(int(r["redacted"]) for r in rows)
    print("| corpus | tokens | redacted | by the token rule | per million tokens |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['corpus']} | {r['tokens']:,} | {r['redacted']} | {r['by_token_rule']} | {r['per_million_tokens']} |")
    print(f"| all | {total_t:,} | {total_r} | {sum(int(r['by_token_rule']) for r in rows)} | "
          f"{round(total_r / max(total_t, 1) * 1e6, 2)} |")
    for r in rows:
        for ex in r["examples"]:
            print(f"  {r['corpus']}: …{ex}…")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
