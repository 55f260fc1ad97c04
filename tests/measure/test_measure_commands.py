"""`python -m looplab.measure COMMAND`: the one entry point of the measurements that are not `looplab` commands."""

from __future__ import annotations

import importlib
import itertools
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from looplab.measure.__main__ import COMMANDS, main
from tests.paths import REPO

ROOT = REPO


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_a_main_and_its_help_names_the_command(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert callable(importlib.import_module(COMMANDS[command][0]).main)
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert f"usage: python -m looplab.measure {command}" in capsys.readouterr().out


def test_no_command_or_an_unknown_one_is_a_usage_error_listing_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([], ["nope"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 2
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    assert all(command in listed for command in COMMANDS)


def test_the_release_check_refuses_a_tag_the_tree_does_not_name_before_building() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "looplab.measure", "release-check", "--tag", "v999.0.0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "CHANGELOG.md has no `## [999.0.0]` section" in done.stderr and "CITATION.cff's version is" in done.stderr
    assert done.stdout == "", "nothing was installed or built"


# Whole seconds: sums of them are exact, so the test and the line agree on which of two equal times is first.
@given(st.lists(st.integers(0, 500).map(float), min_size=1, max_size=20), st.integers(0, 500).map(float))
def test_the_caps_timing_line_names_the_whole_time_and_the_slowest_runner(gaps: list[float], last: float) -> None:
    from looplab.cli.measuring import _measured_in

    starts = list(itertools.accumulate([0.0, *gaps[:-1]]))
    began = {f"runner{n}": s for n, s in enumerate(starts)}
    took = [*gaps[:-1], last]
    line = _measured_in(began, starts[-1] + last)
    slowest = max(range(len(took)), key=took.__getitem__)
    assert line.startswith(f"measured {len(began)} runner(s) in {starts[-1] + last:.0f} s")
    assert line.endswith(f"in {took[slowest]:.0f} s") and f"runner{slowest}" in line
    assert _measured_in({}, 1.0) == "measured no runner"
