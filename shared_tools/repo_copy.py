"""A repository copied within bounds, and a tree walked within a deadline, never opening what could block.

A run works in a copy of its case's repository (`Workspace`). The copy takes regular files, folders and symlinks
(copied as links) and nothing else: FIFOs, sockets and devices are left out without being opened, and so is a file
over `MAX_REPO_FILE_BYTES`. A repository with more than `MAX_REPO_ENTRIES` entries or `MAX_REPO_BYTES` of files, or
whose copy passes its deadline, is refused with one line naming it and the bound.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from looplab.shared_tools.errors import LooplabException

__all__ = ["check_repo"]

#: Entries (files, folders, links, and what is left out) a copy looks at, at most: 20,000 files with their folders.
#: A large real project stays under it once its caches and dependencies are left out (`SKIPPED_DIRS`: `.git`,
#: `node_modules`, `.venv`, ...), while every run pays for its copy on its own clock: 20,000 small files take 3 to
#: 8 s to copy on a loaded 2-core machine (`python -m looplab.measure bench-workspace`).
MAX_REPO_ENTRIES = 25_000
#: Bytes of files a copy takes, at most: far more than any project's sources, and a bound on the disk each run's copy
#: holds (a matrix may run several at once).
MAX_REPO_BYTES = 1 << 30
#: A file larger than this is left out of the copy, never opened. No tool reads more than 2 MB of a file, and a data
#: file this large (or a sparse one, which a copy writes out at its full apparent size) would cost every run its size
#: in disk and seconds; leaving it out rather than refusing the repository keeps a project with one large fixture
#: usable (`Workspace.left_out` names it).
MAX_REPO_FILE_BYTES = 64 << 20
#: How many entries a walk lists between two looks at its deadline.
_CHECK_EVERY = 64
#: Bytes copied at a time.
_CHUNK = 1 << 20
#: Opening a file never follows a link, and never waits (a FIFO that appeared after it was looked at).
_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_BINARY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class RepoRefused(LooplabException, ValueError):
    """A repository a run will not copy; the message names it and the bound it passes."""


def check_repo(folder: Path | str, *, prefix: str = "looplab-ws-") -> Path:
    """`folder` resolved, if a run may copy it; raises `FileNotFoundError` or `RepoRefused` in one line.

    Refused: a missing folder; the file system's root; a folder holding the temporary folder (the copy would go
    inside what it copies); a folder inside a workspace copy (`prefix`) in the temporary folder.
    """
    path = Path(folder).resolve()
    if not path.is_dir():
        raise FileNotFoundError(f"fixture repo not found: {path}")
    if path.parent == path:
        raise RepoRefused(f"repo {path}: the file system's root is not a repository; name the project's folder")
    tmp = Path(tempfile.gettempdir()).resolve()
    if tmp.is_relative_to(path):
        raise RepoRefused(
            f"repo {path} holds the temporary folder {tmp}, where its copy would go; name the project's folder"
        )
    if path.is_relative_to(tmp) and path.relative_to(tmp).parts[0].startswith(prefix):
        raise RepoRefused(f"repo {path} is inside a workspace copy ({tmp}/{prefix}*); name the project's own folder")
    return path


class BoundedCopy:
    """Copies folders into a destination within one budget: `MAX_REPO_ENTRIES`, `MAX_REPO_BYTES`, `deadline_s`.

    A repository and the overlay laid over it share the budget. Over a bound, `copy` raises `RepoRefused`; past the
    deadline, `TimeoutError`; either names the folder being copied. What it leaves out (a FIFO, socket or device; a
    file over `MAX_REPO_FILE_BYTES`; an entry it cannot read) is listed in `left_out` as `path: why`.
    """

    def __init__(self, *, skip: frozenset[str] = frozenset(), deadline_s: float | None = None) -> None:
        """`skip`: names never copied (caches, dependencies); `deadline_s`: seconds the whole copy may take."""
        self.skip = skip
        self.deadline_s = deadline_s
        self._deadline = None if deadline_s is None else time.monotonic() + deadline_s
        self.entries = 0
        self.bytes = 0
        self.left_out: list[str] = []
        self._source = Path()

    def copy(self, source: Path, dest: Path) -> None:
        """Copy `source`'s tree into `dest`, creating it, or laying `source` over what `dest` holds (an overlay)."""
        self._source = source
        merging = os.path.lexists(dest)
        self._folder(str(source), str(dest), merging)
        todo = [(str(source), str(dest))]
        while todo:
            src, dst = todo.pop()
            try:
                listing = os.scandir(src)
            except OSError as exc:  # unreadable: left out, as an unreadable file is
                self._leave_out(src, f"cannot be read ({exc.strerror or exc})")
                continue
            with listing:
                for entry in listing:
                    self._count()
                    if entry.name not in self.skip:
                        sub = self._entry(entry, os.path.join(dst, entry.name), merging)
                        if sub is not None:
                            todo.append(sub)

    def _entry(self, entry: os.DirEntry[str], target: str, merging: bool) -> tuple[str, str] | None:
        """Copy one entry; for a folder, make it and return what is left to copy into it."""
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            self._leave_out(entry.path, f"cannot be read ({exc.strerror or exc})")
            return None
        mode = st.st_mode
        if stat.S_ISDIR(mode):
            self._folder(entry.path, target, merging, mode)
            return entry.path, target
        if stat.S_ISLNK(mode):  # copied as a link: the workspace's path rule refuses one that points out
            try:
                link = os.readlink(entry.path)
            except OSError as exc:
                self._leave_out(entry.path, f"cannot be read ({exc.strerror or exc})")
                return None
            _make_room(target, merging)
            os.symlink(link, target)
        elif stat.S_ISREG(mode):
            if st.st_size > MAX_REPO_FILE_BYTES:
                self._leave_out(
                    entry.path, f"{_size(st.st_size)}, over the {_size(MAX_REPO_FILE_BYTES)} a file may have"
                )
                return None
            if self.bytes + st.st_size > MAX_REPO_BYTES:
                raise RepoRefused(
                    f"repo {self._source}: more than {_size(MAX_REPO_BYTES)} of files to copy (MAX_REPO_BYTES); "
                    "name a smaller folder"
                )
            _make_room(target, merging)
            copied = _copy_file(entry.path, target, self._check_time)
            if copied is None:
                self._leave_out(entry.path, "not a regular file that can be read when opened")
            else:
                self.bytes += copied
        else:  # never opened: a FIFO nobody writes blocks its reader, a device reads without end
            self._leave_out(entry.path, _kind(mode))
        return None

    def _folder(self, src: str, dst: str, merging: bool, mode: int | None = None) -> None:
        if not (merging and _make_room(dst, merging, folder=True)):
            os.mkdir(dst)
        # Always writable by its owner: the workspace's tools write in it, and removing it must not fail.
        mode = os.stat(src).st_mode if mode is None else mode
        os.chmod(dst, stat.S_IMODE(mode) | stat.S_IRWXU)

    def _count(self) -> None:
        self.entries += 1
        if self.entries > MAX_REPO_ENTRIES:
            raise RepoRefused(
                f"repo {self._source}: more than {MAX_REPO_ENTRIES:,} files, folders and links to copy "
                "(MAX_REPO_ENTRIES); name a smaller folder"
            )
        self._check_time()  # each entry: a few tens of nanoseconds beside the file it makes

    def _check_time(self) -> None:
        if self._deadline is not None and time.monotonic() >= self._deadline:
            raise TimeoutError(
                f"repo {self._source}: its copy was not done within the run's {self.deadline_s:g} s "
                f"({self.entries:,} entries, {_size(self.bytes)} copied); name a smaller folder or raise max_seconds"
            )

    def _leave_out(self, path: str, why: str) -> None:
        self.left_out.append(f"{os.path.relpath(path, self._source)}: {why}")


def open_regular(path: str | os.PathLike[str]) -> int | None:
    """A file descriptor open for reading on `path` if it is a regular file (not through a link), else None.

    It never waits: a FIFO put in a file's place after it was looked at is opened without blocking, then refused.
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def walk(
    top: Path,
    *,
    skip: frozenset[str] = frozenset(),
    deadline: float | None = None,
    enter: Callable[[str], bool] | None = None,
) -> Iterator[tuple[os.DirEntry[str], str]]:
    """Every entry under `top` with its path relative to `top` (POSIX), depth first in name order, which is the
    order of `sorted(top.rglob("*"))`.

    Entries named in `skip` are left out, with what is under them; a link to a folder and a folder `enter` refuses
    are not entered. Raises `TimeoutError` once `deadline` (on `time.monotonic()`) has passed, also while it lists a
    long folder. A folder that cannot be read counts as empty.
    """
    stack = [(_sorted_listing(str(top), deadline), "")]
    while stack:
        entries, prefix = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"the walk of {top} passed its deadline")
        if entry.name in skip:
            continue
        rel = prefix + entry.name
        yield entry, rel
        if entry.is_dir(follow_symlinks=False) and (enter is None or enter(entry.name)):
            stack.append((_sorted_listing(entry.path, deadline), rel + "/"))


def _sorted_listing(folder: str, deadline: float | None) -> Iterator[os.DirEntry[str]]:
    found: list[os.DirEntry[str]] = []
    try:
        with os.scandir(folder) as listing:
            for entry in listing:
                found.append(entry)
                if deadline is not None and len(found) % _CHECK_EVERY == 0 and time.monotonic() > deadline:
                    raise TimeoutError(f"listing {folder} passed its deadline")
    except TimeoutError:
        raise
    except OSError:  # a folder that cannot be read, or is gone, counts as empty
        pass
    found.sort(key=lambda e: e.name)
    return iter(found)


def _copy_file(src: str, dst: str, check_time: Callable[[], None]) -> int | None:
    """Copy a regular file's bytes, mode and times; None (and nothing written) if `src` is no longer a regular file
    within the bound, or cannot be read. Copies the size it had when opened, so a growing file cannot hold it."""
    fd = open_regular(src)
    if fd is None:
        return None
    with open(fd, "rb", buffering=0) as fin:
        st = os.fstat(fd)
        if st.st_size > MAX_REPO_FILE_BYTES:
            return None
        left = st.st_size
        with open(dst, "xb") as fout:
            while left > 0 and (chunk := fin.read(min(left, _CHUNK))):
                fout.write(chunk)
                left -= len(chunk)
                if left > 0:
                    check_time()
    os.chmod(dst, stat.S_IMODE(st.st_mode))
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    return st.st_size - left


def _make_room(path: str, merging: bool, *, folder: bool = False) -> bool:
    """Clears `path` for an overlay's entry (a link is replaced, never written through); True when a folder is
    there to merge into. Without `merging` there is nothing to clear."""
    if not merging:
        return False
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(mode):
        if folder:
            return True
        shutil.rmtree(path)
    else:
        os.unlink(path)
    return False


def _kind(mode: int) -> str:
    kinds = {stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket", stat.S_ISCHR: "a character device"}
    kinds |= {stat.S_ISBLK: "a block device"}
    name = next((name for test, name in kinds.items() if test(mode)), "not a file, folder or link")
    return f"{name}, never opened"


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} bytes"
