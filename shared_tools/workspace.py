"""A disposable copy of a fixture repo, and the one place paths are confined."""

from __future__ import annotations

import atexit
import difflib
import fnmatch
import hashlib
import itertools
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from types import TracebackType

from looplab.shared_tools.errors import LooplabException
from looplab.shared_tools.live import Live, end_group, hang_up
from looplab.shared_tools.records import clean, preview
from looplab.shared_tools.repo_copy import (
    MAX_REPO_BYTES,
    MAX_REPO_ENTRIES,
    MAX_REPO_FILE_BYTES,
    BoundedCopy,
    check_repo,
    open_regular,
    walk,
)

__all__ = ["SKIPPED_DIRS", "Workspace"]

#: Suffixes the tools treat as source or text: the common languages' sources, their build and config files, docs
#: and data as text. Binary formats stay out; secrets stay refused by name (`SECRET_PATTERNS`), whatever the suffix.
TEXT_SUFFIXES = frozenset(
    {
        # Python, and text and config files of any project
        *(".py", ".pyi", ".md", ".rst", ".txt", ".toml", ".cfg", ".ini", ".conf", ".json", ".yaml", ".yml"),
        *(".xml", ".csv", ".tsv", ".sql", ".graphql", ".proto", ".properties", ".gradle", ".lock"),
        # JavaScript and TypeScript
        *(".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx", ".vue", ".svelte"),
        # web
        *(".html", ".htm", ".css", ".scss", ".sass", ".less"),
        # other languages
        *(".go", ".rs", ".java", ".kt", ".kts", ".scala", ".groovy", ".rb", ".php", ".pl", ".pm", ".lua", ".r"),
        *(".swift", ".m", ".mm", ".dart", ".ex", ".exs", ".erl", ".hrl", ".hs", ".ml", ".mli", ".clj", ".jl"),
        *(".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".cs", ".fs", ".zig", ".nim"),
        # scripts
        *(".sh", ".bash", ".zsh", ".fish", ".ps1", ".bat", ".cmd", ".mk", ".cmake"),
    }
)

#: File names a tool never reads, even inside the workspace.
SECRET_PATTERNS = (
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_ed25519*",
    ".netrc",
    ".npmrc",
    ".pypirc",
    "credentials*",
    "secrets.*",
)

#: Longer paths are refused before they reach the file system.
MAX_PATH_CHARS = 1024

#: Folders that are tool noise rather than project content.
SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".pytest_cache", ".venv", "node_modules"})

#: "Did you mean" compares a mistyped path with this many files at most (its folder's first, then the repository's),
#: and looks for no longer than `SUGGEST_TIMEOUT_S`: about 0.2 s of matching, in a repository of any size.
SUGGEST_MAX_CANDIDATES = 5_000
SUGGEST_TIMEOUT_S = 1.0
#: At most this many files are named when a tool is given a folder.
_LISTED_FILES = 30

#: `SECRET_PATTERNS` as one expression: a walk tests every name it meets.
_SECRET = re.compile("|".join(fnmatch.translate(pattern) for pattern in SECRET_PATTERNS))


class PathRefused(LooplabException, PermissionError):
    """A path the model passed leaves the workspace or names a secret."""


class ToolError(LooplabException):
    """A tool could not do what was asked; the message tells the model what to do instead."""


def is_secret(name: str) -> bool:
    """True when a file name looks like credentials (`.env`, keys, ...)."""
    return _SECRET.match(name.lower()) is not None


class Workspace:
    """A temporary copy of `source` (with `overlay`'s files on top), removed by `close()` or on leaving a `with` block.

    Every path a tool receives goes through `resolve()`: relative to the
    workspace root, never outside it (no `..`, no absolute path, no symlink
    pointing out) and never a secret-looking file.

    Every open workspace is registered until closed, and `close_all()` (run at
    interpreter exit, and by an interrupted command) removes the ones left: a
    run abandoned as hung, or cut short by Ctrl-C, leaves no copy behind.

    The copy is bounded (`looplab.shared_tools.repo_copy`): regular files, folders and links only, within
    `MAX_REPO_ENTRIES`, `MAX_REPO_BYTES` and `deadline_s`; a copy that fails for any reason leaves nothing behind.
    """

    #: Every workspace not yet closed.
    live: Live[Workspace] = Live(lambda ws: ws.close())

    def __init__(
        self,
        source: Path | str,
        *,
        overlay: Path | str | None = None,
        prefix: str = "looplab-ws-",
        sandbox: bool = False,
        deadline_s: float | None = None,
    ) -> None:
        """`deadline_s`: the seconds the copy may take (a run passes its `max_seconds`); past them it stops with a
        `TimeoutError`. A repository the copy refuses raises `FileNotFoundError` or `RepoRefused`."""
        self.source = check_repo(source, prefix=prefix)
        #: Whether the team's code run in it (test commands, a suite's own tools) runs in a sandbox (`--sandbox`).
        self.sandbox = sandbox
        overlay = None if overlay is None else check_repo(overlay, prefix=prefix)
        #: The process groups of the team's code running in it (`confine.start`): a cancelled run ends them
        #: (`Guard.halt`), each with everything it started.
        self.processes: Live[int] = Live(hang_up, end_group)
        self._tmp = Path(tempfile.mkdtemp(prefix=prefix))
        if not Workspace.live.add(self):
            raise RuntimeError("looplab is shutting down: no new workspace")
        self.root = (self._tmp / self.source.name).resolve()
        copy = BoundedCopy(skip=SKIPPED_DIRS, deadline_s=deadline_s)
        try:
            copy.copy(self.source, self.root)
            if overlay is not None:  # a variant of the repo: its files replace or join the base's
                copy.copy(overlay, self.root)
        except BaseException:  # a refusal, the deadline, a full disk, Ctrl-C: no partial copy stays
            self.close()
            raise
        #: What the copy left out, each as `path: why` (a FIFO, socket or device; a file over `MAX_REPO_FILE_BYTES`).
        self.left_out = copy.left_out

    @classmethod
    def in_place(cls, root: Path | str, *, sandbox: bool = False) -> Workspace:
        """`root` used as it is, as a workspace: not copied, and never removed by `close()`, which only ends what
        the team's code runs in it. What a tool host's tools see (the run's copy, which its own workspace owns),
        and where a suite's tools are described (the suite's folder)."""
        ws = cls.__new__(cls)
        ws.source = ws.root = Path(root).resolve()
        ws.sandbox = sandbox
        ws.processes = Live(hang_up, end_group)
        ws._tmp = None
        ws.left_out = []
        return ws

    def __enter__(self) -> Workspace:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """End what the team's code still runs in it (a suite's tool host), delete the copy. Safe to call twice."""
        Workspace.live.discard(self)
        self.processes.end_all(for_good=True)  # the run is over: nothing of it outlives the folder
        if self._tmp is not None:  # a workspace `in_place` owns no folder
            shutil.rmtree(self._tmp, ignore_errors=True)

    @classmethod
    def close_all(cls, *, for_good: bool = False) -> int:
        """Delete every workspace still open; `for_good` also refuses new ones (the process is ending)."""
        return cls.live.end_all(for_good=for_good)

    def resolve(self, path: str) -> Path:
        """Map a model-supplied relative path to a real path inside the workspace.

        Raises `PathRefused` for anything that would leave the workspace or
        that names a secret; the message says what is allowed instead.
        """
        if not isinstance(path, str) or not path.strip():
            raise PathRefused("empty path; give a path relative to the repository root, e.g. 'tests/test_invoice.py'")
        raw = path.strip()
        shown = clean(preview(raw, 120))
        if len(raw) > MAX_PATH_CHARS or "\0" in raw:
            raise PathRefused(f"{shown}: not a usable path (too long, or a NUL character)")
        if PurePosixPath(raw).is_absolute() or Path(raw).is_absolute() or raw.startswith("~"):
            raise PathRefused(f"{shown}: absolute paths are refused; give a path relative to the repository root")
        if ".." in PurePosixPath(raw).parts:
            raise PathRefused(f"{shown}: '..' leaves the repository; give a path relative to the repository root")
        try:
            resolved = (self.root / raw).resolve()
        except (OSError, ValueError) as exc:  # an unencodable name, a symlink loop
            raise PathRefused(f"{shown}: not a usable path ({type(exc).__name__})") from None
        if not resolved.is_relative_to(self.root):
            raise PathRefused(f"{shown}: resolves outside the repository (symlink); refused")
        # Both spellings count: the name asked for and what it resolves to (a link to a secret is a secret).
        if any(map(is_secret, (*PurePosixPath(raw).parts, *resolved.relative_to(self.root).parts))):
            raise PathRefused(f"{shown}: secret-looking files are never read")
        return resolved

    def text_file(self, path: str, *, deadline: float | None = None) -> Path:
        """The one rule for what a tool may read: `path` resolved, and a regular source or text file.

        Raises `PathRefused` (outside, or a secret, also through a symlink), `IsADirectoryError`,
        `FileNotFoundError` (with the closest existing file as a hint; a FIFO or socket is not a
        file) or `ToolError` (not a source or text file). The folder's listing and the hint look no
        longer than `SUGGEST_TIMEOUT_S`, nor past `deadline` (on `time.monotonic()`).
        """
        resolved = self.resolve(path)
        if resolved.is_dir():
            listing = self._first_files(resolved, _sooner(deadline, SUGGEST_TIMEOUT_S))
            raise IsADirectoryError(f"{path} is a directory; files in it: {', '.join(listing) or 'none'}")
        if not _is_regular(resolved):
            hint = self.suggest(path, deadline=deadline)
            tail = f" — did you mean {hint}?" if hint else " — use search_code to find the right path"
            raise FileNotFoundError(f"{path}{tail}")
        if resolved.suffix not in TEXT_SUFFIXES:
            kind = f"'{resolved.suffix}' files" if resolved.suffix else "files without a suffix"
            raise ToolError(f"{path}: only source and text files can be read, not {kind}")
        return resolved

    def relative(self, path: Path) -> str:
        """The workspace-relative POSIX spelling of `path`."""
        return path.relative_to(self.root).as_posix()

    def text_files(self, *, under: Path | None = None, deadline: float | None = None) -> Iterator[Path]:
        """The files `text_file` lets a tool read, sorted, caches skipped: what `search_code` may search.

        `under`: only those in that folder of the workspace. Raises `TimeoutError` once `deadline` (on
        `time.monotonic()`) has passed, however many files are still to walk.
        """
        top = self.root if under is None else under
        above = top.relative_to(self.root).parts
        if any(part in SKIPPED_DIRS or is_secret(part) for part in above):
            return
        prefix = "".join(f"{part}/" for part in above)
        # Only a link needs resolving: anything else the walk meets is inside the root, under names it checked.
        for entry, rel in walk(top, skip=SKIPPED_DIRS, deadline=deadline, enter=lambda name: not is_secret(name)):
            rel = prefix + rel
            if is_secret(entry.name) or len(rel) > MAX_PATH_CHARS:
                continue
            if entry.is_symlink():
                try:
                    resolved = self.resolve(rel)
                except PathRefused:
                    continue
                if resolved.suffix in TEXT_SUFFIXES and _is_regular(resolved):
                    yield self.root / rel
            elif entry.is_file(follow_symlinks=False) and os.path.splitext(entry.name)[1] in TEXT_SUFFIXES:
                yield self.root / rel

    def suggest(self, path: str, *, deadline: float | None = None) -> str | None:
        """The closest existing file to a mistyped `path`, if one is close.

        It compares at most `SUGGEST_MAX_CANDIDATES` files, those under the nearest existing folder on `path`
        first, and walks for them no longer than `SUGGEST_TIMEOUT_S`, nor past `deadline`.
        """
        ends = _sooner(deadline, SUGGEST_TIMEOUT_S)
        found: dict[str, None] = {}  # in walk order, once each
        for top in dict.fromkeys((self._nearest_folder(path), self.root)):
            try:
                for file in self.text_files(under=top, deadline=ends):
                    found.setdefault(self.relative(file))
                    if len(found) >= SUGGEST_MAX_CANDIDATES:
                        break
            except TimeoutError:
                break
            if len(found) >= SUGGEST_MAX_CANDIDATES:
                break
        candidates = list(found)
        by_name = {PurePosixPath(c).name: c for c in candidates}
        close = difflib.get_close_matches(path, candidates, n=1, cutoff=0.6)
        if close:
            return close[0]
        name = difflib.get_close_matches(PurePosixPath(path).name, list(by_name), n=1, cutoff=0.8)
        return by_name[name[0]] if name else None

    def fingerprint(self) -> str:
        """A hash of every file's path and bytes: equal before and after means unchanged (`tree_fingerprint`)."""
        return tree_fingerprint(self.root)

    def _nearest_folder(self, path: str) -> Path:
        """The deepest folder of the workspace that `path`'s folders name, a link or a skipped folder not followed."""
        folder = self.root
        for part in PurePosixPath(path.strip()).parts[:-1]:
            below = folder / part
            if part in ("/", ".", "..") or part in SKIPPED_DIRS or is_secret(part) or not _is_folder(below):
                break
            folder = below
        return folder

    def _first_files(self, folder: Path, deadline: float) -> list[str]:
        """Up to `_LISTED_FILES` files `text_file` would read in `folder`, sorted, those found before `deadline`."""
        names: list[str] = []
        try:
            names.extend(
                self.relative(p)
                for p in itertools.islice(self.text_files(under=folder, deadline=deadline), _LISTED_FILES)
            )
        except TimeoutError:
            pass
        return sorted(names)


atexit.register(Workspace.close_all)


def _sooner(deadline: float | None, within_s: float) -> float:
    """`deadline`, or `within_s` from now if that comes first (on `time.monotonic()`)."""
    ends = time.monotonic() + within_s
    return ends if deadline is None else min(deadline, ends)


def _is_folder(path: Path) -> bool:
    """A folder, not a link to one."""
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _is_regular(path: Path) -> bool:
    """A regular file (after symlinks): never a FIFO, socket or device, which could block a reader."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def tree_fingerprint(root: Path) -> str:
    """SHA-256 over the relative paths and contents of the files under `root` that a copy takes, caches skipped.

    What a copy leaves out is left out here too, never opened: a FIFO, socket or device (reading a FIFO nobody
    writes to would block), a file over `MAX_REPO_FILE_BYTES`, a file that cannot be read; so a repository and its
    copy have the same fingerprint. A symlink counts by its target's name. Bounded as a copy is: past
    `MAX_REPO_ENTRIES` entries the rest counts as one mark, and once `MAX_REPO_BYTES` were read a file counts by its
    size and modification time; a tree within the bounds is read whole.
    """
    digest = hashlib.sha256()
    read = 0
    for count, (entry, rel) in enumerate(walk(root, skip=SKIPPED_DIRS), 1):
        if count > MAX_REPO_ENTRIES:
            digest.update(b"\0more entries than a copy takes\0")
            break
        try:
            st = entry.stat(follow_symlinks=False)
            target = os.readlink(entry.path) if stat.S_ISLNK(st.st_mode) else None
        except OSError:  # gone since the walk listed it
            continue
        name = rel.encode("utf-8", "surrogateescape") + b"\0"
        if target is not None:
            digest.update(name + b"symlink:" + os.fsencode(target) + b"\0")
        elif not stat.S_ISREG(st.st_mode) or st.st_size > MAX_REPO_FILE_BYTES:
            continue
        elif read + st.st_size > MAX_REPO_BYTES:
            digest.update(name + f"size:{st.st_size}:mtime:{st.st_mtime_ns}".encode() + b"\0")
        elif (fd := open_regular(entry.path)) is not None:
            digest.update(name)
            with open(fd, "rb", buffering=0) as fh:  # no more than a copy would take, however the file grows
                while read <= MAX_REPO_BYTES and (chunk := fh.read(min(1 << 20, MAX_REPO_FILE_BYTES))):
                    digest.update(chunk)
                    read += len(chunk)
            digest.update(b"\0")
    return digest.hexdigest()
