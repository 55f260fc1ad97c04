"""How the scripted investigator reads Python: which calls an asserted value flows from, and where each is defined.

From the failing assertion back through the test's assignments to the calls that produce the value
(`test_sites`), and inside each function read from its `return` back to the calls that feed it (`function_sites`),
whether called by name, through a module (`grading.letter()`), an attribute chain (`self.fees.charge()`) or a
class (`Meter.parse()`); and, for a call, the files the caller's imports say define it (`module_files`). Every
parse is bounded (`parse`), and its results are cached for one decision (`clear_caches`).
"""

from __future__ import annotations

import ast
import builtins
import functools
import sys
from collections import deque
from dataclasses import dataclass

#: Dotted names longer than this (`a.b.c.d...f()`) are not resolved through imports.
MAX_CHAIN = 8
#: Parsing Python can fail in more ways than a SyntaxError on hostile input (deep nesting, NUL bytes).
UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)
#: Longer text is not read as source: parsing costs about 1.5 s and 100 MB a million characters.
MAX_SOURCE_CHARS = 1_000_000
BUILTINS = frozenset(dir(builtins))
#: Methods of the built-in types (`items`, `append`, `quantize` is not one): tried last, they rarely lead anywhere.
BUILTIN_METHODS = frozenset(
    name for kind in (str, bytes, int, float, complex, list, tuple, dict, set, frozenset) for name in dir(kind)
)
#: The names a method reaches its own object and class through.
SELF_NAMES = frozenset({"self", "cls"})


@dataclass(frozen=True)
class Site:
    """A call in code read: the name a `def` gives it, and the dotted names it is reached through.

    `self.fees.charge(x)` is `charge` through ("self", "fees"); `grading.letter(x)` is `letter` through
    ("grading",); `Meter(s).read()` is `read` through ("Meter",), the class whose instance it is called on;
    a call through anything else (`f()()`, `d[k].g()`) has `through` ("",).
    """

    name: str
    through: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hop:
    """A function read on the path from the assertion: its name, its file and the lines of its definition."""

    name: str
    path: str
    first: int
    last: int


def same_file(hit: str, module_file: str) -> bool:
    """Whether the search hit `hit` is `module_file` (`a/b.py`), at the repository root or under a folder (`src/`)."""
    return hit == module_file or hit.endswith("/" + module_file)


def _files_of(parts: list[str]) -> list[str]:
    """The files a dotted module name may live in: `a.b` is a/b.py or a/b/__init__.py."""
    stem = "/".join(parts)
    return [f"{stem}.py", f"{stem}/__init__.py"] if stem else []


def module_files(imports: dict[str, str], site: Site) -> list[str]:
    """The files the caller's imports say `site`'s function is in, most specific first.

    `from a.b import f` then `f()`, `import a.b as m` then `m.f()`, `from a.b import C` then `C.f()` or `C().f()`:
    the function is in the longest module named by a prefix of the dotted name, a/b.py here.
    """
    root = site.through[0] if site.through else site.name
    if root not in imports or len(site.through) > MAX_CHAIN:
        return []
    return prefix_files([*imports[root].split("."), *site.through[1:], *([site.name] if site.through else [])])


def prefix_files(parts: list[str]) -> list[str]:
    """The files of the modules a dotted name's prefixes name, longest first: `a.b.C.f` -> a/b/C.py, ..., a.py."""
    parts = parts[: MAX_CHAIN + 2]
    return [f for end in range(len(parts) - 1, 0, -1) for f in _files_of(parts[:end])]


def imports_of(tree: ast.Module, path: str) -> dict[str, str]:
    """Each name the module at `path` binds by an import, with the dotted name it stands for (relative imports
    resolved against the module's folder)."""
    folder = path.split("/")[:-1]
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom):
            base = folder[: len(folder) - (node.level - 1)] if 0 < node.level <= len(folder) + 1 else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = f"{module}.{alias.name}" if module else alias.name
    return bound


def _external(imports: dict[str, str]) -> set[str]:
    """The imported names that come from the standard library: never the project's functions."""
    return {name for name, dotted in imports.items() if dotted.split(".")[0] in sys.stdlib_module_names}


def _chain(node: ast.expr) -> tuple[str, ...] | None:
    """The dotted names an expression spells (`self.fees` -> self, fees; `Meter(s)` -> Meter), None if it is
    something else or longer than MAX_CHAIN."""
    parts: list[str] = []
    while len(parts) <= MAX_CHAIN:
        if isinstance(node, ast.Call):  # an instance made by, or a value returned from, the callee
            node = node.func
        elif isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            return tuple(reversed(parts))
        else:
            return None
    return None


def _site(call: ast.Call) -> Site | None:
    if isinstance(call.func, ast.Name):
        return Site(call.func.id)
    if isinstance(call.func, ast.Attribute):
        return Site(call.func.attr, _chain(call.func.value) or ("",))
    return None


def _flow_sites(
    roots: list[ast.expr],
    scope: ast.AST,
    attributes: dict[str, list[ast.expr]],
    skip: set[str],
    external: set[str],
    writers: dict[str, list[str]] | None = None,
) -> list[Site]:
    """The calls whose values flow into `roots`, nearest first: the calls in them, then those in the last (then
    earlier) assignments to the names they use, in `scope`, and to the `self.` attributes they use, in `attributes`;
    and the methods in `writers` that change a `self.` attribute they use in place (`self.levels[k] += n`).

    Plain calls of names in `skip` are left out, as are calls through names in `external`; methods of the built-in
    types go last.
    """
    assigns: dict[str, list[ast.expr]] = {}
    for n in ast.walk(scope):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                for name in ast.walk(t):
                    if isinstance(name, ast.Name):
                        assigns.setdefault(name.id, []).insert(0, n.value)
        elif isinstance(n, ast.AugAssign | ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None:
            assigns.setdefault(n.target.id, []).insert(0, n.value)
    order: list[Site] = []
    seen: set[Site] = set()
    pending = deque(roots)
    while pending:
        for sub in ast.walk(pending.popleft()):
            if isinstance(sub, ast.Call):
                site = _site(sub)
                left_out = site is None or (site.through[0] in external if site.through else site.name in skip)
                if site and site not in seen and not left_out:
                    order.append(site)
                    seen.add(site)
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in assigns:
                pending.extend(assigns.pop(sub.id))
            elif _is_self_attribute(sub):
                pending.extend(attributes.pop(sub.attr, []))
                for method in (writers or {}).pop(sub.attr, []):  # the value read is what those methods left there
                    if (site := Site(method, ("self",))) not in seen:
                        order.append(site)
                        seen.add(site)
    return sorted(order, key=lambda s: bool(s.through) and s.name in BUILTIN_METHODS)


def _is_self_attribute(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in SELF_NAMES


#: Methods of the built-in containers that change the container they are called on.
MUTATING_METHODS = frozenset({"append", "extend", "insert", "update", "add", "setdefault", "__setitem__"})


def _state_written(node: ast.AST) -> str | None:
    """The `self.` attribute a statement changes in place (`self.a[k] = v`, `self.a += v`, `self.a.b = v`,
    `self.a.append(v)`), or None. A plain `self.a = v` is not one: its value is followed as an assignment."""
    if isinstance(node, ast.AugAssign):
        targets = [node.target]
    elif isinstance(node, ast.Assign):
        targets = [t for t in node.targets if not _is_self_attribute(t)]
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        targets = [] if _is_self_attribute(node.target) else [node.target]
    elif (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr in MUTATING_METHODS
    ):
        targets = [node.value.func.value]
    else:
        return None
    for target in targets:
        while isinstance(target, ast.Subscript | ast.Attribute) and not _is_self_attribute(target):
            target = target.value
        if _is_self_attribute(target):
            return target.attr
    return None


def _state_writers(owner: ast.ClassDef, reader: str) -> dict[str, list[str]]:
    """The methods of `owner` other than `reader` that change each `self.` attribute in place, by attribute."""
    writers: dict[str, list[str]] = {}
    for method in owner.body:
        if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) or method.name == reader:
            continue
        for node in ast.walk(method):
            if (attr := _state_written(node)) is not None and method.name not in writers.get(attr, []):
                writers.setdefault(attr, []).append(method.name)
    return writers


def failing_assert(scope: ast.AST, line: int | None) -> ast.Assert | None:
    """The assert at the failing line, else the last one in `scope`."""
    asserts = [n for n in ast.walk(scope) if isinstance(n, ast.Assert)]
    return next((a for a in asserts if line is not None and a.lineno == line), asserts[-1] if asserts else None)


def test_sites(source: str, test_name: str | None, line: int | None) -> list[Site]:
    """The project calls the failing assertion's value flows from, nearest first (not the test module's own
    helpers, the built-ins or the standard library)."""
    if not source or (tree := parse(source)) is None:
        return []
    scope = (function_named(tree, test_name) if test_name else None) or tree
    failing = failing_assert(scope, line)
    local_defs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    external = _external(imports_of(tree, ""))
    return _flow_sites([failing.test] if failing else [], scope, {}, {*external, *local_defs, *BUILTINS}, external)


def suspects(source: str, test_name: str | None, line: int | None) -> list[str]:
    """Project functions the failing assertion's value flows from, nearest first."""
    return list(dict.fromkeys(site.name for site in test_sites(source, test_name, line)))


def function_sites(source: str, name: str) -> list[Site]:
    """The calls whose values flow into what function `name` returns, nearest first; all its calls when it returns
    nothing (it works by effect). Not its own local names (callbacks), the built-ins or the standard library."""
    tree = parse(source)
    func = function_named(tree, name) if tree else None
    if tree is None or func is None:
        return []
    owner = next((c for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and func in c.body), None)
    attributes: dict[str, list[ast.expr]] = {}
    for n in ast.walk(owner) if owner else ():
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if _is_self_attribute(t):
                    attributes.setdefault(t.attr, []).insert(0, n.value)
    params = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)} - SELF_NAMES
    local = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    external = _external(imports_of(tree, ""))
    skip = {*external, *BUILTINS, *SELF_NAMES, *params, *local, name}
    returns = [n.value for n in ast.walk(func) if isinstance(n, ast.Return) and n.value is not None]
    writers = _state_writers(owner, name) if owner else {}
    return _flow_sites(returns or [func], func, attributes, skip, external, writers)


def callees(source: str, name: str) -> list[str]:
    """Functions whose values flow into what `name` returns, nearest first (all it calls if it returns nothing)."""
    return list(dict.fromkeys(site.name for site in function_sites(source, name)))


def span(node: ast.AST | None) -> tuple[int, int]:
    """The first and last line of a definition or statement (1, 1 for none)."""
    first = getattr(node, "lineno", 1)
    return first, getattr(node, "end_lineno", None) or first


@functools.lru_cache(maxsize=8)
def parse(source: str) -> ast.Module | None:
    """The source parsed, once per decision (a turn reads the test and the suspects more than once); None if it
    is not Python or too long to be read as source."""
    if len(source) > MAX_SOURCE_CHARS:
        return None
    try:
        return ast.parse(source)
    except UNPARSABLE:
        return None


def function_named(tree: ast.AST, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The first definition of function `name` in `tree` (in `ast.walk` order)."""
    return definitions_in(tree).get(name)


@functools.lru_cache(maxsize=8)
def definitions_in(tree: ast.AST) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function `tree` defines, by name, the first of each: one walk, however many calls are looked up."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            found.setdefault(n.name, n)
    return found


def clear_caches() -> None:
    """Drop the parses and definition tables kept for one decision (they may be large)."""
    parse.cache_clear()
    definitions_in.cache_clear()
