"""Shared helpers for the retention / compaction / erasure tests (no tests here)."""

from __future__ import annotations

import random
from pathlib import Path

from cruxsql.facts import codec, timestamps
from cruxsql.facts.privacy import NamespaceOwner
from cruxsql.facts.store import Store, StoreRequest

# Histories write raw wrapped and control entities, as a Crux daemon's journal holds them.
FIXTURE_OWNER = NamespaceOwner("test fixtures", ("__agent::", "__repo_scan__::"))


def append_events(store: Store, events) -> None:
    """Append raw events (e.g. consolidations the store has no method for yet) and catch the view up."""
    with store.writer_lock():
        store.refresh()
        store.journal.append([codec.encode_event(e) for e in events])
        store.refresh()


def now_text() -> str:
    return timestamps.format_event_time(timestamps.now_ns())


def random_history(store: Store, seed: int, steps: int = 120) -> None:
    """A mixed history: stores, batches, chains, deletes, supersede/clear, validity, horizon, reverify,
    consolidations (raw events), latest-only control snapshots, two tenants, private facts."""
    rng = random.Random(seed)
    tenants = ["default", "acme"]
    entities = ["user:1", "user:2", "proj", "__agent::bob::notes", "decisions::x"]
    keys = ["name", "status", "email"]
    for i in range(steps):
        live = [r for r in store.db.execute(
            "SELECT fact_id, tenant_hash, entity, key, superseded_by FROM facts WHERE deleted = 0")]
        roll = rng.random()
        try:
            if roll < 0.40 or not live:
                store.store(rng.choice(entities), rng.choice(keys), f"value {i} \u00e9\"q\" {rng.random()}",
                            tenant=rng.choice(tenants), confidence=rng.choice([1.0, 0.95, 0.5]),
                            source_receipt=rng.choice([None, "crx_1"]), actor=rng.choice([None, "agent:a"]),
                            owner=FIXTURE_OWNER)
            elif roll < 0.50:
                store.store_batch([StoreRequest(rng.choice(entities), rng.choice(keys), f"batch {i}.{j}",
                                                tenant_hash=rng.choice(tenants)) for j in range(rng.randint(1, 3))],
                                  owner=FIXTURE_OWNER)
            elif roll < 0.62:
                store.delete(rng.choice(live)[0], owner=FIXTURE_OWNER)
            elif roll < 0.67:
                sup = [r for r in live if r[4]]
                if sup:
                    store.clear_supersede(rng.choice(sup)[0], owner=FIXTURE_OWNER)
            elif roll < 0.72:
                store.set_validity(rng.choice(live)[0], 10**18, 2 * 10**18, owner=FIXTURE_OWNER)
            elif roll < 0.77:
                store.set_horizon(rng.choice(live)[0], rng.choice(["volatile", "stable"]), owner=FIXTURE_OWNER)
            elif roll < 0.82:
                store.reverify(rng.choice(live)[0], owner=FIXTURE_OWNER)
            elif roll < 0.86:
                a, b = rng.sample(live, 2) if len(live) > 1 else (live[0], live[0])
                if a[1] == b[1] and a[0] != b[0]:
                    store.supersede(a[0], b[0], owner=FIXTURE_OWNER)
            elif roll < 0.93:
                # consolidate two current facts of one tenant into a canonical (raw journal event)
                cands = [r for r in live if r[4] is None]
                groups = {}
                for r in cands:
                    groups.setdefault(r[1], []).append(r)
                group = max(groups.values(), key=len) if groups else []
                if len(group) >= 2:
                    srcs = rng.sample(group, 2)
                    canonical = codec.Fact(
                        fact_id="f_" + format(rng.getrandbits(128), "032x"), tenant_hash=srcs[0][1],
                        entity=srcs[0][2], key=srcs[0][3], value=f"canonical {i}", confidence=0.8,
                        stored_at=timestamps.now_ns(), tokens=3, version=9, source_receipt="consolidation:x",
                        horizon_class="stable")
                    append_events(store, [codec.ConsolidateEvent(canonical, [s[0] for s in srcs], now_text())])
                    if rng.random() < 0.3:
                        append_events(store, [codec.ConsolidateUndoEvent(canonical.fact_id, [s[0] for s in srcs],
                                                                         now_text())])
            else:
                store.store("__repo_scan__::t::r", "content", f"scan snapshot {i}", private=True, owner=FIXTURE_OWNER)
        except Exception as exc:  # guard refusals (consolidation members) are part of the history
            if type(exc).__name__ not in ("Conflict",):
                raise


def all_file_bytes(data_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(data_dir)): p.read_bytes() for p in Path(data_dir).rglob("*") if p.is_file()}


def fact_state(store: Store) -> dict[str, dict]:
    """Every fact in the view, without the replay-order columns."""
    out = {}
    for fact in store.db.execute("SELECT fact_id FROM facts"):
        out[fact[0]] = store.get(fact[0]).to_dict()
    return out
