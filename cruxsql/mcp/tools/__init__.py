"""The MCP tools, one module per feature; every module of this package is discovered at the first call.

Contract for adding a tool (no central list to edit):

1. Put it in the feature's own module here, `cruxsql/mcp/tools/<feature>.py` (create it if needed).
2. Write one function decorated with `@tool(kind=...)`:

       from ..registry import READ, ToolResult, reads, tool
       from ..call import Call

       @tool(kind=READ, hints=reads("Find contradicting facts"))
       def memory_contradictions(call: Call, limit: int = 50, token_budget: Optional[int] = None) -> ToolResult:
           \"\"\"List opposite-polarity facts sharing an entity and key (read-only).\"\"\"
           report = contradictions(call.store, tenant=call.tenant, limit=limit, token_budget=call.budget(token_budget))
           return ToolResult(report.text(), report.structured())

   * The function name is the tool name (use Crux's); the parameters after `call` are its arguments,
     with Crux's names and defaults. Type hints become the input schema and are enforced strictly
     (unknown arguments and wrong types are refused before the function runs); a parameter without a
     default is required. The first paragraph of the docstring is the description the agent pays for
     in every turn: keep it to one short sentence.
   * `call` carries the connection's identity (`call.agent`, `call.tenant`: never take them from an
     argument), the store and its features (`call.store`, `call.recall`, `call.lane`), and
     `call.budget(requested)`, which shapes a token budget down when the agent nears its session limit.
     `call.require_agent(name)` refuses anonymous callers.
   * `kind`: `READ` for tools that return stored content (refused once the agent's session budget is
     spent), `WRITE` for mutations, `ACCOUNTING` for usage reports (both still work past the budget).
     `hints`: its MCP annotations (a client auto-approves reads and confirms destructive calls by them):
     `reads("Title")`, or `writes("Title", destructive=..., idempotent=...)` (destructive: it can hide
     or remove what was there; a superseding write is not). Every tool declares them (a test checks).
     `core=True` adds the tool to `--tools core`. `holdout=True` samples its answers in the savings
     holdout (`call.control` is then True for the control arm: answer unshaped, pretty JSON).
3. Return a `ToolResult(text, structured)`: Crux's text and its structured content (None for Crux's
   text-only tools). A tool with structured content declares its shape, `@tool(..., output=shape(
   fact_id="string", reason="string?"))`: it goes out as the tool's `outputSchema` (a test holds every
   structured answer to it). A `token_budget` applies to the text and the structured content alike:
   past it, ids and counts, never full values. Refuse with `ToolError("one line")` or a cruxsql error (`InvalidInput`, `NotFound`,
   `Conflict`); the agent sees one line, the server keeps serving. Put the logic itself in the
   feature package (no SQL here): a tool function only maps arguments and shapes the answer.

4. Run `python tools/cli_reference.py`: the server answers `tools/list` from `cruxsql/mcp/tool_index.json`
   (so it starts without importing these modules); a test fails while the index is out of date.

Every call is accounted (`token_usage`) by the server, whatever the tool does.
"""
