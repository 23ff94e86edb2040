"""Idempotency keys: a retried write with the same client key returns the first result, appends nothing.

`facts.jsonl` is shared with Crux daemons and carries only ops Crux replays, so the keys live in a
journal of cruxsql's own, `idempotency.jsonl` beside it, which Crux never reads. Under the writer lock, a
keyed write first appends (and fsyncs) an *intent* line naming its key, its scope (tenant and agent), a
hash of the request and the fact ids it is about to write; then it appends its events to `facts.jsonl`
as any write does; then a *done* line. A retry with the same key, within the window, is answered from
those lines and the view:

- done, or the intent's facts are in the view (the first attempt landed, whatever happened after):
  the first result, nothing appended;
- intent only, and its facts are not in the journal: the first attempt never reached `facts.jsonl`
  (it failed, or the process died between the two appends), so the write is made now, with the same
  fact ids;
- done but the facts are gone (a compaction or an erasure removed them since): refused (Conflict),
  never stored a second time.

The same key with a different request is refused. Keys are kept for `IDEMPOTENCY_WINDOW_S` (24 h by
default, `CRUXSQL_IDEMPOTENCY_WINDOW_S`): an older key is forgotten and the file is rewritten without
expired lines once they are most of it. The lines hold keys, hashes and fact ids, never a value.
Each process reads the file incrementally from where it last stopped (its "replay"), under the lock.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import blake3

from ..errors import Conflict, InvalidInput
from . import timestamps
from .files import fsync_dir, write_file_durably

IDEMPOTENCY_NAME = "idempotency.jsonl"
IDEMPOTENCY_WINDOW_S = 24 * 3600
MAX_KEY_BYTES = 256
_PRUNE_MIN_LINES = 1000


def window_s() -> float:
    text = os.environ.get("CRUXSQL_IDEMPOTENCY_WINDOW_S")
    try:
        return float(text) if text else IDEMPOTENCY_WINDOW_S
    except ValueError:
        raise InvalidInput(f"CRUXSQL_IDEMPOTENCY_WINDOW_S must be a number of seconds, not {text!r}") from None


def check_key(key: str) -> str:
    """A client key: 1..256 bytes of UTF-8 text."""
    if not isinstance(key, str) or not key.strip():
        raise InvalidInput("idempotency_key must be a non-empty string")
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise InvalidInput(f"idempotency_key is longer than {MAX_KEY_BYTES} bytes")
    return key


def request_hash(op: str, request: Any) -> str:
    """What identifies a request beside its key: a retry must ask for the same thing."""
    text = json.dumps([op, request], sort_keys=True, ensure_ascii=False, default=str)
    return blake3.blake3(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass
class KeyRecord:
    """What the idempotency journal says about one (scope, key)."""

    op: str
    request_hash: str
    fact_ids: list[str]
    at_ns: int
    done: bool = False


@dataclass
class IdempotencyJournal:
    """`idempotency.jsonl` of one data directory, as far as this process has read it."""

    data_dir: Path
    records: dict[tuple[str, str], KeyRecord] = field(default_factory=dict)
    _inode: Optional[int] = None
    _offset: int = 0
    _lines: int = 0

    @property
    def path(self) -> Path:
        return self.data_dir / IDEMPOTENCY_NAME

    def load(self) -> None:
        """Read the lines appended since the last load (from the start after a rewrite). Under the lock."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.records, self._inode, self._offset, self._lines = {}, None, 0, 0
            return
        if st.st_ino != self._inode or st.st_size < self._offset:
            self.records, self._inode, self._offset, self._lines = {}, st.st_ino, 0, 0
        if st.st_size == self._offset:
            return
        with open(self.path, "rb") as fh:
            fh.seek(self._offset)
            data = fh.read(st.st_size - self._offset)
        end = data.rfind(b"\n") + 1  # an unterminated last line (a crash mid-append) is not a record
        for raw in data[:end].splitlines():
            self._apply(raw)
        self._offset += end

    def _apply(self, raw: bytes) -> None:
        try:
            obj = json.loads(raw)
            scope_key = (obj["scope"], obj["key"])
        except (ValueError, KeyError, TypeError):
            return  # a line this version does not understand holds no key of its
        self._lines += 1
        if obj.get("done"):
            if scope_key in self.records:
                self.records[scope_key].done = True
        else:
            self.records[scope_key] = KeyRecord(obj["op"], obj["request_hash"], list(obj["fact_ids"]), obj["at_ns"])

    def lookup(self, scope: str, key: str, op: str, req_hash: str) -> Optional[KeyRecord]:
        """The live record of (scope, key), or None; Conflict if the key was used for another request."""
        rec = self.records.get((scope, key))
        if rec is None or rec.at_ns < timestamps.now_ns() - int(window_s() * 1e9):
            return None
        if rec.op != op or rec.request_hash != req_hash:
            raise Conflict(f"idempotency key {key!r} was already used for a different request")
        return rec

    def intend(self, scope: str, key: str, op: str, req_hash: str, fact_ids: list[str]) -> None:
        """Durably note that the write keyed `key` is about to append `fact_ids` (before it does)."""
        now = timestamps.now_ns()
        self._append({"key": key, "scope": scope, "op": op, "request_hash": req_hash, "fact_ids": fact_ids,
                      "at_ns": now}, sync=True)
        self.records[(scope, key)] = KeyRecord(op, req_hash, fact_ids, now)

    def finish(self, scope: str, key: str) -> None:
        """Note that the write keyed `key` reached `facts.jsonl` (not synced: an intent whose facts are in
        the view says as much)."""
        self._append({"key": key, "scope": scope, "done": True}, sync=False)
        if (scope, key) in self.records:
            self.records[(scope, key)].done = True

    def _append(self, obj: dict[str, Any], sync: bool) -> None:
        self.load()
        self._prune()
        data = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"
        created = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            fsync_dir(self.data_dir)
        st = os.stat(self.path)
        if self._inode is None:
            self._inode = st.st_ino
        if self._inode == st.st_ino and st.st_size == self._offset + len(data):
            self._offset, self._lines = st.st_size, self._lines + 1
        else:
            self.load()

    def _prune(self) -> None:
        """Rewrite the file without expired keys once they are most of its lines."""
        if self._lines < _PRUNE_MIN_LINES:
            return
        horizon = timestamps.now_ns() - int(window_s() * 1e9)
        live = {k: r for k, r in self.records.items() if r.at_ns >= horizon}
        if len(live) * 2 > self._lines:
            return
        lines = []
        for (scope, key), rec in live.items():
            lines.append({"key": key, "scope": scope, "op": rec.op, "request_hash": rec.request_hash,
                          "fact_ids": rec.fact_ids, "at_ns": rec.at_ns})
            if rec.done:
                lines.append({"key": key, "scope": scope, "done": True})
        write_file_durably(self.path, b"".join(
            json.dumps(o, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"
            for o in lines), mode=0o600)
        self.records, self._inode, self._offset, self._lines = {}, None, 0, 0
        self.load()
