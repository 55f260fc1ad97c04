from __future__ import annotations

import os
from pathlib import Path

import pytest

from looplab.shared_tools import PathRefused, Workspace, tree_fingerprint


@pytest.mark.parametrize(
    "path",
    [
        "../outside.txt",
        "billing/../../outside.txt",
        "/etc/passwd",
        "../../etc/passwd",
        "~/.bashrc",
        ".env",
        "config/.env.local",
        "deploy.pem",
    ],
)
def test_paths_that_leave_the_workspace_or_name_secrets_are_refused(workspace: Workspace, path: str) -> None:
    with pytest.raises(PathRefused):
        workspace.resolve(path)


def test_a_symlink_pointing_outside_is_refused(workspace: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("do not read")
    (workspace.root / "link.txt").symlink_to(outside)
    with pytest.raises(PathRefused, match="outside"):
        workspace.resolve("link.txt")


def test_relative_paths_inside_resolve_under_the_root(workspace: Workspace) -> None:
    resolved = workspace.resolve("billing/discount.py")
    assert resolved == workspace.root / "billing" / "discount.py"
    assert resolved.is_file()


def test_the_copy_is_removed_on_close(fixture_repo: Path) -> None:
    ws = Workspace(fixture_repo)
    root = ws.root
    assert (root / "billing" / "discount.py").is_file()
    ws.close()
    assert not root.exists()


def test_writing_in_the_workspace_leaves_the_fixture_untouched(workspace: Workspace, fixture_repo: Path) -> None:
    before = tree_fingerprint(fixture_repo)
    (workspace.root / "billing" / "discount.py").write_text("broken = True\n")
    assert workspace.fingerprint() != before
    assert tree_fingerprint(fixture_repo) == before


def test_suggest_finds_the_file_a_typo_meant(workspace: Workspace) -> None:
    assert workspace.suggest("tests/test_invoce.py") == "tests/test_invoice.py"


def test_a_missing_fixture_repo_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="fixture repo not found"):
        Workspace(tmp_path / "nope")


def test_text_files_skip_secrets(workspace: Workspace) -> None:
    (workspace.root / ".env").write_text("TOKEN=1")
    names = [os.path.basename(p) for p in workspace.text_files()]
    assert ".env" not in names and "discount.py" in names
