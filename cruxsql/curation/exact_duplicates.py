"""`fact_norms`: every live, non-private fact's normalised value, grouped by (tenant, entity), kept current
by replay so the `duplicate_candidates` view (migration 0016) reads only the duplicated facts.

The view's rows are pairs of live, non-private facts of one (tenant, entity) whose values are equal once
lowercased and trimmed (SQLite's `lower(trim(value))`). Replay calls `keep_current` at the end of each of
its transactions (a replay hook in `derived_tables.DERIVED_TABLE_HOOKS`): the facts named by the journal lines
replayed since the last call (stored, deleted, superseded, restored, replaced...) are re-read, and the
groups they left or joined get their `duplicated` flags recounted. A compaction carries the table over
(`carry_over`, a rewrite hook there: it drops only deleted facts, which have no row); any other new
generation of the fact tables (a rebuild) is recomputed whole. Nothing here needs the fact tables' secondary indexes,
which a bulk rebuild drops until its end: only `facts`' primary key and the `journal_event_facts` line range.
"""

from __future__ import annotations

from typing import cast

import apsw

from ..facts import derived_tables
from ..facts.journal import Journal

_LIVE = "deleted = 0 AND superseded_by IS NULL AND private = 0"
_CHUNK = 10_000
_GROUP = "tenant_hash = ?1 AND entity = ?2 AND norm = ?3"


def keep_current(db: apsw.Connection, journal: Journal) -> None:
    """Bring `fact_norms` up to the checkpoint (inside the caller's replay transaction)."""
    checkpoint = db.execute("SELECT generation, line_count FROM journal_checkpoint WHERE id = 1").fetchone()
    state = db.execute("SELECT generation, last_line FROM fact_norms_state WHERE id = 1").fetchone()
    if checkpoint is None:
        recompute(db)
        db.execute("DELETE FROM fact_norms_state")
        return
    generation, line_count = checkpoint
    if state is None or state[0] != generation or state[1] > line_count:
        recompute(db)
    elif state[1] < line_count:
        touched = [r[0] for r in db.execute(
            "SELECT DISTINCT fact_id FROM journal_event_facts WHERE line_no > ? AND line_no <= ?",
            (state[1], line_count))]
        for i in range(0, len(touched), _CHUNK):
            _refresh(db, apsw.carray(tuple(touched[i:i + _CHUNK])))
    db.execute("INSERT OR REPLACE INTO fact_norms_state (id, generation, last_line) VALUES (1, ?, ?)",
               (generation, line_count))


def recompute(db: apsw.Connection) -> None:
    """Rebuild `fact_norms` from every live, non-private fact (the rows migration 0016 fills): one sorted
    insert that counts each group with a window function, into the table without its secondary
    indexes, which are then built by one sort each (cheaper than a random insert per row)."""
    indexes = db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'fact_norms' "
                         "AND sql IS NOT NULL").fetchall()
    for name, _ in indexes:
        db.execute(f'DROP INDEX "{name}"')
    db.execute("DELETE FROM fact_norms")
    db.execute(f"INSERT INTO fact_norms (tenant_hash, entity, norm, fact_id, duplicated) "
               f"SELECT tenant_hash, entity, norm, fact_id, count(*) OVER (PARTITION BY tenant_hash, entity, norm) > 1 "
               f"FROM (SELECT tenant_hash, entity, lower(trim(value)) AS norm, fact_id FROM facts WHERE {_LIVE}) "
               f"ORDER BY 1, 2, 3, 4")
    for _, sql in indexes:
        db.execute(cast(str, sql))      # sqlite_master.sql, selected NOT NULL


def carry_over(db: apsw.Connection, rewrite: derived_tables.Rewrite) -> None:
    """A compaction keeps every fact row but the deleted ones, unchanged: `fact_norms`, keyed by fact id
    and holding only live facts, is then already what a recompute would give (the dropped facts, deleted,
    have no row), so it only moves to the new generation and line count. Only when it reflects the whole
    generation being rewritten; otherwise the replay hook recomputes it as before."""
    checkpoint = db.execute("SELECT generation, line_count FROM journal_checkpoint WHERE id = 1").fetchone()
    state = db.execute("SELECT generation, last_line FROM fact_norms_state WHERE id = 1").fetchone()
    if (rewrite.previous is None or checkpoint is None or state is None or tuple(state) != tuple(checkpoint)
            or checkpoint[0] != rewrite.previous):
        return
    db.execute("UPDATE fact_norms_state SET generation = ?, last_line = ? WHERE id = 1",
               (rewrite.generation, rewrite.line_count))


def _refresh(db: apsw.Connection, ids: apsw.CArrayBinding) -> None:
    """Re-read the facts `ids` (gone, no longer live, newly live) and recount every group they touch."""
    groups = set(db.execute("SELECT tenant_hash, entity, norm FROM fact_norms WHERE fact_id IN carray(?)", (ids,)))
    db.execute("DELETE FROM fact_norms WHERE fact_id IN carray(?)", (ids,))
    rows = db.execute(f"SELECT tenant_hash, entity, lower(trim(value)), fact_id FROM facts "
                      f"WHERE fact_id IN carray(?) AND {_LIVE}", (ids,)).fetchall()
    db.executemany("INSERT INTO fact_norms (tenant_hash, entity, norm, fact_id, duplicated) "
                   "VALUES (?, ?, ?, ?, 0)", rows)
    groups.update(r[:3] for r in rows)
    db.executemany(f"UPDATE fact_norms SET duplicated = (SELECT count(*) > 1 FROM fact_norms WHERE {_GROUP}) "
                   f"WHERE {_GROUP} AND duplicated != (SELECT count(*) > 1 FROM fact_norms WHERE {_GROUP})",
                   sorted(groups))

