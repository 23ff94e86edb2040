"""`verify --erasure --cluster`: every running node scans its own data directory for the content the
erasure reports (replicated facts, the same on every node) say is gone, and answers with its proof."""

from __future__ import annotations

import json
from typing import Any

from ..facts.store import Store
from ..governance.erasure_proof import verify_erasure
from .config import ClusterConfig
from .link import ClusterLink
from .status import cluster_status

ANSWER_SECONDS = 30.0


def proof_subject(group: str) -> str:
    """Outside the stream's subjects (`cruxsql.<group>.>`): a request must not become a journal event."""
    return f"cruxsql-rpc.{group}.verify-erasure"


def answer_proof_requests(link: ClusterLink, store: Store, node: str) -> None:
    """Answer the queued requests (the node's loop calls this between catch-ups)."""
    for reply_to, _ in link.requests():
        result = verify_erasure(store)
        link.reply(reply_to, json.dumps({"node": node, **result}, default=str).encode())


def collect_erasure_proofs(config: ClusterConfig, timeout: float = ANSWER_SECONDS) -> dict[str, Any]:
    """Ask every node the registry shows up; `ok` only when each of them answered with a clean proof."""
    expected = sorted(n["node"] for n in cluster_status(config).nodes if n["up"])
    link = ClusterLink(config.urls, config.group)
    try:
        answers = [json.loads(raw) for raw in link.gather(proof_subject(config.group), b"{}", len(expected), timeout)]
    finally:
        link.close()
    proofs = {a.pop("node"): a for a in answers if isinstance(a, dict) and "node" in a}
    missing = sorted(set(expected) - set(proofs))
    return {"nodes": proofs, "missing": missing,
            "ok": bool(proofs) and not missing and all(p["ok"] for p in proofs.values())}
