from __future__ import annotations

import pytest

from cruxsql.facts import privacy


@pytest.fixture(autouse=True)
def _fresh_privacy_policy(monkeypatch: pytest.MonkeyPatch):
    """Each test builds the process-wide privacy policy from its own environment."""
    monkeypatch.delenv(privacy.ALWAYS_PRIVATE_ENV, raising=False)
    monkeypatch.delenv(privacy.SHARE_OVERRIDE_ENV, raising=False)
    privacy.install_global(None)
    yield
    privacy.install_global(None)


@pytest.fixture(scope="module")
def portal():
    """One anyio portal per test module, for the MCP SDK's async clients driven from synchronous tests."""
    from anyio.from_thread import start_blocking_portal

    with start_blocking_portal() as p:
        yield p
