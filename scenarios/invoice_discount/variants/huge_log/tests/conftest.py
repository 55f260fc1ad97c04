import pytest


@pytest.fixture(autouse=True)
def audit_log():
    # A chatty audit trail: every failure report carries all of it.
    for n in range(4000):
        print(f"audit {n:05d}: ledger sync ok, account=ACME-{n % 97:02d}, cache=warm, retries=0, latency_ms={n % 13}")
    yield
