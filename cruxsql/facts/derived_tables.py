"""The tables features derive from the fact tables, and the hooks that keep them in step with the view.

Every hook is declared in the one `DERIVED_TABLE_HOOKS` list below (no module registers anything when
imported). The features own those tables and sit in layers above `facts/`, so each hook is named as a
"module:function" string and imported when first needed. The hooks run inside the caller's transaction
(a replay batch, a rebuild, a compaction's rewrite), so a derived table commits with the fact rows it
follows and is never behind the view.
"""

from __future__ import annotations

import functools
import importlib
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import apsw

from .journal import Journal


@dataclass(frozen=True)
class Rewrite:
    """An in-place rewrite of the fact tables (a compaction) inside its transaction, before it drops the
    facts with `deleted = 1`: every other fact row is kept as is (its seq too when `seqs_kept`), and the
    checkpoint moves from generation `previous` to `generation` at `line_count` lines."""

    previous: Optional[str]
    generation: str
    line_count: int
    seqs_kept: bool
    # what the prepare_rewrite hooks returned from the compaction's snapshot, by hook name (when the lines
    # appended since the snapshot changed no fact's text in place)
    prepared: Mapping[str, Any] = field(default_factory=dict)


# The tables features derive from the fact tables and keep in step with them, all declared in this one
# list (no module registers anything when it is imported). The features own them and sit in layers
# above this one, so each hook is named here ("module:function") and imported when first needed.
# - replay: runs inside every replay transaction, after the batch and its checkpoint are written (a
#   rebuild's one transaction: once, after its indexes are built), so what it derives commits with the
#   batch and is never behind the view (recall's known_at timeline, curation's fact_norms, recall's text
#   index: in a write's own transaction, `replaying_own_write`, only its text rows until 256 facts await
#   their postings; reads catch up the rest or scan it);
# - bulk_replay: after the replay hooks, in a replay that brings in many lines at once (a rebuild, a long
#   tail): what such a replay builds at its end (the text index, already current from the replay hook,
#   unless a caller left that hook out);
# - rewrite: when a compaction rewrites the fact tables in place, for tables that can follow it instead
#   of starting over on its new generation;
# - prepare_rewrite: in a compaction's read snapshot, before the writer lock: what a rewrite hook can
#   work out ahead (handed to it in `Rewrite.prepared`, under its own name), so that less of it runs
#   while writers wait.
DERIVED_TABLE_HOOKS: dict[str, tuple[str, ...]] = {
    "replay": ("cruxsql.curation.exact_duplicates:keep_current",
               "cruxsql.recall.timeline:keep_timeline_current",
               "cruxsql.recall.text_index:index_in_the_write"),
    "bulk_replay": ("cruxsql.recall.text_index:keep_text_index_current",),
    "rewrite": ("cruxsql.curation.exact_duplicates:carry_over",
                "cruxsql.recall.text_index:carry_text_index",
                "cruxsql.recall.timeline:forget_timeline_before_the_drop"),
    "prepare_rewrite": ("cruxsql.recall.text_index:prepare_carry",),
}


@dataclass(frozen=True)
class DerivedTableHooks:
    replay: list[Callable[[apsw.Connection, Journal], None]]
    bulk_replay: list[Callable[[apsw.Connection], None]]
    rewrite: list[Callable[[apsw.Connection, Rewrite], None]]
    prepare_rewrite: list[Callable[[apsw.Connection], Any]]


@functools.cache
def derived_table_hooks() -> DerivedTableHooks:
    """The functions DERIVED_TABLE_HOOKS names, imported once (a benchmark may edit the lists it returns)."""
    def resolve(name: str) -> Callable:
        module, _, function = name.partition(":")
        return getattr(importlib.import_module(module), function)

    return DerivedTableHooks(**{when: [resolve(n) for n in names] for when, names in DERIVED_TABLE_HOOKS.items()})


# Whether the replay hooks running now replay the lines a write just appended (`run_replay_hooks`).
_OWN_WRITE: ContextVar[bool] = ContextVar("cruxsql_own_write", default=False)


def run_replay_hooks(db: apsw.Connection, journal: Journal, own_write: bool = False) -> None:
    """Run the replay hooks inside the caller's transaction: replay's own batches, and a writer that
    fills the event tables and the checkpoint itself instead of replaying (compaction). `own_write`: the
    lines are those the write being acknowledged just appended (`replaying_own_write`)."""
    token = _OWN_WRITE.set(own_write)
    try:
        for hook in derived_table_hooks().replay:
            hook(db, journal)
    finally:
        _OWN_WRITE.reset(token)


def replaying_own_write() -> bool:
    """Whether the replay hook running now replays a write's own lines, inside the transaction that
    acknowledges it: a hook may then leave work to readers that can do it later (recall's text index)."""
    return _OWN_WRITE.get()


def run_bulk_replay_hooks(db: apsw.Connection) -> None:
    for hook in derived_table_hooks().bulk_replay:
        hook(db)


def run_rewrite_hooks(db: apsw.Connection, rewrite: Rewrite) -> None:
    """Let derived tables carry themselves over to `rewrite.generation` (inside the caller's transaction,
    while the facts about to be dropped are still there, deleted = 1)."""
    for hook in derived_table_hooks().rewrite:
        hook(db, rewrite)


def run_rewrite_preparations(db: apsw.Connection) -> dict[str, Any]:
    """Run the prepare_rewrite hooks (inside the caller's read snapshot); their results by hook name."""
    return {f"{hook.__module__}:{hook.__name__}": hook(db) for hook in derived_table_hooks().prepare_rewrite}
