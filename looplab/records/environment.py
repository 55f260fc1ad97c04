"""Where runs were made: the interpreter, the platform and the installed versions a results document records."""

from __future__ import annotations

import hashlib
import platform
import re
from functools import cache
from importlib import metadata

from pydantic import BaseModel, ConfigDict

__all__ = ["Environment", "current_environment"]


class Environment(BaseModel):
    """Where runs were made: the interpreter, the platform and the versions of what looplab runs on."""

    model_config = ConfigDict(frozen=True)

    python: str
    implementation: str
    platform: str
    looplab: str
    #: Installed distribution -> version, for every distribution looplab's core and runner extras name.
    packages: dict[str, str]

    @property
    def id(self) -> str:
        """A short content hash: equal environments from two documents collapse into one when merged."""
        return hashlib.sha256(self.model_dump_json().encode("utf-8")).hexdigest()[:16]


def _requirement_names() -> list[str]:
    """Distributions looplab's core and runner extras require (not the dev extra: it runs no run).

    The runners' own modules are mapped to their distributions too: an install's metadata can be
    older than the runner table, and a framework's version must not go missing for that.
    """
    from looplab.adapters import registry

    names = []
    by_module = metadata.packages_distributions()
    for info in registry.RUNNERS.values():
        for module in info.requires:
            names += [d.lower() for d in by_module.get(module.split(".")[0], [])]
    try:
        requires = metadata.requires("looplab") or []
    except metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
        requires = []
    for req in requires:
        if 'extra == "dev"' in req:
            continue
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req)
        if match and match.group(0).lower() != "looplab":
            names.append(match.group(0).lower())
    return sorted(set(names))


@cache
def current_environment() -> Environment:
    """This process's environment (cached: it does not change while looplab runs)."""
    packages = {}
    for name in _requirement_names():
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:  # an extra not installed here: its runners did not run here
            continue
    try:
        own = metadata.version("looplab")
    except metadata.PackageNotFoundError:
        own = "unknown"
    return Environment(
        python=platform.python_version(),
        implementation=platform.python_implementation(),
        platform=platform.platform(terse=True),
        looplab=own,
        packages=packages,
    )
