"""What `bench list --details` says about each autoscaler and load pattern.

Everything comes from the typed configs themselves - field names, types, defaults and
descriptions of the pydantic models, the models' and modules' docstrings - so the listing cannot
drift from what a run validates. An autoscaler's paper reference is the first line of its module
docstring (every autoscaler module opens with its source; read from the source, so listing imports
the config models but no implementation), the origin of its defaults the first line of its config's
docstring. A parameter's unit is the one its field declares
(`json_schema_extra={"unit": ...}`), else what its name (`_s`, `_ms`) or description says, else none.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str
    default: str
    unit: str
    description: str


@dataclass(frozen=True)
class Described:
    """One autoscaler (or pattern) and its parameters."""

    name: str
    reference: str  # autoscaler: the paper (module docstring's first line); pattern: what it plays
    defaults_from: str  # where the defaults come from (config docstring's first line)
    parameters: list[Parameter]


_SUFFIX_UNITS = (("_ms", "ms"), ("_s", "s"), ("_mb", "MB"), ("_bytes", "bytes"))  # not `_min`: minimum, not minutes
_DESCRIPTION_UNITS = (
    (re.compile(r"\brecords/s\b"), "records/s"),
    (re.compile(r"\(seconds\b|\(s\)|\bin seconds\b"), "s"),
    (re.compile(r"\(ms\)"), "ms"),
    (re.compile(r"\bpercent\b"), "%"),
    (re.compile(r"^records\b|\(records\)"), "records"),
)


# load patterns name minutes `_min` and rates `_rate` (records/s); their noise and steps are rates too
_PATTERN_UNITS = (("_min", "min"), ("_rate", "records/s"), ("noise", "records/s"), ("max_change", "records/s"))


def unit_of(name: str, field: FieldInfo, suffixes: tuple[tuple[str, str], ...] = _SUFFIX_UNITS) -> str:
    extra = field.json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("unit"), str):
        return str(extra["unit"])
    for suffix, unit in suffixes:
        if name.endswith(suffix):
            return unit
    text = field.description or ""
    for pattern, unit in _DESCRIPTION_UNITS:
        if pattern.search(text):
            return unit
    return ""


def _type_name(annotation: Any) -> str:
    """`float | None`, `'jvm' | 'quota'`, `tuple[float, ...]`: constraints (Annotated) left out."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _type_name(args[0])
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (Union, UnionType):
        return " | ".join("None" if a is type(None) else _type_name(a) for a in args)
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else _type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return annotation.__name__ if isinstance(annotation, type) else str(annotation).replace("typing.", "")


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "(required)"
    if field.default_factory is not None:
        try:
            return repr(field.default_factory())  # type: ignore[call-arg]
        except TypeError:
            return "(computed)"
    return repr(field.default)


def parameters(model: type[BaseModel], suffixes: tuple[tuple[str, str], ...] = _SUFFIX_UNITS) -> list[Parameter]:
    return [
        Parameter(name, _type_name(f.annotation), _default(f), unit_of(name, f, suffixes), f.description or "")
        for name, f in model.model_fields.items()
    ]


def _first_line(doc: str | None) -> str:
    lines = [ln.strip() for ln in (doc or "").strip().splitlines()]
    out: list[str] = []
    for ln in lines:  # the first paragraph, joined
        if not ln:
            break
        out.append(ln)
    return " ".join(out)


def module_docstring(module: str) -> str | None:
    """A module's docstring, read from its source when it is not imported yet: an autoscaler's paper
    reference without importing its implementation (numpy, scipy, statsmodels, networkx)."""
    if module in sys.modules:
        return sys.modules[module].__doc__
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return importlib.import_module(module).__doc__  # no source to read (bytecode only, an extension)
    return ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8")), clean=False)


def describe_autoscaler(name: str) -> Described:
    """An autoscaler's parameters from its config model; its reference from its implementation's module
    docstring, read without importing the implementation."""
    import autoscalers

    config = autoscalers.config_class(name)
    implementation = autoscalers.REGISTRY[name].implementation.split(":")[0]
    return Described(name, _first_line(module_docstring(implementation)), _first_line(config.__doc__),
                     parameters(config))


def describe_pattern(name: str) -> Described:
    from workloads.pattern_config import PARAMS

    model = PARAMS[name]
    return Described(name, _first_line(model.__doc__), "", parameters(model, _PATTERN_UNITS))
