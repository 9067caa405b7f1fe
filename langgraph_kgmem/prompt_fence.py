"""Moved to :mod:`langgraph_kgmem.llm.prompts`; this name stays importable for code written against it.

New code imports from :mod:`langgraph_kgmem.llm` (or :mod:`langgraph_kgmem.llm.prompts`): this module
re-exports the same objects (the prompt fence), so both names share one state.
"""

from __future__ import annotations

import warnings

from langgraph_kgmem.llm.prompts import *  # noqa: F401,F403 - the whole public API, under its old name
from langgraph_kgmem.llm.prompts import __all__  # noqa: F401

warnings.warn("langgraph_kgmem.prompt_fence moved to langgraph_kgmem.llm.prompts (or import from langgraph_kgmem.llm)",
              DeprecationWarning, stacklevel=2)
