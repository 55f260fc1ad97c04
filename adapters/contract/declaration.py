"""A runner's declaration, read from its module's source without importing it.

Everything looplab knows about a runner is declared once, on its class (`RunnerDeclaration` and below); what must
be known before its module is imported is written as literal class attributes (the fields of `Declaration`). The
runner's module imports its framework, so listing runners, naming the extra a missing one needs, the noxfile's
sessions and the CI matrix read those literals from the source instead: this module finds the class that the
module's `RUNNER = Class()` builds, and reads its attributes and those of its bases that can be located, the nearest
first (the way Python's attribute lookup goes for single inheritance). An attribute no class on the way declares
takes its default: the value `RunnerDeclaration` sets, read from its source the same way.

It needs nothing but the standard library, so the noxfile (which runs without looplab's dependencies) can load it
by path; its error derives from looplab's root exception only where looplab can be imported.
`tests/contract/test_declarations.py` checks that what it reads equals what the imported class holds.
"""

from __future__ import annotations

import ast
import importlib.util
import shutil
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

try:
    from looplab.shared_tools.errors import LooplabException
except ImportError:  # loaded by path where looplab is not installed (the noxfile): no root to derive from there
    LooplabException = Exception  # type: ignore[misc, assignment]

__all__ = ["Declaration", "DeclarationError", "EXPORT", "OLD_EXPORT", "findable", "read", "read_folder", "source_of"]

#: Where the reader starts: the name of the object every runner module exports.
EXPORT = "RUNNER"
#: What runner modules exported before `RUNNER`: still read, with a `DeprecationWarning`.
OLD_EXPORT = "ADAPTER"
#: The class every runner's class derives from, in `runner.py` beside this module: its literal attributes are the
#: declaration's defaults.
CONTRACT = "RunnerDeclaration"


class DeclarationError(LooplabException):
    """A runner module whose declaration cannot be read; the message is one line naming the module and the field."""


def _parse(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        raise DeclarationError(f"{path}: cannot read a runner declaration: {exc}") from None


def _class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _assignment(node: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id, node.value
    return None, None


def _contract_defaults() -> dict[str, Any]:
    """The literal attributes `RunnerDeclaration` declares: what a runner whose classes do not declare one has."""
    path = Path(__file__).with_name("runner.py")
    cls = _class(_parse(path), CONTRACT)
    if cls is None:
        raise DeclarationError(f"{path}: no class {CONTRACT}")
    defaults = {}
    for node in cls.body:
        target, value = _assignment(node)
        if target is not None and value is not None:
            defaults[target] = ast.literal_eval(value)
    return defaults


_default = _contract_defaults().__getitem__


@dataclass(frozen=True)
class Declaration:
    """A runner's declaration as read from its module's source, before the module is imported: the attributes of
    its `RunnerDeclaration` class known that early (documented there), each defaulting to the value set there."""

    name: str
    module: str
    extra: str
    distribution: str
    summary: str = _default("summary")
    extras: tuple[str, ...] = _default("extras")
    requires: tuple[str, ...] = _default("requires")
    apis: tuple[str, ...] = _default("apis")
    out_of_process: bool = _default("out_of_process")
    commands: tuple[str, ...] = _default("commands")
    programs: str = _default("programs")
    by_default: bool = _default("by_default")
    in_all: bool = _default("in_all")
    one_tool_a_reply: bool = _default("one_tool_a_reply")
    streams: tuple[bool, ...] = _default("streams")
    delegation: str | None = _default("delegation")
    delegation_gaps: dict[str, str] = field(default_factory=_default("delegation_gaps").copy, hash=False)
    delegation_races: dict[str, str] = field(default_factory=_default("delegation_races").copy, hash=False)
    npm_packages: dict[str, str] = field(default_factory=_default("npm_packages").copy, hash=False)
    npm_lines: dict[str, tuple[int, dict[str, str]]] = field(default_factory=_default("npm_lines").copy, hash=False)
    oldest_companions: tuple[str, ...] = _default("oldest_companions")
    listed: int = _default("listed")

    @property
    def all_extras(self) -> tuple[str, ...]:
        """Every extra its loops use (a version session installs them all): `extras`, else just `extra`."""
        return self.extras or (self.extra,)

    def programs_found(self) -> bool:
        """Whether the programs it runs are on PATH (what a runner environment cannot install)."""
        return all(shutil.which(c) is not None for c in self.commands)

    def installed(self) -> bool:
        """Whether its framework can be imported here (found without importing it) and its programs are on PATH."""
        return all(findable(m) for m in self.requires) and self.programs_found()

    def elsewhere(self) -> bool:
        """Whether it can run only in its own runner environment: it cannot share this one and is not in it."""
        return not self.in_all and not self.installed()


#: The attributes read from a runner's source: `Declaration`'s fields but the module it was read from.
DECLARED = tuple(f.name for f in fields(Declaration) if f.name != "module")


def findable(module: str) -> bool:
    """Whether `module` can be imported, without importing it (a dotted name whose parent is missing is not)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def source_of(module: str) -> Path | None:
    """A module's Python source file, found without importing it (its parent packages are imported)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return Path(spec.origin) if spec is not None and spec.origin and spec.origin.endswith(".py") else None


def read(module: str, locate: Callable[[str], Path | None]) -> Declaration | None:
    """The declaration of the runner `module` exports as `RUNNER`; None if it exports none (a helper module).

    A module that exports it as `ADAPTER`, the name before `RUNNER`, is read too, with a `DeprecationWarning`.

    `locate` maps a module name to its source file (None: not found, e.g. a framework's module): the module
    itself, and the modules its runner class's bases come from.
    """
    path = locate(module)
    if path is None:
        raise DeclarationError(f"runner module {module!r} not found")
    tree = _parse(path)
    cls = _exported_class(tree, EXPORT)
    if cls is None:
        cls = _exported_class(tree, OLD_EXPORT)
        if cls is None:
            return None
        warnings.warn(
            f"runner module {module!r} exports {OLD_EXPORT}: name it {EXPORT} ({OLD_EXPORT} will not be read)",
            DeprecationWarning,
            stacklevel=2,
        )
    values: dict[str, Any] = {}
    for name, value in _attributes(module, tree, cls, locate, depth=0):
        values.setdefault(name, value)
    missing = [f for f in ("name", "extra", "distribution") if f not in values]
    if missing:
        raise DeclarationError(f"{path}: runner class {cls.name} declares no {', '.join(missing)}")
    return Declaration(module=module, **values)


def read_folder(folder: Path, package: str) -> Iterator[Declaration]:
    """Every runner declared in `folder` (the modules not starting with an underscore), in name order.

    Modules of `package` are located under `folder`'s tree as the build lays them out; others with `find_spec`.
    """
    root, depth = folder, package.count(".")
    for _ in range(depth):
        root = root.parent
    top = package.split(".")[0]

    def locate(name: str) -> Path | None:
        return _file_under(root, name.split(".")[1:]) if name.split(".")[0] == top else source_of(name)

    for path in sorted(folder.glob("*.py")):
        if not path.name.startswith("_"):
            declared = read(f"{package}.{path.stem}", locate)
            if declared is not None:
                yield declared


def _file_under(root: Path, parts: list[str]) -> Path | None:
    """A looplab module's file under the package folder `root`, installed or in the source tree.

    In the source tree `adapters/`, `scenarios/` and `shared_tools/` sit beside the `looplab/` folder (the build
    places them under it), so `root` is the repository and the package's own modules are in `root/looplab`.
    """
    for base in (root.joinpath(*parts), root.joinpath("looplab", *parts)):
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return path
    return None


def _exported_class(tree: ast.Module, export: str) -> ast.ClassDef | None:
    """The class of `RUNNER = Class()` (`export` names the variable) at the module's top level."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == export for t in node.targets)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
        ):
            return _class(tree, node.value.func.id)
    return None


def _attributes(
    module: str, tree: ast.Module, cls: ast.ClassDef, locate: Callable[[str], Path | None], depth: int
) -> Iterator[tuple[str, Any]]:
    """The class's literal declaration attributes, then its bases' (each base's own, then its bases')."""
    if depth > 20:
        raise DeclarationError(f"{module}: class {cls.name}: bases nested past 20 levels")
    for node in cls.body:
        target, value = _assignment(node)
        if target in DECLARED and value is not None:
            try:
                literal = ast.literal_eval(value)
            except ValueError:
                raise DeclarationError(
                    f"{module}: {cls.name}.{target} is not a literal (a declaration is read without running code)"
                ) from None
            yield target, tuple(literal) if isinstance(literal, list) else literal
    for base in cls.bases:
        if not isinstance(base, ast.Name):
            continue
        found = _base(module, tree, base.id, locate)
        if found is not None:
            yield from _attributes(*found, locate, depth + 1)


def _base(
    module: str, tree: ast.Module, name: str, locate: Callable[[str], Path | None]
) -> tuple[str, ast.Module, ast.ClassDef] | None:
    """Where the base class `name` of a class in `module` is defined, if its source can be located."""
    local = _class(tree, name)
    if local is not None:
        return module, tree, local
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    path = locate(node.module)
                    if path is None:
                        return None
                    other = _parse(path)
                    found = _class(other, alias.name)
                    return (node.module, other, found) if found is not None else None
    return None
