"""Prompts as a seam: each method's prompts are a documented mapping (``PROMPTS`` in its
``prompts`` module, name → template), and a graph can replace any of them with the factory's
``prompts=`` option (or one run with ``context={"prompts": {...}}``)::

    create_kgirag_graph(kg, prompts={"answer": "{reasoning}\\n\\nRecords:\\n{records}\\n\\n"
                                               "Question: {question}\\nAnswer in one line."})

An override is checked when the graph is built (or the run starts): a name the method does not
have, a value that is not text, and a placeholder the step does not fill are refused with
:class:`~langgraph_kgmem.errors.KgmemInputError` naming what is allowed. The nodes read the
template when they call the model, never at import: the override, or else the method's
``PROMPTS`` entry as it is then. Outside text (questions' records, passages, entity names) still
reaches a prompt only through the values the node fills in, each fenced
(:func:`~langgraph_kgmem.llm.fence`); a default that quotes such text carries the data note
(:data:`~langgraph_kgmem.llm.prompts.DATA_NOTE`), and an override that leaves it out gets it added
at its end.
"""

from __future__ import annotations

import string
from importlib import import_module
from typing import Any, ClassVar, Mapping, TypedDict

from pydantic import Field, field_validator

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.spec import MethodOptions
from langgraph_kgmem.llm.prompts import DATA_NOTE


def placeholders(template: str) -> set[str]:
    """The names a template fills (``{question}`` → ``question``; ``{{`` is a literal brace).

    Raises:
        ValueError: the template's braces do not parse (``str.format`` would fail on it)."""
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(template) if name}


def check_prompts(defaults: Mapping[str, str], overrides: Any) -> dict[str, str]:
    """``overrides`` (name → template) checked against a method's ``defaults``: each name must be
    one of them, each template text whose placeholders the default's step fills; a template of a
    step that quotes outside text keeps the data note (added at its end when left out).

    Raises:
        KgmemInputError: not a mapping, an unknown name, a template that is not text or is empty,
            whose braces do not parse, or that uses a placeholder the step does not fill."""
    if overrides is None:
        return {}
    if not isinstance(overrides, Mapping):
        raise KgmemInputError(f"prompts must be a dict of prompt name -> template, got "
                              f"{type(overrides).__name__}; the prompts are: {', '.join(sorted(defaults))}")
    out: dict[str, str] = {}
    for name, template in overrides.items():
        if name not in defaults:
            raise KgmemInputError(f"no prompt {name!r}; the prompts are: {', '.join(sorted(defaults))}")
        if not isinstance(template, str) or not template.strip():
            raise KgmemInputError(f"prompt {name!r} must be non-empty text, got {template!r}")
        try:
            used = placeholders(template)
        except ValueError as exc:
            raise KgmemInputError(f"prompt {name!r} does not parse as a template ({exc}); write a "
                                  "literal brace as {{ or }}") from None
        allowed = placeholders(defaults[name])
        if used - allowed:
            raise KgmemInputError(f"prompt {name!r} uses {', '.join('{' + u + '}' for u in sorted(used - allowed))}"
                                  f", which its step does not fill; it fills: "
                                  f"{', '.join('{' + a + '}' for a in sorted(allowed)) or 'nothing'}")
        out[str(name)] = with_data_note(template, defaults[name])
    return out


def with_data_note(template: str, default: str) -> str:
    """``template`` with the data note at its end when ``default`` carries it and it does not."""
    if DATA_NOTE in default and DATA_NOTE not in template:
        return template.rstrip("\n") + "\n" + DATA_NOTE
    return template


class PromptKwargs(TypedDict, total=False):
    """:class:`PromptOptions`' keyword argument, for a factory's ``Unpack[...]``."""

    prompts: dict[str, str]


class PromptOptions(MethodOptions):
    """Options of a method whose prompts can be overridden: the ``prompts`` option, checked against
    the ``PROMPTS`` mapping of :attr:`PROMPTS_MODULE` (read when a node asks, see :meth:`prompt`)."""

    PROMPTS_MODULE: ClassVar[str] = ""   # the dotted name of the module holding the method's PROMPTS

    prompts: dict[str, str] = Field(default_factory=dict,
                                    description="prompt overrides, name -> template (the names and their "
                                                "placeholders: PROMPTS in the method's prompts module)")

    @field_validator("prompts", mode="before")
    @classmethod
    def _none_is_no_override(cls, value: Any) -> Any:
        return {} if value is None else value

    @classmethod
    def default_prompts(cls) -> Mapping[str, str]:
        """The method's ``PROMPTS`` mapping, as it is now."""
        return import_module(cls.PROMPTS_MODULE).PROMPTS

    @classmethod
    def check_prompts(cls, opts: Mapping[str, Any]) -> None:
        """See :meth:`MethodOptions.check_prompts`: the ``prompts`` option against :meth:`default_prompts`."""
        check_prompts(cls.default_prompts(), opts.get("prompts"))

    def prompt(self, name: str) -> str:
        """The template of prompt ``name`` for this graph or run: the override, else the method's
        ``PROMPTS`` entry (read now, not when the module was imported)."""
        defaults = self.default_prompts()
        return with_data_note(self.prompts[name], defaults[name]) if name in self.prompts else defaults[name]
