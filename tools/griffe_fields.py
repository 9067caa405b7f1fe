"""A griffe extension for the API reference (mkdocs.yml loads it): an options field declared as
``name: T = Field(default, description="...")`` gets that description as its docstring, so each
method's options model shows every field with its type, default, bounds and description, the
one place they are written. A field that only changes an inherited default
(``X.with_default("name", value)``) says where it is described.
"""

from __future__ import annotations

import ast
from typing import Any

from griffe import Docstring, Extension


class FieldDescriptions(Extension):
    """Docstrings for pydantic fields from their ``Field(description=...)``."""

    def on_attribute_instance(self, *, node: Any, attr: Any, **kwargs: Any) -> None:
        """Give ``attr`` its field's description when it has no docstring of its own."""
        value = getattr(node, "value", None)
        if attr.docstring is not None or not isinstance(value, ast.Call):
            return
        func = value.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        text = None
        if name == "Field":
            text = next((ast.literal_eval(k.value) for k in value.keywords if k.arg == "description"), None)
        elif name == "with_default" and isinstance(func, ast.Attribute) and len(value.args) == 2:
            owner = ast.unparse(func.value)
            text = (f"as `{owner}.{ast.literal_eval(value.args[0])}`, with the default "
                    f"{ast.unparse(value.args[1])} here")
        if text:
            attr.docstring = Docstring(str(text), parent=attr)
