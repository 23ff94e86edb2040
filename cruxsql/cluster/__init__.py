"""Cluster mode: the journal becomes a replicated, totally ordered JetStream stream (one per tenant
group); each node's `facts.jsonl` and SQLite view are its mirror of it.

    config.py    which cluster a data directory mirrors (cluster.json)
    link.py      the NATS connection: publish with message ids and expected sequences, fetch, registry
    mirror.py    stream -> local journal -> view, in order, with the version-race rule
    store.py     ClusterStore: writes acknowledged by a quorum, then read on the writing node
    generation.py  compaction (so erasure, retention) as a new stream generation
    node.py      the long-running node process
    status.py    the node registry and `cluster status`
    proofs.py    `verify --erasure --cluster`: every node's proof of its own directory
    loopback.py  nats-server processes on 127.0.0.1 (tests, benchmarks, a one-host trial)

nats-py and nats-server come with the `cluster` extra; nothing here is imported unless a data
directory is bound to a cluster.
"""
