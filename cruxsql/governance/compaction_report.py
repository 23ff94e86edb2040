"""What a compaction reports: Crux's `CompactionReport` fields plus what cruxsql measures (compaction.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional


@dataclass
class CompactionReport:
    """Crux's `CompactionReport` fields plus what cruxsql measures."""

    facts_dropped: int = 0
    facts_retained: int = 0
    tombstones_kept: int = 0
    provenance_lines: int = 0
    corrupt_lines_dropped: int = 0
    corrupt_lines_file: Optional[str] = None
    # Lines Crux reads that the view cannot hold (`codec.UnrepresentableLine`): written to the new journal
    # byte for byte, after the rest; their line numbers in the old journal.
    lines_carried_over: list[int] = field(default_factory=list)
    lines_before: int = 0
    lines_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    journal_blake3_before: Optional[str] = None
    journal_blake3_after: Optional[str] = None
    inode_before: Optional[int] = None
    inode_after: Optional[int] = None
    view_update: str = "direct"
    generation: Optional[str] = None
    override_receipt_id: Optional[str] = None
    stale_temp_files_removed: list[str] = field(default_factory=list)
    wal_checkpointed: bool = False
    seq_renumbered: bool = False
    lines_from_snapshot: bool = False  # the live lines were built before the writer lock (compaction_snapshot.py)
    lines_kept_from_snapshot: int = 0  # of which copied, with their event rows, as the snapshot phase wrote them
    seconds: float = 0.0
    seconds_locked: float = 0.0  # of which the rewrite under the writer lock

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
