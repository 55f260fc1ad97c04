"""What a run's copy of a repository costs: `python -m looplab.measure bench-workspace [--repeat N]`.

It prints the time to copy the built-in fixture repo, a repository of 20,000 small files and one holding a 2 GiB
sparse file; to fingerprint the 20,000 files' copy; and, over 50,000 small files (more than a copy takes, made in a
workspace as a run's tests could), how long `search_code` takes with a 3 s and a 1 s timeout (its answer's last line
shows whether it stopped at its deadline) and `read_file` of a mistyped path (its "did you mean").
Each is the median of `--repeat` tries; the trees are built once.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from looplab.scenarios.cases import load_cases
from looplab.shared_tools.tools import read_file, search_code
from looplab.shared_tools.workspace import Workspace

#: Files in the copied tree and in the searched tree: a large real project, and more than a copy allows.
COPY_FILES = 20_000
SEARCH_FILES = 50_000
SEARCH_TIMEOUT_S = 3.0


def build_tree(root: Path, files: int, per_folder: int = 500) -> Path:
    """`files` small Python files under `root`, `per_folder` to a folder; `root` itself."""
    for i in range(files):
        folder = root / f"pkg{i // per_folder:04d}"
        if i % per_folder == 0:
            folder.mkdir(parents=True)
        (folder / f"mod{i:06d}.py").write_text(f"value_{i} = {i}\n")
    return root


def timed(action: Callable[[], object], repeat: int) -> tuple[float, object]:
    """The median seconds of `repeat` calls of `action`, and the last call's value (or what it raised, as text)."""
    times: list[float] = []
    value: object = None
    for _ in range(repeat):
        started = time.perf_counter()
        try:
            value = action()
        except Exception as exc:  # a refusal or a timeout is a result too
            value = f"raised {type(exc).__name__}: {exc}"
        times.append(time.perf_counter() - started)
    return statistics.median(times), value


def _copy(source: Path) -> None:
    Workspace(source).close()


def _fingerprint(ws: Workspace) -> str:
    return ws.fingerprint()


def measure(repeat: int = 3) -> list[str]:
    """The benchmark's lines."""
    lines = []
    fixture = load_cases()["vip-compound"].repo_path
    seconds, _ = timed(lambda: _copy(fixture), repeat * 10)  # milliseconds: more tries for a steady median
    lines.append(f"copy of the built-in fixture repo: {seconds * 1000:.1f} ms")
    with tempfile.TemporaryDirectory(prefix="looplab-bench-ws-") as tmp:
        copied = build_tree(Path(tmp) / "copied", COPY_FILES)
        seconds, _ = timed(lambda: _copy(copied), repeat)
        lines.append(f"copy of {COPY_FILES:,} small files: {seconds:.2f} s")
        with Workspace(copied) as ws:
            seconds, _ = timed(lambda: _fingerprint(ws), repeat)
        lines.append(f"fingerprint of that copy: {seconds:.2f} s")
        sparse = Path(tmp) / "sparse"
        sparse.mkdir()
        (sparse / "mod.py").write_text("x = 1\n")
        with open(sparse / "data.bin", "wb") as fh:
            fh.truncate(2 << 30)
        seconds, _ = timed(lambda: _copy(sparse), repeat)
        lines.append(f"copy of a repo holding a 2 GiB sparse file: {seconds:.2f} s")
    # More files than a copy takes: made inside a workspace, as a run's tests could.
    with Workspace(fixture) as ws:
        build_tree(ws.root / "generated", SEARCH_FILES)
        for timeout_s in (SEARCH_TIMEOUT_S, 1.0):
            seconds, answer = timed(lambda t=timeout_s: search_code(ws, "no_such_name", timeout_s=t), repeat)
            last = str(answer).splitlines()[-1][:200]
            lines.append(f"search_code over {SEARCH_FILES:,} files, timeout {timeout_s:g} s: {seconds:.2f} s ({last})")
        seconds, answer = timed(lambda: read_file(ws, "generated/pkg0042/mod02100.pyy"), repeat)
        lines.append(
            f"read_file of a mistyped path among {SEARCH_FILES:,} files: {seconds:.2f} s ({str(answer)[:160]})"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m looplab.measure bench-workspace [--repeat N]`."""
    parser = argparse.ArgumentParser(prog="python -m looplab.measure bench-workspace")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    for line in measure(args.repeat):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
