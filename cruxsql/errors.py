"""Exceptions raised by cruxsql. Every message names the input that caused it.

Every error cruxsql raises on purpose is a `CruxsqlError`, so `except cruxsql.CruxsqlError` catches
them all and `str(exc)` is one line to show a user. The base classes live here; a feature's own
errors live beside the code that raises them and are exported from `cruxsql` (those of the CLI and
the cluster from their packages). Where a built-in base is also listed, callers that catch it keep
working (`except ValueError` still catches `InvalidInput`, `CorruptLine` and `VectorFileError`).

    CruxsqlError
    ├── InvalidInput (ValueError)              a malformed or out-of-range argument
    │   ├── ReservedEntityPrefix               facts/privacy.py: creating under a reserved prefix
    │   └── ReservedSupersedesTarget           facts/privacy.py: superseding a daemon-owned fact
    ├── NotFound (LookupError)                 a record that does not exist or is not visible
    ├── Conflict                               well-formed, but the current state forbids it
    │   ├── LegalHoldBlocked                   governance/hold_guard.py: would erase held facts
    │   └── CorruptLinesPresent                governance/compaction.py: would drop undecodable lines
    ├── CapabilityDenied (PermissionError)     the caller may not do this to this record
    │   └── ReservedTarget                     facts/privacy.py: changing a daemon-owned fact
    ├── ReservedNamespace                      facts/privacy.py: base of the three Reserved* above
    ├── JournalError (OSError)                 the journal could not be read or written
    │   └── JournalPoisoned                    a write or fsync failed; reopen the store
    ├── CorruptLine (ValueError)               facts/codec.py: a journal line serde would reject
    │   └── UnrepresentableLine                facts/codec.py: a line serde reads, the view cannot hold
    ├── ViewTooNew                             the view was migrated by a newer cruxsql
    ├── LockTimeout                            the writer lock stayed held too long
    ├── ReadOnlyStore                          a write asked of a read-only store
    ├── VectorFileError (ValueError)           embeddings/vectors.py: a malformed `.ccxv` file
    ├── SegmentError                           documents/segments.py: a missing or mismatched segment
    │   └── ReplicaMoved                       documents/replica.py: the fleet's manifest moved
    ├── BackupError                            governance/backup.py: a backup or restore cannot proceed
    ├── ConsolidationError                     curation/consolidation.py: a refused consolidation
    ├── ToolError                              a JSON-RPC tool error (its code and data)
    ├── DataDirError                           cli/data_dir.py: an unusable data directory (CLI)
    └── ClusterUnavailable, ClusterRefused,    cluster/link.py, cluster/raftlog.py (cluster mode)
        ChainMoved, RaftLogsNotScrubbed
"""

from __future__ import annotations

from typing import Any, Optional

# The JSON-RPC codes Crux answers tool errors with (crates/crux-mcp/src/dispatch.rs).
INVALID_PARAMS, INTERNAL_ERROR, METHOD_NOT_FOUND, CAPABILITY_DENIED = -32602, -32603, -32601, -32030


class CruxsqlError(Exception):
    """Base class: an error a caller can show to a user as one line."""


class InvalidInput(CruxsqlError, ValueError):
    """An argument is malformed or out of range."""


class NotFound(CruxsqlError, LookupError):
    """A fact (or other record) named by the caller does not exist or is not visible."""


class Conflict(CruxsqlError):
    """The request is well-formed but the current state forbids it (e.g. a consolidation edge)."""


class CapabilityDenied(CruxsqlError, PermissionError):
    """The caller may not do this to this record (e.g. delete a daemon-owned fact)."""


class JournalError(CruxsqlError, OSError):
    """The journal could not be read or written."""


class JournalPoisoned(JournalError):
    """A write or fsync failed; durability of the last append is unknown until the store is reopened."""


class ViewTooNew(CruxsqlError):
    """The view was migrated by a newer cruxsql than this one: refuse to guess at its schema."""


class LockTimeout(CruxsqlError):
    """The writer lock stayed held by another process longer than the caller would wait."""


class ReadOnlyStore(CruxsqlError):
    """A write was asked of a store opened read-only (a read-only directory, mount or file)."""


class ToolError(CruxsqlError):
    """An agent-facing call refused in one line: the JSON-RPC `code` Crux answers with and its error `data`.

    Raised by the curation features (Crux's codes and data) and by the MCP surface (its own refusals);
    the MCP server answers every one as a tool result with `isError: true`."""

    def __init__(self, message: str, data: Optional[dict[str, Any]] = None, *, code: int = INVALID_PARAMS) -> None:
        super().__init__(message)
        self.code = code
        self.data = data
