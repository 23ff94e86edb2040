"""Workspace retrieval for coding agents (docs/workspace.md): an indexed folder and the six ctx_* verbs.

    from cruxsql.workspace import Workspace

    with Workspace(Path("./cruxsql-data")) as ws:
        ws.index(Path("."))                                   # DATA_DIR/workspace.db, a rebuildable view
        reply = ws.call("session-1", "ctx_search", query="parse_header")
        print(reply.text)                                     # plain grouped lines; reply.data for scripts

Modules: `paths` (walk, .gitignore, path classes, escape refusal), `outline` (ast symbols, regex
outlines), `markdown` (sections, code, links), `indexer` (incremental index, BM25 postings via the
document lane), `ranking` (the B3 stack and its switches), `modes` (typed read modes, the default
table and its no-lossy-override guard), the verbs `search`, `read`, `doc`, `impact`, `context`,
`expand`, `handles`, `budget`, `governor` (ConvergenceGovernor), `ledger` (savings per session), and
`session` (the `Workspace` facade).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_attributes

_EXPORTS = {"Reply": "reply", "VERBS": "session", "Workspace": "session"}   # name -> module, imported on first use
__all__ = ['Reply', 'VERBS', 'Workspace']

__getattr__ = lazy_attributes(__name__, _EXPORTS)


if TYPE_CHECKING:
    from .reply import Reply
    from .session import VERBS, Workspace
