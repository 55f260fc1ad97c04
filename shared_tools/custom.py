"""A suite's own tools: a team's plain typed Python function as a `Tool` the Guard serves.

The function's name is the tool's name, its docstring the description the model reads, and its typed
parameters the argument schema (`Annotated[int, Field(description=...)]` describes one). A first
parameter annotated `Workspace` receives the run's workspace, so the tool can read the repo copy through
`ws.text_file` / `ws.resolve` (the Guard's one path rule); any other parameter is the model's to fill in.
What it returns is the observation: text as it is, anything else as JSON, cut at `SUITE_TOOL_MAX_CHARS` with the
cut said in the text (as `read_file` cuts a file).

Parameters take JSON's types only (str, int, float, bool, None, Literal, list[...], dict[str, ...], and
unions or optionals of those), so what the Guard validates and records is what the model sent.

A suite's `tools.py` is never run in looplab's process: its tool host (`tool_host`) builds its tools with
`tool_from_function` there. A function given to `tool_from_function` directly (the Python API) runs in the
caller's process.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, create_model

from looplab.shared_tools.guard import BUILTIN_TOOLS, Tool
from looplab.shared_tools.workspace import Workspace

#: The most of a suite tool's result (and of its error message) the model reads, as `read_file`'s bound.
SUITE_TOOL_MAX_CHARS = 20_000

#: What providers take as a tool's name (letters, digits, `_`; at most 64), for a Python function's name.
TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")

_SCALARS: tuple[type, ...] = (str, int, float, bool, type(None))
_ALLOWED = "str, int, float, bool, None, Literal[...], list[...], dict[str, ...] or a union of them"
#: The arguments' model: no fields beyond the schema's; parameter names such as `model_name` are fine.
_ARGS_CONFIG = ConfigDict(extra="forbid", protected_namespaces=())


def tool_from_function(fn: Callable[..., Any], *, effect: bool = False) -> Tool:
    """`fn` as a tool; `effect` puts each of its calls behind approval, as `write_file`'s are.

    A function the model cannot be offered (no docstring, a parameter without a type or of a type JSON
    cannot carry, `*args`/`**kwargs`, an async function, a name providers refuse) is a one-line
    `TypeError` naming the function and, where one is at fault, the parameter. Built once per function
    and process, as the built-in tools are: a run builds its tool set again, and a schema costs milliseconds.
    """
    if not inspect.isfunction(fn):
        raise TypeError(f"{_shown(fn)}: a tool is a plain function (def), not a {type(fn).__name__}")
    return _built(fn, effect)


@functools.cache
def _built(fn: Callable[..., Any], effect: bool) -> Tool:
    name = fn.__name__
    if not TOOL_NAME.fullmatch(name):
        raise TypeError(f"{name}: a tool's name is letters, digits and '_' (at most 64), as providers require")
    if name in BUILTIN_TOOLS:
        raise TypeError(f"{name}: the name of a built-in tool; give the function another name")
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        raise TypeError(f"{name}: a tool is a plain function that returns its result (not async, not a generator)")
    if not (fn.__doc__ or "").strip():
        raise TypeError(f"{name}: no docstring; a tool's docstring is the description the model reads")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # a name the annotations use that the module does not define, and the like
        raise TypeError(f"{name}: its type annotations do not resolve ({_one_line(exc)})") from None

    params = list(inspect.signature(fn).parameters.values())
    takes_workspace = bool(params) and hints.get(params[0].name) is Workspace
    fields: dict[str, Any] = {}
    for param in params[1:] if takes_workspace else params:
        fields[param.name] = _field(name, param, hints)

    def call(ws: Workspace, /, **kwargs: Any) -> str:
        value = fn(ws, **kwargs) if takes_workspace else fn(**kwargs)
        # Cut where the value is made: in a tool host, a huge result never leaves the host's process.
        return cut(value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False))

    # Not functools.wraps: the Guard reads the signature (a `timeout_s` there would mean a tool that bounds itself),
    # and a team's tool is always run on a worker the run's deadline bounds.
    call.__name__ = call.__qualname__ = name
    call.__doc__, call.__module__ = fn.__doc__, fn.__module__
    return Tool(name, call, inspect.cleandoc(fn.__doc__ or ""), _args_model(name, fields), effect)


def cut(text: str, limit: int = SUITE_TOOL_MAX_CHARS) -> str:
    """`text`'s first `limit` characters, the cut said in the text with how much was cut and why."""
    if len(text) <= limit:
        return text
    return text[:limit] + (
        f"\n[... truncated: {len(text) - limit} more characters not shown; "
        f"a suite tool's result is cut at {limit} characters ...]"
    )


def _field(name: str, param: inspect.Parameter, hints: dict[str, Any]) -> tuple[Any, Any]:
    """A parameter as a field of the arguments' model, or a `TypeError` naming it."""
    where = f"{name}: parameter {param.name!r}"
    if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        raise TypeError(f"{where}: *args and **kwargs cannot be described to the model; name each parameter")
    if param.kind is inspect.Parameter.POSITIONAL_ONLY:
        raise TypeError(f"{where}: positional-only; the model passes arguments by name")
    if param.name not in hints:
        raise TypeError(f"{where} has no type annotation; annotate it, e.g. {param.name}: str")
    hint = hints[param.name]
    if hint is Workspace:
        raise TypeError(f"{where}: only the first parameter may take the Workspace")
    if param.name.startswith("_"):
        raise TypeError(f"{where}: a name starting with '_' cannot be an argument; rename it")
    if param.name == "timeout_s":  # a tool host's call takes the run's remaining time under that name
        raise TypeError(f"{where}: the name looplab passes a tool's time bound as; rename it")
    if problem := _unsupported(hint):
        raise TypeError(f"{where}: {problem}")
    default = ... if param.default is inspect.Parameter.empty else param.default
    if default is not ...:
        try:
            json.dumps(default)
        except (TypeError, ValueError):
            raise TypeError(f"{where}: its default {default!r} is not a JSON value") from None
    return hint, default


def _args_model(name: str, fields: dict[str, tuple[Any, Any]]) -> type[BaseModel]:
    """The model the Guard validates arguments with (its JSON schema built once here, so a failure shows now)."""
    try:
        model = create_model(f"{name}_args", __config__=_ARGS_CONFIG, **fields)
        model.model_json_schema()
        return model
    except Exception as whole:
        for field_name, spec in fields.items():  # alone, so the failure names its parameter
            try:
                alone = create_model(f"{name}_{field_name}", __config__=_ARGS_CONFIG, **{field_name: spec})
                alone.model_json_schema()
            except Exception as exc:
                raise TypeError(f"{name}: parameter {field_name!r}: {_one_line(exc)}") from None
        raise TypeError(f"{name}: its parameters make no argument schema ({_one_line(whole)})") from None


def _unsupported(hint: Any) -> str | None:
    """Why a parameter's type is not one JSON carries as it is, or None when it is."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return _unsupported(args[0])
    if hint in _SCALARS:
        return None
    if origin is Literal:
        ok = all(isinstance(a, str | int | bool) or a is None for a in args)
        return None if ok else f"Literal values must be str, int, bool or None, not {args!r}"
    if origin in (Union, types.UnionType):
        return next((p for p in map(_unsupported, args) if p), None)
    if hint in (list, dict, typing.List, typing.Dict):  # noqa: UP006 - the bare typing aliases are refused too
        return f"give the {getattr(hint, '__name__', hint)}'s item type, e.g. list[str] or dict[str, int]"
    if origin is list and len(args) == 1:
        return _unsupported(args[0])
    if origin is dict and len(args) == 2:
        if args[0] is not str:
            return "a dict's keys are strings in JSON: use dict[str, ...]"
        return _unsupported(args[1])
    return f"type {_shown(hint)} is not supported; use {_ALLOWED}"


def _shown(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)


def _one_line(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0] if first else ''}"[:300]
