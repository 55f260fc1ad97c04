from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scenarios.cases import load_cases
from scenarios.scripted.server import ScriptedModelServer
from shared_tools import Guard, Workspace

FIXTURE_REPO = load_cases()["vip-compound"].repo_path
TASK = load_cases()["vip-compound"].task
SYSTEM_PROMPT = load_cases()["vip-compound"].system_prompt


@pytest.fixture
def workspace() -> Iterator[Workspace]:
    with Workspace(FIXTURE_REPO) as ws:
        yield ws


@pytest.fixture
def guard(workspace: Workspace) -> Guard:
    return Guard(workspace)


@pytest.fixture(scope="session")
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def fixture_repo() -> Path:
    return FIXTURE_REPO
