"""Fixtures shared by the whole suite: a data directory, a store on it, and the real CLI two ways.

- `data_dir`: `tmp_path / "data"` (not created: the store or the CLI creates it, as a user's would be).
- `store`: a `Store` open on `data_dir`, closed after the test.
- `cli(*args, input=None, env=None, ok=True)`: click's CliRunner invoking the real `cruxsql` command with
  `CRUXSQL_DATA_DIR=data_dir`; `ok` asserts exit code 0 and shows the output when it is not.
- `run_cli(*args, input=None, env=None, ok=False, timeout=120)`: a real `sys.executable -m cruxsql`
  process with `CRUXSQL_DATA_DIR=data_dir` (`support.cli_process.run_cruxsql`); `ok` asserts exit code 0.
- `mcp_client(data_dir, *args, env=None)`: an MCP SDK client over stdio of a real `cruxsql mcp` process on
  `data_dir` (`support.mcp_clients.stdio`), closed when the module's tests are done; module-scoped, so a
  module's own fixtures name its agents: `alice = mcp_client(data_dir, "--agent", "alice")`.
A module may override `data_dir` (or `store`, building on this one); `cli` and `run_cli` then use its.
Helpers that are not fixtures (journal readers, builders, clients) live in tests/support/.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Optional

import pytest
from click.testing import CliRunner, Result

from support.cli_process import run_cruxsql
from cruxsql.cli import main
from cruxsql.facts import privacy
from cruxsql.facts.store import Store

if TYPE_CHECKING:
    from support.mcp_clients import McpClient


@pytest.fixture(scope="session", autouse=True)
def _no_real_config_dir(tmp_path_factory: pytest.TempPathFactory):
    """No test reads or writes the real user's config dir (this user's list of stores, cli/known_stores.py)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config-session")))
        yield


@pytest.fixture(autouse=True)
def _own_config_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Each test starts as a user with no store yet (its own, empty config dir)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))


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


@pytest.fixture(scope="module")
def mcp_client(portal) -> Iterator[Callable[..., McpClient]]:
    from support.mcp_clients import stdio

    opened: list[McpClient] = []

    def open_client(data_dir: Path, *args: str, env: Optional[dict[str, str]] = None) -> McpClient:
        client = stdio(portal, data_dir, *args, env=env)
        opened.append(client)
        return client

    yield open_client
    for client in reversed(opened):
        client.close()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(data_dir: Path) -> Iterator[Store]:
    with Store(data_dir) as opened:
        yield opened


@pytest.fixture
def cli(data_dir: Path) -> Callable[..., Result]:
    runner = CliRunner()

    def invoke(*args: str, input: Optional[str] = None, env: Optional[dict[str, str]] = None,
               ok: bool = True) -> Result:
        result = runner.invoke(main, list(args), input=input,
                               env={"CRUXSQL_DATA_DIR": str(data_dir), **(env or {})})
        if ok:
            assert result.exit_code == 0, result.output
        return result

    return invoke


@pytest.fixture
def run_cli(data_dir: Path) -> Callable[..., subprocess.CompletedProcess]:
    def run(*args: str, input: Optional[str] = None, env: Optional[dict[str, str]] = None, ok: bool = False,
            timeout: float = 120) -> subprocess.CompletedProcess:
        result = run_cruxsql(data_dir, *args, input=input, env=env, timeout=timeout)
        if ok:
            assert result.returncode == 0, f"cruxsql {' '.join(args)} failed: {result.stderr}"
        return result

    return run


@pytest.fixture
def lazy_text_index():
    """Writes leave recall's text index to its own `sync` (as before writes indexed what they stored), for
    the tests of that sync's own mechanics."""
    from cruxsql.facts import derived_tables
    from cruxsql.recall import text_index

    hooks = derived_tables.derived_table_hooks().replay
    at = hooks.index(text_index.index_in_the_write)
    hooks.remove(text_index.index_in_the_write)
    yield
    hooks.insert(at, text_index.index_in_the_write)
