"""Each option is declared once, in its method's options model, and the rest is read from there.

- A factory's typed keyword arguments (``**options: Unpack[<Method>Kwargs]``) are a second listing
  of the model's names and types, for editors and type checkers: they must list exactly the model's
  fields (less the factory's own parameters, such as ``model``) with the same types, so the two
  cannot drift.
- A field's bounds (``Field(ge=..., lt=...)``), ``Literal`` choices and text items are what the
  options refuse, with the package's error naming the option.
- ``json_schema_extra`` carries only the build-only mark.
"""

from __future__ import annotations

import inspect
import typing
from typing import get_args, get_origin

import pytest

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.registry import method_specs

SPECS = method_specs()


def kwargs_typeddict(factory) -> type:
    """The TypedDict behind the factory's ``**options: Unpack[...]``."""
    param = inspect.signature(factory).parameters["options"]
    assert param.kind is inspect.Parameter.VAR_KEYWORD
    annotation = param.annotation
    if isinstance(annotation, str):
        annotation = eval(annotation, factory.__globals__)  # noqa: S307 - the factory's own annotation
    assert get_origin(annotation) is typing.Unpack, f"{factory.__name__}: **options is not Unpack[...]"
    return get_args(annotation)[0]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_factory_kwargs_list_exactly_the_options_fields(spec):
    td = kwargs_typeddict(spec.factory)
    own = {n for n, p in inspect.signature(spec.factory).parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    fields = {n: f.annotation for n, f in spec.options.model_fields.items() if n not in own}
    hints = typing.get_type_hints(td)
    assert sorted(hints) == sorted(fields), (
        f"{td.__name__} and {spec.options.__name__} disagree: only in the kwargs {sorted(set(hints) - set(fields))}, "
        f"only in the options {sorted(set(fields) - set(hints))}")
    wrong = {n: (hints[n], fields[n]) for n in fields if hints[n] != fields[n]}
    assert not wrong, f"{td.__name__}: types differ from {spec.options.__name__}: {wrong}"
    assert td.__required_keys__ == frozenset(), f"{td.__name__}: every option has a default, so none is required"


def test_the_single_pass_kwargs_are_kgirag_options():
    from langgraph_kgmem.graphs.kgirag import create_singlepass_graph
    from langgraph_kgmem.graphs.kgirag.options import KgiragOptions

    hints = typing.get_type_hints(kwargs_typeddict(create_singlepass_graph))
    assert {n: KgiragOptions.model_fields[n].annotation for n in hints} == hints


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_only_the_build_only_mark_rides_in_json_schema_extra(spec):
    for name, f in spec.options.model_fields.items():
        extra = f.json_schema_extra
        assert extra is None or extra == {"build_only": True}, f"{spec.name}.{name}: json_schema_extra={extra!r}"


def _outside(f) -> list[object]:
    """Values just outside the field's declared bounds."""
    out = []
    for m in f.metadata:
        for attr, step in (("ge", -1), ("gt", 0), ("le", 1), ("lt", 0)):
            bound = getattr(m, attr, None)
            if bound is not None:
                out.append(bound + step if f.annotation is int or f.annotation == (int | None) else
                           (bound - 0.5 if attr == "ge" else bound + 0.5 if attr == "le" else bound))
    return out


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_declared_bounds_and_choices_are_refused_with_the_options_name(spec):
    checked = 0
    for name, f in spec.options.model_fields.items():
        bad = _outside(f)
        if get_origin(f.annotation) is typing.Literal:
            bad.append("no-such-choice")
        if f.annotation in (typing.Sequence[str], typing.Sequence[str] | None):
            bad += ["one string", ("text", 1)]
        for value in bad:
            with pytest.raises(KgmemInputError, match=rf"{name} must be"):
                spec.options.build(**{name: value})
            checked += 1
    assert checked, f"{spec.name}: no declared bound to check"
