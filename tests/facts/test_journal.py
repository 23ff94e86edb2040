"""Journal mechanics: torn-tail quarantine, the record ceiling, poisoning after a failed write."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.journal_builders import fact_obj, line, write_journal

import cruxsql
from cruxsql.facts import journal as journal_mod
from cruxsql.facts.journal import Journal
from support.journal_files import journal_bytes


def _journal_with_last_line(tmp_path: Path) -> tuple[Path, bytes, bytes]:
    head = [line("store", fact=fact_obj(f"f_{i}", key=f"k{i}", value=f"välue {i}")) for i in range(3)]
    last = line("store", fact=fact_obj("f_last", key="last", value="ünïcode tail 🚀"))
    path = write_journal(tmp_path, head + [last])
    full = path.read_bytes()
    return path, full[: len(full) - len(last.encode()) - 1], last.encode() + b"\n"


@pytest.mark.slow
def test_a_cut_at_any_byte_of_the_last_line_is_quarantined_and_nothing_before_is_lost(tmp_path: Path) -> None:
    path, prefix, last = _journal_with_last_line(tmp_path / "template")
    full_opens = set(range(0, len(last), max(1, len(last) // 8)))
    for cut in range(0, len(last)):
        data = tmp_path / f"cut{cut}"
        data.mkdir()
        (data / "facts.jsonl").write_bytes(prefix + last[:cut])
        if cut in full_opens:  # the whole open path, view included
            with cruxsql.open(data) as store:
                assert store.counts()["facts"] == 3, cut
                assert store.verify().view_matches_replay
        else:
            j = Journal(data)
            with j.lock():
                j.repair_torn_tail()
            assert [r.line_no for r in j.records()] == [1, 2, 3]
        assert journal_bytes(data) == prefix
        tails = sorted(data.glob("facts.jsonl.torn.*"))
        if cut == 0:
            assert tails == []
            continue
        assert len(tails) == 1 and len(tails[0].name) == len("facts.jsonl.torn.") + 32
        assert tails[0].read_bytes() == last[:cut]
        assert stat.S_IMODE(tails[0].stat().st_mode) == 0o600


def test_a_complete_line_without_its_newline_is_uncommitted(tmp_path: Path) -> None:
    path = write_journal(tmp_path, [line("store", fact=fact_obj("f_1"))])
    with open(path, "ab") as fh:
        fh.write(line("store", fact=fact_obj("f_2", key="k2")).encode())
    with cruxsql.open(tmp_path) as store:
        assert [r[0] for r in store.db.execute("SELECT fact_id FROM facts")] == ["f_1"]
        report = store.verify()
        assert len(report.quarantined_tails) == 1 and not report.ok


def test_an_oversized_torn_tail_leaves_a_metadata_marker(tmp_path: Path) -> None:
    path = write_journal(tmp_path, [line("store", fact=fact_obj("f_1"))])
    keep = path.stat().st_size
    with open(path, "ab") as fh:
        fh.truncate(keep + journal_mod.MAX_RECORD_BYTES + 10)  # sparse, unterminated
    j = Journal(tmp_path)
    with j.lock():
        marker = j.repair_torn_tail()
    assert marker.name.endswith(".metadata.json")
    assert marker.read_text() == json.dumps(
        {"capture_limit_bytes": journal_mod.MAX_RECORD_BYTES, "reason": "oversized_unterminated_uncommitted_record",
         "schema_version": 1, "tail_len": journal_mod.MAX_RECORD_BYTES + 10, "tail_start": keep},
        separators=(",", ":")) + "\n"
    assert path.stat().st_size == keep


def test_records_over_the_ceiling_are_refused_and_nothing_is_written(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(journal_mod, "MAX_RECORD_BYTES", 600)
    with cruxsql.open(tmp_path) as store:
        store.store("e", "k", "small")
        size = (tmp_path / "facts.jsonl").stat().st_size
        with pytest.raises(cruxsql.InvalidInput, match="600-byte append ceiling"):
            store.store("e", "k", "x" * 700)
        assert (tmp_path / "facts.jsonl").stat().st_size == size
        assert store.counts()["facts"] == 1


def test_a_failed_fsync_poisons_the_store_until_reopened(tmp_path: Path, monkeypatch) -> None:
    store = cruxsql.open(tmp_path)
    store.store("e", "k", "one")
    real_fsync = os.fsync

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(journal_mod.os, "fsync", failing_fsync)
    with pytest.raises(cruxsql.JournalPoisoned, match="indeterminate"):
        store.store("e", "k", "two")
    monkeypatch.setattr(journal_mod.os, "fsync", real_fsync)
    with pytest.raises(cruxsql.JournalPoisoned, match="poisoned"):
        store.store("e", "k", "three")
    store.close()
    with cruxsql.open(tmp_path) as again:
        # the line whose fsync failed may or may not be durable; the view still equals the journal
        assert again.verify().view_matches_replay
        again.store("e", "k", "four")
        assert [f.value for f in again.history("e", "k")][-1] == "four"


def test_records_report_offsets_and_line_numbers_across_crlf(tmp_path: Path) -> None:
    path = tmp_path / "facts.jsonl"
    path.write_bytes(b'{"a":1}\r\n\n{"b":2}\n')
    recs = list(Journal(tmp_path).records())
    assert [(r.line_no, r.offset, r.length, r.raw) for r in recs] == [
        (1, 0, 9, b'{"a":1}'), (2, 9, 1, b""), (3, 10, 8, b'{"b":2}')]


def test_every_line_of_a_mutation_goes_out_in_one_write(tmp_path: Path, monkeypatch) -> None:
    writes: list[bytes] = []
    real_write = os.write

    def spy(fd: int, data) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    with cruxsql.open(tmp_path) as store:
        first = store.store("e", "k", "one")
        monkeypatch.setattr(journal_mod.os, "write", spy)
        store.store("e", "k", "two")
    assert len(writes) == 1 and writes[0].endswith(b"\n") and writes[0].count(b"\n") == 2
    store_line, supersede_line = (json.loads(line) for line in writes[0].splitlines())
    assert store_line["op"] == "store" and supersede_line == {
        "op": "supersede", "fact_id": first.fact_id, "by_fact_id": store_line["fact"]["fact_id"],
        "superseded_at": supersede_line["superseded_at"]}


def test_lock_if_free_takes_the_writer_lock_only_when_nobody_holds_it(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.readline()", str(tmp_path / "LOCK")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with journal.lock_if_free() as by_another_process:
            pass
    finally:
        holder.communicate("\n")
    seen: list[bool] = []

    def try_it() -> None:
        with journal.lock_if_free() as got:
            seen.append(got)

    probe = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')\n"
             "except BlockingIOError:\n    print('held')")
    with journal.lock():
        with journal.lock_if_free() as by_this_thread:
            pass
        still = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "LOCK")], capture_output=True,
                               text=True, check=True).stdout.strip()  # the outer hold survived the inner try
        other = threading.Thread(target=try_it)
        other.start()
        other.join()
    with journal.lock_if_free() as free:
        other = threading.Thread(target=try_it)  # held by this thread now
        other.start()
        other.join()
    with journal.lock_if_free() as free_again:  # and released again
        pass
    assert (by_another_process, by_this_thread, still, seen, free, free_again) == (
        False, False, "held", [False, False], True, True)
