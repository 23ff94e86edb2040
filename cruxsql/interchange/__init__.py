"""Interchange with other memory stores: imports (MCP memory server, mem0) and a portable facts export.

Modules: `mcp_memory` (the MCP reference memory server's JSONL knowledge graph), `mem0` (mem0's JSON
export), `importer` (idempotent, batched, with a dry run), `facts_export` (live facts as StoreFact JSONL).
"""
