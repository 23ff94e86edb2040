"""A rebuild builds every derived table exactly as incremental replay does from the same journal.

A rebuild replays the whole journal in bulk and builds the derived tables (recall's text index and word
postings, the known_at timeline, fact_norms) once, after the last fact row; a store() or a catch-up of
a few lines extends them line by line. Both must end with the same rows.
"""

from __future__ import annotations

import random
from array import array
from pathlib import Path

import apsw
import pytest
from support.mixed_journal import mixed_journal, tables

from cruxsql.facts import privacy, replay, view_file
from cruxsql.facts.journal import Journal
from cruxsql.recall import fact_terms, text_index, timeline

pytestmark = pytest.mark.slow

# Tables whose rows a fact keeps after a later line removed it from the view (replace_latest) when it was
# indexed before that line, as incremental replay does; recall joins them on `facts`.
_INDEXED_TEXT = ("recall_text", "recall_grams")
DERIVED_TABLES = ("recall_text", "recall_grams", "recall_terms", "recall_term_stats", "recall_index_state",
                  "recall_event_times", "recall_changes", "recall_timeline_state", "fact_norms", "fact_norms_state")


@pytest.fixture
def small_blocks_and_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Postings blocks of 32 seqs, so that a journal of a few thousand lines spans many: the rebuild writes
    each block once, incremental replay appends to the block it is filling. And the timeline's ways for
    many lines at once (a rebuild's) from 100 lines on."""
    for module in (fact_terms, text_index):
        monkeypatch.setattr(module, "BLOCK_BITS", 5)
        monkeypatch.setattr(module, "BLOCK_SIZE", 32)
    # store lines' times from one scan of `facts`; the changes a window of lines at a time
    monkeypatch.setattr(timeline, "_SCAN_FACTS_PAST", 100)
    monkeypatch.setattr(timeline, "_WINDOW_LINES", 300)


def _rebuilt(data: Path, journal: bytes) -> apsw.Connection:
    data.mkdir()
    (data / "facts.jsonl").write_bytes(journal)
    db = view_file.open_connection(data / view_file.DB_NAME)
    stats = replay.rebuild(db, Journal(data), privacy.global_policy())
    assert stats.rebuilt and stats.events > 2000
    return db


def _replayed_incrementally(data: Path, journal: bytes, seed: int) -> apsw.Connection:
    """The journal appended a few lines at a time, each append replayed as a store() replays its line (the
    row path, one transaction, every replay hook)."""
    data.mkdir()
    path = data / "facts.jsonl"
    db = view_file.open_connection(data / view_file.DB_NAME)
    lines = journal.splitlines(keepends=True)
    rng = random.Random(seed)
    at = 0
    while at < len(lines):
        step = rng.choice((1, 1, 1, 2, 3, 5, 8, 30))
        with open(path, "ab") as fh:
            fh.write(b"".join(lines[at:at + step]))
        at += step
        stats = replay.replay(db, Journal(data), privacy.global_policy())
        assert stats.rebuilt == (at == step)          # only the first replay starts the view
    return db


def _present(db: apsw.Connection) -> set[int]:
    return {seq for (seq,) in db.execute("SELECT seq FROM facts")}


def _gram_postings(db: apsw.Connection) -> set[tuple[int, int]]:
    return {(gram, (block << text_index.BLOCK_BITS) | offset)
            for gram, block, blob in db.execute("SELECT gram, block, seqs FROM recall_grams")
            for offset in array("H", blob)}


@pytest.mark.parametrize("seed", [7, 12])
def test_a_rebuild_builds_every_derived_table_as_incremental_replay_does(tmp_path: Path, monkeypatch,
                                                                         small_blocks_and_windows, seed: int) -> None:
    monkeypatch.setenv(privacy.ALWAYS_PRIVATE_ENV, "secret::")
    privacy.install_global(None)
    journal = mixed_journal(seed=seed)
    rebuilt = _rebuilt(tmp_path / "rebuilt", journal)
    incremental = _replayed_incrementally(tmp_path / "incremental", journal, seed)
    assert text_index.TextIndex(rebuilt).is_current() and text_index.TextIndex(incremental).is_current()
    a, b = tables(rebuilt), tables(incremental)
    assert a.keys() == b.keys() and set(DERIVED_TABLES) <= a.keys()
    for name in a:
        if name not in _INDEXED_TEXT:
            assert a[name] == b[name], f"table {name} differs"
    # the derived tables hold what they derive (an empty table would compare equal too)
    for name in DERIVED_TABLES:
        assert a[name], f"{name} is empty"
    assert len({r[3] for r in a["recall_terms"]}) > 10          # several postings blocks (of 32 seqs)
    # recall_text and recall_grams: the same rows for every fact in the view; incremental replay's only
    # extra ones are those of facts a later line removed after it had indexed them
    present = _present(rebuilt)
    assert present == _present(incremental)
    text_a = {r[0]: r for r in rebuilt.execute("SELECT * FROM recall_text")}
    text_b = {r[0]: r for r in incremental.execute("SELECT * FROM recall_text")}
    assert set(text_a) == present and set(text_b) >= present
    assert {seq: text_b[seq] for seq in present} == text_a
    grams_a, grams_b = _gram_postings(rebuilt), _gram_postings(incremental)
    assert grams_a == {p for p in grams_b if p[1] in present}
    assert all(p[1] not in present for p in grams_b - grams_a)
    if set(text_b) == present:          # nothing removed after it was indexed: the very same rows
        assert a["recall_grams"] == b["recall_grams"]
