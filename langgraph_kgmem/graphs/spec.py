"""What every method declares about itself: :class:`MethodSpec`, and :class:`MethodOptions`, the
base of each method's options model.

A method package (``graphs/<method>/``) exports one ``SPEC``; the registry collects them, and the
package's exports, the agents' tool descriptions, the CLI's choices and help, the served graphs
and the benchmark read the spec instead of restating it.

Options are one pydantic model per method. The factory validates its keyword arguments through
it (a bad value raises :class:`~langgraph_kgmem.errors.KgmemInputError` at build time, naming the
option), and the same model is the graph's ``context_schema``: ``app.invoke(inputs,
context={"top_passages": 3, "user_id": "alice"})`` overrides those knobs for one run, on top of
the values the graph was built with. Options that decide the graph's shape (which nodes exist)
are fixed at build time; a run that tries to change one is refused with a message saying so.

Each option is declared once, as a pydantic field: its type (``Literal`` choices, a sequence of
them), its bounds (``Field(ge=, gt=, le=, lt=)``), its description and, for an option fixed at
build, ``json_schema_extra={"build_only": True}``. The base model reads those declarations to
check each given value with the package's own message (``top_passages must be an integer >= 1,
got 0``); only checks that code must express (a callable, a mapping's keys, several options at
once) are written by hand, in :meth:`MethodOptions.check_values` and
:meth:`MethodOptions.check_together`.
"""

from __future__ import annotations

import types
from collections.abc import Sequence as AbcSequence
from dataclasses import dataclass, field
from typing import (Any, Callable, ClassVar, Literal, Mapping, Sequence, TypedDict, TypeVar, Union, get_args,
                    get_origin)

from langgraph.store.base import BaseStore
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo

from langgraph_kgmem.errors import KgmemInputError, check_int, check_number
from langgraph_kgmem.memory import ROOT, SYSTEM_KINDS
from langgraph_kgmem.memory.kinds import MemoryKind, register_kind

O = TypeVar("O", bound="MethodOptions")

# what a method needs besides a KG of documents (MethodSpec.requirements)
REQUIREMENTS = {
    "store": "a LangGraph store for its cross-session memory (compile(store=...) or store=)",
    "records": "time-stamped records in the KG (kg.add_records)",
    "tool_calling": "a chat model with tool calling (bind_tools), or model='offline'",
    "graph_env": "a KG, or a GRBench-style graph environment (GraphEnv)",
}


# the mark of an option a run's context cannot change (MethodOptions.build_only reads it)
AT_BUILD = {"build_only": True}


def memory_scope_field(namespaces: str) -> Any:
    """The ``memory_scope`` option, declared once for every method that keeps memory: tenant labels
    (``"{user_id}"`` or keys of ``tenant``, filled per run) inserted in ``namespaces``, fixed when the
    graph is built; None: one memory per KG."""
    return Field(None, examples=[("{user_id}",)], json_schema_extra=AT_BUILD,
                 description=f"tenant labels of {namespaces}, filled per run from the run's user_id and tenant, "
                             "e.g. ('{user_id}',) gives each user their own; None: one memory per KG")


class MethodOptions(BaseModel):
    """Base of the per-method options: the chat model and the tenant ids every method accepts per
    run, plus the method's own knobs (subclasses). Frozen; unknown names are refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True,
                              protected_namespaces=())

    METHOD: ClassVar[str] = "method"

    model: Any = Field(None, description="chat model: a LangChain chat model, 'offline' or 'provider:model'; "
                                         "None uses the one the graph was built with ($KGMEM_MODEL)")
    user_id: str | None = Field(None, description="tenant id: fills '{user_id}' in memory_scope for this run")
    tenant: dict[str, str] = Field(default_factory=dict,
                                   description="other tenant labels for memory_scope templates, e.g. {'org': 'acme'}")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _input_error(type(self), exc) from None

    @model_validator(mode="before")
    @classmethod
    def _check_given(cls, data: Any) -> Any:
        # the values as given (each option at its class default when left out), checked before
        # pydantic's own coercion so that a bad value gets the package's message naming it
        if isinstance(data, dict):
            opts = {name: data.get(name, f.get_default(call_default_factory=True))
                    for name, f in cls.model_fields.items()}
            for name, f in cls.model_fields.items():
                _check_declared(name, f, opts[name])
            cls.check_values(opts)
            cls.check_prompts(opts)
        return data

    @classmethod
    def check_prompts(cls, opts: Mapping[str, Any]) -> None:
        """Checks of the ``prompts`` option of a method whose prompts can be overridden
        (:class:`~langgraph_kgmem.graphs.prompt_overrides.PromptOptions`); nothing here."""

    @classmethod
    def check_values(cls, opts: Mapping[str, Any]) -> None:
        """Checks of single values beyond what the fields declare (their type's choices and bounds,
        checked before this): a subclass overrides this and raises :class:`KgmemInputError`
        naming the option; ``opts`` holds every option, as given or at its class default."""

    @classmethod
    def with_default(cls, name: str, default: Any) -> Any:
        """The declaration of the inherited option ``name`` (type bounds, description, build-only
        mark) with another default, for a method whose default differs from the mixin's:
        ``fusion_strong: float = FusionOptions.with_default("fusion_strong", 1.01)``."""
        return FieldInfo.merge_field_infos(cls.model_fields[name], default=default)

    @classmethod
    def build(cls: type[O], **options: Any) -> O:
        """The options of a graph being built (what the factory's keyword arguments become)."""
        built = cls(**options)
        built.check_together()
        return built

    def given(self) -> dict[str, Any]:
        """The options set explicitly (the rest are the class defaults)."""
        return {k: getattr(self, k) for k in self.model_fields_set}

    def for_run(self: O, context: Any) -> O:
        """These (build-time) options with the run's ``context`` on top: a dict, an options model of
        this method (what LangGraph makes of the dict) or any object with a ``model`` attribute.
        Raises :class:`KgmemInputError` for an option fixed at build time, or a value out of range."""
        if context is None:
            return self
        if isinstance(context, MethodOptions):
            given = context.given()
        elif isinstance(context, Mapping):
            given = dict(context)
        else:   # a bare run context such as a dataclass with a model
            given = {"model": getattr(context, "model", None)} if getattr(context, "model", None) is not None else {}
        given = {k: v for k, v in given.items() if not (k == "model" and v is None)}
        if not given:
            return self
        build_only = self.build_only()
        fixed = sorted(k for k in given if k in build_only and given[k] != getattr(self, k, None))
        if fixed:
            raise KgmemInputError(
                f"{self.METHOD}: {', '.join(fixed)} is fixed when the graph is built: pass it to the factory, "
                f"not in context= (per-run options: {', '.join(sorted(set(type(self).model_fields) - build_only))})")
        merged = type(self)(**{**self.given(), **given})
        merged.check_together()
        return merged

    def check_together(self) -> None:
        """Checks that read several options at once (a subclass overrides this and raises
        :class:`KgmemInputError`). They run on the options a graph is built with and on each run's
        merged options, never in a field validator: LangGraph makes a run's ``context`` dict an
        instance of this model with the options it leaves out at their defaults, not the build's."""

    @classmethod
    def build_only(cls) -> frozenset[str]:
        """The options a run's context cannot change: those that choose the graph's nodes or what it
        writes once, declared with ``json_schema_extra={"build_only": True}``."""
        return frozenset(name for name, f in cls.model_fields.items()
                         if isinstance(f.json_schema_extra, Mapping) and f.json_schema_extra.get("build_only"))

    def scope_values(self) -> dict[str, str]:
        """The tenant labels this run gives (``user_id`` and ``tenant``), for ``memory_scope``."""
        values = dict(self.tenant)
        if self.user_id is not None:
            values["user_id"] = self.user_id
        return values


class MethodKwargs(TypedDict, total=False):
    """The keyword arguments every factory takes for :class:`MethodOptions`' tenant ids (``model``
    is a parameter of its own). A method's ``<Method>Kwargs`` extends it with the names and types of
    its options model, for ``**options: Unpack[...]``; the defaults, bounds and descriptions live
    only in the model, and a test checks that the two list the same names and types."""

    user_id: str | None
    tenant: dict[str, str]


def _check_declared(name: str, declared: FieldInfo, value: Any) -> None:
    """``value`` against what the field ``name`` declares: its bounds (``ge``/``gt``/``le``/``lt``)
    on an integer or a number, its ``Literal`` choices, a non-empty selection of them for a
    sequence of a ``Literal``, and text items (not one string) for a sequence of ``str`` (the
    message shows the field's first ``examples`` entry); None passes where the type allows it.
    Raises KgmemInputError in the package's words; what a field does not declare is left to
    pydantic (an integer with no lower bound included)."""
    annotation, optional = declared.annotation, False
    if get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        annotation, optional = (rest[0] if len(rest) == 1 else annotation), True
    bounds: dict[str, Any] = {}
    for m in declared.metadata:   # pydantic keeps Field(ge=...) as annotated_types.Ge(ge=...), and so on
        for attr, bound in (("ge", {}), ("gt", {"low_open": True}), ("le", {}), ("lt", {"high_open": True})):
            if getattr(m, attr, None) is not None:
                bounds.update(bound, **{"low" if attr[0] == "g" else "high": getattr(m, attr)})
    if "low" in bounds and annotation is int:   # integers: an open bound is the next integer in
        high = bounds.get("high")
        check_int(name, value, bounds["low"] + bool(bounds.get("low_open")),
                  None if high is None else high - bool(bounds.get("high_open")), optional=optional)
    elif bounds and annotation is float:
        check_number(name, value, optional=optional, **bounds)
    elif get_origin(annotation) is Literal and not (optional and value is None):
        allowed = get_args(annotation)
        if value not in allowed:
            raise KgmemInputError(f"{name} must be {_choices(allowed)}, got {value!r}")
    elif get_origin(annotation) in (Sequence, AbcSequence) and not (optional and value is None):
        inner = get_args(annotation)
        if inner == (str,) and (isinstance(value, str) or not isinstance(value, AbcSequence)
                                or not all(isinstance(v, str) for v in value)):
            example = f" such as {declared.examples[0]!r}" if declared.examples else ""
            raise KgmemInputError(f"{name} must be a tuple of strings{example}, got {value!r}")
        if inner and get_origin(inner[0]) is Literal:
            allowed = get_args(inner[0])
            if (isinstance(value, str) or not isinstance(value, AbcSequence) or not value
                    or any(v not in allowed for v in value)):
                raise KgmemInputError(f"{name} must be a non-empty subset of {allowed}, got {value!r}")


def _choices(allowed: Sequence[Any]) -> str:
    """``'a', 'b' or 'c'``."""
    shown = [repr(a) for a in allowed]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _input_error(cls: type[MethodOptions], exc: ValidationError) -> KgmemInputError:
    """The first problem of a failed options validation as a KgmemInputError naming the option.
    A check that raised KgmemInputError itself keeps its own message."""
    for err in exc.errors():
        original = (err.get("ctx") or {}).get("error")
        if isinstance(original, KgmemInputError):
            return KgmemInputError(f"{cls.METHOD}: {original}")
    err = exc.errors()[0]
    name = ".".join(str(p) for p in err.get("loc", ())) or "options"
    if err.get("type") == "extra_forbidden":
        known = ", ".join(sorted(cls.model_fields))
        return KgmemInputError(f"{cls.METHOD} has no option {name!r}; its options are: {known}")
    return KgmemInputError(f"{cls.METHOD}: option {name} = {err.get('input')!r}: {err.get('msg')}")


def options_of(runtime: Any, defaults: O) -> O:
    """The options of this run: ``defaults`` (the build's) with ``runtime.context`` on top."""
    return defaults.for_run(getattr(runtime, "context", None))


@dataclass(frozen=True)
class Preset:
    """A named variant of a method (its own registry name, served graph and agent tool)."""

    name: str
    options: Mapping[str, Any]
    summary: str                 # one line: langgraph.json, CLI help, listings
    agent_description: str       # what an agent reads to decide when to call it


@dataclass(frozen=True)
class MethodSpec:
    """Everything the rest of the package needs to know about one method."""

    name: str
    factory: Callable[..., Any]          # create_<method>_graph(kg, *, model, store, **options)
    options: type[MethodOptions]         # validated options = the graph's context_schema
    summary: str                         # one line
    description: str                     # a paragraph: the idea and when to use it
    agent_description: str               # what an agent reads to decide when to call it
    requirements: frozenset[str] = frozenset()   # keys of REQUIREMENTS
    output_keys: tuple[str, ...] = ("answer", "evidence", "usage", "method", "model", "run_id")
    presets: Sequence[Preset] = field(default_factory=tuple)
    # called by give_feedback after it stored feedback on one of this method's runs:
    # (store, kg name, tenant scope, {run_id, question, method, useful, wrong, verdict, source})
    on_feedback: Callable[[BaseStore, str, tuple[str, ...], dict], None] | None = None
    # the memory kinds the method keeps in the store and how `kgmem memory` shows them; registered
    # with the memory layer when the spec is made (the method's package is imported)
    memory: tuple[MemoryKind, ...] = ()

    def __post_init__(self) -> None:
        unknown = set(self.requirements) - set(REQUIREMENTS)
        if unknown:
            raise ValueError(f"{self.name}: unknown requirement(s) {sorted(unknown)}; known: {sorted(REQUIREMENTS)}")
        for kind in self.memory:
            if {kind.label, kind.short} & (SYSTEM_KINDS | {ROOT}):
                raise ValueError(f"{self.name}: memory kind {kind.label!r} (--kind {kind.short}) takes a system "
                                 f"kind's name ({', '.join(sorted(SYSTEM_KINDS | {ROOT}))}): give it its own")
            register_kind(kind)

    @property
    def export(self) -> str:
        """The factory's public name (exported by ``langgraph_kgmem``)."""
        return self.factory.__name__

    def variants(self) -> list[tuple[str, dict[str, Any], str, str]]:
        """``(name, preset options, summary, agent description)`` for the method and each preset."""
        out = [(self.name, {}, self.summary, self.agent_description)]
        out += [(p.name, dict(p.options), p.summary, p.agent_description) for p in self.presets]
        return out


__all__ = ["MethodOptions", "MethodSpec", "Preset", "options_of"]
