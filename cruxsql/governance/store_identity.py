"""A store's identity: `cruxsql-store.json` in the data directory, `{"store_id": "st_<hex>"}`.

A backup records the path and identity of the store it was taken of, so that a restore can tell whether
that path still holds the same store (whose erasure ledger then says what was erased since) or something
else (a directory deleted and started again). The identity is made the first time a backup needs it. A
restore keeps the identity of the directory it replaces; restored into the path the backup came from,
once that store is gone, it takes the backup's (it is the same store, brought back).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Optional

from ..facts.files import write_file_durably

IDENTITY_NAME = "cruxsql-store.json"


def read_id(data_dir: Path) -> Optional[str]:
    """The store id of `data_dir`, or None (no identity yet, or unreadable)."""
    try:
        value = json.loads((Path(data_dir) / IDENTITY_NAME).read_bytes()).get("store_id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def write_id(data_dir: Path, store_id: str) -> None:
    write_file_durably(Path(data_dir) / IDENTITY_NAME,
                       json.dumps({"store_id": store_id}).encode("utf-8") + b"\n", mode=0o600)


def ensure_id(data_dir: Path) -> str:
    """The store id of `data_dir`, made and written now when it has none."""
    existing = read_id(data_dir)
    if existing is not None:
        return existing
    store_id = "st_" + uuid.uuid4().hex
    write_id(data_dir, store_id)
    return store_id
