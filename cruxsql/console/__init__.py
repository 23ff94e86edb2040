"""The operators' SQL surfaces: `cruxsql sql`'s sandbox and Datasette over the view, both read-only.

`readonly_sql` runs one read-only statement against the view under the sandbox (`cruxsql sql`); the
Datasette console serves the live view (and audit exports) in its own process, under the same rules
(`sandbox`).

`contract` documents every table, view and column once (docs/sql.md's schema table and Datasette's
metadata are both generated from it); `canned` holds the parameterised queries, `dashboards` the
charts, `metadata` assembles Datasette's configuration, `launch` starts the server process and
`server`/`plugin` run inside it (Python's sqlite3 only: apsw never opens the view in that process).
"""
