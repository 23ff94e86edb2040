"""The fleet's copy of the segments, for a lane whose store belongs to a cluster: the store offers a
`segment_replica` that the lane pulls from before it reads or writes, and pushes a new manifest to
(with the files it adds and removes) before that manifest becomes its own. A single-node store has none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from .segments import Manifest, SegmentError, SegmentInfo


class ReplicaMoved(SegmentError):
    """Another node changed the fleet's manifest since this node pulled it: pull, then build again."""


class SegmentReplica(Protocol):
    def pull(self, directory: Path) -> int:
        """Make `directory`'s manifest the fleet's: fetch the files it lacks, verify each against the
        manifest's BLAKE3, save the manifest; returns how many local segments the fleet no longer lists.
        A file that fails its checksum is refused (left out of the local manifest, never indexed) and
        reported by raising SegmentError once the verified ones are in place."""

    def push(self, directory: Path, manifest: Manifest, added: list[SegmentInfo],
             removed: list[SegmentInfo]) -> None:
        """Upload `added`'s files, make `manifest` the fleet's unless it changed since the last pull
        (ReplicaMoved), then delete `removed`'s files from the fleet's store, their bytes overwritten."""
