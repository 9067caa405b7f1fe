"""The KG drawn for people: a self-contained interactive HTML page (:mod:`~langgraph_kgmem.view.html`,
``kgmem export --html``) over node positions computed once, in Python
(:mod:`~langgraph_kgmem.view.layout`).

It reads the KG through its public methods and sits above the storage layer, which imports
nothing from here.
"""
