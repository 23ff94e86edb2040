"""The long-running node: keeps its data directory mirrored with the stream (so reads on this host see
the fleet's facts within moments), reports itself in the group's node registry for `cluster status`,
and answers `verify --erasure --cluster` with its own directory's proof."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

from ..documents import DocumentLane
from ..documents.segments import SegmentError
from ..errors import CruxsqlError
from .config import ClusterConfig, read_config, write_config
from .link import ClusterLink, ClusterUnavailable
from .proofs import answer_proof_requests, proof_subject
from .status import NodeReport
from .store import ClusterStore

POLL_SECONDS = 0.05
REPORT_SECONDS = 1.0


def check_binding(data_dir: Path, config: ClusterConfig) -> None:
    """Refuse `config` when `data_dir` is bound to another group already (changes nothing)."""
    bound = read_config(data_dir)
    if bound is not None and bound.group != config.group:
        raise CruxsqlError(f"{data_dir} mirrors group {bound.group!r}, not {config.group!r}")


def bind(data_dir: Path, config: ClusterConfig) -> ClusterConfig:
    """Bind `data_dir` to `config`'s cluster, or check it is bound to the same group already."""
    check_binding(data_dir, config)
    if read_config(data_dir) != config:
        write_config(data_dir, config)
    return config


def run_node(data_dir: Path, config: ClusterConfig, stop: threading.Event,
             on_ready: Optional[Callable[[], None]] = None, on_position: Optional[Callable[[int], None]] = None,
             **options: Any) -> None:
    """Mirror the stream into `data_dir` until `stop` is set; report to the registry every second.
    Rides out the cluster's outages once running (keeps retrying); raises for a refusal at start
    (e.g. a stream the cluster cannot host) and for a local failure."""
    # nothing is written until the cluster answered and holds the stream: a mistyped URL or a cluster
    # that is down leaves the directory as it was (unbound, no view), and the next start may differ
    check_binding(data_dir, config)
    link = ClusterLink(config.urls, config.group)
    try:
        link.ensure_stream(config.replicas)
        bind(data_dir, config)
    except BaseException:
        link.close()
        raise
    store = ClusterStore(data_dir, config, link=link, **options)
    store.link.serve(proof_subject(config.group))
    if on_ready:
        on_ready()
    try:
        host, reported, position, refusal = socket.gethostname(), 0.0, -1, ""
        while not stop.is_set():
            try:
                with store.writer_lock():
                    now_at = store.mirror.catch_up(store).seq
                if now_at != position and on_position:
                    on_position(now_at)
                position = now_at
                answer_proof_requests(store.link, store, config.node)
                if time.monotonic() - reported >= REPORT_SECONDS:
                    refusal = _pull_documents(store, refusal)
                    store.link.report_node(config.node, NodeReport(config.node, host, os.getpid(), position,
                                                                   time.time()).encode(), config.replicas)
                    reported = time.monotonic()
            except ClusterUnavailable:
                stop.wait(0.5)
                continue
            stop.wait(POLL_SECONDS)
    finally:
        store.close()


def _pull_documents(store: ClusterStore, said: str) -> str:
    """Fetch, verify and index the fleet's new segments; a refusal goes to stderr once (until it changes)."""
    try:
        DocumentLane(store, embedder=None)
    except SegmentError as exc:
        if str(exc) != said:
            print(f"Error: {exc}", file=sys.stderr, flush=True)
        return str(exc)
    return ""
