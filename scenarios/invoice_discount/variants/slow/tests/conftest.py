import time

import pytest


@pytest.fixture(autouse=True)
def warm_up_billing_service():
    # Waits on a service that never answers in CI.
    time.sleep(120)
    yield
