-- The last error of each MCP tool, for `cruxsql doctor` (a tool that keeps failing while health checks
-- say OK is the silent failure operators miss). Derived, not journaled: deleting cruxsql.db loses only
-- this history. `internal` = 1 for a server-side failure (a bug or the environment), 0 for a refusal
-- of the caller's input.
CREATE TABLE tool_errors (
    tool      TEXT NOT NULL,
    internal  INTEGER NOT NULL,
    agent     TEXT NOT NULL,          -- the connection's agent name, `__anon__` without one
    at        TEXT NOT NULL,          -- RFC 3339, of the latest such error
    at_ns     INTEGER NOT NULL,
    message   TEXT NOT NULL,          -- the one line the agent saw
    errors    INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (tool, internal)
) WITHOUT ROWID;
