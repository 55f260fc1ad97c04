"""The boundary tests' shared fixture: every client a test made is closed when it ends (`clients.closed_at_end`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.boundary.clients import close_all


@pytest.fixture(autouse=True)
def _clients_closed() -> Iterator[None]:
    yield
    close_all()
