"""One soak worker: a real process that mutates a data directory in a loop until it is killed.

    python tools/soak/worker.py PHASE DATA_DIR WORKER_NO

It prints `READY` once the store is open, then one line per acknowledged mutation, flushed only after
the call returned (so the line is the acknowledgement):
    S <fact_id>     stored (kept: must survive)
    D <fact_id>     deleted (must stay deleted or be compacted away)
    G <fact_id>     stored under `gone:` (an erasure or retention run may remove it)
    C / E / R       a compaction / erasure / retention run finished
"""

from __future__ import annotations

import sys
import time

from cruxsql.facts import timestamps
from cruxsql.facts.store import Store, StoreRequest
from cruxsql.governance import compaction, erasure, retention


def _ack(*parts: str) -> None:
    print(*parts, flush=True)


def main(phase: str, data_dir: str, worker: int) -> None:
    store = Store(data_dir)
    _ack("READY")
    i = 0
    while True:
        i += 1
        tag = f"w{worker}-{i}"
        if phase in ("writes", "concurrent"):
            fact = store.store(f"svc{i % 5}", f"k{i % 3}", f"value {tag} ünï", confidence=0.5 + (i % 5) / 10)
            _ack("S", fact.fact_id)
        elif phase == "store-batch":
            facts = store.store_batch([StoreRequest(f"batch{j % 4}", f"k{(i + j) % 3}", f"value {tag}-{j}")
                                       for j in range(6)])
            for f in facts:
                _ack("S", f.fact_id)
        elif phase == "delete":
            fact = store.store(f"del{i % 4}", "k", f"to delete {tag}")
            store.delete(fact.fact_id)
            _ack("D", fact.fact_id)
        elif phase == "compactor":
            compaction.compact(store, drop_corrupt=True)
            _ack("C")
            time.sleep(0.05)
        elif phase == "compact":
            kept = store.store(f"keep{i % 3}", "k", f"kept {tag}")
            _ack("S", kept.fact_id)
            gone = store.store("scratch", f"k{i % 7}", f"dropped {tag}")
            store.delete(gone.fact_id)
            _ack("D", gone.fact_id)
            if i % 3 == 0:
                compaction.compact(store, drop_corrupt=True)
                _ack("C")
        elif phase in ("erase", "retention"):
            for j in range(4):
                _ack("G", store.store(f"gone:{i % 5}", f"k{j}", f"erase me {tag}-{j}").fact_id)
            cutoff = timestamps.format_fact_time(timestamps.now_ns())
            # private: never eligible for retention, and outside the erased prefix
            _ack("S", store.store(f"keep:{i % 3}", "k", f"kept {tag}", private=True).fact_id)
            if phase == "erase":
                erasure.erase(store, erasure.Selection(entity_prefixes=("gone:",)), reason=f"soak {tag}")
                _ack("E")
            else:
                retention.apply(store, cutoff)
                _ack("R")
        else:
            raise SystemExit(f"unknown phase {phase!r}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
