"""A repository is copied within bounds, on the run's clock: regular files, folders and links only, never opening a
FIFO, socket or device; bounded in entries, bytes, file size and time; nothing left behind when a copy fails; and
every walk of a workspace (search_code, "did you mean", a folder's listing) stopping at its deadline."""

from __future__ import annotations

import os
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.model import ModelSpec
from looplab.adapters.contract.runner import Probe
from looplab.adapters.session import RunSession
from looplab.run import harness
from looplab.run.harness import Endpoint, ModelChoice, run_one
from looplab.scenarios.cases import load_case, load_cases
from looplab.shared_tools import Guard, Workspace, repo_copy, tools, tree_fingerprint
from looplab.shared_tools import workspace as workspace_module
from looplab.shared_tools.repo_copy import MAX_REPO_FILE_BYTES, RepoRefused

T = TypeVar("T")
CASES = load_cases()
FIXTURE = CASES["vip-compound"].repo_path
#: The temporary folder before a test gives workspaces their own: short paths, which a socket needs.
SHORT_TMP = tempfile.gettempdir()


@pytest.fixture
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary folder of the test's own, where workspaces go: what a failed copy leaves is seen there."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


@pytest.fixture(scope="module")
def where(model_server) -> Iterator[Endpoint]:
    yield Endpoint(
        ModelChoice(), {"openai": model_server.openai_base_url, "anthropic": model_server.anthropic_base_url}
    )


def _char_device(path: Path) -> bool:
    """A character device at `path` that reads as /dev/null (so that a copy reading it ends); False where the
    process may not make one."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except (PermissionError, AttributeError, OSError):
        return False
    return True


def _socket(path: Path) -> socket.socket | None:
    if len(os.fsencode(path)) >= 100 or not hasattr(socket, "AF_UNIX"):
        return None
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    return sock


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink()
    }


def _links(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): os.readlink(p) for p in root.rglob("*") if p.is_symlink()}


def _specials(root: Path) -> list[str]:
    kinds = (stat.S_ISFIFO, stat.S_ISSOCK, stat.S_ISCHR, stat.S_ISBLK)
    return [p.name for p in root.rglob("*") if any(k(p.lstat().st_mode) for k in kinds)]


def _in_thread(action: Callable[[], T], timeout_s: float) -> T:
    """`action()`'s value or exception; fails the test if it is still running after `timeout_s` (it would block)."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = action()
        except BaseException as exc:  # handed to the test, which raises it
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout_s)
    assert not worker.is_alive(), f"still running after {timeout_s} s: it blocked or read without end"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


# --- what is copied ----------------------------------------------------------------------------------------------

KINDS = ("file", "folder", "link-in", "link-out", "fifo", "device", "socket")


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    entries=st.lists(
        st.tuples(
            st.lists(st.sampled_from(["a", "b", "c.py", "d.txt"]), min_size=1, max_size=3),
            st.sampled_from(KINDS),
            st.binary(max_size=64),
        ),
        max_size=14,
    )
)
def test_a_copy_holds_the_regular_files_folders_and_links_and_leaves_out_what_could_block(
    entries: list[tuple[list[str], str, bytes]], own_tmp: Path
) -> None:
    with tempfile.TemporaryDirectory(dir=SHORT_TMP) as made:
        src = Path(made) / "r"
        src.mkdir()
        outside = Path(made) / "outside.txt"
        outside.write_text("not in the repo")
        specials, sockets = [], []
        for parts, kind, data in entries:
            path = src.joinpath(*parts)
            if os.path.lexists(path) or any(p.is_symlink() or p.exists() and not p.is_dir() for p in path.parents):
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "file":
                path.write_bytes(data)
            elif kind == "folder":
                path.mkdir()
            elif kind == "link-in":
                path.symlink_to("a")
            elif kind == "link-out":
                path.symlink_to(outside)
            elif kind == "fifo":
                os.mkfifo(path)
            elif kind == "device" and _char_device(path):
                pass
            elif kind == "socket" and (sock := _socket(path)) is not None:
                sockets.append(sock)
            else:
                continue
            if kind in ("fifo", "device", "socket"):
                specials.append(path.relative_to(src).as_posix())
        try:
            ws = _in_thread(lambda: Workspace(src), 10.0)
            with ws:
                assert _files(ws.root) == _files(src)
                assert _links(ws.root) == _links(src)
                assert _specials(ws.root) == []
                assert sorted(line.partition(":")[0] for line in ws.left_out) == sorted(specials)
                assert ws.fingerprint() == _in_thread(lambda: tree_fingerprint(src), 10.0)
            assert not ws.root.exists()
        finally:
            for sock in sockets:
                sock.close()
    assert list(own_tmp.iterdir()) == []


def test_a_fifo_a_device_and_a_huge_sparse_file_cost_nothing(own_tmp: Path, tmp_path: Path) -> None:
    src = tmp_path / "repo"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("x = 1\n")
    os.mkfifo(src / "pkg" / "pipe.txt")  # nobody writes to it: opening it to read would wait forever
    device = _char_device(src / "null.py")
    with open(src / "data.bin", "wb") as fh:
        fh.truncate(2 << 30)  # 2 GiB that take no disk: a copy would write them all
    started = time.monotonic()
    with _in_thread(lambda: Workspace(src), 10.0) as ws:
        assert time.monotonic() - started < 2.0
        assert _files(ws.root) == {"pkg/mod.py": b"x = 1\n"}
        reasons = dict(line.split(": ", 1) for line in ws.left_out)
        assert reasons["data.bin"] == "2 GiB, over the 64 MiB a file may have"
        assert reasons["pkg/pipe.txt"] == "a FIFO, never opened"
        if device:
            assert reasons["null.py"] == "a character device, never opened"
        started = time.monotonic()
        assert _in_thread(lambda: tree_fingerprint(src), 10.0) == ws.fingerprint()  # neither reads what was left out
        assert time.monotonic() - started < 1.0


def test_a_file_just_over_the_bound_is_left_out(own_tmp: Path, tmp_path: Path) -> None:
    src = tmp_path / "repo"
    src.mkdir()
    with open(src / "big.txt", "wb") as fh:
        fh.truncate(MAX_REPO_FILE_BYTES + 1)
    (src / "small.txt").write_bytes(b"s" * 10)
    with Workspace(src) as ws:
        assert not (ws.root / "big.txt").exists()
        assert (ws.root / "small.txt").read_bytes() == b"s" * 10


def test_an_overlay_replaces_a_link_and_never_writes_through_it(own_tmp: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text("kept = True\n")
    base, overlay = tmp_path / "base", tmp_path / "overlay"
    base.mkdir()
    overlay.mkdir()
    (base / "mod.py").symlink_to(outside)
    (overlay / "mod.py").write_text("replaced = True\n")
    with Workspace(base, overlay=overlay) as ws:
        assert not (ws.root / "mod.py").is_symlink()
        assert (ws.root / "mod.py").read_text() == "replaced = True\n"
    assert outside.read_text() == "kept = True\n"


# --- what is refused, in one line, leaving nothing behind ----------------------------------------------------------


@pytest.mark.parametrize(
    ("place", "expected"),
    [
        ("root", "the file system's root is not a repository"),
        ("above the temporary folder", "holds the temporary folder"),
        ("inside a workspace copy", "is inside a workspace copy"),
    ],
)
def test_a_repo_that_cannot_be_copied_is_refused_in_one_line(place: str, expected: str, own_tmp: Path) -> None:
    with Workspace(FIXTURE) as other:
        repo = {"root": Path("/"), "above the temporary folder": own_tmp.parent, "inside a workspace copy": other.root}
        with pytest.raises(RepoRefused) as info:
            Workspace(repo[place], deadline_s=2.0)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"repo {repo[place]}") and expected in message
    assert list(own_tmp.iterdir()) == []


@pytest.mark.parametrize(
    ("bound", "value", "expected"),
    [
        ("MAX_REPO_ENTRIES", 40, "more than 40 files, folders and links to copy (MAX_REPO_ENTRIES)"),
        ("MAX_REPO_BYTES", 2 << 20, "more than 2 MiB of files to copy (MAX_REPO_BYTES)"),
    ],
)
def test_a_repo_over_a_bound_is_refused_and_its_partial_copy_removed(
    bound: str, value: int, expected: str, own_tmp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(repo_copy, bound, value)
    src = tmp_path / "repo"
    for i in range(60):
        (src / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (src / f"d{i % 3}" / f"f{i}.txt").write_bytes(b"x" * (100 << 10))  # 60 x 100 KiB: 6 MiB, 63 entries
    live = set(Workspace.live._items)
    with pytest.raises(RepoRefused) as info:
        Workspace(src)
    assert str(info.value) == f"repo {src.resolve()}: {expected}; name a smaller folder"
    assert list(own_tmp.iterdir()) == []
    assert set(Workspace.live._items) == live


def test_a_copy_past_its_deadline_stops_in_one_line_and_leaves_nothing(own_tmp: Path, tmp_path: Path) -> None:
    src = tmp_path / "repo"
    src.mkdir()
    for i in range(200):
        (src / f"f{i}.txt").write_text("x")
    with pytest.raises(TimeoutError) as info:
        Workspace(src, deadline_s=0.0)
    assert str(info.value).startswith(f"repo {src.resolve()}: its copy was not done within the run's 0 s (")
    assert list(own_tmp.iterdir()) == []


@pytest.mark.parametrize("failure", [OSError("disk full"), KeyboardInterrupt()])
def test_a_copy_that_fails_midway_removes_itself_and_is_no_longer_live(
    failure: BaseException, own_tmp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "repo"
    src.mkdir()
    for i in range(5):
        (src / f"f{i}.txt").write_text("x")
    calls: list[str] = []
    real = repo_copy._copy_file

    def failing(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 3:
            raise failure
        return real(*args, **kwargs)

    monkeypatch.setattr(repo_copy, "_copy_file", failing)
    live = set(Workspace.live._items)
    with pytest.raises(type(failure)):
        Workspace(src)
    assert len(calls) == 3
    assert list(own_tmp.iterdir()) == []
    assert set(Workspace.live._items) == live


def test_looplab_cases_refuses_a_case_whose_repo_is_the_root(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    (suite / "cases").mkdir(parents=True)
    case = suite / "cases" / "own.toml"
    case.write_text('id = "own"\nrepo = "/"\ntarget = "t.py::t"\ntask = "Find out why."\n', encoding="utf-8")
    with pytest.raises(LooplabError) as info:
        load_case(case)
    assert str(info.value) == f"{case}: repo /: the file system's root is not a repository; name the project's folder"


# --- on the run's clock --------------------------------------------------------------------------------------------


def test_time_spent_before_the_session_counts_against_max_seconds(workspace: Workspace) -> None:
    now = [5.0]
    guard = Guard(workspace, clock=lambda: now[0], began=0.0)
    model = ModelSpec("openai", "scripted", base_url="http://127.0.0.1:1/v1")
    session = RunSession(guard, Limits(max_seconds=8.0), model, Probe(knob="test", value=None))
    assert session.remaining_s() == pytest.approx(3.0)
    assert guard.deadline == pytest.approx(8.0)


def test_a_slow_copy_is_spent_from_the_run(where: Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES["vip-compound"]
    case = case.model_copy(update={"limits": case.limits.model_copy(update={"max_seconds": 1.0})})

    class SlowToMake(Workspace):
        def __init__(self, *args, **kwargs) -> None:
            time.sleep(1.2)  # longer than the run may take
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(harness, "Workspace", SlowToMake)
    outcome = run_one("handrolled", case, where)
    assert outcome.result is not None, outcome.error
    assert outcome.result.stop_reason is StopReason.TIMEOUT
    assert outcome.result.totals.model_calls == 0
    assert outcome.result.totals.wall_s >= 1.2


def test_a_copy_that_outlasts_max_seconds_ends_the_run_with_its_error(
    where: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES["vip-compound"]
    case = case.model_copy(update={"limits": case.limits.model_copy(update={"max_seconds": 0.5})})
    real = repo_copy._copy_file

    def slow(*args, **kwargs):
        time.sleep(0.2)
        return real(*args, **kwargs)

    monkeypatch.setattr(repo_copy, "_copy_file", slow)
    started = time.monotonic()
    outcome = run_one("handrolled", case, where)
    assert time.monotonic() - started < 2.0
    assert outcome.result is None
    assert outcome.error is not None
    assert outcome.error.startswith(f"TimeoutError: repo {FIXTURE}: its copy was not done within the run's 0.5 s (")


# --- every walk stops at its deadline --------------------------------------------------------------------------------


def _many_files(root: Path, n: int, text: str = "") -> None:
    for i in range(n):
        folder = root / f"pkg{i // 200:03d}"
        if i % 200 == 0:
            folder.mkdir(parents=True)
        (folder / f"mod{i:05d}.py").write_text(text)


def test_a_walk_of_the_workspace_stops_at_its_deadline(workspace: Workspace) -> None:
    _many_files(workspace.root / "generated", 1_000)
    with pytest.raises(TimeoutError):
        list(workspace.text_files(deadline=time.monotonic()))
    names = [workspace.relative(p) for p in workspace.text_files(under=workspace.root / "billing")]
    assert names == ["billing/__init__.py", "billing/discount.py", "billing/invoice.py", "billing/money.py"]


def test_search_code_returns_what_it_found_when_its_deadline_comes(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    _many_files(workspace.root / "generated", 600, "needle = 1\n")
    read = Path.read_text

    def slow_read(self: Path, *args, **kwargs) -> str:
        time.sleep(0.005)  # 600 files: 3 s to read them all
        return read(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", slow_read)
    started = time.monotonic()
    out = tools.search_code(workspace, "needle", timeout_s=0.3)
    assert time.monotonic() - started < 1.0
    lines = out.splitlines()
    assert lines[0].startswith("generated/pkg000/mod00000.py:1: needle = 1")
    assert lines[-1].startswith("(the search stopped at its 0.3s deadline after ")
    assert "; the files after generated/pkg000/mod000" in lines[-1]


def test_did_you_mean_compares_a_bounded_set_its_folder_first(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    _many_files(workspace.root / "aaa", 300)  # walked before billing/
    monkeypatch.setattr(workspace_module, "SUGGEST_MAX_CANDIDATES", 20)
    compared: list[int] = []
    close = workspace_module.difflib.get_close_matches

    def counting(word, possibilities, *args, **kwargs):
        compared.append(len(possibilities))
        return close(word, possibilities, *args, **kwargs)

    monkeypatch.setattr(workspace_module.difflib, "get_close_matches", counting)
    assert workspace.suggest("billing/invoce.py") == "billing/invoice.py"
    assert compared and max(compared) <= 20
    with pytest.raises(FileNotFoundError, match="did you mean billing/invoice.py"):
        tools.read_file(workspace, "billing/invoce.py")
