"""The operators' console: Datasette over the live view (and audit exports), read-only, in its own process.

`contract` documents every table, view and column once (docs/sql.md's schema table and Datasette's
metadata are both generated from it); `canned` holds the parameterised queries, `dashboards` the
charts, `metadata` assembles Datasette's configuration, `launch` starts the server process and
`server`/`plugin` run inside it (Python's sqlite3 only: apsw never opens the view in that process).
"""
