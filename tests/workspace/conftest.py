"""The workspace these tests share: `ws`, a `Workspace` on `tmp_path / "data"` that has indexed the small
built tree of support/workspace_builders.py (`tmp_path / "ws"`, with a file outside it), closed after
the test."""

import pytest

from cruxsql.workspace import Workspace
from support.workspace_builders import build_workspace


@pytest.fixture
def ws(tmp_path):
    root = build_workspace(tmp_path / "ws", tmp_path / "outside")
    workspace = Workspace(tmp_path / "data")
    workspace.index(root)
    yield workspace
    workspace.close()
