"""Synthetic Crux journals for the benchmarks: realistic op mix, written fast with the codec."""

from __future__ import annotations

import os
import random
from pathlib import Path

from cruxsql.facts import codec, timestamps
from cruxsql.facts.codec import Fact

WORDS = ("deploy canary rollout service owner alice bob carol database index latency budget token "
         "incident pager runbook schema migration replica shard cache eviction queue worker cron "
         "invoice customer region europe asia america kernel patch release freeze").split()


def generate(path: Path, events: int, seed: int = 1, tenants: int = 4) -> int:
    """Write `events` journal lines (stores with chains, supersedes, deletes, validity changes). They go to
    a `.partial` file renamed to `path` once complete, so an interrupted run leaves no short journal
    that a later run would take for a whole one."""
    rng = random.Random(seed)
    t0 = timestamps.parse_ns("2026-01-01T00:00:00Z")
    live: list[str] = []
    chains: dict[tuple[str, str, str], tuple[str, int]] = {}
    written = 0
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", encoding="utf-8") as fh:
        while written < events:
            roll = rng.random()
            now = t0 + written * 1_000_003_217
            at = timestamps.format_event_time(now + 500)
            if roll < 0.06 and live:
                fid = live.pop(rng.randrange(len(live)))
                fh.write(codec.encode_event(codec.DeleteEvent(fid, at)) + "\n")
                written += 1
                continue
            if roll < 0.09 and live:
                fid = rng.choice(live)
                fh.write(codec.encode_event(codec.SetValidityEvent(fid, now, None, at)) + "\n")
                written += 1
                continue
            tenant = f"tenant{rng.randrange(tenants)}"
            entity = f"{rng.choice(('svc', 'proj', 'user', 'incident:', 'bench:'))}{rng.randrange(20000)}"
            key = rng.choice(("owner", "status", "region", "note", "summary"))
            value = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 14))) + f" #{written}"
            prev = chains.get((tenant, entity, key))
            fact = Fact(fact_id=f"f_{rng.getrandbits(128):032x}", tenant_hash=tenant, entity=entity, key=key,
                        value=value, confidence=codec.to_f32(rng.choice((0.5, 0.7, 0.9, 0.95, 1.0))),
                        stored_at=now, tokens=codec.token_cost(value), version=prev[1] + 1 if prev else 1,
                        supersedes=prev[0] if prev else None,
                        horizon_class=codec.default_horizon_for_entity(entity))
            fh.write(codec.encode_event(codec.StoreEvent(fact)) + "\n")
            written += 1
            if prev and written < events:
                fh.write(codec.encode_event(codec.SupersedeEvent(prev[0], fact.fact_id, at)) + "\n")
                written += 1
            chains[(tenant, entity, key)] = (fact.fact_id, fact.version)
            live.append(fact.fact_id)
    os.replace(partial, path)
    return written
