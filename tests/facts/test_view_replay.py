"""Replay materialises every journal op into the view with the V-C rules (Crux's fact_store.rs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.journal_builders import fact_obj, line, write_journal

import cruxsql
from cruxsql.facts import codec

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "crux_spec_examples.jsonl"


def fact_row(store: cruxsql.Store, fact_id: str) -> dict:
    cur = store.db.execute("SELECT * FROM facts WHERE fact_id = ?", (fact_id,))
    row = cur.fetchone()
    return dict(zip([d[0] for d in cur.getdescription()], row)) if row else {}


def test_crux_journal_opens_as_is_and_replays_every_op(tmp_path: Path) -> None:
    data = tmp_path / "crux"
    data.mkdir()
    shutil.copy(GOLDEN, data / "facts.jsonl")
    with cruxsql.open(data) as store:
        canary = fact_row(store, "f_9b1c4e2a7d3f4b6e8a0c1d2e3f4a5b6c")
        assert canary["value"] == "canary deployment with evaluator programme"
        assert canary["stored_at"] == "2026-05-27T10:11:12.123456789Z"
        assert canary["stored_at_ns"] == 1779876672123456789
        assert canary["confidence"] == codec.to_f32(0.95)
        # superseded on line 3, cleared on line 7
        assert canary["superseded_by"] is None
        blue = fact_row(store, "f_0d4e61b2c3a94f0e9d8c7b6a5f4e3d2c")
        assert blue["supersedes"] == "f_9b1c4e2a7d3f4b6e8a0c1d2e3f4a5b6c"
        assert blue["valid_from"] == "2026-06-01T00:00:00Z" and blue["valid_to"] is None
        assert fact_row(store, "f_aa11bb22cc33dd44ee55ff6677889900")["deleted"] == 1
        assert fact_row(store, "f_5a6b7c8d9e0f41a2b3c4d5e6f7a8b9c0")["private"] == 1
        # consolidate needs live, unsuperseded sources that exist: these don't, so V-C skips it
        assert fact_row(store, "f_c0ffee00c0ffee00c0ffee00c0ffee00") == {}
        skipped = dict(store.db.execute("SELECT line_no, skip_reason FROM journal_events WHERE applied = 0"))
        assert 9 in skipped and "source" in skipped[9]
        # the extension ops replay too
        e2 = fact_row(store, "f_e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2")
        assert e2["horizon_class"] == "stable" and e2["reverified_at"] == "2026-05-27T12:08:00.000000001Z"
        assert store.counts()["journal_events"] == 18
        assert store.verify().ok


def test_view_facts_reserialise_to_the_journal_bytes(tmp_path: Path) -> None:
    # f_e2e2... points across chains, which link sanitisation clears (tested below), so leave it out
    lines = [l for l in GOLDEN.read_text(encoding="utf-8").splitlines()
             if l.startswith('{"op":"store","fact"') and "f_e2e2" not in l]
    write_journal(tmp_path, lines)
    with cruxsql.open(tmp_path) as store:
        for raw in lines:
            event = codec.decode_event(raw.encode())
            again = store.get(event.fact.fact_id)
            assert codec.encode_event(codec.StoreEvent(again)) == raw


def test_corrupt_middle_lines_are_skipped_counted_and_reported(tmp_path: Path) -> None:
    path = write_journal(tmp_path, [
        line("store", fact=fact_obj("f_1", value="one")),
        "{not json",
        line("teleport", fact_id="f_1"),
        "",
        "   ",
        line("store", fact=fact_obj("f_2", key="k2", version="2")),
        line("store", fact=fact_obj("f_3", key="k3", value="three")),
    ])
    with open(path, "ab") as fh:
        fh.write(b'{"op":"delete","fact_id":"f_\xff","deleted_at":"x"}\n')
        fh.write(b'{"op":"store","fact":' + fact_obj_bytes("f_4") + b'}\r\n')
    with cruxsql.open(tmp_path) as store:
        report = store.verify()
        assert [c["line_no"] for c in report.corrupt_lines] == [2, 3, 6, 8]
        assert "invalid JSON" in report.corrupt_lines[0]["reason"]
        assert "unknown op" in report.corrupt_lines[1]["reason"]
        assert "version" in report.corrupt_lines[2]["reason"]
        assert "UTF-8" in report.corrupt_lines[3]["reason"]
        assert {r[0] for r in store.db.execute("SELECT fact_id FROM facts")} == {"f_1", "f_3", "f_4"}
        assert report.view_matches_replay and not report.ok


def fact_obj_bytes(fact_id: str) -> bytes:
    import json
    return json.dumps(fact_obj(fact_id, key="crlf"), separators=(",", ":")).encode()


def test_duplicate_fact_id_keeps_the_first(tmp_path: Path) -> None:
    write_journal(tmp_path, [line("store", fact=fact_obj("f_1", value="first")),
                             line("store", fact=fact_obj("f_1", value="second"))])
    with cruxsql.open(tmp_path) as store:
        assert store.get("f_1").value == "first"
        assert store.db.execute("SELECT skip_reason FROM journal_events WHERE line_no = 2").fetchone()[0] \
            == "duplicate fact_id"


def test_supersede_across_tenants_and_unknown_ids_are_skipped(tmp_path: Path) -> None:
    write_journal(tmp_path, [
        line("store", fact=fact_obj("f_a", tenant_hash="t1")),
        line("store", fact=fact_obj("f_b", tenant_hash="t2")),
        line("supersede", fact_id="f_a", by_fact_id="f_b", superseded_at="x"),
        line("supersede", fact_id="f_a", by_fact_id="f_missing", superseded_at="x"),
        line("delete", fact_id="f_missing", deleted_at="x"),
    ])
    with cruxsql.open(tmp_path) as store:
        assert store.get("f_a").superseded_by is None
        reasons = [r[0] for r in store.db.execute("SELECT skip_reason FROM journal_events WHERE applied = 0")]
        assert reasons == ["tenant mismatch", "unknown fact_id", "tombstone (fact not in the journal)"]


def test_privacy_is_reapplied_and_empty_tenant_defaulted_on_replay(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CORECRUXD_ALWAYS_PRIVATE_PREFIXES", " secret:: ,")
    cruxsql.facts.privacy.install_global(None)
    write_journal(tmp_path, [
        line("store", fact=fact_obj("f_1", entity="github::org/repo")),
        line("store", fact=fact_obj("f_2", entity="secret::x", tenant_hash="")),
        line("store", fact=fact_obj("f_3", entity="public")),
    ])
    with cruxsql.open(tmp_path) as store:
        assert store.get("f_1").private and store.get("f_2").private and not store.get("f_3").private
        assert store.get("f_2").tenant_hash == "default"


def test_latest_only_control_fact_hard_removes_its_chain(tmp_path: Path) -> None:
    ent = "__repo_scan__::t::r"
    write_journal(tmp_path, [
        line("store", fact=fact_obj("f_1", entity=ent, key="content", private=True)),
        line("store", fact=fact_obj("f_2", entity=ent, key="content", private=True, version=2)),
        line("replace_latest", fact=fact_obj("f_3", entity=ent, key="content", private=True, version=3),
             replaced_fact_ids=["f_2"]),
    ])
    with cruxsql.open(tmp_path) as store:
        assert [r[0] for r in store.db.execute("SELECT fact_id FROM facts")] == ["f_3"]


def _consolidation_journal() -> list[str]:
    return [
        line("store", fact=fact_obj("f_a", entity="proj", key="status", value="green")),
        line("store", fact=fact_obj("f_b", entity="proj", key="status", value="GREEN", version=2,
                                    supersedes="f_a")),
        line("consolidate", canonical=fact_obj("f_c", entity="proj", key="status", value="green", version=3,
                                               supersedes="f_b"),
             superseded_fact_ids=["f_a", "f_b"], consolidated_at="t1"),
        line("delete", fact_id="f_a", deleted_at="t2"),
        line("delete", fact_id="f_c", deleted_at="t3"),
    ]


def test_consolidation_applies_and_protects_its_members(tmp_path: Path) -> None:
    write_journal(tmp_path, _consolidation_journal())
    with cruxsql.open(tmp_path) as store:
        assert store.get("f_a").superseded_by == "f_c" and store.get("f_b").superseded_by == "f_c"
        assert not store.get("f_a").deleted and not store.get("f_c").deleted
        assert [r[0] for r in store.db.execute("SELECT source_fact_id FROM consolidation_sources ORDER BY position")] \
            == ["f_a", "f_b"]
        with pytest.raises(cruxsql.Conflict, match="consolidation"):
            store.delete("f_a")


def test_consolidate_undo_restores_sources(tmp_path: Path) -> None:
    lines = _consolidation_journal()[:3] + [
        line("consolidate_undo", canonical_fact_id="f_c", restored_fact_ids=["f_b", "f_a", "f_a"], undone_at="t4"),
        line("consolidate_undo", canonical_fact_id="f_c", restored_fact_ids=["f_a", "f_b"], undone_at="t5"),
    ]
    write_journal(tmp_path, lines)
    with cruxsql.open(tmp_path) as store:
        assert store.get("f_c").deleted
        assert store.get("f_a").superseded_by is None and store.get("f_b").superseded_by is None
        applied = [r[0] for r in store.db.execute("SELECT applied FROM journal_events ORDER BY line_no")]
        assert applied == [1, 1, 1, 1, 1]


def test_consolidate_undo_with_wrong_sources_is_skipped(tmp_path: Path) -> None:
    lines = _consolidation_journal()[:3] + [
        line("consolidate_undo", canonical_fact_id="f_c", restored_fact_ids=["f_a"], undone_at="t4")]
    write_journal(tmp_path, lines)
    with cruxsql.open(tmp_path) as store:
        assert not store.get("f_c").deleted and store.get("f_a").superseded_by == "f_c"


def test_link_sanitisation_clears_cross_chain_references(tmp_path: Path) -> None:
    write_journal(tmp_path, [
        line("store", fact=fact_obj("f_1", key="a", superseded_by="f_2")),
        line("store", fact=fact_obj("f_2", key="b", tenant_hash="other", supersedes="f_1")),
        line("store", fact=fact_obj("f_3", key="c", supersedes="f_gone")),
    ])
    with cruxsql.open(tmp_path) as store:
        assert store.get("f_1").superseded_by is None
        assert store.get("f_2").supersedes is None
        assert store.get("f_3").supersedes == "f_gone"
        assert store.verify().view_matches_replay


def test_open_replays_only_the_new_tail(tmp_path: Path) -> None:
    write_journal(tmp_path, [line("store", fact=fact_obj(f"f_{i}", key=f"k{i}")) for i in range(5)])
    with cruxsql.open(tmp_path) as store:
        assert store.last_replay.events == 5
    with open(tmp_path / "facts.jsonl", "a") as fh:
        fh.write(line("delete", fact_id="f_2", deleted_at="x") + "\n")
    with cruxsql.open(tmp_path) as store:
        assert store.last_replay.events == 1 and not store.last_replay.rebuilt
        assert store.get("f_2").deleted
    with cruxsql.open(tmp_path) as store:
        assert store.last_replay.events == 0


def test_a_journal_rewritten_elsewhere_triggers_a_full_rebuild(tmp_path: Path) -> None:
    write_journal(tmp_path, [line("store", fact=fact_obj(f"f_{i}", key=f"k{i}")) for i in range(5)])
    with cruxsql.open(tmp_path):
        pass
    # another process compacts: same length prefix replaced, new inode
    tmp = tmp_path / "new.jsonl"
    tmp.write_text("".join(line("store", fact=fact_obj(f"g_{i}", key=f"k{i}")) + "\n" for i in range(6)))
    tmp.replace(tmp_path / "facts.jsonl")
    with cruxsql.open(tmp_path) as store:
        assert store.last_replay.rebuilt
        assert {r[0] for r in store.db.execute("SELECT fact_id FROM facts")} == {f"g_{i}" for i in range(6)}
        assert store.verify().ok


def test_deleting_the_view_loses_nothing(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        a = store.store("svc", "owner", "alice")
        store.store("svc", "owner", "bob")
        store.set_horizon(a.fact_id, "volatile")
        before = [f.to_json() for f in store.history("svc", "owner")]
    for name in ("cruxsql.db", "cruxsql.db-wal", "cruxsql.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    with cruxsql.open(tmp_path) as store:
        assert [f.to_json() for f in store.history("svc", "owner")] == before


def test_rebuild_equals_incremental_view(tmp_path: Path) -> None:
    with cruxsql.open(tmp_path) as store:
        for i in range(30):
            store.store(f"e{i % 3}", "k", f"value {i}", tenant=f"t{i % 2}")
        first = store.db.execute("SELECT * FROM facts ORDER BY fact_id").fetchall()
        stats = store.rebuild()
        assert stats.rebuilt and stats.events == 30 + 24  # 30 stores, 24 of them retire a predecessor
        again = store.db.execute("SELECT * FROM facts ORDER BY fact_id").fetchall()
        assert [r[:-2] for r in first] == [r[:-2] for r in again]
        assert store.verify().ok
