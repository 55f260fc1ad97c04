"""The runners looplab knows, found without importing a framework; `load()` imports one on demand.

Built-in runners are the modules of `looplab.adapters.runners`; a package that is not looplab ships a runner
by naming its module in the `looplab.runners` entry-point group (`name = "package.module"`). Either way the
runner is declared once, on its class, and read here from the source (`contract.declaration`), so listing
runners, or naming the extra a missing one needs, imports nothing of theirs.
"""

from __future__ import annotations

import importlib
import shutil
import warnings
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from looplab.adapters.contract.declaration import (
    EXPORT,
    OLD_EXPORT,
    Declaration,
    DeclarationError,
    findable,
    read,
    read_folder,
    source_of,
)
from looplab.adapters.contract.errors import LooplabError, MissingExtra

if TYPE_CHECKING:
    from looplab.adapters.session import Runner

__all__ = ["RUNNERS", "load"]

#: The entry-point group through which another package ships a runner.
ENTRY_POINTS = "looplab.runners"
_BUILT_IN = Path(__file__).with_name("runners")


def _from_entry_points(known: set[str]) -> list[Declaration]:
    """Runners other packages declare; one that cannot be read is left out with a warning naming it."""
    found = []
    for point in metadata.entry_points(group=ENTRY_POINTS):
        module = point.value.partition(":")[0].strip()
        try:
            declared = read(module, source_of)
        except DeclarationError as exc:
            warnings.warn(f"runner {point.name!r} ({module}) left out: {exc}", stacklevel=2)
            continue
        if declared is None:
            warnings.warn(f"runner {point.name!r}: {module} exports no {EXPORT}; left out", stacklevel=2)
        elif declared.name in known:
            warnings.warn(
                f"runner {declared.name!r} from {module} left out: looplab has one of that name", stacklevel=2
            )
        else:
            known.add(declared.name)
            found.append(declared)
    return found


def _discover() -> dict[str, Declaration]:
    built_in = list(read_folder(_BUILT_IN, f"{__package__}.runners"))
    others = _from_entry_points({d.name for d in built_in})
    return {d.name: d for d in sorted(built_in + others, key=lambda d: (d.listed, d.name))}


RUNNERS: dict[str, Declaration] = _discover()


def load(name: str) -> Runner:
    """Import a runner; a missing framework raises `MissingExtra` naming the extra."""
    info = RUNNERS.get(name)
    if info is None:
        raise LooplabError(f"unknown runner {name!r}; known runners: {', '.join(RUNNERS)}")
    for module in info.requires:
        if not findable(module):
            raise MissingExtra(name, info.extra, module)
    for command in info.commands:
        if shutil.which(command) is None:
            raise LooplabError(f"runner {name!r} needs {command!r} on PATH, which this machine does not have")
    module = importlib.import_module(info.module)
    # A module of another package may still export its runner under the old name (its reading warned of it).
    return getattr(module, EXPORT, None) or getattr(module, OLD_EXPORT)
