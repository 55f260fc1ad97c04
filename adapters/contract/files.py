"""Files looplab reads and writes on a user's say-so: one rule for every one of them.

Reading (`read_bytes`, `read_text`): only a regular file (after symlinks), never more than a bound.
The path is checked before it is opened and the open file again after (it may have been swapped in
between); the open itself is non-blocking, so a FIFO or a device can never hold the process.

Writing (`write_text`, `replacing`): only to a regular file, a symlink or nothing. The new content
goes to a temporary file in the same folder, is flushed to disk, then renamed over the target: a
reader (or an interrupt) never sees half a file, a symlink at the target is replaced rather than
followed, and a FIFO, folder, socket or device there is refused before anything is written. A new
file is created with mode 0o666 by the kernel, which applies the umask (or the folder's default
ACL) as it does for any file a program creates, so nothing reads or changes the process-wide umask;
a regular file that is replaced keeps its permission bits.

Logs written as they grow (`open_log`) follow the same rule for what may be at the path, and the
same creation mode, but are written in place.

Every refusal and failure is a `FileRefused`: one line naming the path.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from looplab.adapters.contract.errors import FileRefused

__all__ = [
    "FileRefused",
    "locked",
    "make_folder",
    "open_log",
    "read_bytes",
    "read_text",
    "ready_to_write",
    "replacing",
    "write_bytes",
    "write_text",
]

#: The most looplab reads of one file. A results document of the built-in suite takes about 10 KB a run
#: (measured: 21 KB for two 5-step runs), so this holds some 50,000 runs, far past the largest matrix
#: (14 runners x 10 cases x 20 repeats = 2,800 runs), while a path to something endless or huge by
#: mistake (a disk image, /dev/zero through a symlink) is refused before it fills memory: parsing the
#: JSON takes about 1.5 times the file's size again.
MAX_READ_BYTES = 512 * 1024 * 1024
#: Mode of a file looplab creates, before the umask: what `open()` and every shell redirection use.
NEW_FILE_MODE = 0o666
#: Attempts at a free temporary name (each is 64 random bits: one collision is already unheard of).
TEMP_NAME_ATTEMPTS = 100
_READ_CHUNK = 1024 * 1024


def kind_of(mode: int) -> str:
    """What a file of `mode` (from `stat`) is, in words: `a regular file`, `a FIFO`, `a folder`, ..."""
    kinds = (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((name for test, name in kinds if test(mode)), "not a file")


def _why(exc: OSError) -> str:
    """An OSError's reason in a few words, without the path (the caller names the path once)."""
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    return exc.strerror or type(exc).__name__


def read_bytes(path: Path | str, *, limit: int = MAX_READ_BYTES, follow_links: bool = True) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them; `follow_links=False`: a symlink is refused.

    Raises `FileRefused` for a missing file, a FIFO, socket, device or folder (none of them is opened
    in a way that can block), a file over `limit` bytes, or any error reading it.
    """
    path = Path(path)
    # Non-blocking: a FIFO swapped in after the check still cannot hold the open (or a read); no controlling
    # terminal is taken from a device either.
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        before = os.stat(path) if follow_links else os.lstat(path)
        _refuse_unless_regular(path, before.st_mode)
        fd = os.open(path, flags)
    except OSError as exc:
        raise FileRefused(f"{path}: {_why(exc)}") from None
    try:
        opened = os.fstat(fd)
        _refuse_unless_regular(path, opened.st_mode)
        if opened.st_size > limit:
            raise FileRefused(f"{path}: {opened.st_size:,} bytes, over the {limit:,} looplab reads of one file")
        chunks, total = [], 0
        while chunk := os.read(fd, _READ_CHUNK):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew while being read
                raise FileRefused(f"{path}: over the {limit:,} bytes looplab reads of one file")
        return b"".join(chunks)
    except OSError as exc:
        raise FileRefused(f"{path}: {_why(exc)}") from None
    finally:
        os.close(fd)


def read_text(path: Path | str, *, limit: int = MAX_READ_BYTES) -> str:
    """The UTF-8 text of the regular file at `path`, under `read_bytes`' rule; text that is not UTF-8 is refused."""
    data = read_bytes(path, limit=limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileRefused(f"{path}: not UTF-8 text (byte {exc.start:,} is {data[exc.start]:#04x})") from None


def _refuse_unless_regular(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise FileRefused(f"{path}: {kind_of(mode)}, not a regular file: looplab reads only regular files")


def ready_to_write(path: Path | str) -> int | None:
    """Check that looplab may write `path` and create its folder; the permission bits a replacement keeps.

    None when `path` is absent or a symlink (either becomes a new file, the link itself replaced); a
    regular file's permission bits otherwise. A folder, FIFO, socket or device at `path` is a
    `FileRefused`, as is a folder that cannot be created. Commands call it before they run anything,
    so a bad output path is refused before the work, not after.
    """
    path = Path(path)
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        found = None
    except OSError as exc:  # a parent that is a file, no permission to look
        raise FileRefused(f"{path}: {_why(exc)}") from None
    if found is not None and not (stat.S_ISREG(found.st_mode) or stat.S_ISLNK(found.st_mode)):
        raise FileRefused(f"{path}: {kind_of(found.st_mode)}, not a regular file: looplab writes only regular files")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FileRefused(f"{path}: cannot create its folder {path.parent} ({_why(exc)})") from None
    return stat.S_IMODE(found.st_mode) & 0o777 if found is not None and stat.S_ISREG(found.st_mode) else None


def make_folder(folder: Path | str, *, what: str = "", hint: str = "") -> Path:
    """`folder` created if missing (its parents too); if it cannot be, one `FileRefused` line naming it (after
    `what` it is, e.g. "runner environment cache") and ending with `hint`, what to do about it.

    A file (or anything else) where the folder should be, or a folder that cannot be created, is refused before
    anything is put in it.
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = "a file, not a folder" if isinstance(exc, FileExistsError | NotADirectoryError) else _why(exc)
        named = f"{what} {folder}" if what else str(folder)
        raise FileRefused(f"{named}: {why}" + (f"; {hint}" if hint else "")) from None
    return folder


def _new_temp(path: Path) -> tuple[int, Path]:
    """A new, empty file beside `path` (a dot name, so listings and globs skip it), open for writing."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(TEMP_NAME_ATTEMPTS):
        temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            # The kernel applies the umask (or the folder's default ACL) to NEW_FILE_MODE, as for any new file.
            return os.open(temp, flags, NEW_FILE_MODE), temp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path} after {TEMP_NAME_ATTEMPTS} attempts")


@contextlib.contextmanager
def replacing(path: Path | str, *, binary: bool = False) -> Iterator[IO]:
    """A file handle whose content replaces `path` when the block ends without an exception.

    The rule of this module: `ready_to_write` first, the content into a temporary file beside
    `path`, flushed with fsync, then `os.replace`. If the block raises, or writing fails, the
    temporary file is removed and `path` is left as it was. OS errors are a `FileRefused` line.
    """
    path = Path(path)
    keep = ready_to_write(path)
    try:
        fd, temp = _new_temp(path)
    except OSError as exc:
        raise FileRefused(f"{path}: cannot write ({_why(exc)})") from None
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as handle:
            yield handle  # what the block raises propagates as it is, after the cleanup below
            try:
                handle.flush()
                if keep is not None and hasattr(os, "fchmod"):  # POSIX: Windows has no mode bits to keep
                    os.fchmod(handle.fileno(), keep)
                os.fsync(handle.fileno())  # on disk before the rename, so a crash leaves the old file or the new
            except OSError as exc:
                raise FileRefused(f"{path}: cannot write ({_why(exc)})") from None
        try:
            os.replace(temp, path)
        except OSError as exc:
            raise FileRefused(f"{path}: cannot write ({_why(exc)})") from None
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def write_text(path: Path | str, text: str) -> Path:
    """Write `text` (UTF-8) to `path` under this module's rule (see `replacing`); returns `path`."""
    with replacing(path) as handle:
        _write_all(handle, path, text)
    return Path(path)


def write_bytes(path: Path | str, data: bytes) -> Path:
    """Write `data` to `path` under this module's rule (see `replacing`); returns `path`."""
    with replacing(path, binary=True) as handle:
        _write_all(handle, path, data)
    return Path(path)


def _write_all(handle: IO, path: Path | str, content: str | bytes) -> None:
    try:
        handle.write(content)
    except OSError as exc:  # a full disk, a quota
        raise FileRefused(f"{path}: cannot write ({_why(exc)})") from None


def open_log(path: Path | str, *, binary: bool = False) -> IO:
    """`path` emptied and open for writing as it grows (a log another process or thread appends to).

    What may be at `path` is `ready_to_write`'s rule: a symlink there is removed (a new file takes its
    place, the link's target untouched), and a FIFO or device is refused, also one swapped in after the
    check (the open neither follows a link nor waits for a FIFO's reader). A new file gets the umask's
    mode; an existing regular file is truncated and keeps its own. The caller closes the handle.
    """
    path = Path(path)
    ready_to_write(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        if path.is_symlink():
            path.unlink()
        fd = os.open(path, flags, NEW_FILE_MODE)
    except OSError as exc:
        raise FileRefused(f"{path}: cannot write ({_why(exc)})") from None
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode):
        os.close(fd)
        raise FileRefused(f"{path}: {kind_of(found.st_mode)}, not a regular file: looplab writes only regular files")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"}))


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive `flock` on `path` for the block (none where `fcntl` is missing: Windows)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
