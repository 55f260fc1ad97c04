"""The one rule for files looplab reads and writes (`adapters.files`): regular files only, atomic replace, links
replaced not followed, the umask respected, every refusal one line and quick."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looplab.adapters.contract import files
from tests.paths import REPO

#: What can be at the path looplab is told to write.
KINDS = (
    "absent",
    "absent-folder",
    "regular-0644",
    "regular-0600",
    "regular-0640",
    "symlink",
    "dangling-symlink",
    "fifo",
    "folder",
)
#: A refusal comes back at once; this bound only catches a wait (a FIFO open blocks forever).
QUICK_S = 2.0


def _umask() -> int:
    """This process's umask, read without changing it."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise AssertionError("no Umask line in /proc/self/status")


def _make(folder: Path, kind: str) -> tuple[Path, Path | None]:
    """A target of `kind` in `folder`, and the file a symlink points at (None for other kinds)."""
    target = folder / "out.txt"
    pointed = folder / "pointed.txt"
    if kind == "absent-folder":  # the folders on the way are made too
        target = folder / "a" / "b" / "out.txt"
    elif kind.startswith("regular"):
        target.write_text("old", encoding="utf-8")
        target.chmod(int(kind.split("-")[1], 8))
    elif kind == "symlink":
        pointed.write_text("pointed", encoding="utf-8")
        pointed.chmod(0o604)
        target.symlink_to(pointed.name)
    elif kind == "dangling-symlink":
        target.symlink_to("nowhere.txt")
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    return target, pointed if kind == "symlink" else None


@settings(deadline=None)
@given(kind=st.sampled_from(KINDS), text=st.text(max_size=200))
def test_a_write_replaces_a_file_or_link_and_refuses_anything_else(kind: str, text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        target, pointed = _make(Path(tmp), kind)
        before = sorted(os.listdir(tmp))
        started = time.monotonic()
        if kind in ("fifo", "folder"):
            with pytest.raises(files.FileRefused) as refused:
                files.write_text(target, text)
            assert time.monotonic() - started < QUICK_S
            message = str(refused.value)
            assert "\n" not in message and message.startswith(f"{target}: ")
            assert "not a regular file" in message
            assert sorted(os.listdir(tmp)) == before  # nothing written, no temporary file left
            return
        files.write_text(target, text)
        found = os.lstat(target)
        assert stat.S_ISREG(found.st_mode)  # a link at the target is replaced, not followed
        assert target.read_bytes() == text.encode("utf-8")
        if kind.startswith("regular"):
            assert stat.S_IMODE(found.st_mode) == int(kind.split("-")[1], 8)  # the replaced file's mode is kept
        else:
            assert stat.S_IMODE(found.st_mode) == 0o666 & ~_umask()
        if pointed is not None:  # the link's target is untouched
            assert pointed.read_text(encoding="utf-8") == "pointed"
            assert stat.S_IMODE(pointed.stat().st_mode) == 0o604
        leftovers = [n for n in os.listdir(target.parent) if n.endswith(".tmp")]
        assert leftovers == []


#: Runs in a fresh interpreter (the umask is process-wide: changing it here could touch other tests' files):
#: for each umask, the mode of a new file, of a replaced link, and of replaced regular files.
UMASK_SCRIPT = """
import json, os, sys, tempfile
from pathlib import Path
from looplab.adapters.contract import files

out = {}
for umask in (0o022, 0o077, 0o002):
    os.umask(umask)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        files.write_text(tmp / "new.txt", "x")
        (tmp / "pointed.txt").write_text("p")
        (tmp / "link.txt").symlink_to("pointed.txt")
        files.write_text(tmp / "link.txt", "x")
        log = files.open_log(tmp / "log.txt")
        log.close()
        kept = {}
        for mode in (0o644, 0o600, 0o640):
            (tmp / "old.txt").write_text("old")
            (tmp / "old.txt").chmod(mode)
            files.write_text(tmp / "old.txt", "x")
            kept[oct(mode)] = oct((tmp / "old.txt").stat().st_mode & 0o777)
        out[oct(umask)] = {
            "new": oct((tmp / "new.txt").stat().st_mode & 0o777),
            "link": oct((tmp / "link.txt").lstat().st_mode & 0o777),
            "log": oct((tmp / "log.txt").stat().st_mode & 0o777),
            "kept": kept,
        }
print(json.dumps(out))
"""


def test_new_files_get_the_umasks_mode_and_replaced_files_keep_theirs() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", UMASK_SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    modes = json.loads(proc.stdout)
    for umask in (0o022, 0o077, 0o002):
        expected = oct(0o666 & ~umask)
        seen = modes[oct(umask)]
        assert (seen["new"], seen["link"], seen["log"]) == (expected, expected, expected)
        assert seen["kept"] == {oct(m): oct(m) for m in (0o644, 0o600, 0o640)}


def test_a_failed_write_leaves_the_target_as_it_was_and_no_temporary_file(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "out.json"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError), files.replacing(target) as handle:
        handle.write("half")
        raise RuntimeError("the writer failed")
    assert target.read_text(encoding="utf-8") == "old" and os.listdir(tmp_path) == ["out.json"]

    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(files.FileRefused, match=r"out\.json: cannot write \(No space left on device\)$"):
        files.write_text(target, "new")
    assert target.read_text(encoding="utf-8") == "old" and os.listdir(tmp_path) == ["out.json"]


def test_the_temporary_file_is_on_disk_before_it_replaces_the_target(tmp_path: Path, monkeypatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append("replace"), real_replace(a, b))[1])
    files.write_text(tmp_path / "out.json", "{}")
    assert events == ["fsync", "replace"]


@pytest.mark.parametrize("kind", ["fifo", "folder", "device", "absent"])
def test_reading_anything_but_a_regular_file_is_one_line_at_once(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "in.json"
    if kind == "fifo":
        os.mkfifo(path)  # nobody writes to it: a blocking open would wait forever
    elif kind == "folder":
        path.mkdir()
    elif kind == "device":
        path.symlink_to("/dev/zero")  # endless: read to the end it would fill memory
    started = time.monotonic()
    with pytest.raises(files.FileRefused) as refused:
        files.read_bytes(path)
    assert time.monotonic() - started < QUICK_S
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    expected = {"fifo": "a FIFO", "folder": "a folder", "device": "a character device", "absent": "no such file"}
    assert expected[kind] in message


def test_reading_follows_a_link_to_a_regular_file_and_stops_at_its_bound(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_bytes(b"x" * 100)
    (tmp_path / "link.json").symlink_to("real.json")
    assert files.read_bytes(tmp_path / "link.json") == b"x" * 100
    assert files.read_bytes(tmp_path / "link.json", limit=100) == b"x" * 100
    with pytest.raises(files.FileRefused, match=r"link\.json: 100 bytes, over the 99 looplab reads of one file$"):
        files.read_bytes(tmp_path / "link.json", limit=99)
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9")
    with pytest.raises(files.FileRefused, match=r"latin1\.txt: not UTF-8 text \(byte 3 is 0xe9\)$"):
        files.read_text(tmp_path / "latin1.txt")


@pytest.mark.parametrize("kind", ["symlink", "fifo", "regular-0640"])
def test_a_log_replaces_a_link_refuses_a_fifo_and_truncates_a_file_keeping_its_mode(tmp_path: Path, kind: str) -> None:
    target, pointed = _make(tmp_path, kind)
    if kind == "fifo":
        started = time.monotonic()
        with pytest.raises(files.FileRefused, match="a FIFO, not a regular file"):
            files.open_log(target)
        assert time.monotonic() - started < QUICK_S
        return
    with files.open_log(target) as log:
        log.write("line\n")
    assert not target.is_symlink() and target.read_text(encoding="utf-8") == "line\n"
    if pointed is not None:
        assert pointed.read_text(encoding="utf-8") == "pointed"
    else:
        assert stat.S_IMODE(target.stat().st_mode) == 0o640
