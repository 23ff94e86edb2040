"""A mixed journal and a table dump, for the tests that compare two ways of building the same view
(bulk against row-by-row replay, a rebuild against incremental replay, a cluster's catch-up)."""

from __future__ import annotations

import json
import random
from array import array

import apsw

from cruxsql.facts import codec, timestamps
from cruxsql.facts.codec import Fact

T0 = timestamps.parse_ns("2026-03-01T08:00:00Z")
ENTITIES = ("svc", "proj", "secret::vault", "incident:9", "__repo_scan__::t::r", "user")
# a random id, clock readings, and the journal copy's inode (each view replays its own copy)
VOLATILE_FIELDS = {"generation", "updated_at_ns", "applied_at", "inode"}


def _fact(rng: random.Random, i: int, fact_id: str, chain: dict, tenant: str) -> Fact:
    entity, key = rng.choice(ENTITIES), rng.choice(("owner", "status", "content"))
    prev = chain.get((tenant, entity, key))
    value = rng.choice(("green", 'say "hi": now', "[WIP] {draft}", "ünïcode ✓", "tab\there", "\x01 control",
                        "x" * rng.randint(0, 40)))
    ns = T0 + i * 1_000_001_000 + rng.choice((0, 0, 7, 120_000_000, 123_456_000))
    return Fact(
        fact_id=fact_id, tenant_hash=tenant, entity=entity, key=key, value=value,
        source_receipt=rng.choice((None, "rcpt-1")), confidence=codec.to_f32(rng.choice((1.0, 0.5, 0.3333, 0.0))),
        stored_at=ns, tokens=codec.token_cost(value), version=prev[1] + 1 if prev else 1,
        supersedes=prev[0] if prev and rng.random() < 0.9 else rng.choice((None, "f_missing")),
        private=rng.random() < 0.2, horizon_class=rng.choice(codec.HORIZON_CLASSES),
        reverified_at=rng.choice((None, ns + 5)), superseded_by=rng.choice((None, None, None, "f_1")),
        actor=rng.choice((None, "agent-7")), valid_from=rng.choice((None, ns)), valid_to=rng.choice((None, ns + 10**12)),
        access_count=rng.choice((0, 3)), last_accessed_at=rng.choice((None, ns + 9)),
    )


def _odd_line(rng: random.Random, ids: list[str], i: int) -> bytes:
    """A line the fast decoder must hand to the codec: corrupt, or valid but unusual."""
    fid = rng.choice(ids) if ids else "f_none"
    base = json.loads(codec.encode_event(codec.StoreEvent(Fact(
        fact_id=f"f_odd{i}", entity="odd", key="k", value="v", confidence=1.0, stored_at=T0 + i, tokens=1))))
    fact = base["fact"]
    choices = [
        b"{not json",
        json.dumps({"op": "teleport", "fact_id": fid}).encode(),
        json.dumps({"op": "store", "fact": {**fact, "tokens": -1}}).encode(),
        json.dumps({"op": "store", "fact": {**fact, "tokens": 1.0}}).encode(),
        json.dumps({"op": "store", "fact": {**fact, "deleted": 0}}).encode(),
        json.dumps({"op": "store", "fact": {**fact, "horizon_class": "forever"}}).encode(),
        json.dumps({"op": "store", "fact": {**fact, "stored_at": "yesterday"}}).encode(),
        json.dumps({"op": "store", "fact": {**fact, "tenant_hash": None}}).encode(),
        json.dumps({"op": "store", "fact": {**fact, "confidence": 1e300}}).encode(),
        json.dumps({"op": "store", "fact": {k: v for k, v in fact.items() if k != "tokens"}}).encode(),
        b'{"op":"delete","fact_id":"f_\xff","deleted_at":"x"}',
        b'{"op":"delete","fact_id":"' + fid.encode() + b'","fact_id":"f_x","deleted_at":"x"}',
        b'{"op":"delete","fact_id":"' + fid.encode() + b'","junk":1,"junk":2,"deleted_at":"x"}',
        b'{"op":"delete","fact_id":"' + fid.encode() + b'","deleted_at":"x","deep":' + b"[" * 130 + b"]" * 130 + b"}",
        b'{"op":"delete","fact_id":"' + fid.encode() + b'","deleted_at":"x","deep":' + b"[" * 120 + b"]" * 120 + b"}",
        b'{"op":"delete","fact_id":"f_\\ud800","deleted_at":"x"}',
        b'{"op":"delete","fact_id":"' + fid.encode() + b'","deleted_at":"\\u00e9t\\u00e9"}',
        b'{"op":"delete","fact_id":"' + fid.encode() + b'","deleted_at":NaN}',
        json.dumps({"op": "store", "fact": {**fact, "value": 'has "quotes": inside'}}, separators=(", ", ": ")).encode(),
        json.dumps({"op": "store", "fact": {**fact, "stored_at": "2026-03-01T08:00:00.000Z"}}).encode(),
        json.dumps({"op": "store", "fact": {**fact, "stored_at": "2026-03-01T08:00:00+01:00"}}).encode(),
        json.dumps({"op": "store", "fact": {**fact, "stored_at": "2016-12-31T23:59:60.5Z"}}).encode(),
        json.dumps({"op": "store", "fact": {**fact, "confidence": 1, "extra": {"nested": [1, {"a": 2}]}}}).encode(),
        json.dumps({"op": "store", "fact": {**fact, "fact_id": fid}}).encode(),
        json.dumps({"op": "set_validity", "fact_id": fid, "valid_from": "2026-01-01 10:00:00Z", "set_at": "s"}).encode(),
        json.dumps({"op": "reverify", "fact_id": fid, "reverified_at": "2026-01-01T10:00:00.100000Z"}).encode(),
        json.dumps([1, 2]).encode(),
        b"   ",
        b"",
    ]
    return rng.choice(choices)


def mixed_journal(seed: int = 7, events: int = 2500) -> bytes:
    """Every op kind, chains, cross-tenant and unknown references, duplicates, latest-only control facts,
    consolidations (in the last fifth), corrupt and unusual lines, blank and CRLF lines."""
    rng = random.Random(seed)
    out: list[bytes] = []
    ids: list[str] = []
    tenant_of: dict[str, str] = {}
    chain: dict = {}
    for i in range(events):
        at = timestamps.format_event_time(T0 + i * 1_000_000_000 + 17)
        roll = rng.random()
        pick = (lambda: rng.choice(ids) if ids and rng.random() < 0.9 else f"f_unknown{i}")
        if roll < 0.30 or not ids:
            tenant = rng.choice(("default", "default", "t1", ""))
            fid = f"f_{i}" if rng.random() < 0.97 or not ids else rng.choice(ids)
            fact = _fact(rng, i, fid, chain, tenant)
            out.append(codec.encode_event(codec.StoreEvent(fact)).encode())
            if fact.supersedes and rng.random() < 0.8:
                out.append(codec.encode_event(codec.SupersedeEvent(fact.supersedes, fid, at)).encode())
            chain[(tenant, fact.entity, fact.key)] = (fid, fact.version)
            ids.append(fid)
            tenant_of[fid] = tenant
        elif roll < 0.36:
            facts = [_fact(rng, i, f"f_{i}_{j}" if rng.random() < 0.9 or not ids else rng.choice(ids), chain,
                           rng.choice(("default", "t1"))) for j in range(rng.randint(0, 5))]
            out.append(codec.encode_event(codec.StoreBatchEvent(facts)).encode())
            ids += [f.fact_id for f in facts]
        elif roll < 0.46:
            out.append(codec.encode_event(codec.DeleteEvent(pick(), at)).encode())
        elif roll < 0.56:
            out.append(codec.encode_event(codec.SupersedeEvent(pick(), pick(), at)).encode())
        elif roll < 0.60:
            out.append(codec.encode_event(codec.ClearSupersedeEvent(pick(), at)).encode())
        elif roll < 0.65:
            ns = T0 + rng.randrange(10**15)
            out.append(codec.encode_event(codec.SetValidityEvent(
                pick(), rng.choice((None, ns)), rng.choice((None, ns + 10**9)), at)).encode())
        elif roll < 0.69:
            out.append(codec.encode_event(codec.SetHorizonEvent(pick(), rng.choice(codec.HORIZON_CLASSES), at)).encode())
        elif roll < 0.73:
            out.append(codec.encode_event(codec.ReverifyEvent(pick(), T0 + i * 3_000_000_123)).encode())
        elif roll < 0.76:
            fact = Fact(fact_id=f"f_{i}", entity="__repo_scan__::t::r", key="content", value=f"scan {i}",
                        confidence=1.0, stored_at=T0 + i, tokens=2, private=True)
            replaced = [pick() for _ in range(rng.randint(0, 2))]
            op = rng.choice(("store", "replace"))
            out.append(codec.encode_event(codec.StoreEvent(fact) if op == "store"
                                          else codec.ReplaceLatestEvent(fact, replaced)).encode())
            ids.append(fact.fact_id)
        elif roll < 0.85 and i > events * 0.8:  # late: the fast path covers deletes and supersessions until then
            sources = [pick() for _ in range(rng.randint(1, 3))]
            canonical = Fact(fact_id=f"f_c{i}", entity="svc", key="owner", value="merged", confidence=1.0,
                             stored_at=T0 + i, tokens=2, tenant_hash=tenant_of.get(sources[0], "default"))
            kind = rng.random()
            if kind < 0.5:
                out.append(codec.encode_event(codec.ConsolidateEvent(canonical, sources, at)).encode())
                ids.append(canonical.fact_id)
                out.append(codec.encode_event(codec.DeleteEvent(rng.choice([canonical.fact_id, *sources]), at)).encode())
            elif kind < 0.75:
                out.append(codec.encode_event(codec.ConsolidationProvenanceEvent(
                    pick(), sources, tenant_of.get(sources[0], "default"), at)).encode())
            else:
                out.append(codec.encode_event(codec.ConsolidateUndoEvent(pick(), sources, at)).encode())
        else:
            out.append(_odd_line(rng, ids, i))
        if rng.random() < 0.01:
            out[-1] += b"\r"
    return b"".join(line + b"\n" for line in out)


def tables(db: apsw.Connection) -> dict[str, list[tuple]]:
    """Every table's rows (sorted), VOLATILE_FIELDS blanked, and the schema."""
    out = {}
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                              "ORDER BY name").fetchall():
        columns = [r[1] for r in db.execute(f'PRAGMA table_info("{name}")')]
        rows = [tuple(None if c in VOLATILE_FIELDS else v for c, v in zip(columns, row))
                for row in db.execute(f'SELECT * FROM "{name}"')]
        out[name] = sorted(rows, key=repr)
    out["sqlite_master"] = sorted(db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(), key=repr)
    return out


def present_text_index(db: apsw.Connection) -> tuple[list[tuple], set[tuple[int, int]]]:
    """The recall_text rows and (gram, seq) postings of the facts in the view."""
    present = {seq for (seq,) in db.execute("SELECT seq FROM facts")}
    rows = [r for r in db.execute("SELECT * FROM recall_text ORDER BY seq") if r[0] in present]
    postings = {(gram, (block << 16) | offset)
                for gram, block, blob in db.execute("SELECT gram, block, seqs FROM recall_grams")
                for offset in array("H", blob)}
    return rows, {(gram, seq) for gram, seq in postings if seq in present}
