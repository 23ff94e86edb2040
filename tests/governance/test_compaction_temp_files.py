"""A compaction, the erasure primitive, copies no value it erases into a temp file outside the data directory.

SQLite writes its temp files (statement journals, sorter runs, transient tables) unnamed into /var/tmp,
where erasure can neither reach nor verify them. Every write to one is recorded here through a VFS that
wraps the default one (only files SQLite opens without a name are recorded) while a store compacts.
"""

from __future__ import annotations

from array import array

import apsw
import pytest

from cruxsql.facts.store import Store, StoreRequest
from cruxsql.governance import compaction
from cruxsql.recall.facade import Recall

MARK = b"Erase-Me-4f1d"  # recall's text index keeps the lower-cased copy of a value that has capitals


class _TempWrites(apsw.VFS):
    """The default VFS, recording the bytes written to each temp file (registered as the default)."""

    def __init__(self) -> None:
        self.base = apsw.vfs_names()[0]
        self.writes: list[bytes] = []
        super().__init__("cruxsql-test-tempwrites", self.base, makedefault=True)

    def xOpen(self, name, flags):  # noqa: N802 (apsw's method name)
        return _File(self, name, flags)


class _File(apsw.VFSFile):
    def __init__(self, vfs: _TempWrites, name, flags) -> None:
        self._writes = vfs.writes if name is None else None
        super().__init__(vfs.base, name, flags)

    def xWrite(self, data, offset):  # noqa: N802
        if self._writes is not None:
            self._writes.append(bytes(data))
        return super().xWrite(data, offset)


@pytest.fixture
def temp_writes(tmp_path):
    vfs = _TempWrites()
    try:
        # The recorder sees SQLite's temp files: a savepoint's changes to 100 existing pages are journaled
        # in a temp file (past the 64 KiB SQLite keeps in memory).
        (tmp_path / "probe").mkdir()
        db = apsw.Connection(str(tmp_path / "probe" / "probe.db"))
        db.execute("PRAGMA journal_mode=WAL")  # as the view
        db.execute("CREATE TABLE t (x); INSERT INTO t SELECT randomblob(3000) FROM carray(?)",
                   (apsw.carray(array("q", range(100))),))
        db.execute("BEGIN; SAVEPOINT s; UPDATE t SET x = x || 'probe-f00d'; RELEASE s; COMMIT")
        db.close()
        assert sum(map(len, vfs.writes)) > 100 * 3000
        vfs.writes.clear()
        yield vfs.writes
    finally:
        vfs.unregister()


@pytest.mark.slow
@pytest.mark.parametrize("batched", [True, False], ids=["one-batch-renumbers-seqs", "one-fact-per-call"])
def test_compaction_copies_no_erased_value_outside_the_data_directory(tmp_path, temp_writes, batched, monkeypatch):
    # Facts stored in one batch under a clock that does not move share their stored_at (store_batch stamps
    # each fact when it is built, as Crux does), so the compacted order (stored_at, fact_id) differs
    # from replay order and the compaction renumbers the seqs (and rebuilds recall's text index); stored
    # one per call, the order holds and the index is carried over with the erased facts taken out.
    requests = [StoreRequest(f"svc:{i}", "note", (MARK.decode() if i % 10 == 0 else "kept") + f" {i} " + "x" * 400)
                for i in range(600)]  # more than SQLite keeps of a statement journal in memory (64 KiB)
    with Store(tmp_path / "data") as store:
        if batched:
            from cruxsql.facts import timestamps
            frozen = timestamps.now_ns()
            with monkeypatch.context() as m:
                m.setattr(timestamps, "now_ns", lambda: frozen)
                facts = store.store_batch(requests)
        else:
            facts = [store.store_batch([r])[0] for r in requests]
        # recall's text index holds the values too (lower-cased), a deleted fact's until a compaction
        recall = Recall(store)
        assert len(recall.query_facts(MARK.decode(), contract="legacy", record_access=False, top_k=500).rows) == 60
        for fact in facts[::10]:
            store.delete(fact.fact_id)
        assert recall.query_facts(MARK.decode(), contract="legacy", record_access=False).rows == []
        like = (MARK.lower().decode() + "%",)
        assert store.db.execute("SELECT count(*) FROM recall_text WHERE lc_value LIKE ?", like).fetchone()[0] == 60
        temp_writes.clear()
        report = compaction.compact(store)
        assert (report.facts_dropped, report.seq_renumbered) == (60, batched)
        assert not any(MARK in data or MARK.lower() in data for data in temp_writes)
        assert not store.db.execute("SELECT 1 FROM facts WHERE value LIKE ?", (MARK.decode() + "%",)).fetchone()
        assert not store.db.execute("SELECT 1 FROM recall_text WHERE lc_value LIKE ?", like).fetchone()
