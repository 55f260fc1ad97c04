"""The house plan, checked from the code's own imports: rooms import only downward, and no import circle.

Every `import` and `from ... import` in looplab's modules counts, inside functions too (a lazy import is still a
dependency); only those under `if TYPE_CHECKING:` do not, since they never run. The rooms and what each may use are
the README's layout section, as data.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from looplab.adapters.contract.declaration import EXPORT
from looplab.run.environments import PLACED_UNDER_LOOPLAB
from tests.paths import REPO, TESTS

ROOT = REPO
#: Where the build places each repository folder: `adapters/` is `looplab.adapters`, and so on.
PLACED = {"looplab": "looplab"} | {folder: f"looplab.{folder}" for folder in PLACED_UNDER_LOOPLAB}

#: A room, by module prefix (the longest prefix wins), and the rooms it may import besides itself.
ROOMS: dict[str, set[str]] = {
    "looplab.shared_tools": set(),
    "looplab.adapters.contract": {"looplab.shared_tools"},
    "looplab.adapters.boundary": {"looplab.adapters.contract", "looplab.shared_tools"},
    "looplab.adapters.session": {"looplab.adapters.boundary", "looplab.adapters.contract", "looplab.shared_tools"},
    "looplab.adapters.runners": {
        "looplab.adapters.session",
        "looplab.adapters.boundary",
        "looplab.adapters.contract",
        "looplab.shared_tools",
    },
    # Finds runners by name and loads one on demand: it imports no runner module.
    "looplab.adapters.registry": {"looplab.adapters.contract"},
    "looplab.adapters": set(),
    "looplab.scenarios": {"looplab.adapters.contract", "looplab.shared_tools"},
    # The registry is the runners' declarations, found without importing a runner: records and views read it.
    "looplab.records": {
        "looplab.adapters.registry",
        "looplab.adapters.contract",
        "looplab.scenarios",
        "looplab.shared_tools",
    },
    "looplab.run": {
        "looplab.records",
        "looplab.adapters.registry",
        "looplab.adapters.runners",
        "looplab.adapters.session",
        "looplab.adapters.boundary",
        "looplab.adapters.contract",
        "looplab.scenarios",
        "looplab.shared_tools",
    },
    "looplab.views": {
        "looplab.records",
        "looplab.adapters.registry",
        "looplab.adapters.contract",
        "looplab.shared_tools",
    },
    "looplab.measure": {
        "looplab.run",
        "looplab.views",
        "looplab.records",
        "looplab.adapters",
        "looplab.scenarios",
        "looplab.shared_tools",
    },
    # Test support a package shipping its own runner imports: it runs runners, as the harness does.
    "looplab.testing": {
        "looplab.run",
        "looplab.records",
        "looplab.adapters",
        "looplab.scenarios",
        "looplab.shared_tools",
    },
    "looplab.cli": {"looplab"},
    "looplab": set(),
}


def modules() -> dict[str, Path]:
    """Every module of the installed package, by its dotted name (the fixture repos are data, not looplab)."""
    found = {}
    for folder, package in PLACED.items():
        for path in (ROOT / folder).rglob("*.py"):
            if "invoice_discount" in path.parts:
                continue
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            found[".".join((package, *parts))] = path
    return found


MODULES = modules()


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that can run: all but those under `if TYPE_CHECKING:`."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in _runtime_imports(ast.Module([child], [])))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _runtime_imports(node)


def _owner(name: str) -> str | None:
    """The looplab module `name` is, or the module that defines it (`looplab.x.Name` -> `looplab.x`)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _every_import(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, those under `if TYPE_CHECKING:` too."""
    return (node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom))


def imports_of(module: str, *, typing_too: bool = False) -> set[str]:
    """The looplab modules `module` imports when it runs; with `typing_too`, for its type hints as well."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    statements = _every_import if typing_too else _runtime_imports
    for node in statements(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            owner = _owner(target)
            if owner is not None and owner != module:
                found.add(owner)
    return found


GRAPH = {module: imports_of(module) for module in MODULES}
#: The same with the imports type hints need: a module that types against another knows it, so these are no circle
#: either (a lower room stays free of the one above it).
TYPED_GRAPH = {module: imports_of(module, typing_too=True) for module in MODULES}


def room(module: str) -> str:
    return max((r for r in ROOMS if module == r or module.startswith(r + ".")), key=len)


def test_every_module_is_in_a_room() -> None:
    assert MODULES, "no modules found"
    assert all(room(m) for m in MODULES)


def test_the_folders_placed_under_looplab_are_the_ones_the_build_places() -> None:
    """`PLACED_UNDER_LOOPLAB`, which every tool that lays out a source tree reads, says what pyproject.toml builds."""
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-dir"
    ]
    assert package_dir == {f"looplab.{folder}": folder for folder in PLACED_UNDER_LOOPLAB}


#: The tests' folder for what is about the repository as a whole (layout, packaging, docs, workflow, nox sessions).
WHOLE_REPOSITORY = "project"


def test_the_tests_mirror_the_rooms() -> None:
    """Every test module sits in the folder of the room it tests (`tests/boundary/`, `tests/views/`, ...)."""
    folders = {p.parent.name for p in TESTS.glob("*/test_*.py")}
    last_parts = {r.rsplit(".", 1)[-1] for r in ROOMS if r != "looplab"}
    assert folders and folders <= last_parts | {WHOLE_REPOSITORY}, folders - last_parts
    assert not list(TESTS.glob("test_*.py")), "a test module outside a room's folder"
    assert all((TESTS / folder / "__init__.py").is_file() for folder in folders)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_its_own_room_and_the_rooms_below(module: str) -> None:
    mine = room(module)
    allowed = ROOMS[mine] | {mine}
    upward = sorted(
        target
        for target in GRAPH[module]
        if not any(target == r or target.startswith(r + ".") for r in allowed)
        # a package's own `__init__` is where its modules live
        and not (module.startswith(target + ".") and MODULES[target].name == "__init__.py")
    )
    assert not upward, f"{module} (room {mine}) imports {upward}"


def _cycles(graph: dict[str, set[str]] = GRAPH) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle() -> None:
    assert _cycles() == []


def test_no_import_circle_counting_the_imports_of_type_hints() -> None:
    assert _cycles(TYPED_GRAPH) == []


def test_the_circle_check_finds_a_circle() -> None:
    """The check itself: two modules importing each other are found."""
    saved = dict(GRAPH)
    try:
        GRAPH["looplab.adapters.contract.limits"] = GRAPH["looplab.adapters.contract.limits"] | {"looplab.cli"}
        assert any("looplab.cli" in c and "looplab.adapters.contract.limits" in c for c in _cycles())
    finally:
        GRAPH.clear()
        GRAPH.update(saved)


def test_the_contract_imports_nothing_above_it() -> None:
    contract = [m for m in MODULES if room(m) == "looplab.adapters.contract"]
    below = {"looplab.adapters.contract", "looplab.shared_tools"}
    above = {t for m in contract for t in GRAPH[m] if room(t) not in below}
    assert contract and not above


# --- the surface: what a room offers the others -------------------------------------------------------------------
#
# A module declares `__all__` when something outside its room uses it, and `__all__` is exactly what is used from
# outside: by the other rooms, the public API's lazy names, the command's entry point, the runner modules' export,
# the examples, the docs' hooks and API reference, and the noxfile. A module only its own room uses declares none.

#: Files outside the package that use looplab as a user does (the built copy of the example package is not one).
OUTSIDE = [
    *(p for p in (ROOT / "examples").rglob("*.py") if "build" not in p.parts),
    *(ROOT / "docs" / "_hooks").glob("*.py"),
    ROOT / "noxfile.py",
]
#: The modules an outside `from ... import *` reads: every name of their `__all__` is offered (pytest collects the
#: conformance checks from it).
STAR = "*"


def _declared_all(module: str) -> list[str] | None:
    for node in ast.parse(MODULES[module].read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                return list(ast.literal_eval(node.value))  # type: ignore[arg-type]
    return None


def _top_level_names(module: str) -> set[str]:
    """The names `module` binds when it runs (its definitions, assignments and imports, under `if`/`try` too)."""
    names: set[str] = set()
    body = list(ast.parse(MODULES[module].read_text(encoding="utf-8")).body)
    while body:
        node = body.pop()
        if isinstance(node, ast.If | ast.Try):
            body += [*node.body, *node.orelse, *getattr(node, "finalbody", []), *getattr(node, "handlers", [])]
        elif isinstance(node, ast.ExceptHandler):
            body += node.body
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).partition(".")[0] for a in node.names}
    return names


TOP_LEVEL = {module: _top_level_names(module) for module in MODULES}


def _uses(tree: ast.AST, package: str) -> Iterator[tuple[str, str]]:
    """(module, name) for each looplab name the code in `tree` takes: `from m import name`, or `alias.name` on a
    module it imported; a module taken whole gives (module, "")."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if base not in MODULES:
                continue
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
                    yield f"{base}.{alias.name}", ""
                else:
                    yield base, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    aliases[alias.asname or alias.name] = alias.name
                    yield alias.name, ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            held = ast.unparse(node.value)
            module = aliases.get(held, held if held in MODULES else None)
            # a local variable may share a module's name: only what the module binds is taken from it
            if module is not None and node.attr in TOP_LEVEL[module]:
                yield module, node.attr


def surface() -> dict[str, set[str]]:
    """Each looplab module used from outside its room, and the names used (STAR: all of its `__all__`)."""
    found: dict[str, set[str]] = {}

    def use(module: str, name: str) -> None:
        found.setdefault(module, set()).update({name} if name else set())

    for module, path in MODULES.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for target, name in _uses(ast.parse(path.read_text(encoding="utf-8")), package):
            if room(target) != room(module):
                use(target, name)
    for path in OUTSIDE:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for target, name in _uses(tree, ""):
            use(target, name)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in MODULES and node.names[0].name == "*":
                use(node.module, STAR)
    use("looplab", STAR)  # the public API: tests/project/test_packaging.py holds it to docs/api.md
    lazy = next(
        n.value
        for n in ast.parse(MODULES["looplab"].read_text(encoding="utf-8")).body
        if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "_LAZY"
    )
    for module, name in ast.literal_eval(lazy).values():
        use(module, name)
    for target in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"].values():
        use(*target.split(":"))
    for page in (ROOT / "docs").glob("*.md"):  # the API reference's `::: looplab.module.Name`
        for line in page.read_text(encoding="utf-8").splitlines():
            if line.startswith("::: "):
                dotted = line.removeprefix("::: ").strip()
                use(*dotted.rsplit(".", 1))
    for module in MODULES:  # the registry imports a runner module by name and takes its export
        if room(module) == "looplab.adapters.runners" and not MODULES[module].stem.startswith("_"):
            if MODULES[module].name != "__init__.py":
                use(module, EXPORT)
    return found


SURFACE = surface()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_all_is_exactly_what_the_other_rooms_use(module: str) -> None:
    declared, used = _declared_all(module), SURFACE.get(module)
    if used is None:
        assert declared is None, f"{module}: nothing outside its room uses it, so it declares no __all__"
        return
    assert declared is not None, f"{module}: used from outside its room ({sorted(used)}), so it declares __all__"
    if STAR in used:
        assert declared, f"{module}: an outside `import *` reads its __all__"
        return
    assert not (missing := sorted(used - set(declared))), f"{module}: used from outside but not in __all__: {missing}"
    assert not (unused := sorted(set(declared) - used)), f"{module}: in __all__ but used nowhere outside: {unused}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _declared_all(m)))
def test_every_name_a_module_offers_exists(module: str) -> None:
    import importlib

    if room(module) == "looplab.adapters.runners":  # a framework may be missing: the name is assigned in the source
        tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
        names = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        assert set(_declared_all(module) or []) <= names
        return
    loaded = importlib.import_module(module)
    assert [name for name in loaded.__all__ if not hasattr(loaded, name)] == []


def test_the_surface_check_sees_a_use_from_another_room() -> None:
    """The check itself: a view taking a name from the records is seen, and a name used only inside is not."""
    assert "build" in SURFACE["looplab.records.results"]
    assert "looplab.records.migrate" not in SURFACE
