"""Runners whose loop is a Node program shipped in `adapters/runners/ts/`, installed with `npm ci` on first use.

The programs are plain ES modules (`.mjs`: Node 20 runs them with no build step). Their packages are
pinned by `adapters/runners/ts/package-lock.json` and installed once per lockfile into a cache folder,
`~/.cache/looplab/node/<hash of the lockfile>/` (`LOOPLAB_NODE_CACHE` moves the root): the first
run takes `npm ci`, later runs reuse the folder. An install holds a lock file (`fcntl.flock`), so two
processes starting at once install once. The programs are copied beside their `node_modules` (Node
resolves a program's imports from its own folder), refreshed whenever the shipped copy changes.

The install says on stderr, before it starts, what it fetches, where, and roughly how much and how long (it is
silent otherwise, for half a minute), and when it is done, how long it took.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from looplab.adapters.boundary.processes import run_bounded
from looplab.adapters.contract import files
from looplab.adapters.contract.bare import BareRun
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.model import PROVIDER_ENV, ModelSpec, ToolTransport
from looplab.adapters.runners import _bare_child
from looplab.adapters.runners._child import ChildRunner
from looplab.adapters.session import RunSession

#: The shipped programs, `package.json` and `package-lock.json`.
TS_DIR = Path(__file__).resolve().parent / "ts"
#: Moves the cache root (default `~/.cache/looplab/node`).
CACHE_ENV = "LOOPLAB_NODE_CACHE"
#: Other versions than the lockfile's, as npm specs (`ai@6.0.0 @ai-sdk/openai@3`): the nox `adapter-ts_*-oldest`
#: and `adapter-ts_*-latest-<line>` sessions set it; each set of specs gets its own install folder.
VERSIONS_ENV = "LOOPLAB_NPM_VERSIONS"
#: Written into an install folder once `npm ci` has succeeded there.
MARKER = ".looplab-installed"
#: The oldest Node the pinned packages run on (`ai` 7 and `@ai-sdk/*` 4 want 22; see package.json).
MIN_NODE = 20
#: Each npm command of the install is stopped past this (`run_bounded`), and the install fails in one line.
INSTALL_TIMEOUT_S = 600.0
#: A first install of the pinned packages, measured once (npm 10, Node 20, an empty npm cache, 153 packages):
#: about 92 MB downloaded into npm's cache, 213 MB in `node_modules`, 31 s (20 s with npm's cache warm). The
#: announcement states them as approximations; the package count it reads from the lockfile.
INSTALL_DOWNLOAD_MB = 90
INSTALL_DISK_MB = 215
INSTALL_SECONDS = 30
NODE_VERSION_TIMEOUT_S = 30.0
DESCRIBE_TIMEOUT_S = 60.0
NPM_CI = ("ci", "--no-audit", "--no-fund", "--ignore-scripts")
NPM_INSTALL = ("install", "--no-save", "--no-audit", "--no-fund", "--ignore-scripts")
#: Loaded before a program run as a bare loop: it counts the program's model requests (`_bare_child`).
REQUEST_COUNTER = "count_model_requests.mjs"


def cache_root() -> Path:
    """Where install folders live: `LOOPLAB_NODE_CACHE`, else `~/.cache/looplab/node`."""
    given = os.environ.get(CACHE_ENV, "").strip()
    return Path(given).expanduser() if given else Path.home() / ".cache" / "looplab" / "node"


def version_specs() -> list[str]:
    """The npm specs `LOOPLAB_NPM_VERSIONS` asks for instead of the lockfile's pins (none: the lockfile's)."""
    return os.environ.get(VERSIONS_ENV, "").split()


def lock_hash() -> str:
    """The install folder's name: the first 16 hex digits of the sha256 of the lockfile (and of any other versions)."""
    digest = hashlib.sha256((TS_DIR / "package-lock.json").read_bytes())
    digest.update(" ".join(version_specs()).encode())
    return digest.hexdigest()[:16]


def install_dir() -> Path:
    """The install folder for the shipped lockfile, installed or not."""
    return cache_root() / lock_hash()


def is_installed(folder: Path) -> bool:
    return (folder / MARKER).is_file() and (folder / "node_modules").is_dir()


def ensure_installed() -> Path:
    """The install folder, with `npm ci` run there first if it never succeeded; the programs kept current."""
    folder = install_dir()
    if not is_installed(folder):
        hint = f"point {CACHE_ENV} at a folder looplab may write"
        files.make_folder(folder.parent, what="Node package cache", hint=hint)
        with files.locked(folder.parent / f"{folder.name}.lock"):
            if not is_installed(folder):  # another process may have installed it while this one waited
                _install(folder)
    _sync_programs(folder)
    return folder


def check_node(runner: str) -> None:
    """One line if `node` is missing or older than `MIN_NODE`."""
    node = shutil.which("node")
    if node is None:
        raise LooplabError(f"runner {runner!r} needs 'node' (Node.js {MIN_NODE} or newer) on PATH, which has none")
    version = _node_version(node)
    major = re.match(r"v?(\d+)\.", version)
    if major is None or int(major[1]) < MIN_NODE:
        raise LooplabError(f"runner {runner!r} needs Node.js {MIN_NODE} or newer; {node} is {version or 'unknown'}")


def package_version(package: str) -> str:
    """`package`'s installed version (its `package.json` in the install folder); before the install, the
    lockfile's pin, which is what `npm ci` installs."""
    installed = install_dir() / "node_modules" / package / "package.json"
    try:
        return str(json.loads(installed.read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        pass
    lock = json.loads((TS_DIR / "package-lock.json").read_text(encoding="utf-8"))
    return str(lock["packages"].get(f"node_modules/{package}", {}).get("version", "unknown"))


@functools.cache
def describe(folder: Path) -> dict[str, Any]:
    """What `describe.mjs` reads from the installed packages: knob defaults and the stop condition's name."""
    node = shutil.which("node") or "node"
    proc = subprocess.run(
        [node, str(folder / "describe.mjs")],
        cwd=folder,
        env=_env_without_keys(),
        capture_output=True,
        text=True,
        timeout=DESCRIBE_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise LooplabError(f"reading the Node packages' defaults failed in {folder}: {tail}")
    return json.loads(proc.stdout)


class NodeRunner(ChildRunner):
    """A runner whose loop is `program` in `adapters/runners/ts/`, run by `node` from the install folder."""

    extra = "mcp"  # the tool server looplab serves the child's tools from
    requires = ("mcp",)
    commands = ("node",)
    programs = "Node.js 20+ (node; npm on first use)"
    cap_language = "javascript"
    #: The program's file name in `adapters/runners/ts/`.
    program: str

    def prepare(self, model: ModelSpec, tools: ToolTransport) -> Any:
        """Check `node` and install the packages, so neither counts against the run's clock."""
        check_node(self.name)
        ensure_installed()
        return super().prepare(model, tools)

    def command(self, session: RunSession | None = None) -> list[str]:
        """`node PROGRAM` from the install folder (installed by `prepare()`; here too if called directly)."""
        check_node(self.name)
        return [shutil.which("node") or "node", str(ensure_installed() / self.program)]

    def bare_loop(self) -> BareRun:
        """The program with none of looplab's boundaries (`_bare_child`), its model requests counted in node by
        `REQUEST_COUNTER`; node is checked and the packages installed within the run, as `prepare()` does."""
        return functools.partial(_bare_child.bare_run, self, self.counted_command)

    def counted_command(self) -> list[str]:
        """`command()` with `REQUEST_COUNTER` loaded before the program (`node --import`, Node 20.6 or newer)."""
        node, *program = self.command()
        return [node, "--import", (ensure_installed() / REQUEST_COUNTER).as_uri(), *program]

    def version(self, model: ModelSpec | None = None) -> str:
        """The installed version of the npm package named by `distribution`."""
        return package_version(self.distribution)

    def cap_source(self) -> str:
        """The program's text (its cap is set between `// cap:begin` and `// cap:end`)."""
        return (TS_DIR / self.program).read_text(encoding="utf-8")

    def defaults(self) -> dict[str, Any]:
        """`describe.mjs`'s reading of the installed packages."""
        check_node(self.name)
        return describe(ensure_installed())


def _install(folder: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise LooplabError(
            "installing the Node runners' packages needs 'npm' on PATH (it comes with Node.js); "
            f"install it, or point {CACHE_ENV} at a folder where they are installed"
        )
    shutil.rmtree(folder, ignore_errors=True)  # what a failed or interrupted install left
    folder.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(TS_DIR / name, folder / name)
    specs = version_specs()
    _say(_announcement(folder, specs))
    started = time.monotonic()
    code, output = run_bounded([npm, *NPM_CI], _env_without_keys(), folder, INSTALL_TIMEOUT_S)
    if code == 0 and specs:  # the versions a nox session asks for, over the pinned ones
        code, output = run_bounded([npm, *NPM_INSTALL, *specs], _env_without_keys(), folder, INSTALL_TIMEOUT_S)
    if code != 0:
        why = f"did not finish within {INSTALL_TIMEOUT_S:g} s" if code is None else f"exited {code}"
        tail = next((line.strip() for line in reversed(output) if "npm" in line and "ERR" in line), None)
        tail = tail or (output[-1].strip() if output else "no output")
        raise LooplabError(
            f"npm ci {why} in {folder}: {tail}; check that the npm registry is reachable and retry "
            f"({CACHE_ENV} moves the folder)"
        )
    seconds = round(time.monotonic() - started, 1)
    marker = {"lockfile": lock_hash(), "npm_ci_seconds": seconds}
    (folder / MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
    _say(f"looplab: installed the Node runners' npm packages in {seconds:g} s; later runs reuse them")


def _announcement(folder: Path, specs: list[str]) -> str:
    """The line said before the install: the packages `package.json` names, how many the lockfile pins in all,
    roughly how much and how long (`INSTALL_*`: measured, not computed), where, and the bound."""
    direct = sorted(json.loads((TS_DIR / "package.json").read_text(encoding="utf-8")).get("dependencies", {}))
    lock = json.loads((TS_DIR / "package-lock.json").read_text(encoding="utf-8"))
    pinned = sum(1 for path in lock.get("packages", {}) if path.startswith("node_modules/"))
    then = f", then {' '.join(specs)}" if specs else ""
    # A few short lines: the first is what a user reads while nothing else moves.
    return (
        f"looplab: installing the Node runners' {len(direct)} npm packages once ({pinned} with their dependencies): "
        f"about {INSTALL_DOWNLOAD_MB} MB to download, {INSTALL_DISK_MB} MB on disk, {INSTALL_SECONDS} s\n"
        f"  {', '.join(direct)}{then}\n"
        f"  npm ci into {folder} (stopped after {INSTALL_TIMEOUT_S:g} s)"
    )


def _say(line: str) -> None:
    """`line` on stderr at once: the install runs between the two lines, with nothing else to show it."""
    print(line, file=sys.stderr, flush=True)


def _sync_programs(folder: Path) -> None:
    """Copy each shipped `.mjs` into `folder` where it differs; atomically, as other runs may be reading it."""
    for source in sorted(TS_DIR.glob("*.mjs")):
        text = source.read_bytes()
        target = folder / source.name
        with contextlib.suppress(OSError):
            if target.read_bytes() == text:
                continue
        files.write_bytes(target, text)


@functools.cache
def _node_version(node: str) -> str:
    try:
        proc = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=NODE_VERSION_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip()


def _env_without_keys() -> dict[str, str]:
    """This environment without the provider keys: npm and the describe program need neither."""
    return {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV.values()}
