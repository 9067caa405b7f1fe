"""One module per benchmarked method; each defines ``ADAPTERS`` (see tools/benchlib/api.py)."""
