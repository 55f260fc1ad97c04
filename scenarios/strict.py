"""Reading TOML into pydantic models strictly: every mistake is one line naming the file, the table and the key.

A case file is written by hand, so a typo must not pass as a default: `max_step = 4` in `[limits]` is refused
(with `max_steps` suggested), not ignored. Unknown keys are found by walking the data beside the model's fields,
before validation, so each gets the nearest valid key; type errors and missing keys come from pydantic's own
errors, reworded to one line.

Every TOML file looplab reads (a case, `suite.toml`, `looplab.toml`) is read by `read_toml`: through the files rule
(a regular file only, never blocking, at most the caller's bound of bytes), then scanned for nesting before it is
parsed, so a file nested thousands of levels deep (arrays, inline tables, the parts of a dotted key) is one line
at once instead of a recursion error or seconds of parsing.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from looplab.adapters.contract import files
from looplab.adapters.contract.errors import LooplabError

__all__ = ["nearest", "read_toml", "validate"]

M = TypeVar("M", bound=BaseModel)

#: The deepest a TOML file looplab reads may nest, each part of a key and each array or inline table one level.
#: A case file goes 4 deep (`[checks]`, `observation_contains = [{ tool = ... }]`), so 32 is far past any file
#: written by hand, and far below where tomllib fails: its parser recurses once a level (Python's recursion
#: ends near 400 nested arrays) and its dotted keys cost the square of their parts (4,000 parts: 0.2 s).
MAX_TOML_DEPTH = 32

#: What the nesting scan looks at: strings and comments (skipped whole, so a bracket or dot in them counts for
#: nothing), and the characters that open, close or separate keys and values. Everything else (bare keys,
#: numbers, dates) sits between the matches.
_TOML_TOKEN = re.compile(
    r'"""(?:[^\\]|\\[\s\S])*?"""(?!")'  # a multi-line basic string (it may end in up to two more quotes)
    r"|'''[\s\S]*?'''(?!')"  # a multi-line literal string
    r'|"(?:[^"\\\n]|\\.)*"'  # a basic string
    r"|'[^'\n]*'"  # a literal string
    r"|#[^\n]*"  # a comment
    r"|[\[\]{}=,.\n]"
)


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


def toml_too_deep(text: str, limit: int = MAX_TOML_DEPTH) -> int | None:
    """The offset in TOML `text` where its nesting first goes past `limit` levels, or None when it never does.

    A level is a part of a key (`a.b.c = 1` puts its value 3 deep; `[a.b]` puts the table's keys under 2), an
    array or an inline table. A cheap scan without parsing: strings and comments are skipped whole, and text that
    is not TOML at all is left for the parser to refuse; valid TOML within `limit` is never reported.
    """
    stack: list[tuple[str, int]] = []  # the open arrays and inline tables: their bracket and their level
    table = 0  # the level of the current [table] (a key of it sits one below)
    base, parts = 0, 1  # the key being read: the level it hangs from, its parts so far
    reading_key, header, line_done, level = True, 0, False, 0
    for match in _TOML_TOKEN.finditer(text):
        token, at = match.group(), match.start()
        if token == "\n":
            if not stack:  # a new line at the top: a key, a [table] or nothing comes next
                base, parts, reading_key, header, line_done = table, 1, True, 0, False
        elif token[0] in "\"'#" or line_done:
            continue
        elif token == "." and reading_key:
            parts += 1
            if base + parts + max(header - 1, 0) > limit:
                return at
        elif token == "=" and reading_key and not header:
            level, reading_key = base + parts, False
            if level > limit:
                return at
        elif token == "[" and reading_key and not stack:  # `[table]` or `[[array of tables]]`
            adjacent = header == 1 and text[at - 1] == "["
            if header == 0 or adjacent:
                header, base, parts = header + 1, 0, 1
        elif token == "]" and header:
            table, line_done = parts + header - 1, True
            if table > limit:
                return at
        elif token in "[{" and not reading_key:
            stack.append((token, level))
            level += 1
            if level > limit:
                return at
            if token == "{":
                base, parts, reading_key = stack[-1][1], 1, True
        elif token == "," and stack:
            if stack[-1][0] == "[":
                level = stack[-1][1] + 1
            else:
                base, parts, reading_key = stack[-1][1], 1, True
        elif token in "]}" and stack:
            level = stack.pop()[1]
            reading_key = False
    return None


def read_toml(path: Path, *, limit: int) -> dict[str, Any]:
    """The TOML file at `path` as data, read under the files rule with at most `limit` bytes.

    Raises `LooplabError` (one line naming the file) for a file the rule refuses, text that is not UTF-8, nesting
    past `MAX_TOML_DEPTH`, or TOML that does not parse.
    """
    return parse_toml(files.read_text(path, limit=limit), path)


def parse_toml(text: str, path: Path) -> dict[str, Any]:
    """TOML `text` (read from `path`) as data: its nesting scanned first, then parsed; a `LooplabError` naming `path`
    for nesting past `MAX_TOML_DEPTH` or TOML that does not parse."""
    if (at := toml_too_deep(text)) is not None:
        line = text.count("\n", 0, at) + 1
        raise LooplabError(
            f"{path}: line {line}: nested more than {MAX_TOML_DEPTH} levels deep (keys, arrays, tables): "
            "no looplab file needs that"
        )
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LooplabError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # the scan above bounds nesting; this keeps any other deep path one line too
        raise LooplabError(f"{path}: not valid TOML: nested too deep to parse") from None
