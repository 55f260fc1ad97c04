"""Reading TOML into pydantic models strictly: every mistake is one line naming the file, the table and the key.

A case file is written by hand, so a typo must not pass as a default: `max_step = 4` in `[limits]` is refused
(with `max_steps` suggested), not ignored. Unknown keys are found by walking the data beside the model's fields,
before validation, so each gets the nearest valid key; type errors and missing keys come from pydantic's own
errors, reworded to one line.
"""

from __future__ import annotations

import difflib
import json
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from looplab.adapters.contract.errors import LooplabError

__all__ = ["nearest", "place", "unknown_keys", "validate"]

M = TypeVar("M", bound=BaseModel)


def nearest(word: str, choices: Sequence[str]) -> str:
    """`; did you mean X?` for the closest of `choices`, or '' when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def place(loc: Sequence[str | int]) -> str:
    """Where a key sits, as a reader of the TOML file sees it: `[limits] max_steps`, `[[faults]] #2 kind`, `task`."""
    *table, key = [str(p) for p in loc] or ["(top level)"]
    if not table:
        return key
    shown, index = [], ""
    for part in table:
        if part.isdigit():
            index = f" #{int(part) + 1}"
        else:
            shown.append(part)
    brackets = ("[[", "]]") if index else ("[", "]")
    return f"{brackets[0]}{'.'.join(shown)}{brackets[1]}{index} {key}"


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    """The pydantic models an annotation can hold (`M`, `M | None`, `list[M]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        yield from _models_in(typing.get_args(annotation)[0])
    elif origin in (typing.Union, types.UnionType, list, tuple):
        for arg in typing.get_args(annotation):
            yield from _models_in(arg)


def unknown_keys(data: Any, model: type[BaseModel], loc: tuple[str | int, ...] = ()) -> Iterator[str]:
    """A one-line description of each key in `data` that `model` (or a model nested in it) has no field for."""
    if not isinstance(data, Mapping):
        return
    fields = model.model_fields
    for key, value in data.items():
        if key not in fields:
            yield f"{place((*loc, key))}: unknown key{nearest(str(key), list(fields))}"
            continue
        for inner in _models_in(fields[key].annotation):
            if isinstance(value, list):
                for i, item in enumerate(value):
                    yield from unknown_keys(item, inner, (*loc, key, i))
            else:
                yield from unknown_keys(value, inner, (*loc, key))
            break


def _keys_only(model: type[BaseModel], loc: Sequence[str | int]) -> tuple[str | int, ...]:
    """An error's location as the file's keys and list indices: without the union members pydantic names
    (`str-enum[StopReason]`, `list[...]`) between them."""
    kept: list[str | int] = []
    current: type[BaseModel] | None = model
    for part in loc:
        if isinstance(part, int):
            kept.append(part)
        elif current is not None and part in current.model_fields:
            kept.append(part)
            current = next(_models_in(current.model_fields[part].annotation), None)
    return tuple(kept)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate(model: type[M], data: dict[str, Any], path: Path, *, allowed: Sequence[str] = ()) -> M:
    """`data` (read from `path`) as `model`, or a `LooplabError` naming the file, the table and the key.

    `allowed` limits the top-level keys a file may set (fields the loader fills itself are not among them).
    """
    top = list(allowed) or list(model.model_fields)
    for key in data:
        if key not in top:
            raise LooplabError(f"{path}: {place((key,))}: unknown key{nearest(str(key), top)}")
    if problem := next(unknown_keys(data, model), None):
        raise LooplabError(f"{path}: {problem}")
    try:
        # Strict, through JSON: `true` is no number and `"3"` no integer, while a TOML string still names an enum
        # member and an integer is still a float (TOML dates, which JSON has not, arrive as their text).
        return model.model_validate_json(json.dumps(data, default=str), strict=True)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = place(_keys_only(model, err["loc"]))
        if err["type"] == "missing":
            raise LooplabError(f"{path}: {where}: missing (a required key)") from None
        got = f", got {_shown(err['input'])}" if err["type"] not in ("value_error", "assertion_error") else ""
        raise LooplabError(f"{path}: {where}: {err['msg']}{got}") from None
