"""The benchmark harness library behind tools/bench.py (not part of the installed package)."""
