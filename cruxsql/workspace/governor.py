"""The ConvergenceGovernor: break agent retry loops at the tool layer.

An 8-slot window of a session's recent call signatures; when a call makes three identical ones
inside the window, its reply gets one line naming a better verb. The window is the session's last
ledger rows, so it survives across CLI processes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Optional, Sequence

WINDOW = 8
REPEATS = 3
BETTER_VERB = {
    "ctx_search": "ctx_read the top file (after two searches, read) or ctx_context for a task-shaped block",
    "ctx_read": "ctx_expand the handle you hold, or ctx_read mode=lines:START-END for the span you need",
    "ctx_doc": "ctx_doc --section PATTERN for the part you need",
    "ctx_impact": "ctx_read the dependents it listed",
    "ctx_context": "ctx_search with one identifier, then ctx_read",
    "ctx_expand": "ctx_read the file the handle points into",
}


def call_signature(verb: str, args: dict[str, Any]) -> str:
    blob = json.dumps({"verb": verb, "args": args}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def nudge(verb: str, signature: str, recent: Sequence[str]) -> Optional[str]:
    """The nudge line when `signature` plus the previous WINDOW-1 calls hold REPEATS identical calls."""
    window = list(recent[-(WINDOW - 1):]) + [signature]
    count = window.count(signature)
    if count < REPEATS:
        return None
    return f"nudge: same {verb} call {count}x in the last {len(window)} calls — try {BETTER_VERB[verb]}"
