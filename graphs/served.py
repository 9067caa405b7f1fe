"""LangGraph Server entry points: one graph factory per registered method (and preset), named
after it (``langgraph.json``: ``"./graphs/served.py:catrag"``), configured from the ``KGMEM_*``
environment variables (see :mod:`langgraph_kgmem.serve`). Importing this opens nothing: each
factory opens the KG and compiles its method on the first access, once per process."""

from langgraph_kgmem.serve import served_graphs

globals().update(served_graphs())
