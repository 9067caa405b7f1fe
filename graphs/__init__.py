"""Entry points LangGraph Server serves (see ``langgraph.json``): ``served.py`` exports one graph
factory per registered method, built by :func:`langgraph_kgmem.serve.graph_factory`; the KG,
model and embeddings come from the ``KGMEM_*`` environment variables.
"""
