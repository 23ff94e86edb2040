"""`cruxsql cluster status`: the stream (last sequence, leader, replicas) and every node that reported
itself in the registry, with how far behind the stream its mirror is."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from .config import ClusterConfig
from .link import ClusterLink


@dataclass
class NodeReport:
    """What a node puts in the registry bucket each second."""

    node: str
    host: str
    pid: int
    position: int
    reported_at: float

    def encode(self) -> bytes:
        return json.dumps(self.__dict__).encode()

    @classmethod
    def decode(cls, raw: bytes) -> "NodeReport":
        obj = json.loads(raw)
        return cls(obj["node"], obj["host"], int(obj["pid"]), int(obj["position"]), float(obj["reported_at"]))


STALE_AFTER_SECONDS = 5.0
"""A node that has not reported for this long is shown as down (nodes report every second)."""


@dataclass
class ClusterStatus:
    stream: str
    last_seq: int
    messages: int
    leader: str
    replicas: list[dict[str, Any]]
    nodes: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def cluster_status(config: ClusterConfig) -> ClusterStatus:
    link = ClusterLink(config.urls, config.group)
    try:
        state = link.state()
        reports = link.node_reports(config.replicas)
    finally:
        link.close()
    now = time.time()
    nodes = []
    for name in sorted(reports):
        report = NodeReport.decode(reports[name])
        age = max(0.0, now - report.reported_at)
        nodes.append({"node": report.node, "host": report.host, "pid": report.pid, "position": report.position,
                      "lag": max(0, state.last_seq - report.position), "up": age < STALE_AFTER_SECONDS,
                      "reported_seconds_ago": round(age, 1)})
    return ClusterStatus(state.name, state.last_seq, state.messages, state.leader or "", state.replicas, nodes)
