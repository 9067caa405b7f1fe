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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping, Sequence, TypeVar

from langgraph.store.base import BaseStore
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from langgraph_kgmem.errors import KgmemInputError, check_int
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


class MethodOptions(BaseModel):
    """Base of the per-method options: the chat model and the tenant ids every method accepts per
    run, plus the method's own knobs (subclasses). Frozen; unknown names are refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True,
                              protected_namespaces=())

    METHOD: ClassVar[str] = "method"
    # options that choose the graph's nodes: a run cannot change them (the nodes are not there)
    BUILD_ONLY: ClassVar[frozenset[str]] = frozenset()
    # True: the nodes read every knob of the method once, when the graph is built, so a run may
    # set only the base options (model and tenant ids)
    FIXED_AT_BUILD: ClassVar[bool] = False
    # integer options and their least value (None allowed for those in OPTIONAL_INT_FLOORS)
    INT_FLOORS: ClassVar[Mapping[str, int]] = {}
    OPTIONAL_INT_FLOORS: ClassVar[Mapping[str, int]] = {}

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
            for name, low in cls.INT_FLOORS.items():
                check_int(name, opts[name], low)
            for name, low in cls.OPTIONAL_INT_FLOORS.items():
                check_int(name, opts[name], low, optional=True)
            cls.check_values(opts)
            cls.check_prompts(opts)
        return data

    @classmethod
    def check_prompts(cls, opts: Mapping[str, Any]) -> None:
        """Checks of the ``prompts`` option of a method whose prompts can be overridden
        (:class:`~langgraph_kgmem.graphs.prompt_overrides.PromptOptions`); nothing here."""

    @classmethod
    def check_values(cls, opts: Mapping[str, Any]) -> None:
        """Checks of single values beyond the integer floors (a subclass overrides this and raises
        :class:`KgmemInputError` naming the option); ``opts`` holds every option, as given or at
        its class default."""

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
        """The options a run's context cannot change."""
        if cls.FIXED_AT_BUILD:
            return frozenset(cls.model_fields) - frozenset(MethodOptions.model_fields)
        return cls.BUILD_ONLY

    def scope_values(self) -> dict[str, str]:
        """The tenant labels this run gives (``user_id`` and ``tenant``), for ``memory_scope``."""
        values = dict(self.tenant)
        if self.user_id is not None:
            values["user_id"] = self.user_id
        return values


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
