"""A disposable copy of a fixture repo, and the one place paths are confined."""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from types import TracebackType

#: Suffixes the tools treat as source or text.
TEXT_SUFFIXES = frozenset({".py", ".md", ".txt", ".toml", ".cfg", ".ini", ".json", ".yaml", ".yml"})

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

#: Folders that are tool noise rather than project content.
SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".pytest_cache", ".venv", "node_modules"})


class PathRefused(PermissionError):
    """A path the model passed leaves the workspace or names a secret."""


def is_secret(name: str) -> bool:
    """True when a file name looks like credentials (`.env`, keys, ...)."""
    return any(fnmatch.fnmatch(name.lower(), pattern) for pattern in SECRET_PATTERNS)


class Workspace:
    """A temporary copy of `source` (with `overlay`'s files on top), removed by `close()` or on leaving a `with` block.

    Every path a tool receives goes through `resolve()`: relative to the
    workspace root, never outside it (no `..`, no absolute path, no symlink
    pointing out) and never a secret-looking file.
    """

    def __init__(self, source: Path | str, *, overlay: Path | str | None = None, prefix: str = "looplab-ws-") -> None:
        self.source = Path(source).resolve()
        for folder in (self.source, overlay):
            if folder is not None and not Path(folder).is_dir():
                raise FileNotFoundError(f"fixture repo not found: {Path(folder).resolve()}")
        self._tmp = Path(tempfile.mkdtemp(prefix=prefix))
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
        shutil.rmtree(self._tmp, ignore_errors=True)

    def resolve(self, path: str) -> Path:
        """Map a model-supplied relative path to a real path inside the workspace.

        Raises `PathRefused` for anything that would leave the workspace or
        that names a secret; the message says what is allowed instead.
        """
        if not isinstance(path, str) or not path.strip():
            raise PathRefused("empty path; give a path relative to the repository root, e.g. 'tests/test_invoice.py'")
        raw = path.strip()
        if PurePosixPath(raw).is_absolute() or Path(raw).is_absolute() or raw.startswith("~"):
            raise PathRefused(f"{raw}: absolute paths are refused; give a path relative to the repository root")
        if ".." in PurePosixPath(raw).parts:
            raise PathRefused(f"{raw}: '..' leaves the repository; give a path relative to the repository root")
        resolved = (self.root / raw).resolve()
        if not resolved.is_relative_to(self.root):
            raise PathRefused(f"{raw}: resolves outside the repository (symlink); refused")
        for part in resolved.relative_to(self.root).parts:
            if is_secret(part):
                raise PathRefused(f"{raw}: secret-looking files are never read")
        return resolved

    def relative(self, path: Path) -> str:
        """The workspace-relative POSIX spelling of `path`."""
        return path.relative_to(self.root).as_posix()

    def text_files(self) -> Iterator[Path]:
        """Source and text files, sorted, skipping caches and secrets."""
        for path in sorted(self.root.rglob("*")):
            rel = path.relative_to(self.root).parts
            if any(part in SKIPPED_DIRS for part in rel) or is_secret(path.name):
                continue
            if path.suffix in TEXT_SUFFIXES and path.is_file() and path.resolve().is_relative_to(self.root):
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


def tree_fingerprint(root: Path) -> str:
    """SHA-256 over the relative paths and contents of all files under `root`, caches skipped."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in SKIPPED_DIRS for part in rel.parts) or path.is_dir():
            continue
        digest.update(rel.as_posix().encode() + b"\0")
        digest.update(path.read_bytes() if not path.is_symlink() else str(path.readlink()).encode())
        digest.update(b"\0")
    return digest.hexdigest()
