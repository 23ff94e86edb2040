"""Build journal lines as the Rust daemon writes them, for tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def fact_obj(fact_id: str, entity: str = "e", key: str = "k", value: str = "v", **extra: Any) -> dict[str, Any]:
    """A Fact JSON object as the Rust daemon writes it (defaults filled in)."""
    obj = {"fact_id": fact_id, "tenant_hash": "default", "entity": entity, "key": key, "value": value,
           "source_receipt": None, "confidence": 1.0, "stored_at": "2026-05-27T10:00:00Z", "tokens": 1,
           "deleted": False, "version": 1, "private": False, "horizon_class": "none"}
    obj.update(extra)
    return obj


def line(op: str, **fields: Any) -> str:
    return json.dumps({"op": op, **fields}, ensure_ascii=False, separators=(",", ":"))


def write_journal(data_dir: Path, lines: list[str]) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "facts.jsonl"
    path.write_bytes("".join(l + "\n" for l in lines).encode("utf-8"))
    return path
