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
