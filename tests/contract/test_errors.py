"""One exception tree: every public exception looplab defines is under `LooplabException` or, for the signals that
must pass through `except Exception`, under `LooplabSignal`; and the errors module's docstring draws each of them.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path

import pytest

from looplab.adapters.contract import errors
from looplab.adapters.contract.errors import LooplabException, LooplabSignal
from tests.project.test_layout import MODULES, ROOT


def _defined_exceptions() -> dict[str, type[BaseException]]:
    """Each public exception class a looplab module defines, by its qualified name; runners whose framework is
    missing are skipped, since their module cannot be imported here."""
    found: dict[str, type[BaseException]] = {}
    for name in sorted(MODULES):
        if name.endswith("__main__"):  # runs the command line
            continue
        try:
            module = importlib.import_module(name)
        except ImportError:
            assert ".adapters.runners." in name, f"{name} cannot be imported"
            continue
        for attr, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == name
                and not attr.startswith("_")
            ):
                found[f"{name}.{attr}"] = value
    return found


EXCEPTIONS = _defined_exceptions()


def test_the_walk_finds_the_exceptions_of_every_room() -> None:
    rooms = {"adapters.contract", "adapters.boundary", "scenarios", "shared_tools", "records"}
    assert {room for room in rooms for name in EXCEPTIONS if f"looplab.{room}." in name} == rooms


@pytest.mark.parametrize("name", sorted(EXCEPTIONS))
def test_every_public_exception_is_under_one_of_the_two_roots(name: str) -> None:
    assert issubclass(EXCEPTIONS[name], LooplabException | LooplabSignal)


@pytest.mark.parametrize("name", sorted(EXCEPTIONS))
def test_the_errors_docstring_draws_every_public_exception(name: str) -> None:
    assert re.search(rf"[─ ]{EXCEPTIONS[name].__name__}\b", errors.__doc__ or ""), name


def test_signals_are_not_exceptions_and_errors_are() -> None:
    """A framework's `except Exception` must not swallow a signal; a caller's `except Exception` catches the rest."""
    assert not issubclass(LooplabSignal, Exception)
    assert issubclass(LooplabException, Exception)


def test_the_declaration_reader_still_loads_by_path_without_looplab(monkeypatch: pytest.MonkeyPatch) -> None:
    """The noxfile loads it by path where looplab is not installed: its error then derives from `Exception`."""
    monkeypatch.setitem(sys.modules, "looplab.shared_tools.errors", None)  # an import of it raises ImportError
    path = Path(ROOT / "adapters" / "contract" / "declaration.py")
    spec = importlib.util.spec_from_file_location("looplab_declaration_by_path", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    assert module.DeclarationError.__bases__ == (Exception,)
