"""`.github/workflows/compare.yml`, run here as far as it can be.

GitHub Actions cannot run here, so the tests read the workflow file itself (never a copy of its commands) and run
what its jobs run: the eval job's step once per shard of its matrix, in parallel processes each in a folder of its
own (one machine each), the artifacts carried as the upload and download steps name them, and the report job's
merge step on them; the merged document must equal one unsharded `looplab eval` cell for cell, minus timings.
The eval is narrowed through `LOOPLAB_EVAL_ARGS`, the variable the workflow's eval job passes its
`workflow_dispatch` input `eval-args` through: what runs is a manual run with that input, without provider keys.
The adapter matrix is checked against the noxfile's sessions, and the YAML against GitHub's workflow schema.

Every workflow (the release's too) is read for what its jobs may do with a token: every action pinned to a full
commit with its version named, no checkout that leaves a token in `.git/config`, and no job that can write
(contents, issues, pages, an OIDC token) installing or running anything but the actions it pins, git and gh. These
read the files only and run in the fast tier; the ones that run the workflow's commands are the full tier's.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.paths import REPO
from tests.project.test_nox_sessions import load_noxfile
from tests.run.test_shards_and_resume import minus_timings

ROOT = REPO
WORKFLOW = ROOT / ".github" / "workflows" / "compare.yml"
#: Every workflow of the repository.
WORKFLOWS = sorted(WORKFLOW.parent.glob("*.yml"))
#: The interpreter's own bin folder (the .venv's, run as .venv/bin/pytest): its `looplab` and `nox` go first on PATH.
BIN = Path(sys.executable).parent
#: A small matrix that still splits into two non-empty shards: two Python runners (and a Node one where Node is),
#: two cases, two repeats; one worker each, so three evals at once fit two cores.
NARROW = "--runner handrolled --runner langgraph --case vip-compound --case tight-budget --repeat 2 --jobs 1"
if shutil.which("node") and shutil.which("npm"):
    NARROW += " --runner ts_ai_sdk"
#: Seconds any one command of the workflow may take here before it is killed and the test fails.
TIMEOUT = 300
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def triggers(doc: dict[str, Any]) -> dict[str, Any]:
    """The `on:` block (YAML 1.1 reads a bare `on` key as True)."""
    return doc.get("on", doc.get(True))


def step(job: dict[str, Any], step_id: str) -> dict[str, Any]:
    found = [s for s in job["steps"] if s.get("id") == step_id]
    assert len(found) == 1, f"the job has no single step with id {step_id!r}"
    return found[0]


def uses(job: dict[str, Any], action: str) -> dict[str, Any]:
    found = [s for s in job["steps"] if s.get("uses", "").split("@")[0] == action]
    assert len(found) == 1, f"the job has no single {action} step"
    return found[0]


def expand(text: str, values: dict[str, Any]) -> str:
    """`text` with each `${{ expr }}` replaced by its value; an expression the test does not know fails it."""

    def value(match: re.Match[str]) -> str:
        expr = match[1]
        if expr in values:
            return str(values[expr])
        if "secrets." in expr:  # no provider key is configured here: the scripted model needs none
            return ""
        raise AssertionError(f"the test does not know what ${{{{ {expr} }}}} is on GitHub: teach it")

    return EXPRESSION.sub(value, text)


def environment(job: dict[str, Any], values: dict[str, Any]) -> dict[str, str]:
    """This process's environment with the job's `env:` evaluated, and this interpreter's bin first on PATH."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.update({name: expand(str(text), values) for name, text in job.get("env", {}).items()})
    return env


def start(script: str, cwd: Path, env: dict[str, str], scratch: Path) -> subprocess.Popen[str]:
    """A `run:` step as the runner runs one without `shell:` (`bash -e FILE`, the file kept in `scratch`), in its
    own process group."""
    path = scratch / f"step-{os.urandom(4).hex()}.sh"
    path.write_text(script, encoding="utf-8")
    return subprocess.Popen(
        ["bash", "-e", str(path)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def finish(process: subprocess.Popen[str], what: str, timeout: float = TIMEOUT, check: bool = True) -> str:
    """Waits at most `timeout` seconds (the whole process group ended past it); returns the output, and with
    `check` fails with it unless the step exited 0."""
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"{what} ran longer than {timeout} s:\n{output[-3000:]}")
    assert not check or process.returncode == 0, f"{what} exited {process.returncode}:\n{output[-3000:]}"
    return output


def noxfile() -> tuple[Any, set[str]]:
    """noxfile.py as a module, and the names of the sessions it registers."""
    import nox.registry

    module = load_noxfile()
    return module, set(nox.registry.get())


@pytest.mark.full
def test_two_shards_run_and_merged_as_the_workflow_does_equal_one_unsharded_eval(tmp_path: Path) -> None:
    jobs = workflow()["jobs"]
    ev, report = jobs["eval"], jobs["report"]
    shards = ev["strategy"]["matrix"]["shard"]
    assert len(shards) >= 2, "the eval job must shard the matrix"
    inputs = {"inputs.eval-args": NARROW, "github.event_name": "workflow_dispatch"}

    # The eval job, one machine per shard, all at once; and the reference, one unsharded eval, beside them.
    running: dict[Any, tuple[subprocess.Popen[str], Path, dict[str, Any]]] = {}
    for shard in shards:
        values = {**inputs, "matrix.shard": shard, "strategy.job-total": len(shards)}
        machine = tmp_path / f"machine-{shard}"
        machine.mkdir()
        running[shard] = (
            start(expand(step(ev, "eval")["run"], values), machine, environment(ev, values), tmp_path),
            machine,
            values,
        )
    whole = tmp_path / "whole.json"
    reference = start(
        f"looplab eval {NARROW} --json {shlex.quote(str(whole))}\n", tmp_path, environment(ev, inputs), tmp_path
    )

    # Each shard's artifact, as its upload step names it and finds it; the report job downloads them all.
    download = uses(report, "actions/download-artifact")["with"]
    assert download.get("merge-multiple") is True, "the merge step expects the shards' files in one folder"
    desk = tmp_path / "report-job"
    into = desk / download["path"]
    into.mkdir(parents=True)
    for shard, (process, machine, values) in running.items():
        finish(process, f"eval shard {shard}")
        upload = expand(json.dumps(uses(ev, "actions/upload-artifact")["with"]), values)
        artifact = json.loads(upload)
        assert fnmatch.fnmatch(artifact["name"], download["pattern"]), "the report job would not download it"
        produced = machine / artifact["path"]
        assert produced.is_file(), f"shard {shard} wrote no {artifact['path']}"
        assert json.loads(produced.read_text(encoding="utf-8"))["cells"], f"shard {shard} ran no cell: proves nothing"
        shutil.copy(produced, into / produced.name)
    finish(reference, "the unsharded eval")

    finish(start(expand(step(report, "merge")["run"], {}), desk, environment(report, {}), tmp_path), "the merge step")
    kept = [line.strip() for line in uses(report, "actions/upload-artifact")["with"]["path"].splitlines()]
    assert kept and all((desk / name).is_file() for name in kept), f"the report job uploads {kept}: not all written"

    merged = json.loads((desk / "all.json").read_text(encoding="utf-8"))
    expected = json.loads(whole.read_text(encoding="utf-8"))
    assert len(merged["cells"]) == len(expected["cells"]) > len(shards)
    assert minus_timings(merged) == minus_timings(expected)
    assert "<html" in (desk / "report.html").read_text(encoding="utf-8").lower()


@pytest.mark.full
def test_the_adapter_matrix_is_the_noxfile_adapter_sessions(tmp_path: Path) -> None:
    """The sessions job's step, run here, lists exactly the noxfile's version sessions, each with the Node.js it
    needs: every runner's oldest and latest, and for a runner in node its oldest and each npm line's latest."""
    if shutil.which("jq") is None:
        pytest.skip("jq is not on PATH (GitHub's ubuntu runners have it): the sessions step pipes nox into jq")
    doc = workflow()
    jobs = doc["jobs"]
    out = tmp_path / "github_output"
    env = {**environment(jobs["sessions"], {}), **doc["env"], "GITHUB_OUTPUT": str(out)}
    finish(start(expand(step(jobs["sessions"], "list")["run"], {}), ROOT, env, tmp_path), "the sessions step")
    (line,) = [x for x in out.read_text(encoding="utf-8").splitlines() if x.startswith("adapters=")]
    listed = json.loads(line.removeprefix("adapters="))

    module, sessions = noxfile()
    default_node = str(doc["env"]["NODE_VERSION"])
    assert sorted((m["runner"], m["version"], m["node"]) for m in listed) == sorted(
        (d.name, suffix, str(node or default_node))
        for d in module.RUNNERS
        for suffix, _, node in module.version_sessions(d)
    )
    # Both majors of the AI SDK, each on the Node.js its engines need.
    assert {(m["version"], m["node"]) for m in listed if m["runner"] == "ts_ai_sdk"} >= {
        ("latest-ai6", "20"),
        ("latest-ai7", "22"),
    }
    # Each matrix entry's step runs one session nox knows on the Node.js the entry names, and the caps job runs
    # the caps session.
    adapter = jobs["adapter"]
    (command,) = [s["run"] for s in adapter["steps"] if "nox -s" in s.get("run", "")]
    for entry in listed:
        values = {f"matrix.{k}": v for k, v in entry.items()}
        argv = shlex.split(expand(command, values))
        assert argv[:2] == ["nox", "-s"] and argv[2] in sessions, argv
        assert expand(str(uses(adapter, "actions/setup-node")["with"]["node-version"]), values) == entry["node"]
    assert shlex.split(step(jobs["caps"], "caps")["run"])[:3] == ["nox", "-s", "caps"] and "caps" in sessions


#: The run's URL on GitHub, as the keep job names it to the drift text.
RUN_URL = "https://github.com/looplab-dev/looplab/actions/runs/7"
#: What the history jobs' expressions are on a scheduled run on GitHub.
ON_GITHUB = {
    "github.server_url": "https://github.com",
    "github.repository": "looplab-dev/looplab",
    "github.run_id": 7,
    "github.token": "not-a-token",
}
#: A stand-in for the GitHub CLI: logs each call; `issue list` answers the open issue's number in GH_OPEN_ISSUE.
FAKE_GH = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$GH_LOG"
if [ "$1 $2" = "issue list" ]; then printf '%s' "${GH_OPEN_ISSUE:-}"; fi
"""


def run_step(job: dict[str, Any], step_id: str, cwd: Path, scratch: Path, **extra: str) -> str:
    """One `run:` step of `job`, its own `env:` evaluated over the job's, in `cwd`."""
    found = step(job, step_id)
    env = environment(job, ON_GITHUB)
    env.update({name: expand(str(text), ON_GITHUB) for name, text in found.get("env", {}).items()})
    return finish(start(expand(found["run"], ON_GITHUB), cwd, {**env, **extra}, scratch), f"the {step_id} step")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


@pytest.mark.full
def test_the_history_jobs_keep_the_runs_measurements_commit_them_and_file_the_drift_as_the_workflow_does(
    tmp_path: Path,
) -> None:
    """The caps job's measurement and the report job's document, downloaded as the keep job names them, kept by its
    record step and uploaded; then the history job, which alone may write, takes the kept files and the issue texts
    from that upload, commits and pushes them (its commit step) and files the drift through a stand-in for `gh` (its
    drift step): created when no issue is open for the runner, commented on when one is."""
    from looplab.records import history

    jobs = workflow()["jobs"]
    keeper, writer = jobs["keep"], jobs["history"]
    assert set(keeper["needs"]) == {"caps", "report"} and "permissions" not in keeper  # the workflow's: read
    assert writer["needs"] == "keep" and writer["permissions"] == {"contents": "write", "issues": "write"}

    # The checkout both jobs make: the kept data as committed, with handrolled's newest measurement made a release
    # older, one whose vip-compound took a model call more. The measurement made below is then the next release.
    remote, origin = tmp_path / "origin.git", tmp_path / "origin"
    shutil.copytree(ROOT / "history", origin / "history")
    [(path, newest)] = [
        (p, history.VersionRecord.model_validate_json(p.read_text(encoding="utf-8")))
        for p in sorted((origin / "history" / "handrolled").glob("*.json"))[-1:]
    ]
    older = newest.model_copy(update={"version": "anthropic 0.0.1"}, deep=True)
    older.cases["vip-compound"].model_calls = (older.cases["vip-compound"].model_calls or 0) + 1
    path.unlink()
    (path.parent / history.file_name(older.version)).write_text(history.to_json(older), encoding="utf-8")
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(tmp_path, "init", "-q", "-b", "main", str(origin))
    git(origin, "add", "-A")
    git(origin, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "kept")
    git(origin, "remote", "add", "origin", str(remote))
    git(origin, "push", "-q", "-u", "origin", "main")
    desk, writing = tmp_path / "keep-job", tmp_path / "history-job"
    for checkout in (desk, writing):
        git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(checkout))

    # The artifacts: the caps session's command with the caps step's options, and one eval as the report's document.
    downloads = [s["with"] for s in keeper["steps"] if s.get("uses", "").startswith("actions/download-artifact@")]
    assert {d["name"] for d in downloads} == {"caps", "report"} and len({d["path"] for d in downloads}) == 1
    into = desk / downloads[0]["path"]
    into.mkdir()
    caps_args = shlex.split(step(jobs["caps"], "caps")["run"])
    options = caps_args[caps_args.index("--") + 1 :]
    upload = uses(jobs["caps"], "actions/upload-artifact")["with"]
    assert upload["name"] == "caps" and options == ["--measured", upload["path"]]
    finish(
        start(
            f"looplab caps --check --docs {ROOT / 'docs'} --runner handrolled --measured {into / upload['path']}\n",
            desk,
            environment(jobs["caps"], {}),
            tmp_path,
        ),
        "the caps session's command",
    )
    assert "all.json" in uses(jobs["report"], "actions/upload-artifact")["with"]["path"]
    finish(
        start(
            f"looplab eval --runner handrolled --case vip-compound --json {into / 'all.json'}\n",
            desk,
            environment(jobs["report"], {}),
            tmp_path,
        ),
        "an eval",
    )

    out = run_step(keeper, "record", desk, tmp_path)
    assert "new version: handrolled anthropic" in out and "(after anthropic 0.0.1)" in out
    [drift] = (desk / "drift").iterdir()
    text = drift.read_text(encoding="utf-8")
    assert "| case vip-compound | model\\_calls |" in text and RUN_URL in text

    # The keep job's upload, as the history job downloads it: each path named, under the folder both share.
    kept = uses(keeper, "actions/upload-artifact")["with"]
    taken = uses(writer, "actions/download-artifact")["with"]
    assert kept["name"] == taken["name"] and kept["if-no-files-found"] == "error"
    for named in kept["path"].split():
        shutil.copytree(desk / named, writing / taken["path"] / named)
    # Anything else in the upload stays out of the commit and the issues: it came from a job that ran the frameworks.
    (writing / taken["path"] / "history" / "handrolled" / "notes.txt").write_text("not a kept file", encoding="utf-8")

    run_step(writer, "take", writing, tmp_path)
    # A push to main while the jobs ran: the commit step rebases onto it, as the bot, with no git identity configured.
    (origin / "README.md").write_text("pushed meanwhile\n", encoding="utf-8")
    git(origin, "add", "README.md")
    git(origin, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "meanwhile")
    git(origin, "push", "-q")
    home = tmp_path / "home"
    home.mkdir()
    bare = {"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    run_step(writer, "commit", writing, tmp_path, **bare)
    pushed = git(remote, "log", "--name-only", "--format=%s %an", "-2", "main")
    assert pushed.startswith("Kept measurements of ") and f"history/handrolled/{path.name}" in pushed
    assert "github-actions[bot]" in pushed.splitlines()[0] and "meanwhile" in pushed
    assert "notes.txt" not in pushed and "kept/" not in pushed
    assert "nothing new measured" in run_step(writer, "commit", writing, tmp_path, **bare)  # again: nothing new
    assert "extraheader" not in (writing / ".git" / "config").read_text(encoding="utf-8")

    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "gh").write_text(FAKE_GH, encoding="utf-8")
    (tools / "gh").chmod(0o755)
    path_first = f"{tools}{os.pathsep}{environment(writer, {})['PATH']}"
    log = tmp_path / "gh.log"
    title = text.splitlines()[0]
    run_step(writer, "drift", writing, tmp_path, PATH=path_first, GH_LOG=str(log))
    assert log.read_text(encoding="utf-8").splitlines()[-1] == f"issue create --title {title} --body-file body.md"
    assert (writing / "body.md").read_text(encoding="utf-8") == text.split("\n", 2)[2]
    run_step(writer, "drift", writing, tmp_path, PATH=path_first, GH_LOG=str(log), GH_OPEN_ISSUE="12")
    assert log.read_text(encoding="utf-8").splitlines()[-1] == "issue comment 12 --body-file body.md"


def test_the_write_token_reaches_only_the_steps_that_push_and_file_issues() -> None:
    """The history job holds the workflow's only write token: no checkout keeps it in `.git/config`, it installs
    nothing, and only its commit step (git) and drift step (gh) see the token, each in its own `env:`."""
    job = workflow()["jobs"]["history"]
    assert "env" not in job
    holding = [s.get("id") or s.get("uses") for s in job["steps"] if "github.token" in json.dumps(s)]
    assert holding == ["commit", "drift"]
    assert all("github.token" in json.dumps(step(job, name).get("env", {})) for name in holding)
    assert "persist-credentials" in uses(job, "actions/checkout")["with"]


def test_the_site_job_builds_the_kept_data_with_the_runs_report_and_the_deploy_job_publishes_it() -> None:
    jobs = workflow()["jobs"]
    site, deploy = jobs["site"], jobs["deploy"]
    assert step(site, "build")["env"]["LOOPLAB_SITE_REPORT"].startswith(
        uses(site, "actions/download-artifact")["with"]["path"]
    )
    assert shlex.split(step(site, "build")["run"]) == ["mkdocs", "build", "--strict", "--site-dir", "site"]
    assert uses(site, "actions/upload-pages-artifact")["with"]["path"] == "site"
    assert deploy["needs"] == "site" and deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    # tests/project/test_docs.py builds the site as this step does, the report given, and reads the kept data's pages.


def test_triggers_and_secrets() -> None:
    doc = workflow()
    on = triggers(doc)
    assert {"workflow_dispatch", "pull_request", "push", "schedule"} <= set(on)
    assert all(len(entry["cron"].split()) == 5 for entry in on["schedule"])
    for name, job in doc["jobs"].items():
        # A secret reaches a job only on a manual run: pushes, pull requests and the schedule need none.
        for text in map(str, job.get("env", {}).values()):
            if "secrets." in text:
                assert text.startswith("${{ github.event_name == 'workflow_dispatch' && secrets."), f"{name}: {text}"
        assert "secrets." not in json.dumps(job["steps"]), f"{name}: a step reads a secret"


#: A `uses:` line: the action's reference, and the comment after it.
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>\S+)(?:\s+#\s*(?P<comment>.*?))?\s*$")
#: An action pinned to a full commit: `owner/repo[/path]@<40 hex>`.
PINNED = re.compile(r"[\w.-]+/[\w.-]+(?:/[\w./-]+)?@[0-9a-f]{40}")
#: The version a pin's comment names: the release tag it was taken from.
VERSION_TAG = re.compile(r"v\d+(?:\.\d+)*")
#: What installs or runs packages from a registry (or from the checkout, which is the same code).
INSTALLERS = re.compile(r"\b(?:pip3?|pipx|uvx?|nox|poetry|npm|npx|pnpm|yarn|bun|conda|gem|cargo|looplab|mkdocs)\b")
#: Permissions that let a job change something: the repository, its issues, its site, an OIDC token for PyPI.
WRITES = {"write"}


def uses_lines(path: Path) -> list[re.Match[str]]:
    """Every `uses:` line of a workflow, as written (the YAML parser drops the comments)."""
    return [m for line in path.read_text(encoding="utf-8").splitlines() if (m := USES.match(line))]


def declared_uses(path: Path) -> list[str]:
    """Every `uses:` the workflow declares: its steps' and its jobs' (reusable workflows)."""
    jobs = yaml.safe_load(path.read_text(encoding="utf-8"))["jobs"].values()
    return [s["uses"] for job in jobs for s in job.get("steps", []) if "uses" in s] + [
        job["uses"] for job in jobs if "uses" in job
    ]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_full_commit_with_its_version_named(path: Path) -> None:
    """A tag or a branch (`@v4`, `@release/v1`) is whatever its owner points it at next; a commit is what was
    reviewed. A job's own folder (`./`) and a container image (`docker://`) are not actions fetched by tag."""
    lines = uses_lines(path)
    written = sorted(m["ref"].strip("'\"") for m in lines)
    assert written == sorted(declared_uses(path)), "a uses: that is not on a line of its own"
    assert lines, f"{path.name} uses no action: nothing checked"
    for found in lines:
        ref = found["ref"].strip("'\"")
        if ref.startswith(("./", "docker://")):
            continue
        assert PINNED.fullmatch(ref), f"{path.name}: {ref} is not pinned to a full commit SHA"
        assert found["comment"] and VERSION_TAG.fullmatch(found["comment"]), f"{path.name}: {ref} names no version"


def test_an_action_is_pinned_to_one_commit_and_version_in_every_workflow() -> None:
    pins: dict[str, set[tuple[str, str]]] = {}
    for path in WORKFLOWS:
        for found in uses_lines(path):
            action, _, commit = found["ref"].strip("'\"").partition("@")
            pins.setdefault(action, set()).add((commit, found["comment"] or ""))
    assert {a: p for a, p in pins.items() if len(p) > 1} == {}


def job_permissions(doc: dict[str, Any], job: dict[str, Any]) -> dict[str, str]:
    """A job's permissions: its own, else the workflow's."""
    granted = job.get("permissions", doc.get("permissions", {}))
    return granted if isinstance(granted, dict) else {"all": granted}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_checkout_keeps_a_token_and_no_job_that_can_write_installs_anything(path: Path) -> None:
    """Jobs that install unpinned packages run code this repository did not review: no checkout leaves its token
    in `.git/config` for them (`persist-credentials: false`), and a job that can write installs and runs nothing
    but pinned actions, git and gh (a write job's commands read the files a read-only job computed)."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert set(job_permissions(doc, {}).values()) <= {"read", "none"}, "the workflow's default may write"
    for name, job in doc["jobs"].items():
        for s in job.get("steps", []):
            if s.get("uses", "").startswith("actions/checkout@"):
                assert s.get("with", {}).get("persist-credentials") is False, f"{path.name}: {name} keeps a token"
        if not WRITES & set(job_permissions(doc, job).values()):
            continue
        for s in job.get("steps", []):
            commands = "\n".join(line for line in s.get("run", "").splitlines() if not line.lstrip().startswith("#"))
            assert not INSTALLERS.search(commands), f"{path.name}: {name} can write and runs {s['run']!r}"
            assert not s.get("uses", "").startswith(("actions/setup-", "./")), f"{path.name}: {name}: {s['uses']}"


needs_schema = pytest.mark.skipif(
    importlib.util.find_spec("check_jsonschema") is None,
    reason="check-jsonschema is not installed (the dev extra has it): it holds GitHub's workflow schema offline",
)


def check_schema(path: Path, schema: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


@pytest.mark.full
@needs_schema
@pytest.mark.parametrize("schema", ["vendor.github-workflows", "custom.github-workflows-require-timeout"])
@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_workflow_validates_against_githubs_schema(path: Path, schema: str, tmp_path: Path) -> None:
    """SchemaStore's github-workflow schema, vendored in check-jsonschema; the second requires every job's timeout."""
    result = check_schema(path, schema)
    assert result.returncode == 0, result.stdout + result.stderr
    # The same check on a workflow that has lost what the schema asks for fails: it is not a check that always passes.
    broken = tmp_path / "broken.yml"
    key = "runs-on" if schema == "vendor.github-workflows" else "timeout-minutes"
    broken.write_text(path.read_text(encoding="utf-8").replace(f"    {key}:", f"    no-{key}:"), encoding="utf-8")
    assert check_schema(broken, schema).returncode != 0
