"""The agents' surface: an MCP server (stdio, streamable HTTP) with Crux's tools over one data directory.

Modules: `server` (the call path and transports), `identity` (agent and tenant from the connection,
bearer tokens), `call` (what a tool receives), `registry` (tool declaration, discovery, validation),
`tools/` (one module per feature; see its docstring for how to add a tool).
"""
