-- Token accounting of the MCP server (retrieval spec §15), per agent and UTC day, so operators can query
-- what each agent spent with `cruxsql sql`. Crux keeps these counters in memory and loses them on
-- restart. Derived, not journaled: deleting cruxsql.db loses only this history, never a fact.
CREATE TABLE token_usage (
    agent              TEXT NOT NULL,     -- the connection's agent name, `__anon__` without one
    day                TEXT NOT NULL,     -- UTC date, YYYY-MM-DD
    calls              INTEGER NOT NULL DEFAULT 0,
    tokens_in          INTEGER NOT NULL DEFAULT 0,   -- estimate_tokens(arguments)
    tokens_out         INTEGER NOT NULL DEFAULT 0,   -- estimate_tokens(result), or of the error message
    declared_budget_in INTEGER NOT NULL DEFAULT 0,   -- sum of the calls' `token_budget` arguments
    refused            INTEGER NOT NULL DEFAULT 0,   -- calls refused by the enforced session budget
    PRIMARY KEY (agent, day)
) WITHOUT ROWID;
