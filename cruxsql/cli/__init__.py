"""The `cruxsql` command line: one click group; every module of this package adds its own commands.

A module here that defines `COMMANDS` (a tuple of click commands and groups) is discovered and its
commands added, so a new capability adds a module (e.g. `cli/curation.py`) and edits no central list.
The options commands share are in `options.py`, the rest of what they share in `common.py`.

Commands load lazily: `command_index.py` (written by `python tools/cli_reference.py` from the modules'
`COMMANDS`) names each command's module and the first paragraph of its help, so `cruxsql --help` imports
no command module and `cruxsql sql ...` imports only `facts.py`'s. A command the index does not know
yet is still found, by importing every module.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

import click

from .command_index import COMMAND_INDEX
from .common import DATA_DIR_ENV, DEFAULT_DATA_DIR, CruxsqlGroup, end_after_closed_pipe
from .options import lock_timeout_option


def command_modules() -> dict[str, tuple[click.Command, ...]]:
    """Every module of this package that adds commands, imported, with its commands."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        commands = getattr(importlib.import_module(f"{__name__}.{info.name}"), "COMMANDS", ())
        if commands:
            found[info.name] = tuple(commands)
    return found


class LazyGroup(CruxsqlGroup):
    """The top-level group: lists commands from the index, imports a command's module when it runs, and
    prints its help when called with no arguments (exit 0). Its `commands` attribute, read from outside
    (tools/cli_reference.py, tests), imports every module and holds every command, as a click group's does."""

    _loaded: dict[str, click.Command]
    _complete = False

    @property  # type: ignore[override]
    def commands(self) -> dict[str, click.Command]:
        if not self._complete:
            self._add(command_modules())
            self._complete = True
        return self._loaded

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._loaded = dict(value)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self._loaded) if self._complete else sorted(set(COMMAND_INDEX) | set(self._loaded))

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        indexed = COMMAND_INDEX.get(cmd_name)
        if cmd_name not in self._loaded and indexed is not None:
            self._add({indexed[0]: _commands_of(indexed[0])})
        if cmd_name not in self._loaded:     # not in the index, or moved since it was written
            self._add(command_modules())
        return self._loaded.get(cmd_name)

    def _add(self, modules: dict[str, tuple[click.Command, ...]]) -> None:
        for commands in modules.values():
            for command in commands:
                self._loaded.setdefault(command.name or "", command)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Click's listing, from the index's summaries for commands not loaded."""
        rows = [(name, self._loaded.get(name) or _summary(name)) for name in self.list_commands(ctx)]
        rows = [(name, command) for name, command in rows if not command.hidden]
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in rows])

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            end_after_closed_pipe()    # before click's own handling, which would exit 1

    def main(self, args: Optional[Sequence[str]] = None, prog_name: Optional[str] = None,
             complete_var: Optional[str] = None, standalone_mode: bool = True, **extra: Any) -> Any:
        given = sys.argv[1:] if args is None else list(args)
        if standalone_mode and not given:
            args = ["--help"]      # `cruxsql` alone: its help, exit 0
        return super().main(args, prog_name, complete_var, standalone_mode, **extra)


def _commands_of(module: str) -> tuple[click.Command, ...]:
    return tuple(getattr(importlib.import_module(f"{__name__}.{module}"), "COMMANDS", ()))


def _summary(name: str) -> click.Command:
    """A stand-in with what `--help` shows of a command not yet imported."""
    _, short_help, help_text, hidden = COMMAND_INDEX[name]
    return click.Command(name, help=help_text, short_help=short_help, hidden=hidden)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="cruxsql")
@click.option("--data-dir", type=click.Path(path_type=Path), envvar=DATA_DIR_ENV, default=DEFAULT_DATA_DIR,
              show_default=True, show_envvar=True,
              help="Data directory for every subcommand (like `git -C`); a subcommand's own --data-dir wins.")
@lock_timeout_option
def main(data_dir: Path) -> None:
    """cruxsql: a Crux-compatible agent memory store, materialised into SQLite.

    Facts live in DATA_DIR/facts.jsonl (the journal, the source of truth); DATA_DIR/cruxsql.db is a
    SQLite view rebuilt from it. --data-dir goes before or after the subcommand.

    \b
    Conventions of every command:
      - read commands need an existing store; init and --create make one; store, store-batch,
        store-conversation, ingest, hold place and mcp start one only for a user with none yet, at a path this
        user's list of stores names, or at ./cruxsql-data (a typo never forks memory)
      - a read-only data directory is read through an in-memory copy of the view
      - records print as a table by default, or with --json, --nl or --csv; commands named
        after Crux's tools print Crux's text by default (--text)
      - failures print one `Error: ...` line and exit 1, as does an erasure that matched
        nothing or is not verified; one that legal holds held back entirely exits 3; doctor has
        its own (see `cruxsql doctor --help`)
      - an empty answer says on stderr which other tenant holds matches (counts only)
      - `-` is stdin for an input file and stdout for --output
    """
