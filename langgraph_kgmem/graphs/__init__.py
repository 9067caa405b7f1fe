"""One module per method; each exposes ``create_<method>_graph(kg, *, model=..., **options)``."""
