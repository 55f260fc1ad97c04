"""A disposable copy of a fixture repo, and the one place paths are confined."""

from __future__ import annotations

import atexit
import difflib
import fnmatch
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from types import TracebackType

from looplab.shared_tools.live import Live, kill_process_group
from looplab.shared_tools.records import clean, preview

__all__ = [
    "MAX_PATH_CHARS",
    "PathRefused",
    "SECRET_PATTERNS",
    "SKIPPED_DIRS",
    "TEXT_SUFFIXES",
    "ToolError",
    "Workspace",
    "is_secret",
    "tree_fingerprint",
]

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


class PathRefused(PermissionError):
    """A path the model passed leaves the workspace or names a secret."""


class ToolError(Exception):
    """A tool could not do what was asked; the message tells the model what to do instead."""


def is_secret(name: str) -> bool:
    """True when a file name looks like credentials (`.env`, keys, ...)."""
    return any(fnmatch.fnmatch(name.lower(), pattern) for pattern in SECRET_PATTERNS)


class Workspace:
    """A temporary copy of `source` (with `overlay`'s files on top), removed by `close()` or on leaving a `with` block.

    Every path a tool receives goes through `resolve()`: relative to the
    workspace root, never outside it (no `..`, no absolute path, no symlink
    pointing out) and never a secret-looking file.

    Every open workspace is registered until closed, and `close_all()` (run at
    interpreter exit, and by an interrupted command) removes the ones left: a
    run abandoned as hung, or cut short by Ctrl-C, leaves no copy behind.
    """

    #: Every workspace not yet closed.
    live: Live[Workspace] = Live(lambda ws: ws.close())

    def __init__(self, source: Path | str, *, overlay: Path | str | None = None, prefix: str = "looplab-ws-") -> None:
        self.source = Path(source).resolve()
        for folder in (self.source, overlay):
            if folder is not None and not Path(folder).is_dir():
                raise FileNotFoundError(f"fixture repo not found: {Path(folder).resolve()}")
        #: The process groups of the tests running in it: a cancelled run ends them (`Guard.halt`).
        self.processes: Live[int] = Live(kill_process_group)
        self._tmp = Path(tempfile.mkdtemp(prefix=prefix))
        if not Workspace.live.add(self):
            raise RuntimeError("looplab is shutting down: no new workspace")
        self.root = (self._tmp / self.source.name).resolve()
        ignore = shutil.ignore_patterns(*SKIPPED_DIRS)
        shutil.copytree(self.source, self.root, symlinks=True, ignore=ignore)
        if overlay is not None:  # a variant of the repo: its files replace or join the base's
            shutil.copytree(overlay, self.root, symlinks=True, ignore=ignore, dirs_exist_ok=True)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Delete the copy. Safe to call twice."""
        Workspace.live.discard(self)
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

    def text_file(self, path: str) -> Path:
        """The one rule for what a tool may read: `path` resolved, and a regular source or text file.

        Raises `PathRefused` (outside, or a secret, also through a symlink), `IsADirectoryError`,
        `FileNotFoundError` (with the closest existing file as a hint; a FIFO or socket is not a
        file) or `ToolError` (not a source or text file).
        """
        resolved = self.resolve(path)
        if resolved.is_dir():
            listing = sorted(self.relative(p) for p in self.text_files() if p.is_relative_to(resolved))
            raise IsADirectoryError(f"{path} is a directory; files in it: {', '.join(listing[:30]) or 'none'}")
        if not _is_regular(resolved):
            hint = self.suggest(path)
            tail = f" — did you mean {hint}?" if hint else " — use search_code to find the right path"
            raise FileNotFoundError(f"{path}{tail}")
        if resolved.suffix not in TEXT_SUFFIXES:
            kind = f"'{resolved.suffix}' files" if resolved.suffix else "files without a suffix"
            raise ToolError(f"{path}: only source and text files can be read, not {kind}")
        return resolved

    def relative(self, path: Path) -> str:
        """The workspace-relative POSIX spelling of `path`."""
        return path.relative_to(self.root).as_posix()

    def text_files(self) -> Iterator[Path]:
        """The files `text_file` lets a tool read, sorted, caches skipped: what `search_code` may search."""
        for path in sorted(self.root.rglob("*")):
            rel = path.relative_to(self.root)
            if any(part in SKIPPED_DIRS for part in rel.parts):
                continue
            try:
                resolved = self.resolve(rel.as_posix())
            except PathRefused:
                continue
            if resolved.suffix in TEXT_SUFFIXES and _is_regular(resolved):
                yield path

    def suggest(self, path: str) -> str | None:
        """The closest existing file to a mistyped `path`, if one is close."""
        candidates = [self.relative(p) for p in self.text_files()]
        by_name = {PurePosixPath(c).name: c for c in candidates}
        close = difflib.get_close_matches(path, candidates, n=1, cutoff=0.6)
        if close:
            return close[0]
        name = difflib.get_close_matches(PurePosixPath(path).name, list(by_name), n=1, cutoff=0.8)
        return by_name[name[0]] if name else None

    def fingerprint(self) -> str:
        """A hash of every file's path and bytes: equal before and after means unchanged."""
        return tree_fingerprint(self.root)


atexit.register(Workspace.close_all)


def _is_regular(path: Path) -> bool:
    """A regular file (after symlinks): never a FIFO, socket or device, which could block a reader."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def tree_fingerprint(root: Path) -> str:
    """SHA-256 over the relative paths and contents of all files under `root`, caches skipped.

    A symlink counts by its target's name and a FIFO, socket or device by its kind, never by
    opening it (reading a FIFO nobody writes to would block).
    """
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        mode = path.lstat().st_mode
        if any(part in SKIPPED_DIRS for part in rel.parts) or stat.S_ISDIR(mode):
            continue
        digest.update(rel.as_posix().encode("utf-8", "surrogateescape") + b"\0")
        if stat.S_ISREG(mode):
            digest.update(path.read_bytes())
        elif stat.S_ISLNK(mode):
            digest.update(b"symlink:" + os.fsencode(os.readlink(path)))
        else:
            digest.update(f"special:{stat.S_IFMT(mode):o}".encode())
        digest.update(b"\0")
    return digest.hexdigest()
