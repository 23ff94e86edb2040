"""Memory-panel writes (edit, pin, history, acknowledge_use) and the store-level reads (aggregate_v1,
export / list_page paging, dedup_latest) on real data directories."""

from __future__ import annotations


import pytest

from cruxsql.curation.aggregate import AggregateRequest, aggregate_v1, dedup_latest, parse_leading_number
from cruxsql.errors import ToolError
from cruxsql.curation.memory_panel import (AckBuffer, chrono_display, memory_acknowledge_use,
                                           memory_edit, memory_history, memory_pin)
from cruxsql.curation.paging import decode_cursor, export, list_page
from cruxsql.errors import InvalidInput
from cruxsql.facts.codec import to_f32
from cruxsql.facts.privacy import NamespaceOwner
from cruxsql.facts.store import Store, StoreRequest
from cruxsql.recall.facade import Recall


def test_edit_makes_next_version_with_reason_receipt_and_carries_pin(store: Store) -> None:
    old = store.store("svc", "owner", "alice", confidence=0.8)
    assert memory_pin(store, old.fact_id, agent="a1")["content"][0]["text"] == f"pinned fact {old.fact_id}"
    out = memory_edit(store, old.fact_id, "bob", "handover", agent="a1", actor="a1")
    new = out["structuredContent"]["new_fact"]
    assert out["content"][0]["text"] == f"edited fact {old.fact_id} \u2192 {new['id']} (v2 supersedes {old.fact_id})"
    assert (new["value"], new["version"], new["source_receipt"], new["pinned"], new["confidence"], new["actor"]) == \
        ("bob", 2, "memory_edit:handover", True, to_f32(0.8), "a1")
    assert store.get(old.fact_id).superseded_by == new["id"]
    view = Recall(store).memory_view(agent="a1")
    assert [(f["id"], f["pinned"]) for f in view.facts if f["key"] == "owner"][0] == (new["id"], True)


@pytest.mark.parametrize("case,code,message", [
    ("anonymous", -32602, "memory_edit requires an authenticated agent identity"),
    ("missing", -32602, "fact not found: f_nope"),
    ("other_tenant", -32602, "fact not found: {id}"),
    ("reserved", -32602, "fact not found: {id}"),       # a born-private daemon fact: nobody's to see
    ("other_agent_private", -32602, "fact not found: {id}"),      # exactly as a missing one: no oracle
])
def test_edit_refusals(store: Store, case: str, code: int, message: str) -> None:
    kw = {"reserved": dict(entity="__ops::x", owner=NamespaceOwner("test", ("__ops::",))),
          "other_agent_private": dict(entity="notes", private=True, agent="a2")}.get(case, dict(entity="svc"))
    fact = store.store(kw.pop("entity"), "k", "v", tenant="t2" if case == "other_tenant" else "default", **kw)
    journal = store.journal.path.read_bytes()
    with pytest.raises(ToolError) as err:
        memory_edit(store, "f_nope" if case == "missing" else fact.fact_id, "new",
                    agent=None if case == "anonymous" else "a1")
    assert (err.value.code, str(err.value)) == (code, message.format(id=fact.fact_id))
    assert store.journal.path.read_bytes() == journal


def test_panel_flag_off_and_unpin(store: Store) -> None:
    f = store.store("svc", "k", "v")
    off = memory_pin(store, f.fact_id, agent="a1", env={"CORECRUXD_FEATURE_MEMORY_PANEL": "off"})
    assert off["isError"] is False and off["content"][0]["text"].startswith("memory_pin: memory panel explicitly disabled")
    memory_pin(store, f.fact_id, agent="a1")
    assert memory_pin(store, f.fact_id, False, agent="a1")["structuredContent"] == {"fact_id": f.fact_id, "pinned": False}
    assert Recall(store).memory_view(agent="a1").facts[0]["pinned"] is False


def test_history_versions_text_and_scope(store: Store) -> None:
    v1 = store.store("svc", "k", "one", source_receipt="r1")
    v2 = store.store("svc", "k", "two")
    store.delete(v2.fact_id)
    mine = store.store("svc", "k", "mine", private=True, agent="a1")
    store.store("svc", "k", "theirs", private=True, agent="a2")
    out = memory_history(store, "svc", "k", agent="a1")
    assert [v["id"] for v in out["structuredContent"]["versions"]] == [v1.fact_id, mine.fact_id, v2.fact_id]
    assert out["content"][0]["text"].splitlines()[0] == \
        f"v1: k = one (id={v1.fact_id}, stored_at={chrono_display(v1.stored_at)}, receipt=r1)"
    assert out["content"][0]["text"].splitlines()[2].endswith(" [deleted]")
    assert memory_history(store, fact_id=v1.fact_id, agent=None)["structuredContent"]["versions"][0]["id"] == v1.fact_id
    assert memory_history(store, "nothing", "k", agent="a1")["content"][0]["text"] == "no history for entity=nothing, key=k"
    with pytest.raises(ToolError, match=r"requires either \{entity,key\} or \{fact_id\}"):
        memory_history(store, agent="a1")
    with pytest.raises(ToolError, match="entity is reserved"):
        memory_history(store, "__ops::x", "k", agent="a1")
    assert chrono_display(1_700_000_000_123_000_000) == "2023-11-14 22:13:20.123 UTC"


def test_acknowledge_use_counts_and_buffer(store: Store) -> None:
    ok = store.store("svc", "k", "v", tenant="t")
    gone = store.store("svc", "k2", "v", tenant="t")
    store.delete(gone.fact_id, tenant="t")
    hidden = store.store("x", "k", "v", tenant="t", private=True, agent="a2")
    redacted = store.store("__ops::x", "k", "v", tenant="t", private=True, agent="a1",
                           owner=NamespaceOwner("test", ("__ops::",)))
    buffer = AckBuffer(capacity=2)
    env = {"CORECRUXD_FEATURE_MEMORY_ACK": "1"}
    out = memory_acknowledge_use(store, buffer, "turn-1", [ok.fact_id, gone.fact_id, hidden.fact_id, "f_x", 7,
                                                           redacted.fact_id], agent="a1", tenant="t", env=env,
                                 now_ns=ok.stored_at + 3 * 86_400 * 10**9)
    assert out["memories_used"] == [{"fact_id": ok.fact_id, "topic": "svc", "age_days": 3}]
    # another agent's private fact is not found, as an unknown id is (not_visible would tell it exists)
    assert (out["not_found_count"], out["not_visible_count"], out["redacted_count"], out["filtered_count"]) == (3, 0, 1, 4)
    assert out["receipt_ref"] == "mu_a1_turn-1" and out["intent"] == "answer"
    for turn in ("turn-2", "turn-3", "turn-1"):
        memory_acknowledge_use(store, buffer, turn, [], agent="a1", tenant="t", env=env)
    assert list(buffer.turns) == ["turn-3", "turn-1"]
    off = memory_acknowledge_use(store, AckBuffer(), "t9", [ok.fact_id], agent="a1")
    assert off["feature_enabled"] is False and off["memories_used"] == []
    with pytest.raises(ToolError, match="requires an authenticated agent identity"):
        memory_acknowledge_use(store, buffer, "t", agent=None)
    with pytest.raises(ToolError, match="fact_ids must be an array of strings"):
        memory_acknowledge_use(store, buffer, "t", "f_1", agent="a1")


@pytest.mark.parametrize("text,expected", [
    ("$450,000 approved", 450000.0), ("-12.5C", -12.5), ("v1.2.3", 1.2), ("none", None), ("a-b 7", 7.0),
    ("+3 more", 3.0), ("5.", 5.0),
])
def test_parse_leading_number(text: str, expected) -> None:
    assert parse_leading_number(text) == expected


def test_aggregate_ops_budget_and_temporal_diff(store: Store) -> None:
    facts = store.store_batch([StoreRequest("deal", "amount", v) for v in ("$100", "$250.5", "n/a", "$100")],
                              chain=False)
    by = lambda op, **kw: aggregate_v1(store.db, AggregateRequest(op, "deal", "amount", **kw))  # noqa: E731
    assert by("count") == {"op": "count", "matched": 4, "value": 4, "llm_calls": 0,
                           "tokens_scanned": sum(f.tokens for f in facts), "budget_truncated": False}
    assert by("sum_numeric")["value"] == 450.5 and by("distinct")["value"] == 3
    assert by("count", query="$1")["value"] == 2
    cut = by("count", token_budget=1)
    assert (cut["value"], cut["budget_truncated"]) == (1, True)
    first = store.store("svc", "latency", "120 ms")
    store.store("svc", "latency", "100 ms")
    store.store("svc", "latency", "95 ms")
    diff = aggregate_v1(store.db, AggregateRequest("temporal_diff", "svc", "latency"))
    assert (diff["value"], diff["matched"]) == (-25.0, 3)
    from cruxsql.facts import timestamps
    at = aggregate_v1(store.db, AggregateRequest("temporal_diff", "svc", "latency",
                                                 as_of=timestamps.format_event_time(first.stored_at)))
    assert at["value"] == -25.0
    assert aggregate_v1(store.db, AggregateRequest("temporal_diff", "svc"))["value"] is None
    with pytest.raises(InvalidInput, match="unknown aggregate op 'avg'"):
        aggregate_v1(store.db, AggregateRequest("avg"))


def test_export_and_list_page(store: Store) -> None:
    ids = [store.store(f"e{i}", "k", f"v{i}").fact_id for i in range(5)]
    store.store("hidden", "k", "v", private=True)
    page = export(store.db, limit=2)
    assert [f.fact_id for f in page.facts] == ids[:2] and page.has_more and page.next_cursor == ids[1]
    store.delete(ids[1])   # Crux would restart from the beginning here; cruxsql resumes after the key
    page = export(store.db, cursor=page.next_cursor, limit=2)
    assert [f.fact_id for f in page.facts] == ids[2:4]
    last = export(store.db, cursor=page.next_cursor, limit=2)
    assert [f.fact_id for f in last.facts] == ids[4:] and not last.has_more and last.next_cursor is None
    with pytest.raises(InvalidInput, match="unknown export cursor"):
        export(store.db, cursor="f_nope")
    first = list_page(store.db, limit=2)
    # newest first by stored_at in milliseconds, then fact_id descending (two stores can share a millisecond)
    newest = sorted((i for i in ids if i != ids[1]), key=lambda i: (store.get(i).stored_at // 1_000_000, i),
                    reverse=True)
    assert first.total_visible == 4 and [f.fact_id for f in first.facts] == newest[:2]
    ms, fid = decode_cursor(first.next_cursor)
    assert fid == newest[1] and ms == store.get(fid).stored_at // 1_000_000
    rest = list_page(store.db, cursor=first.next_cursor, limit=5)
    assert [f.fact_id for f in rest.facts] == newest[2:] and not rest.has_more
    for bad in ("nocolon", "x:f_1", "12:", " 12:f"):
        with pytest.raises(InvalidInput, match="invalid list_page cursor"):
            decode_cursor(bad)


def test_dedup_latest(store: Store) -> None:
    a = store.store_batch([StoreRequest("b", "k", "1"), StoreRequest("a", "k", "1"), StoreRequest("b", "k", "2")],
                          chain=False)
    c = store.store("a", "k", "newer")
    got = dedup_latest([store.get(x.fact_id) for x in a] + [c])
    assert [(f.entity, f.fact_id) for f in got] == [("a", c.fact_id), ("b", a[0].fact_id)]
