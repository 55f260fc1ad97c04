"""The release: `.github/workflows/release.yml`, the noxfile's `release` session it runs, CHANGELOG.md and CITATION.cff.

Fast tier: the workflow validates against GitHub's schemas, runs only on `v*` tags, builds with the `release`
session and publishes with trusted publishing alone; CITATION.cff validates against the Citation File Format's
schema; the CHANGELOG has the sections the release check reads; and the check's parts refuse what they should
(a mismatched tag, a wheel missing a file or holding caches, a run that did not pass), without building anything.

Full tier: the `build` job's release step, read from the workflow and run as written on a scratch clone of this tree
(committed and tagged with CITATION.cff's version there, as the tag push would be): the sdist and wheel built,
twine, the wheel's contents, the wheel installed in a fresh venv running a case from outside the checkout, the tag
against all three; then the same step with a tag the tree does not name fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from looplab.measure import release_check
from tests.paths import REPO
from tests.project.test_nox_sessions import load_noxfile
from tests.project.test_workflow import check_schema, finish, needs_schema, start, triggers

ROOT = REPO
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
CHANGELOG = ROOT / "CHANGELOG.md"
CITATION = ROOT / "CITATION.cff"
#: The interpreter's own bin folder (the .venv's): its `nox` runs the workflow's step here.
BIN = Path(sys.executable).parent
#: Seconds the release step may take here (a build, two installs and a run: about 30 s on the 2-core machine).
RELEASE_TIMEOUT = 1200
GIT_TIMEOUT = 120
#: The action that publishes (pinned to a commit, as every action is: tests/project/test_workflow.py checks the pins).
PUBLISH_ACTION = "pypa/gh-action-pypi-publish"


@pytest.fixture(scope="module")
def noxfile() -> ModuleType:
    return load_noxfile()


def workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def _released_version() -> str:
    """The version CITATION.cff names: the latest release, which the CHANGELOG must have a section for."""
    version = release_check.citation_version(CITATION.read_text(encoding="utf-8"))
    assert version, "CITATION.cff has no version"
    return version


# --- the workflow ------------------------------------------------------------------------------------------------


# tests/project/test_workflow.py validates every workflow file, this one too, against GitHub's schema.


def test_the_workflow_runs_on_version_tags_alone() -> None:
    assert triggers(workflow()) == {"push": {"tags": ["v*"]}}


def test_only_the_publish_job_gets_a_token_and_only_the_github_release_may_write() -> None:
    doc = workflow()
    assert doc["permissions"] == {"contents": "read"}
    granted = {name: job.get("permissions") for name, job in doc["jobs"].items()}
    assert granted.pop("publish") == {"id-token": "write"}
    writers = {name: p for name, p in granted.items() if p is not None}
    assert writers in ({}, {"github-release": {"contents": "write"}}), writers
    for name, job in doc["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int), f"{name} has no timeout"


def test_the_publish_job_uses_trusted_publishing_and_no_secret() -> None:
    doc = workflow()
    publish = doc["jobs"]["publish"]
    assert publish["needs"] in ("build", ["build"])
    environment = publish["environment"]
    assert (environment["name"] if isinstance(environment, dict) else environment) == "pypi"
    (step,) = [s for s in publish["steps"] if s.get("uses", "").startswith("pypa/gh-action-pypi-publish@")]
    assert step["uses"].partition("@")[0] == PUBLISH_ACTION
    # Trusted publishing is the action's way when it is handed no password: a token here would bypass it.
    assert not {"password", "user", "repository-url"} & set(step.get("with") or {})
    assert "secrets." not in WORKFLOW.read_text(encoding="utf-8"), "the release needs no secret"
    # It publishes exactly the build job's artifact, from where the action reads (dist/).
    (download,) = [s for s in publish["steps"] if s.get("uses", "").startswith("actions/download-artifact@")]
    (upload,) = [
        s["with"]
        for s in doc["jobs"]["build"]["steps"]
        if s.get("uses", "").startswith("actions/upload-artifact@") and s["with"]["name"] == download["with"]["name"]
    ]
    assert download["with"]["path"].rstrip("/") == upload["path"].rstrip("/") == "dist"


def test_the_build_job_runs_the_release_session_on_the_tag_with_the_whole_history() -> None:
    build = workflow()["jobs"]["build"]
    (checkout,) = [s for s in build["steps"] if s.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"]["fetch-depth"] == 0, "setuptools-scm needs the tags: no shallow clone"
    command = _release_step(build)
    assert re.search(r"\bnox -s release -- .*--tag \"\$GITHUB_REF_NAME\"", command), command


def _release_step(build: dict[str, Any]) -> str:
    (step,) = [s for s in build["steps"] if s.get("id") == "release"]
    return str(step["run"])


def test_the_release_session_is_registered_with_a_docstring(noxfile: ModuleType) -> None:
    import nox.registry

    session = nox.registry.get()["release"]
    assert session.__doc__ and "--tag" in session.__doc__
    assert "release" not in noxfile.nox.options.sessions, "a bare `nox` must not build and install a release"


# --- CITATION.cff and the CHANGELOG -------------------------------------------------------------------------------


@needs_schema
def test_the_citation_file_validates_and_names_the_project() -> None:
    result = check_schema(CITATION, "vendor.citation-file-format")
    assert result.returncode == 0, result.stdout + result.stderr
    citation = yaml.safe_load(CITATION.read_text(encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0"
    assert citation["authors"] == [{"name": "The looplab authors"}]
    assert citation["repository-code"] == "https://github.com/looplab-dev/looplab"
    assert citation["license"] == "MIT"
    # How to cite a measurement: the versions and the date it names, and where they are kept.
    for named in ("looplab version", "framework version", "date", "docs/iteration-caps.md", "history/"):
        assert named in " ".join(citation["message"].split()), named


def test_the_changelog_has_the_sections_a_release_reads() -> None:
    text = CHANGELOG.read_text(encoding="utf-8")
    assert re.search(r"^## \[Unreleased\]$", text, re.M)
    version = _released_version()
    section = release_check.changelog_section(text, version)
    assert section and "### Added" in section, f"CHANGELOG.md has no section for {version}"
    assert re.search(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M), "a dated heading"
    assert "[Unreleased]:" not in section and not re.search(r"^## ", section, re.M), "the section runs past its end"
    assert release_check.changelog_section(text, "999.0.0") is None


def test_the_tree_is_releasable_as_the_cited_version_and_no_other() -> None:
    changelog, citation = CHANGELOG.read_text(encoding="utf-8"), CITATION.read_text(encoding="utf-8")
    version = _released_version()
    tag = f"v{version}"
    assert release_check.tag_problems(tag, changelog, citation) == []
    assert release_check.tag_problems(tag, changelog, citation, built=version) == []
    # A build of another commit than the tag's: only the version differs, and that alone fails.
    (built,) = release_check.tag_problems(tag, changelog, citation, built=f"{version}.post1.dev3+g1a2b3c4")
    assert "the build is looplab" in built
    # A tag the CHANGELOG and CITATION.cff do not name.
    other = release_check.tag_problems("v999.0.0", changelog, citation, built="999.0.0")
    assert len(other) == 2 and "CHANGELOG.md" in other[0] and "CITATION.cff" in other[1]


@pytest.mark.parametrize(
    ("tag", "why"),
    [
        ("0.1.0", "is `v` and a version"),
        ("release-0.1.0", "is `v` and a version"),
        ("vnext", "does not name a version"),
        ("v01.0", "v1.0 is"),
        ("v0.1.0+local", "v0.1.0 is"),
    ],
)
def test_a_tag_that_is_not_v_and_a_version_is_refused(tag: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        release_check.tag_version(tag)
    assert release_check.tag_version("v0.1.0") == "0.1.0" and release_check.tag_version("refs/tags/v1.2rc1") == "1.2rc1"


def test_citation_version_reads_quoted_and_bare_values() -> None:
    assert release_check.citation_version('cff-version: 1.2.0\nversion: "0.2.0"\n') == "0.2.0"
    assert release_check.citation_version("version: 0.2.0  # the latest\n") == "0.2.0"
    assert release_check.citation_version("cff-version: 1.2.0\n") is None


# --- the release check's parts, without a build -----------------------------------------------------------------


def test_the_expected_wheel_holds_what_looplab_reads_at_run_time() -> None:
    expected, stale = release_check.wheel_expected(ROOT)
    assert stale == []
    wanted = {
        "TypeScript programs": r"looplab/adapters/runners/ts/[^/]+\.mjs",
        "their package.json": r"looplab/adapters/runners/ts/package\.json",
        "their lockfile": r"looplab/adapters/runners/ts/package-lock\.json",
        "the price table": r"looplab/adapters/contract/prices\.json",
        "report templates": r"looplab/views/templates/[^/]+",
        "the built-in suite's cases": r"looplab/scenarios/invoice_discount/cases/[^/]+\.toml",
        "the investigator's prompt": r"looplab/scenarios/system_prompt\.txt",
        "the code reader's prompt": r"looplab/scenarios/code_reader_prompt\.txt",
        "the fixture repo": r"looplab/scenarios/invoice_discount/repo/.+\.py",
        "a dotfile of an overlay": r"looplab/scenarios/invoice_discount/variants/snoop/\.env",
        "py.typed": r"looplab/py\.typed",
        "the modules": r"looplab/adapters/contract/limits\.py",
    }
    for what, pattern in wanted.items():
        assert any(re.fullmatch(pattern, name) for name in expected), f"the wheel check does not ask for {what}"
    assert not [n for n in expected if "__pycache__" in n or n.endswith(".pyc") or "node_modules" in n]
    assert not [n for n in expected if n.startswith(("tests/", "looplab/tests/"))]


def test_the_contents_check_names_what_a_wheel_lacks_or_must_not_hold() -> None:
    expected, _ = release_check.wheel_expected(ROOT)
    dist_info = "looplab-0.1.0.dist-info"
    right = {*expected, f"{dist_info}/METADATA", f"{dist_info}/RECORD", "looplab/"}
    assert release_check.wheel_problems(right, expected) == []

    (missing,) = release_check.wheel_problems(right - {"looplab/adapters/contract/prices.json"}, expected)
    assert "lacks 1 files" in missing and "prices.json" in missing
    for unwanted in (
        "looplab/adapters/__pycache__/registry.cpython-311.pyc",
        "looplab/adapters/runners/ts/node_modules/ai/package.json",
        "looplab/tests/measure/test_release.py",
    ):
        (problem,) = release_check.wheel_problems(right | {unwanted}, expected)
        assert unwanted in problem, problem
    (foreign,) = release_check.wheel_problems(right | {"adapters/__init__.py"}, expected)
    assert "more than `looplab`" in foreign
    (glob_,) = release_check.wheel_problems(right, expected, ["looplab.views: templates/*"])
    assert "templates/*" in glob_
    assert release_check.sdist_problems(["looplab-0.1.0/PKG-INFO", "looplab-0.1.0/tests/measure/test_release.py"]) == []
    assert release_check.sdist_problems(["looplab-0.1.0/adapters/runners/ts/node_modules/x.js"])


def test_a_glob_that_matches_nothing_is_reported(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pkg" / "data.json").write_text("{}", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools]\npackages = ["pkg"]\n[tool.setuptools.package-data]\npkg = ["data.json", "gone/*"]\n',
        encoding="utf-8",
    )
    expected, stale = release_check.wheel_expected(tmp_path)  # not a git repository: the files on disk
    assert expected == {"pkg/__init__.py", "pkg/data.json"}
    assert stale == ["pkg: gone/*"]


def test_the_run_check_needs_one_passed_cell_recorded_by_the_version_built() -> None:
    table = "runner      vip-compound  tokens  wall s\nhandrolled  answer 5       4,996     0.6\n"
    cell = {"runner": "handrolled", "case": "vip-compound", "passed": True, "stop_reason": "final_answer"}
    results = {"cells": [cell], "environments": {"e1": {"looplab": "0.1.0"}}}
    assert release_check.run_problems(table, results, "0.1.0") == []
    assert release_check.run_problems(table.replace("answer 5", "answer 5 ✗"), results, "0.1.0")
    assert release_check.run_problems(table.replace("answer 5", "cap 12"), results, "0.1.0")
    failed = {**results, "cells": [{**cell, "passed": False, "stop_reason": "max_steps"}]}
    assert release_check.run_problems(table, failed, "0.1.0")
    assert release_check.run_problems(table, results, "0.2.0"), "a run by another looplab than the one built"


def test_the_sessions_arguments() -> None:
    options = release_check.release_options(["--tag", "v0.1.0", "--notes", "notes.md"])
    assert (options.tag, options.dist, options.notes) == ("v0.1.0", "dist", "notes.md")
    with pytest.raises(SystemExit):
        release_check.release_options(["--notes", "notes.md"])  # the notes are the tag's section: no tag, no notes


# --- the release check, end to end -------------------------------------------------------------------------------


def _git(*args: str | Path, cwd: Path) -> str:
    done = subprocess.run(
        ["git", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT, check=False
    )
    assert done.returncode == 0, f"git {args}: {done.stderr}"
    return done.stdout


def _tagged_clone(tmp_path: Path, tag: str) -> Path:
    """A clone of this repository with the working tree as it is now committed and tagged `tag`: what the tag push
    hands the workflow (a scratch repository; this one is left as it is)."""
    clone = tmp_path / "looplab"
    _git("clone", "--quiet", ROOT, clone, cwd=tmp_path)
    changed = _git("ls-files", "-z", "--modified", "--others", "--exclude-standard", cwd=ROOT).split("\0")
    for path in filter(None, changed):
        if (ROOT / path).is_file():
            (clone / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / path, clone / path)
    for path in filter(None, _git("ls-files", "-z", "--deleted", cwd=ROOT).split("\0")):
        (clone / path).unlink(missing_ok=True)
    who = ["-c", "user.name=looplab tests", "-c", "user.email=tests@looplab.invalid", "-c", "commit.gpgsign=false"]
    _git("add", "--all", cwd=clone)
    _git(*who, "commit", "--quiet", "--allow-empty", "--no-verify", "-m", "the tree under test", cwd=clone)
    _git(*who, "-c", "tag.gpgsign=false", "tag", "--force", "--annotate", "-m", tag, tag, cwd=clone)
    return clone


def _run_step(script: str, clone: Path, tag: str) -> subprocess.CompletedProcess[str]:
    """The `run:` step as GitHub's runner runs it (`bash -e`), with the tag push's GITHUB_REF_NAME, this
    interpreter's bin first on PATH (its nox), in a process group ended whole on a timeout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(GITHUB_REF_NAME=tag, PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    process = start(script, clone, env, clone.parent)
    output = finish(process, "the release step", timeout=RELEASE_TIMEOUT, check=False)
    return subprocess.CompletedProcess(script, process.returncode, output, "")


@pytest.mark.full
@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and a checkout")
def test_the_build_jobs_release_step_builds_checks_and_runs_the_tagged_release(tmp_path: Path) -> None:
    version = _released_version()
    tag = f"v{version}"
    clone = _tagged_clone(tmp_path, tag)
    build = workflow()["jobs"]["build"]
    done = _run_step(_release_step(build), clone, tag)
    assert done.returncode == 0, done.stdout[-6000:]
    assert f"looplab {version} is releasable as {tag}" in done.stdout
    assert "the installed wheel ran vip-compound on handrolled" in done.stdout

    # What the upload steps carry: exactly the wheel and sdist of the tag's version, and the release notes.
    uploads = [s["with"] for s in build["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    dist = clone / next(u["path"] for u in uploads if u["name"] == "dist")
    built = sorted(p.name for p in dist.iterdir())
    assert built == [f"looplab-{version}-py3-none-any.whl", f"looplab-{version}.tar.gz"]
    notes = clone / next(u["path"] for u in uploads if u["name"] == "release-notes")
    changelog = (clone / "CHANGELOG.md").read_text(encoding="utf-8")
    assert notes.read_text(encoding="utf-8").strip() == release_check.changelog_section(changelog, version)

    # The contents check that passed on this wheel fails on the same wheel less one file it needs.
    wheel = dist / f"looplab-{version}-py3-none-any.whl"
    expected, stale = release_check.wheel_expected(clone)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert release_check.wheel_problems(names, expected, stale) == []
    doctored = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(doctored, "w") as copy:
        for item in source.infolist():
            if item.filename != "looplab/views/templates/report.html.j2":
                copy.writestr(item, source.read(item))
    with zipfile.ZipFile(doctored) as zf:
        (problem,) = release_check.wheel_problems(zf.namelist(), expected, stale)
    assert "report.html.j2" in problem
    assert release_check.wheel_version(wheel) == version

    # The same step on a tag this tree does not name fails before building, saying why.
    refused = _run_step(_release_step(build), clone, "v999.0.0")
    assert refused.returncode != 0
    assert "CHANGELOG.md has no `## [999.0.0]` section" in refused.stdout
    assert "CITATION.cff's version is" in refused.stdout
