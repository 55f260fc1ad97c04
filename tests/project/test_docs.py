"""The README and the documentation site: they build, their links resolve, and the commands they show are real.

- `mkdocs build --strict` passes (a missing page, a broken link or anchor, an API name that no longer exists);
- every relative link in the README and under docs/ names a file that exists;
- the README stays a five-minute read;
- every `looplab ...` command shown in a bash block parses with looplab's own argument parser, and the cheap
  offline ones of the README run for real.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from looplab import cli
from looplab.adapters import registry
from looplab.records import history
from looplab.run.environments import PLACED_UNDER_LOOPLAB
from tests.paths import REPO

REPO = REPO
README = REPO / "README.md"
DOCS = REPO / "docs"
#: About 200 lines: what a newcomer reads in five minutes.
README_MAX_LINES = 200
BUILD_TIMEOUT = 300
RUN_TIMEOUT = 120
#: README commands that run offline in seconds: run for real (everything else is only parsed).
CHEAP_COMMANDS = (
    "looplab runners",
    "looplab cases",
    "looplab run --runner handrolled --json results.json",
)

BASH_BLOCK = re.compile(r"```bash\n(.*?)```", re.S)
#: A Markdown link's target: [text](target), images included.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
#: Code (fenced blocks, then inline spans), where bracket-paren text is code, not a link.
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def _pages() -> list[Path]:
    """The README and every Markdown page of the site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def _shown_commands(page: Path) -> list[str]:
    """Every `looplab ...` command of the page's bash blocks, as typed: env prefix, path and comment removed."""
    commands = []
    for block in BASH_BLOCK.findall(page.read_text(encoding="utf-8")):
        for line in block.splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # VAR=value before the command
                    words = words[1:]
                if words and words[0].removeprefix(".venv/bin/") == "looplab":
                    commands.append(shlex.join(["looplab", *words[1:]]))
    return commands


def test_the_readme_is_a_five_minute_read() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail to a page under docs/"


def test_the_readmes_installs_upgrade_pip_before_they_name_an_extra() -> None:
    # The pip `python3 -m venv` bundles with Python 3.11 (23.2.1) does not match a runner's own name with `_`
    # (`[pydantic_ai]`) to its extra: a command that installs an extra must bring a newer pip first.
    installs = [line for block in BASH_BLOCK.findall(README.read_text(encoding="utf-8")) for line in block.splitlines()]
    installs = [line for line in installs if re.search(r"pip install [^&]*\[", line)]
    assert installs, "the README shows no install command"
    for line in installs:
        upgrade = re.search(r"pip install (-U|--upgrade) pip\b", line)
        extra = re.search(r"pip install [^&]*\[", line)
        assert upgrade and extra and upgrade.start() < extra.start(), f"pip is not upgraded before the extra: {line}"


def test_the_readme_names_every_runner_that_needs_an_environment_of_its_own() -> None:
    # A team installing `[all]` must learn from the README which runners it leaves out, and no more.
    text = " ".join(README.read_text(encoding="utf-8").split())
    sentence = next((s for s in re.split(r"(?<=\.) ", text) if "environments of their own" in s), "")
    named = set(re.findall(r"`([a-z_]+)`", sentence))
    own = {name for name, info in registry.RUNNERS.items() if not info.in_all}
    assert own and named == own, f"the README names {sorted(named)}, the runners are {sorted(own)}"


def _hook():
    """docs/_hooks/kept_data.py, as MkDocs loads it."""
    spec = importlib.util.spec_from_file_location("kept_data_hook", REPO / "docs" / "_hooks" / "kept_data.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    return hook


def generated_pages() -> tuple[str, ...]:
    """The pages the site's hook writes from the kept data at each build (in docs/, but never on disk)."""
    return _hook().PAGES


def filled_pages() -> tuple[str, ...]:
    """The hand-written pages the hook fills with a part read from the kept data (the front page, the caps page)."""
    return _hook().FILLED


def test_every_relative_link_names_a_file_that_exists() -> None:
    generated = {REPO / "docs" / name for name in generated_pages()}
    broken = []
    for page in _pages():
        for target in LINK.findall(CODE.sub("", page.read_text(encoding="utf-8"))):
            path = target.split("#", 1)[0]
            if not path or re.match(r"[a-z]+:", path):  # an anchor on the same page, or a URL
                continue
            if not (page.parent / path).exists() and (page.parent / path).resolve() not in generated:
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert not broken, "links to nothing:\n" + "\n".join(broken)


def test_the_pages_show_commands_to_check() -> None:
    readme = _shown_commands(README)
    assert "looplab run" in readme and set(CHEAP_COMMANDS) <= set(readme), readme
    assert sum(len(_shown_commands(page)) for page in _pages()) > 40


@pytest.mark.parametrize("page", _pages(), ids=lambda page: str(page.relative_to(REPO)))
def test_every_command_shown_parses(page: Path) -> None:
    parser = cli._parser()
    for command in _shown_commands(page):
        try:
            parser.parse_args(shlex.split(command)[1:])
        except SystemExit as stop:  # argparse's way of refusing; its message went to stderr
            pytest.fail(f"{page.relative_to(REPO)}: `{command}` does not parse (exit {stop.code})")


@pytest.mark.parametrize("command", CHEAP_COMMANDS)
def test_the_readmes_offline_commands_run(command: str, tmp_path: Path) -> None:
    pytest.importorskip("anthropic", reason="the handrolled runner needs the [anthropic] extra")
    argv = [sys.executable, "-m", "looplab", *shlex.split(command)[1:]]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    assert done.returncode == 0, f"`{command}` exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert done.stdout.strip()
    if "--json" in command:
        assert (tmp_path / "results.json").is_file()


def build_site(source: Path, site: Path, report: Path) -> None:
    """`mkdocs build --strict` of the checkout at `source`, as the workflow's site job runs it, into `site`."""
    pytest.importorskip("mkdocs", reason="the site needs the [docs] extra: pip install -e '.[docs]'")
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or "mkdocs"
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(site)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "LOOPLAB_SITE_REPORT": str(report)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]


def test_the_site_builds_strict(tmp_path: Path) -> None:
    """As the workflow's site job builds it: the docs, the pages read off the kept data, and a run's report."""
    report = tmp_path / "report.html"
    report.write_text("<html><body>the run's report</body></html>", encoding="utf-8")
    site = tmp_path / "site"
    build_site(REPO, site, report)
    assert (site / "index.html").is_file() and (site / "iteration-caps.html").is_file()
    assert (site / "report.html").read_text(encoding="utf-8") == report.read_text(encoding="utf-8")
    assert 'href="report.html"' in (site / "latest-results.html").read_text(encoding="utf-8")
    kept = history.read(REPO / "history")
    page = (site / "history.html").read_text(encoding="utf-8")
    assert kept and all(v.version in page for versions in kept.values() for v in versions)
    assert all(f"<code>{runner}</code>" in (site / "scorecard.html").read_text(encoding="utf-8") for runner in kept)
    # The front page leads with the comparison read off the kept data: a row per runner, where they differ, the caps.
    index = (site / "index.html").read_text(encoding="utf-8")
    assert all(f"<code>{runner}</code>" in index for runner in kept)
    assert index.index("Where runners differ") < index.index("The caps at a glance") < index.index("Read on")
    api = (site / "api.html").read_text(encoding="utf-8")
    assert "run_one" in api and "Limits" in api  # the reference was read from the docstrings


@pytest.mark.full
def test_the_site_built_from_hostile_kept_data_shows_it_as_text(tmp_path: Path) -> None:
    """The whole site built by mkdocs, as the site job builds it, from kept data whose every free string is hostile
    (tests/records/test_history_safety.py renders the same pages through the hook and Python-Markdown, for any such
    data):
    no element or attribute of the pages comes from it, and each page shows it as text."""
    from tests.records.test_history_safety import PAYLOADS, Elements, hostile_record, keep

    # A checkout beside this one: the docs and the site's hooks copied, the sources linked, the kept data hostile.
    source = tmp_path / "checkout"
    source.mkdir()
    shutil.copytree(DOCS, source / "docs")
    shutil.copy(REPO / "mkdocs.yml", source / "mkdocs.yml")
    for name in ("pyproject.toml", "looplab", *PLACED_UNDER_LOOPLAB):
        (source / name).symlink_to(REPO / name)
    pools = {"1.0": list(PAYLOADS), "2.0": list(reversed(PAYLOADS))}  # every field moves from one to the next
    keep(
        source / "history",
        [hostile_record(r, v, "0.1.0", p) for r in ("langgraph", "pydantic_ai") for v, p in pools.items()],
    )
    report = tmp_path / "report.html"
    report.write_text("<html><body>the run's report</body></html>", encoding="utf-8")
    site = tmp_path / "site"
    build_site(source, site, report)

    for page in (*generated_pages(), *filled_pages()):
        html = (site / page.replace(".md", ".html")).read_text(encoding="utf-8")
        parsed = Elements(html)
        for tag, attrs in parsed.elements:
            for name, value in attrs:
                assert "alert(" not in f"{name}={value}", (page, tag, name, value)
                assert "javascript:" not in (value or ""), (page, tag, name, value)
        assert "alert(" not in "".join(parsed.scripts), f"{page}: a script holds kept text"
        # Every free string of the kept data is a payload: which ones a page shows is where the data's strings fall
        # (a filled page shows fewer: the caps' knob, counts and ending), and what it shows is the payload as it is.
        text = " ".join(parsed.text)
        assert any(p.strip() in text for p in PAYLOADS if "<" in p), f"{page} does not show the kept text as text"
    index = (site / "search" / "search_index.json").read_text(encoding="utf-8")
    assert "<img src=x onerror" not in index and "<script>alert" not in index, "the search index holds markup"
