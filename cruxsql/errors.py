"""Exceptions raised by cruxsql. Every message names the input that caused it."""

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
