"""The curation tools through the SDK's own client over stdio: real `cruxsql mcp` processes on one store,
seeded through the Python API on the same data directory (the servers catch up before each call)."""

from __future__ import annotations

import re
from pathlib import Path

import blake3
import cbor2
import pytest

import cruxsql
from cruxsql.curation.memory_panel import chrono_display
from cruxsql.facts import codec, timestamps
from cruxsql.facts.codec import Fact
from cruxsql.facts.store import StoreRequest
from cruxsql.governance import legal_holds
from support.journal_files import journal_bytes

pytestmark = pytest.mark.slow

CURATION = ["memory_contradictions", "memory_consolidate", "memory_consolidate_undo", "memory_edit", "memory_pin",
            "memory_history", "memory_acknowledge_use", "memory_forget_dry_run", "memory_forget", "fact_history"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-curation")


@pytest.fixture(scope="module")
def alice(mcp_client, data_dir):
    return mcp_client(data_dir, "--agent", "alice", "--tenant", "acme", env={"CORECRUXD_FEATURE_MEMORY_ACK": "1"})


@pytest.fixture(scope="module")
def bob(mcp_client, data_dir):
    return mcp_client(data_dir, "--agent", "bob", "--tenant", "acme")


@pytest.fixture(scope="module")
def anon_globex(mcp_client, data_dir):
    return mcp_client(data_dir, "--tenant", "globex")


def seed(data_dir: Path, entity: str, key: str, *values: str, **kw) -> list[str]:
    """Live facts of one (entity, key) at once, in tenant acme (a batch never supersedes within itself)."""
    with cruxsql.open(data_dir) as store:
        return [f.fact_id for f in store.store_batch([StoreRequest(entity, key, v, "acme", **kw) for v in values],
                                                           chain=False)]


def error(result) -> tuple[str, object]:
    assert result.is_error
    return result.content[0].text, result.structured_content


def test_the_curation_tools_are_listed_with_crux_arguments(alice):
    tools = {t.name: t for t in alice.tools()}
    assert set(CURATION) <= set(tools)
    required = {name: tools[name].input_schema.get("required", []) for name in CURATION}
    assert required == {
        "memory_contradictions": [], "memory_consolidate": ["entity", "key", "canonical_value", "target_fact_ids"],
        "memory_consolidate_undo": ["canonical_fact_id", "source_fact_ids"], "memory_edit": ["fact_id", "new_value"],
        "memory_pin": ["fact_id"], "memory_history": [], "memory_acknowledge_use": ["turn_id"],
        "memory_forget_dry_run": ["scope"], "memory_forget": ["scope", "reason"], "fact_history": ["entity", "key"]}
    assert tools["memory_forget"].input_schema["properties"]["scope"]["properties"]["type"]["enum"] == \
        ["entity_prefix", "key_glob", "passport_id", "before_timestamp", "tenant_id"]
    assert tools["memory_contradictions"].input_schema["properties"] == {
        "limit": {"default": 50, "type": "integer"}, "token_budget": {"default": 500, "type": "integer"}}


def test_contradiction_consolidation_and_undo_round_trip(alice, bob, anon_globex, data_dir):
    yes, no = seed(data_dir, "svc:api", "status", "yes", "no", confidence=0.8)
    found = alice.call("memory_contradictions")
    assert found.structured_content == {"candidates": [
        {"entity": "svc:api", "key": "status", "reason": "opposite_polarity_same_entity_key", "polarity_a": "negative",
         "polarity_b": "positive", "fact_ids": [no, yes], "values": ["no", "yes"]}], "count": 1, "limit": 50,
        "dry_run": True}
    assert found.content[0].text.startswith("1 contradiction candidate(s) detected; see structured `candidates`")
    assert anon_globex.text("memory_contradictions") == \
        "no contradiction candidates (no active opposite-polarity facts sharing entity+key)"

    before = journal_bytes(data_dir)
    base = {"entity": "svc:api", "key": "status", "canonical_value": "degraded"}
    refusals = [
        (alice, {**base, "target_fact_ids": [yes, no], "protected_fact_ids": [no]},
         (f"target fact is protected by caller: {no}", {"reason": "target_pinned", "protected": True})),
        (alice, {**base, "target_fact_ids": [yes, "f_nope"]},
         ("target fact not found: f_nope", {"reason": "target_not_found", "protected": True})),
        (alice, {**base, "target_fact_ids": [yes]},      # the other live version must be named too
         (f"current prior version must be an explicitly validated target: {no}",
          {"reason": "implicit_prior_not_target", "protected": True})),
        (alice, {**base, "target_fact_ids": []},
         ("target_fact_ids must be a non-empty array", {"param": "target_fact_ids", "required": True})),
        (alice, {**base, "target_fact_ids": [yes, no], "canonical_value": "x" * (2 * 1024 * 1024)},
         ("`canonical_value` is 2097152 bytes; the limit is 1048576", None)),
        (anon_globex, {**base, "target_fact_ids": [yes, no]},
         ("memory_consolidate requires an authenticated passport (anonymous calls rejected)",
          {"tool": "memory_consolidate", "requires_passport": True})),
        (bob, {**base, "target_fact_ids": [yes, no], "horizon_class": "weekly"},
         ("memory_consolidate: `horizon_class`: Input should be 'volatile', 'medium', 'stable' or 'none'", None)),
    ]
    for client, arguments, expected in refusals:
        assert error(client.call("memory_consolidate", arguments)) == expected
    assert journal_bytes(data_dir) == before                     # every refusal left the journal byte-identical

    done = alice.call("memory_consolidate", {**base, "target_fact_ids": [yes, no], "consolidation_id": "ops-1",
                                             "horizon_class": "volatile"})
    receipt = done.structured_content["receipt"]
    cid = receipt["canonical_fact_id"]
    assert done.content[0].text == f"consolidated 2 target(s) into canonical fact {cid} (receipt ops-1); history preserved"
    assert done.structured_content == {"status": "consolidated", "receipt": {
        "consolidation_id": "ops-1", "canonical_fact_id": cid,
        "canonical_hash": "blake3:" + blake3.blake3(b"degraded").hexdigest(),
        "superseded_fact_ids": [yes, no], "source_fact_ids": [yes, no]}}
    with cruxsql.open(data_dir) as store:
        canonical = store.get(cid)
        assert (canonical.tenant_hash, canonical.actor, canonical.value, canonical.horizon_class,
                canonical.source_receipt) == ("acme", "alice", "degraded", "volatile", "consolidation:ops-1")
        assert [store.get(f).superseded_by for f in (yes, no)] == [cid, cid]
    assert alice.call("memory_contradictions").structured_content["count"] == 0

    before = journal_bytes(data_dir)
    assert error(bob.call("memory_consolidate_undo", {"canonical_fact_id": cid, "source_fact_ids": [yes]})) == \
        (f"consolidation undo source set does not match canonical edges: {cid}",
         {"reason": "undo_source_mismatch", "protected": True})
    assert error(anon_globex.call("memory_consolidate_undo", {"canonical_fact_id": cid, "source_fact_ids": [yes, no]}))[0] \
        == "memory_consolidate_undo requires an authenticated passport (anonymous calls rejected)"
    assert journal_bytes(data_dir) == before
    undone = bob.call("memory_consolidate_undo", {"canonical_fact_id": cid, "source_fact_ids": [no, yes]})
    assert undone.content[0].text == f"undid consolidation {cid}: canonical deleted, 2 source fact(s) live again"
    assert undone.structured_content == {"status": "undone", "canonical_fact_id": cid,
                                         "restored_fact_ids": sorted([yes, no])}
    after_undo = journal_bytes(data_dir)
    again = bob.call("memory_consolidate_undo", {"canonical_fact_id": cid, "source_fact_ids": [yes, no]})
    assert again.content[0].text == f"consolidation {cid} was already undone; nothing written"
    assert again.structured_content["status"] == "already_undone" and journal_bytes(data_dir) == after_undo
    assert alice.call("memory_contradictions").structured_content["candidates"][0]["fact_ids"] == [no, yes]


def test_edit_pin_and_both_histories(alice, bob, anon_globex, data_dir):
    fid = alice.call("store_fact", {"entity": "db", "key": "engine", "value": "postgres 15"}).structured_content["fact_id"]
    pin = alice.call("memory_pin", {"fact_id": fid})
    assert (pin.content[0].text, pin.structured_content) == (f"pinned fact {fid}", {"fact_id": fid, "pinned": True})

    edited = alice.call("memory_edit", {"fact_id": fid, "new_value": "postgres 16", "reason": "upgrade"})
    new = edited.structured_content["new_fact"]
    nid = new["id"]
    assert edited.content[0].text == f"edited fact {fid} \u2192 {nid} (v2 supersedes {fid})"
    assert (edited.structured_content["old_fact_id"], edited.structured_content["reason"]) == (fid, "upgrade")
    assert {k: new[k] for k in ("entity", "key", "value", "version", "pinned", "source_receipt", "actor")} == \
        {"entity": "db", "key": "engine", "value": "postgres 16", "version": 2, "pinned": True,
         "source_receipt": "memory_edit:upgrade", "actor": "alice"}
    def pins(client) -> dict[str, bool]:
        return {f["id"]: f["pinned"] for f in client.call("memory_view", {"entity": "db"}).structured_content["facts"]}
    assert (pins(alice), pins(bob)) == ({fid: True, nid: True}, {fid: False, nid: False})    # pins are per agent

    with cruxsql.open(data_dir) as store:
        at = {f: chrono_display(store.get(f).stored_at) for f in (fid, nid)}
    history = bob.call("memory_history", {"fact_id": fid})
    assert [(v["id"], v["version"], v["supersedes"], v["source_receipt"]) for v in
            history.structured_content["versions"]] == [(fid, 1, None, None), (nid, 2, fid, "memory_edit:upgrade")]
    assert history.content[0].text == (f"v1: engine = postgres 15 (id={fid}, stored_at={at[fid]}, receipt=)\n"
                                       f"v2: engine = postgres 16 (id={nid}, stored_at={at[nid]}, receipt=memory_edit:upgrade)")
    assert alice.text("fact_history", {"entity": "db", "key": "engine"}) == (
        f"v1: [db] {fid} = postgres 15 (confidence=1.00, stored_at={at[fid]}, supersedes=-, actor=alice)\n"
        f"v2: [db] {nid} = postgres 16 (confidence=1.00, stored_at={at[nid]}, supersedes={fid}, actor=alice)")

    secret = alice.call("store_fact", {"entity": "notes", "key": "secret", "value": "kiwi", "private": True})
    sid = secret.structured_content["fact_id"]
    assert alice.text("fact_history", {"entity": "notes", "key": "secret"}).startswith(f"v1: [notes] {sid} = kiwi ")
    assert bob.text("fact_history", {"entity": "notes", "key": "secret"}) == "no history for entity=notes, key=secret"
    assert bob.text("memory_history", {"entity": "notes", "key": "secret"}) == "no history for entity=notes, key=secret"
    assert anon_globex.text("fact_history", {"entity": "db", "key": "engine"}) == "no history for entity=db, key=engine"
    seed(data_dir, "vault", "code", "1234", private=True)       # private without an owner: nobody sees it
    assert alice.text("fact_history", {"entity": "vault", "key": "code"}) == "no history for entity=vault, key=code"

    before = journal_bytes(data_dir)
    assert error(bob.call("memory_edit", {"fact_id": sid, "new_value": "mango"})) == \
        (f"fact not found: {sid}", {"fact_id": sid})          # alice's private fact answers as a missing one
    assert error(bob.call("memory_pin", {"fact_id": sid}))[0] == f"fact not found: {sid}"
    assert error(bob.call("memory_history", {"fact_id": sid})) == (f"fact not found: {sid}", {"fact_id": sid})
    assert error(anon_globex.call("memory_edit", {"fact_id": nid, "new_value": "mysql"})) == \
        ("memory_edit requires an authenticated agent identity", {"requires_agent_identity": True})
    assert error(alice.call("memory_pin", {"fact_id": "f_missing"})) == \
        ("fact not found: f_missing", {"fact_id": "f_missing"})
    assert error(alice.call("memory_history", {"key": "engine"})) == \
        ("memory_history requires either {entity,key} or {fact_id}",
         {"required_alternatives": ["entity+key", "fact_id"]})
    assert error(alice.call("memory_edit", {"fact_id": nid, "new_value": 16}))[0] == \
        "memory_edit: `new_value`: Input should be a valid string"
    assert journal_bytes(data_dir) == before


def test_acknowledge_use_counts_what_the_agent_may_see(alice, bob, data_dir):
    public = alice.call("store_fact", {"entity": "ack", "key": "pub", "value": "shared"}).structured_content["fact_id"]
    mine = bob.call("store_fact", {"entity": "ack", "key": "own", "value": "bob's", "private": True}).structured_content["fact_id"]
    acked = alice.call("memory_acknowledge_use", {"turn_id": "t1", "fact_ids": [public, mine, "f_missing"],
                                                  "intent": "decision", "note": "ignored, as in Crux"})
    assert acked.content[0].text == ("acknowledged 1 memories for turn t1 (intent=decision, actor=alice, "
                                     "receipt_ref=mu_alice_t1, redacted=0, not_found=2, not_visible=0)")
    assert acked.structured_content == {
        "turn_id": "t1", "intent": "decision", "feature_enabled": True, "receipt_ref": "mu_alice_t1",
        "memories_used": [{"fact_id": public, "topic": "ack", "age_days": 0}], "filtered_count": 2,
        "redacted_count": 0, "not_found_count": 2, "not_visible_count": 0}
    off = bob.call("memory_acknowledge_use", {"turn_id": "t1", "fact_ids": [mine]})   # bob's server: flag unset
    assert off.structured_content == {"turn_id": "t1", "feature_enabled": False, "memories_used": [],
                                      "filtered_count": 0}
    assert error(alice.call("memory_acknowledge_use", {"turn_id": "t2", "intent": "guess"}))[0] == \
        "memory_acknowledge_use: `intent`: Input should be 'answer', 'decision', 'tool_call' or 'implicit'"


def test_forget_dry_run_then_forget_with_pins_holds_and_a_receipt(alice, bob, anon_globex, data_dir):
    old, pinned = seed(data_dir, "proj:x", "note", "first", "second")
    held = seed(data_dir, "proj:held", "note", "evidence")[0]
    with cruxsql.open(data_dir) as store:
        hold, _ = legal_holds.place_hold(store, "acme", "litigation", ["proj:held"])
    alice.text("memory_pin", {"fact_id": pinned})
    before = journal_bytes(data_dir)
    scope = {"type": "entity_prefix", "value": "proj:x"}
    dry = alice.call("memory_forget_dry_run", {"scope": scope})
    assert dry.content[0].text == ("dry-run: 1 facts would be forgotten (entity_prefix=proj:x); see structured "
                                   "`facts_that_would_be_affected`")
    assert [r["fact_id"] for r in dry.structured_content["facts_that_would_be_affected"]] == [old]
    assert bob.call("memory_forget_dry_run", {"scope": scope}).structured_content["count"] == 2   # alice's pin only
    assert alice.call("memory_forget_dry_run", {"scope": scope, "include_pinned": True}).structured_content["count"] == 2
    assert anon_globex.text("memory_forget_dry_run", {"scope": {"type": "entity_prefix", "value": ""}}) == \
        "dry-run: no facts match scope (entity_prefix=)"

    refusals = [
        (alice, {"scope": {"type": "entity_prefix", "value": "proj:held"}, "reason": "tidy"},
         ("memory_forget refused: 1 active legal hold(s) cover the requested facts",
          {"error": "LEGAL_HOLD_ACTIVE", "hold_ids": [hold.hold_id], "facts_blocked": 1,
           "holds": [{"hold_id": hold.hold_id, "tenant_id": "acme", "entity_prefixes": ["proj:held"],
                      "reason": "litigation"}]})),
        (alice, {"scope": {"type": "everything", "value": ""}, "reason": "tidy"},
         ("invalid scope: unknown variant `everything`",
          {"param": "scope", "accepted_types": ["entity_prefix", "key_glob", "passport_id", "before_timestamp",
                                                "tenant_id"], "error": "unknown variant `everything`"})),
        (alice, {"scope": scope, "reason": "  "},
         ("memory_forget requires a non-empty `reason`", {"param": "reason", "required": True})),
        (alice, {"scope": scope, "reason": "tidy", "tenant_id": "globex"},
         ("tenant_id 'globex' is not this connection's tenant", None)),
        (anon_globex, {"scope": scope, "reason": "tidy"},
         ("memory_forget requires an authenticated agent identity (passport)",
          {"param": "passport", "requires_agent_identity": True})),
    ]
    for client, arguments, expected in refusals:
        assert error(client.call("memory_forget", arguments)) == expected
    assert journal_bytes(data_dir) == before

    forgot = alice.call("memory_forget", {"scope": scope, "reason": "gdpr request", "tenant_id": "acme"})
    fields = forgot.structured_content
    assert re.fullmatch(r"forget receipt r_forget_[0-9a-f]{16} emitted: 1 facts soft-deleted \(scope=entity_prefix="
                        r"proj:x\); recovery window ends \S+", forgot.content[0].text)
    assert (fields["facts_affected"], fields["passport_id"], fields["scope"], fields["recovery_window_seconds"]) == \
        (1, "alice", scope, 7 * 86_400)
    body_bytes = bytes.fromhex(fields["receipt_body_cbor_hex"])
    assert fields["receipt_body_hash_hex"] == blake3.blake3(body_bytes).hexdigest()
    body = cbor2.loads(body_bytes)
    assert (body["receipt_id"], body["tenant_id"], body["reason"]) == (fields["forget_receipt_id"], "acme", "gdpr request")
    assert body["facts_affected"] == [{"fact_id": old, "pre_forget_value_hash_hex": blake3.blake3(b"first").hexdigest(),
                                       "entity": "proj:x", "key": "note"}]
    with cruxsql.open(data_dir) as store:
        assert [store.get(f).deleted for f in (old, pinned, held)] == [True, False, False]


def test_lines_a_crux_daemon_appended_are_caught_up_before_curation_reads(alice, data_dir):
    """A daemon appends to facts.jsonl without touching cruxsql.db: each read replays what is new first."""
    def append(letter: str, value: str) -> str:
        fact = Fact(fact_id=f"f_{letter * 32}", tenant_hash="acme", entity="daemon", key="enabled", value=value,
                    confidence=0.5, stored_at=timestamps.now_ns(), tokens=1)
        with open(data_dir / "facts.jsonl", "a", encoding="utf-8") as journal_file:
            journal_file.write(codec.encode_event(codec.StoreEvent(fact)) + "\n")
        return fact.fact_id

    on = append("a", "true")
    assert alice.text("fact_history", {"entity": "daemon", "key": "enabled"}).startswith(f"v1: [daemon] {on} = true ")
    off = append("b", "false")
    (found,) = [c for c in alice.call("memory_contradictions").structured_content["candidates"]
                if c["entity"] == "daemon"]
    assert found["fact_ids"] == [off, on]
