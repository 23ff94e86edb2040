"""The savings ledger: per session, what each verb returned and what full reads of its files would cost.

Rows live in `workspace.db` (`ledger`, and the `ledger_savings` view per session) so an operator can
quote savings with SQL:

    SELECT * FROM ledger_savings;
    SELECT verb, sum(returned_tokens), sum(full_read_tokens) FROM ledger WHERE session='s1' GROUP BY verb;

The ledger is a measurement log of the derived index: deleting `workspace.db` resets it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import apsw

from .governor import WINDOW


@dataclass(frozen=True)
class LedgerEntry:
    session: str
    verb: str
    args: dict[str, Any]
    signature: str
    returned_tokens: int
    full_read_tokens: int
    files: list[str]
    nudged: bool


def recent_signatures(db: apsw.Connection, session: str) -> list[str]:
    rows = db.execute("SELECT signature FROM ledger WHERE session=? ORDER BY seq DESC LIMIT ?", (session, WINDOW - 1))
    return [row[0] for row in rows][::-1]


def full_read_tokens(db: apsw.Connection, paths: list[str]) -> int:
    """What reading every named file whole would cost (estimated tokens from the index)."""
    if not paths:
        return 0
    marks = ",".join("?" * len(paths))
    return db.execute(f"SELECT coalesce(sum(tokens), 0) FROM files WHERE path IN ({marks})", tuple(paths)).get


def record(db: apsw.Connection, entry: LedgerEntry) -> None:
    with db:
        db.execute(
            "INSERT INTO ledger(session, verb, args, signature, returned_tokens, full_read_tokens, files, nudged) "
            "VALUES (?,?,?,?,?,?,?,?)",
            (entry.session, entry.verb, json.dumps(entry.args, sort_keys=True, ensure_ascii=False), entry.signature,
             entry.returned_tokens, entry.full_read_tokens, json.dumps(entry.files), int(entry.nudged)))
