"""Entry points LangGraph Server serves (see ``langgraph.json``): one module per method.

Each module exports ``graph``, a graph factory built by :func:`langgraph_kgmem.serve.graph_factory`;
the KG, model and embeddings come from the ``KGMEM_*`` environment variables.
"""
