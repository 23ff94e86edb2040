"""query_facts against an independent brute-force oracle on randomised stores (hypothesis).

The oracle below re-implements the Crux pipeline in plain Python over every fact of the view. For
`known_at` it replays only the journal lines written at or before T into a separate store, so
transaction-time travel is checked against an exact replay rather than against the timeline tables.
"""

from __future__ import annotations

import math

import pytest

import numpy as np
import tempfile
from pathlib import Path
from typing import Any, Optional

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cruxsql.facts import codec, timestamps, view
from cruxsql.facts.codec import Fact
from cruxsql.facts.store import Store
from cruxsql.recall import crc_v1, text_index
from cruxsql.recall.facade import Recall
from cruxsql.recall.tokens import compact_json, estimate_tokens_str

pytestmark = pytest.mark.slow

HOUR_NS = 3_600_000_000_000
BASE = timestamps.parse_ns("2026-03-01T00:00:00Z")
STEP = 7 * HOUR_NS + 123_456_789

WORDS = ["deploy", "Deploy", "STATUS", "green", "Straße", "ΟΔΥΣΣΕΥΣ", "Σίσυφος", "İstanbul", "naïve", "ǅemal",
         "日本語", "😀ok", "x", "ab", "a\u0301b", "ﬁle", "notes", "proj"]
SEPS = [" ", "\u3000", "\x1c", "-", "\t"]
ENTITIES = ["proj:alpha", "Proj:ΑΣ", "notes", "__agent::bob::notes", "__agent::alice::notes", "__agent::bob::Proj:x",
            "github::repo", "__bootstrap__::doc:setup", "svc", "__agent::bob"]
KEYS = ["status", "Owner", "ΚΛΕΙΔΙ", "k"]
TENANTS = ["default", "t1", "t2"]
CONFIDENCES = [1.0, 0.9, 0.5, 0.3]
HORIZONS = ["none", "volatile", "medium", "stable"]

# Rust char::is_whitespace (Unicode White_Space), written out independently of cruxsql.recall.scope
RUST_WS = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F,
           0x205F, 0x3000}


# --- journal generation ------------------------------------------------------------------------------

# skewed choices so that version chains, ties and cross-agent collisions are common
ENTITY_I = st.sampled_from([0, 0, 0, 1, 2, 3, 3, 4, 5, 6, 7, 8, 9])
KEY_I = st.sampled_from([0, 0, 0, 1, 2, 3])
TENANT_I = st.sampled_from([0, 0, 0, 1, 2])
STORE_OP = st.tuples(st.just("store"), ENTITY_I, KEY_I,
              st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPS)), min_size=1, max_size=4),
              TENANT_I, st.sampled_from(CONFIDENCES), st.sampled_from(HORIZONS),
              st.sampled_from([False] * 5 + [True]), st.sampled_from([0, 0, 0, 1, 3, 50, 10**6]))
op_strategy = st.one_of(
    STORE_OP, STORE_OP, STORE_OP, STORE_OP,
    st.tuples(st.just("batch"), ENTITY_I, st.sampled_from(WORDS), st.sampled_from(WORDS), TENANT_I,
              st.sampled_from(CONFIDENCES)),
    st.tuples(st.just("delete"), st.integers(0, 50)),
    st.tuples(st.just("supersede"), st.integers(0, 50), st.integers(0, 50)),
    st.tuples(st.just("clear"), st.integers(0, 50)),
    st.tuples(st.just("validity"), st.integers(0, 50), st.integers(-3, 30), st.integers(1, 30)),
    st.tuples(st.just("horizon"), st.integers(0, 50), st.sampled_from(HORIZONS)),
    st.tuples(st.just("reverify"), st.integers(0, 50)),
)


def build_lines(ops: list[tuple]) -> list[tuple[int, str]]:
    """(event time, journal line) per op; times strictly increase."""
    out: list[tuple[int, str]] = []
    facts: list[Fact] = []
    chains: dict[tuple, Fact] = {}
    n = 0
    for op in ops:
        n += 1
        t = BASE + n * STEP
        at = timestamps.format_event_time(t)
        kind = op[0]
        if kind == "store":
            _, ei, ki, words, ti, conf, horizon, private, accesses = op  # journals Crux compacted carry access_count
            value = "".join(w + s for w, s in words).rstrip()
            entity, key, tenant = ENTITIES[ei], KEYS[ki], TENANTS[ti]
            prev = chains.get((tenant, entity, key))
            f = Fact(fact_id=f"f_{n:04d}", entity=entity, key=key, value=value, confidence=codec.to_f32(conf),
                     stored_at=t, tokens=codec.token_cost(value), tenant_hash=tenant,
                     version=prev.version + 1 if prev else 1, supersedes=prev.fact_id if prev else None,
                     private=private, horizon_class=horizon, access_count=accesses)
            out.append((t, codec.encode_event(codec.StoreEvent(f))))
            if prev is not None:
                n += 1
                t2 = BASE + n * STEP
                out.append((t2, codec.encode_event(codec.SupersedeEvent(prev.fact_id, f.fact_id,
                                                                        timestamps.format_event_time(t2)))))
            chains[(tenant, entity, key)] = f
            facts.append(f)
            continue
        if kind == "batch":
            # two facts with one stored_at: ties broken by fact_id
            _, ei, w1, w2, ti, conf = op
            batch = [Fact(fact_id=f"f_{n:04d}{suffix}", entity=ENTITIES[ei], key=f"b{suffix}", value=w, confidence=codec.to_f32(conf),
                          stored_at=t, tokens=codec.token_cost(w), tenant_hash=TENANTS[ti])
                     for suffix, w in (("b", w1), ("a", w2))]
            out.append((t, codec.encode_event(codec.StoreBatchEvent(batch))))
            facts.extend(batch)
            continue
        if not facts:
            continue
        target = facts[op[1] % len(facts)].fact_id
        if kind == "delete":
            out.append((t, codec.encode_event(codec.DeleteEvent(target, at))))
        elif kind == "supersede":
            by = facts[op[2] % len(facts)].fact_id
            if by != target:
                out.append((t, codec.encode_event(codec.SupersedeEvent(target, by, at))))
        elif kind == "clear":
            out.append((t, codec.encode_event(codec.ClearSupersedeEvent(target, at))))
        elif kind == "validity":
            start = BASE + op[2] * STEP
            out.append((t, codec.encode_event(codec.SetValidityEvent(target, start, start + op[3] * STEP, at))))
        elif kind == "horizon":
            out.append((t, codec.encode_event(codec.SetHorizonEvent(target, op[2], at))))
        elif kind == "reverify":
            out.append((t, codec.encode_event(codec.ReverifyEvent(target, t))))
    return out


def write(path: Path, lines: list[tuple[int, str]], mode: str = "w") -> None:
    with open(path, mode, encoding="utf-8") as fh:
        for _, text in lines:
            fh.write(text + "\n")


# --- the oracle -------------------------------------------------------------------------------------

def ws_split(text: str) -> list[str]:
    terms, cur = [], []
    for ch in text:
        if ord(ch) in RUST_WS:
            if cur:
                terms.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        terms.append("".join(cur))
    return terms


def visible(f: Fact, agent: Optional[str]) -> Optional[str]:
    if f.entity.startswith("__agent::"):
        rest = f.entity[len("__agent::"):]
        if "::" in rest:
            owner, logical = rest.split("::", 1)
            return logical if agent and agent == owner else None
    return None if f.private else f.entity


def eff_of(f: Fact, now_ns: int) -> tuple[float, str, int]:
    anchor_ns = f.reverified_at if f.reverified_at is not None else f.stored_at
    anchor, now = anchor_ns // 1_000_000, now_ns // 1_000_000
    hours = max(0, (now_ns - anchor_ns) // 3_600_000_000_000)
    if f.horizon_class == "none":
        return float(f.confidence), "fresh", hours
    if anchor <= 0 or now <= 0 or anchor > now:
        return float(f.confidence), "unknown", hours
    base = {"volatile": 24 * 3_600_000, "medium": 35 * 86_400_000, "stable": 365 * 86_400_000}[f.horizon_class]
    factor = min(max(1 + 0.25 * math.log(f.access_count + 1), 1.0), 4.0)
    if now - anchor > int(base * factor):
        return float(f.confidence) * 0.5, "stale", hours
    return float(f.confidence), "fresh", hours


def oracle(facts: list[Fact], *, query, entity, entity_prefix, tenant, agent, top_k, token_budget, floor, as_of,
           include_superseded, contract, now) -> dict[str, Any]:
    agent = agent or None
    tenant = tenant if tenant and tenant.strip() else "default"
    terms = None if query is None else ws_split(query.lower())
    out = []
    for f in facts:
        if f.deleted:
            continue
        if as_of is not None and not ((f.valid_from is None or f.valid_from <= as_of)
                                      and (f.valid_to is None or as_of < f.valid_to)):
            continue
        if not include_superseded and f.superseded_by is not None:
            continue
        vis = visible(f, agent)
        if vis is None or f.tenant_hash != tenant:
            continue
        if entity_prefix is not None and not (f.entity.startswith(entity_prefix) or vis.startswith(entity_prefix)):
            continue
        if entity is not None and not (f.entity == entity or vis == entity):
            continue
        if terms is not None and not any(t in f.value.lower() or t in f.key.lower() or t in vis.lower() for t in terms):
            continue
        e, fresh, hours = eff_of(f, now)
        out.append((f, vis, e, fresh, hours))
    out.sort(key=lambda x: (-x[2], -x[0].stored_at, x[0].fact_id))
    matched = len(out)
    floor = None if floor is None else float(np.float32(floor))
    below = sum(1 for x in out if floor is not None and x[2] < floor)
    kept = [x for x in out if floor is None or x[2] >= floor]
    crc = contract == "crc-v1"
    if token_budget is not None and not crc:
        picked, used = [], 0
        for x in kept:
            if picked and used + x[0].tokens > token_budget:
                break
            picked.append(x)
            used += x[0].tokens
            if used >= token_budget:
                break
        # the lines count in full against the budget (cruxsql's): drop from the end while over, first always
        while len(picked) > 1 and estimate_tokens_str("\n".join(
                f"[{vis}] {f.key} = {f.value} (confidence={f.confidence:.2f}, effective_confidence={e:.2f}, "
                f"freshness={fresh}, age_hours={hours})" for f, vis, e, fresh, hours in picked)) > token_budget:
            picked.pop()
    else:
        picked = kept[: 10 if top_k is None else top_k]
    rows = [{"fact_id": f.fact_id, "entity": vis, "key": f.key, "value": f.value, "confidence": f.confidence,
             "effective_confidence": e, "horizon_class": f.horizon_class, "freshness": fresh, "age_hours": hours,
             "superseded_by": f.superseded_by, "actor": f.actor} for f, vis, e, fresh, hours in picked]
    result = {"rows": rows, "filtered_below_threshold": below, "matched": matched,
              "left_out": matched - below - len(rows), "total_tokens": sum(x[0].tokens for x in picked)}
    if crc and rows and token_budget is not None and (least := estimate_tokens_str(compact_json(
            crc_v1.wrap_facts_tiered(rows[:1], entity, query, 1, len(rows))))) > token_budget:
        result["compact"] = least          # below the least envelope: compact lines instead (cruxsql's)
    elif crc and rows:
        costs = [x[0].tokens for x in picked]
        if token_budget is not None:
            full, used = 0, 0
            for c in costs:
                if full and used + c > token_budget:
                    break
                used += c
                full += 1
                if used >= token_budget:
                    break
            full = max(full, 1)
            emit = max(min(full + max(0, token_budget - sum(costs[:full])) // 40, len(costs)), full)
            # the envelope's own text counts too (cruxsql's): emit fewer until it fits, one at least
            while emit > 1 and estimate_tokens_str(compact_json(crc_v1.wrap_facts_tiered(
                    rows[:emit], entity, query, min(full, emit), len(rows)))) > token_budget:
                emit -= 1
            full = min(full, emit)
        else:
            full = emit = len(costs)
        result["crc"] = ([r["fact_id"] for r in rows[:emit]], full, len(rows))
    return result


def implementation(recall: Recall, **kw) -> dict[str, Any]:
    res = recall.query_facts(**kw)
    out = {"rows": res.rows, "filtered_below_threshold": res.filtered_below_threshold, "matched": res.matched,
           "left_out": res.left_out, "total_tokens": res.total_tokens}
    if res.compact is not None:
        out["compact"] = res.compact.envelope_tokens
    if res.crc_v1 is not None:
        env = res.crc_v1
        out["crc"] = ([p["id"] for p in env["pointers"]], len(env["content"]), env["meta"].get("total_candidates",
                                                                                              len(env["pointers"])))
    return out


_KNOWN_CACHE: dict[tuple, list[Fact]] = {}


def facts_known_at(lines: list[tuple[int, str]], known_at: int, tmp: Path) -> list[Fact]:
    """Exact answer for `known_at`: replay only the lines written at or before T."""
    cache_key = (str(tmp), known_at)
    if cache_key in _KNOWN_CACHE:
        return _KNOWN_CACHE[cache_key]
    sub = Path(tempfile.mkdtemp(dir=tmp))
    write(sub / "facts.jsonl", [l for l in lines if l[0] <= known_at])
    with Store(sub) as s:
        _KNOWN_CACHE.clear()
        _KNOWN_CACHE[cache_key] = list(view.iter_facts(s.db))
        return _KNOWN_CACHE[cache_key]


def mostly_none(strategy, nones: int = 3):
    """None `nones` times out of nones + 1, so that most queries keep most facts."""
    return st.integers(0, nones).flatmap(lambda i: strategy if i == 0 else st.none())


query_text = st.one_of(
    st.lists(st.one_of(st.sampled_from(WORDS), st.sampled_from(WORDS).flatmap(
        lambda w: st.tuples(st.integers(0, len(w)), st.integers(1, 5)).map(lambda ij: w[ij[0]:ij[0] + ij[1]]))),
        min_size=0, max_size=3).flatmap(lambda ws: st.sampled_from(SEPS).map(lambda s: s.join(ws))),
    st.sampled_from(["ASE", "ΣΊΣ", "İST", "ΟΔΥΣΣΕΥΣ", "i\u0307st", "ǆ", "agent", "bob", "s", "e", "o", "proj", "OWNER",
                     "κλειδι", "ner"]))

query_strategy = st.fixed_dictionaries({
    "query": mostly_none(query_text, 1),
    "entity": mostly_none(st.sampled_from(ENTITIES + ["Proj:x"]), 4),
    "entity_prefix": mostly_none(st.sampled_from(["", "pro", "Pro", "__agent::", "no", "github", "__boot"]), 4),
    "tenant": st.sampled_from([None, None, "default", "t1", " "]),
    "agent": st.sampled_from([None, "bob", "bob", "alice", ""]),
    "top_k": mostly_none(st.integers(0, 12), 2),
    "token_budget": mostly_none(st.one_of(st.integers(0, 30), st.integers(150, 700)), 2),
    "floor": mostly_none(st.sampled_from([0.0, 0.3, 0.45, 0.5, 0.9, 1.0]), 2),
    "as_of": mostly_none(st.integers(-2, 40).map(lambda i: BASE + i * STEP), 4),
    "known_at": mostly_none(st.integers(0, 60), 1),  # just after journal line i (see the test)
    "include_superseded": st.booleans(),
    "contract": st.sampled_from(["legacy", "crc-v1"]),
})


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(ops=st.lists(op_strategy, min_size=8, max_size=30), queries=st.lists(query_strategy, min_size=1, max_size=6),
       split=st.integers(0, 30), now_steps=st.integers(0, 400))
def test_query_facts_matches_oracle(ops, queries, split, now_steps):
    old_bits, old_size = text_index.BLOCK_BITS, text_index.BLOCK_SIZE
    text_index.BLOCK_BITS, text_index.BLOCK_SIZE = 2, 4  # many postings blocks, merges on resume
    try:
        lines = build_lines(ops)
        now = BASE + (len(ops) * 2 + now_steps // 10) * STEP + now_steps * HOUR_NS
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            data = tmp / "data"
            data.mkdir()
            cut = min(split, len(lines))
            write(data / "facts.jsonl", lines[:cut])
            with Store(data) as store:
                recall = Recall(store)
                recall.query_facts("x", now=now)  # index the first part, then catch up incrementally
                write(data / "facts.jsonl", lines[cut:], mode="a")
                for q in queries:
                    kw = dict(query=q["query"], entity=q["entity"], entity_prefix=q["entity_prefix"],
                              tenant=q["tenant"], agent=q["agent"], top_k=q["top_k"],
                              token_budget=q["token_budget"], as_of=q["as_of"],
                              include_superseded=q["include_superseded"], contract=q["contract"], now=now)
                    if q["known_at"] is not None and lines:
                        known_at = lines[q["known_at"] % len(lines)][0] + 1
                        facts = facts_known_at(lines, known_at, tmp)
                        got = implementation(recall, known_at=known_at, min_effective_confidence=q["floor"], **kw)
                    else:
                        store.refresh()
                        facts = list(view.iter_facts(store.db))
                        got = implementation(recall, min_effective_confidence=q["floor"], **kw)
                    want = oracle(facts, floor=q["floor"], **kw)
                    assert got == want, (q, lines)
    finally:
        text_index.BLOCK_BITS, text_index.BLOCK_SIZE = old_bits, old_size


RESERVED_VIEW = ("__agent::", "__ops::", "__bootstrap__::", "__memory_pin::", "__work__::", "__decisions__::",
                 "__project_layer__::", "__tenant_metadata__::")


def view_oracle(facts: list[Fact], entity, key, top_k, budget, tenant, agent) -> list[str]:
    rows = []
    for f in facts:
        vis = visible(f, agent or None)
        if f.deleted or vis is None or f.tenant_hash != (tenant or "default") or vis.startswith(RESERVED_VIEW):
            continue
        if (entity is not None and vis != entity) or (key is not None and f.key != key):
            continue
        rows.append(f)
    rows.sort(key=lambda f: (-f.stored_at, -f.confidence, f.fact_id))
    out, used = [], 0
    for f in rows[:max(1, top_k)]:
        if out and used + f.tokens > budget:
            break
        out.append(f.fact_id)
        used += f.tokens
    return out


def bootstrap_oracle(facts: list[Fact], prefix, query, budget, tenant, agent) -> list[str]:
    terms = None if query is None else ws_split(query.lower())
    rows = []
    for f in facts:
        if f.deleted or f.tenant_hash != (tenant or "default"):
            continue
        vis = visible(f, agent or None)
        if vis is None and f.entity.startswith("__bootstrap__::") and not f.entity.startswith("__agent::"):
            vis = f.entity  # the daemon-owned bootstrap namespace itself is readable
        if vis is None or not (f.entity.startswith(prefix) or vis.startswith(prefix)):
            continue
        if terms is not None and not any(t in f.value.lower() or t in f.key.lower() or t in vis.lower() for t in terms):
            continue
        rows.append(f)
    rows.sort(key=lambda f: (-f.confidence, -f.stored_at, f.fact_id))
    rows = rows[:100]
    out, used = [], 0
    for f in rows:
        if budget is not None and out and used + f.tokens > budget:
            break
        out.append(f.fact_id)
        used += f.tokens
        if budget is not None and used >= budget:
            break
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op_strategy, min_size=8, max_size=30),
       views=st.lists(st.fixed_dictionaries({
           "entity": mostly_none(st.sampled_from(ENTITIES + ["Proj:x"]), 2), "key": mostly_none(st.sampled_from(KEYS), 2),
           "top_k": st.integers(0, 8), "budget": st.integers(0, 20), "tenant": st.sampled_from([None, "t1"]),
           "agent": st.sampled_from([None, "bob"]), "topic": st.sampled_from([None, "docs", "doc", "setup"]),
           "query": mostly_none(query_text, 1), "bbudget": mostly_none(st.integers(0, 10), 1)}), min_size=1, max_size=4))
def test_memory_view_and_bootstrap_match_oracle(ops, views):
    lines = build_lines(ops)
    with tempfile.TemporaryDirectory() as tmp_name:
        data = Path(tmp_name)
        write(data / "facts.jsonl", lines)
        with Store(data) as store:
            recall = Recall(store)
            facts = list(view.iter_facts(store.db))
            for v in views:
                got = [f["id"] for f in recall.memory_view(v["entity"], v["key"], v["top_k"], v["budget"],
                                                           tenant=v["tenant"], agent=v["agent"]).facts]
                assert got == view_oracle(facts, v["entity"], v["key"], v["top_k"], v["budget"], v["tenant"],
                                          v["agent"]), v
                res = recall.get_bootstrap(v["topic"], v["query"], v["bbudget"], tenant=v["tenant"], agent=v["agent"])
                prefix = {None: "__bootstrap__::", "docs": "__bootstrap__::doc:", "doc": "__bootstrap__::doc:",
                          "setup": "__bootstrap__::setup:"}[v["topic"]]
                assert res.prefix == prefix
                assert [f["fact_id"] for f in res.facts] == bootstrap_oracle(
                    facts, prefix, v["query"], v["bbudget"], v["tenant"], v["agent"]), v
