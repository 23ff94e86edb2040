"""What `import cruxsql` offers: one error hierarchy, every public error exported, `__version__`, and no
side effect of the import itself (the derived tables' replay hooks are declared in one list)."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import cruxsql
from cruxsql.errors import CruxsqlError
from cruxsql.facts import derived_tables

ROOT = Path(__file__).resolve().parents[2]
# Errors of the surfaces (CLI, cluster, MCP) live in their packages; the MCP ToolError is not a
# CruxsqlError yet (a tool's refusal, shown to the agent as a tool result).
SURFACES = ("cruxsql.cli", "cruxsql.cluster", "cruxsql.mcp", "cruxsql.console")


def _all_error_classes() -> list[type]:
    for info in pkgutil.walk_packages(cruxsql.__path__, "cruxsql."):
        if info.name != "cruxsql.__main__":  # that one runs the CLI
            importlib.import_module(info.name)
    found, todo = [], [CruxsqlError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return sorted(set(found), key=lambda c: (c.__module__, c.__name__))


def test_every_library_error_is_exported_and_in_the_documented_tree() -> None:
    tree = sys.modules["cruxsql.errors"].__doc__
    for cls in _all_error_classes():
        assert cls.__name__ in tree, f"{cls.__module__}.{cls.__name__} is missing from errors.py's tree"
        if cls.__module__.startswith(SURFACES) or cls.__name__ == "ToolError":
            continue
        assert cls.__name__ in cruxsql.__all__ and getattr(cruxsql, cls.__name__) is cls, cls


def test_the_errors_callers_catch_by_name_are_exported() -> None:
    for name in ("CapabilityDenied", "LockTimeout", "ReadOnlyStore", "CorruptLine", "VectorFileError"):
        assert name in cruxsql.__all__ and issubclass(getattr(cruxsql, name), CruxsqlError)


@pytest.mark.parametrize("name,builtin", [("CorruptLine", ValueError), ("VectorFileError", ValueError),
                                          ("InvalidInput", ValueError), ("NotFound", LookupError),
                                          ("CapabilityDenied", PermissionError), ("JournalError", OSError)])
def test_callers_catching_the_builtin_still_catch_it(name: str, builtin: type) -> None:
    with pytest.raises(builtin):
        raise getattr(cruxsql, name)("x")


def test_version_is_the_package_metadata_pyprojects() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert cruxsql.__version__ == project["version"]


def test_importing_cruxsql_registers_nothing() -> None:
    probe = ("import cruxsql\n"
             "from cruxsql.facts import derived_tables\n"
             "print(derived_tables.derived_table_hooks.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0"


def test_every_declared_replay_hook_names_a_function() -> None:
    hooks = derived_tables.derived_table_hooks()
    names = [n for group in derived_tables.DERIVED_TABLE_HOOKS.values() for n in group]
    resolved = hooks.replay + hooks.bulk_replay + hooks.rewrite + hooks.prepare_rewrite
    assert [f"{f.__module__}:{f.__name__}" for f in resolved] == names
    assert set(derived_tables.DERIVED_TABLE_HOOKS) == {"replay", "bulk_replay", "rewrite", "prepare_rewrite"}
