"""`CruxServer`: the MCP server over one data directory (stdio or streamable HTTP).

It opens the store like the CLI (same files, same writer lock; every read first catches up with what
other processes appended), lists the discovered tools (`--tools core|all`), and runs every call
through one path: identity from the connection -> argument validation -> session budget -> the tool ->
accounting (and the savings holdout). A tool error is one line; nothing a caller sends stops the server.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from ..accounting.holdout import Holdout, holdout_fraction
from ..accounting.tool_errors import record_error
from ..accounting.usage import BudgetPolicy, TokenLedger
from ..errors import CruxsqlError
from ..facts.store import Store
from ..recall.tokens import CHARS_PER_TOKEN, compact_json, estimate_tokens, estimate_tokens_str
from . import guide
from .call import Call
from .identity import AgentRegistry, Identity
from .pipes import stdio_pipes
from .registry import READ, ToolError, ToolResult, ToolSpec, discover

if TYPE_CHECKING:
    from ..documents.lane import DocumentLane
    from ..recall.fact_indexer import FactIndexer
    from ..recall.facade import Recall
from .wire import RequestGate

log = logging.getLogger("cruxsql.mcp")
INVALID_PARAMS = -32602     # JSON-RPC's code for a request naming what does not exist
MIN_ANSWER_TOKENS = 40      # the least a read can answer in (a pointer): below it, a read is refused unrun
TOOL_SETS = ("core", "all")
TOOL_INDEX = Path(__file__).with_name("tool_index.json")
INSTRUCTIONS = ("cruxsql: memory for agents. Ask with recall (ranked by relevance) before asking the user; "
                "store what you learn with store_fact, or many facts at once with store_facts; search documents "
                "with query, read them with query_expand.")
UNAUTHORIZED = {"error": "unauthorized", "hint": "set Authorization: Bearer <CRUX_AGENT_TOKEN>"}


class CruxServer:
    """The tools of one store, callable in-process (`call`) or served over MCP (`serve_stdio`, `serve_http`)."""

    def __init__(self, store: Store, *, identity: Identity = Identity(), registry: Optional[AgentRegistry] = None,
                 tools: str = "all", budgets: Optional[BudgetPolicy] = None,
                 holdout: Optional[float] = None) -> None:
        if tools not in TOOL_SETS:
            raise ValueError(f"tools must be one of {TOOL_SETS}, got {tools!r}")
        self.store = store
        self.identity = identity
        self.registry = registry or AgentRegistry([])
        self.tools = tools
        self.ledger = TokenLedger(store.db, budgets or BudgetPolicy())
        self.holdout = Holdout(holdout_fraction() if holdout is None else holdout)
        self.definitions = listed_definitions(tools)    # tools/list, without importing a tool module
        self._lane: Optional[DocumentLane] = None
        self._indexing = self._indexer_started = False
        self._indexer: Optional[FactIndexer] = None
        self._indexer_lock = threading.Lock()
        self._calls_running = 0
        self._last_call_end = time.monotonic()
        self.server: Server[Any] = Server(
            "cruxsql", version=version("cruxsql"), instructions=INSTRUCTIONS, on_list_tools=self._on_list_tools,
            on_call_tool=self._on_call_tool, on_list_prompts=self._on_list_prompts, on_get_prompt=self._on_get_prompt,
            on_list_resources=self._on_list_resources, on_list_resource_templates=self._on_list_templates,
            on_read_resource=self._on_read_resource)

    # --- tool list --------------------------------------------------------------------------------

    @functools.cached_property
    def specs(self) -> dict[str, ToolSpec]:
        """Every tool, its module imported: at the first call, not at start-up."""
        return discover()

    @property
    def listed(self) -> list[ToolSpec]:
        return [s for s in self.specs.values() if self.tools == "all" or s.core]

    @functools.cached_property
    def recall(self) -> Recall:
        from ..recall.facade import Recall
        return Recall(self.store)

    def tool_definitions(self) -> list[types.Tool]:
        return self.definitions

    def tools_list_tokens(self) -> int:
        return list_tokens(self.definitions)

    async def _on_list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tool_definitions())

    # --- prompts and resources (guide.py) ---------------------------------------------------------

    async def _on_list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=guide.prompts())

    async def _on_get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != guide.GUIDE:
            raise MCPError(INVALID_PARAMS, f"unknown prompt {params.name!r}: the prompt is {guide.GUIDE}")
        return guide.guide({t.name for t in self.definitions})

    async def _on_list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=guide.resources())

    async def _on_list_templates(self, ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=guide.templates())

    async def _on_read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        """A resource for the connection's identity; an entity's facts through the memory_view tool (its
        visibility, budget and accounting)."""
        try:
            identity = self._identity_of(ctx)
        except ToolError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None

        def view(entity: str) -> tuple[str, bool]:
            answer = self.call("memory_view", {"entity": entity}, identity)
            return answer.content[0].text, bool(answer.is_error)     # type: ignore[union-attr]

        self.store.refresh()
        try:
            return guide.read(str(params.uri), identity, self.store, len(self.definitions), view)
        except ValueError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None

    # --- tool calls -------------------------------------------------------------------------------

    def _identity_of(self, ctx: Any) -> Identity:
        request = getattr(ctx, "request", None)
        if self.registry and request is not None:
            found = self.registry.authenticate(request.headers.get("authorization"))
            if found is None:       # the HTTP gate answers 401 first; this is the backstop
                raise ToolError("unauthorized")
            return found
        return self.identity

    async def _on_call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            identity = self._identity_of(ctx)
        except ToolError as exc:
            return _wire(ToolResult(str(exc), is_error=True))
        return self.call(params.name, params.arguments or {}, identity)

    def lane(self) -> DocumentLane:
        if self._lane is None:
            from ..documents.lane import DocumentLane
            self._lane = DocumentLane(self.store)
        return self._lane

    def call(self, name: str, arguments: dict[str, Any], identity: Optional[Identity] = None) -> types.CallToolResult:
        """Run one tool call for `identity` and account for it; never raises for anything the caller sent."""
        self._calls_running += 1
        try:
            return self._call(name, arguments, identity or self.identity)
        finally:
            self._calls_running -= 1
            self._last_call_end = time.monotonic()

    def quiet_for(self) -> float:
        """Seconds since the last tool call ended, 0 while one runs (the fact indexer waits for quiet)."""
        return 0.0 if self._calls_running else time.monotonic() - self._last_call_end

    def _call(self, name: str, arguments: dict[str, Any], identity: Identity) -> types.CallToolResult:
        self._start_indexing()
        spec: Optional[ToolSpec] = self.specs.get(name)
        standing = self.ledger.standing(identity.agent)
        refused = control = False
        declared: Optional[int] = None
        tokens_in = _arguments_tokens(arguments)
        allowance = None if standing.remaining is None else standing.remaining - tokens_in
        try:
            if spec is None:
                raise ToolError(f"unknown tool: {name}")
            kwargs = spec.validate(arguments)
            declared = kwargs.get("token_budget")
            metered = allowance if spec.kind == READ else None     # the allowance a read is held to
            if metered is not None and metered < MIN_ANSWER_TOKENS:
                refused = True
                raise ToolError(standing.refusal())
            control = spec.holdout and self.holdout.request_is_control(arguments)
            call = Call(identity, self.store, self.recall, self.ledger, self.holdout, standing, control, self.lane,
                        allowance=metered)
            result = spec.fn(call, **kwargs)
            result_notes = call.notes
            if metered is not None and _wire_tokens(_wire(result, result_notes)) > metered:
                refused = True            # even shaped, the answer would overshoot what is left: refuse it
                raise ToolError(f"session token budget: this answer takes {_wire_tokens(_wire(result, result_notes))} "
                                f"tokens and agent {standing.agent} has {allowance} left of {standing.limit}; "
                                "ask for less (a smaller token_budget, top_k or limit)")
        except (ToolError, CruxsqlError) as exc:    # Crux's error data (e.g. RESERVED_ENTITY_PREFIX) travels along
            result, result_notes = ToolResult(str(exc), getattr(exc, "data", None), is_error=True), []
            self._note_error(name, identity, result.text, internal=False)
        except Exception as exc:   # a bug or an environment failure: report it, keep serving
            log.exception("tool %s failed", name)
            result, result_notes = ToolResult(f"internal error in {name}: {type(exc).__name__}: {exc}",
                                              is_error=True), []
            self._note_error(name, identity, result.text, internal=True)
        if result.is_error:           # one line, whatever the input it names held
            result.text = result.text.replace("\r", "\\r").replace("\n", "\\n")
        elif spec is not None and spec.output_schema is not None and result.structured is None:
            result.structured = {}    # a tool with an output schema always sends structured content (a disabled panel)
        wire = _wire(result, result_notes)
        tokens_out = estimate_tokens_str(result.text) if result.is_error else _wire_tokens(wire)
        self.ledger.record(identity.agent, tokens_in, tokens_out, declared, refused)
        if spec is not None and spec.holdout and result.sample and not result.is_error:
            self.holdout.record(arguments, control, result.text, result.payload)
        return wire

    def _note_error(self, tool: str, identity: Identity, message: str, internal: bool) -> None:
        """Keep the tool's last error for `cruxsql doctor`; losing that note must never fail the call."""
        try:
            record_error(self.store.db, tool if tool in self.specs else "(unknown tool)", identity.agent, message,
                         internal)
        except Exception:
            log.exception("could not record the error of %s", tool)

    # --- transports -------------------------------------------------------------------------------

    @contextmanager
    def fact_indexing(self) -> Iterator[None]:
        """While serving: the background fact indexer, which embeds facts and turns as they arrive, so a
        recall never waits for the model over facts it has not seen (recall/fact_indexer.py). It starts at
        the first tool call, not at launch, so the model's load never delays the handshake and `tools/list`."""
        self._indexing = True
        try:
            yield
        finally:
            self._indexing = False
            if self._indexer is not None:
                self._indexer.stop()

    def _start_indexing(self) -> None:
        """The first tool call of a serving server starts its fact indexer (once; None for a read-only store)."""
        with self._indexer_lock:
            if not self._indexing or self._indexer_started:
                return
            self._indexer_started = True
            from ..recall.fact_indexer import FactIndexer

            self._indexer = FactIndexer.for_recall(self.recall, quiet=self.quiet_for)
            if self._indexer is not None:
                self._indexer.start()

    async def serve_stdio(self) -> None:
        from mcp.server.stdio import stdio_server

        async with stdio_pipes() as (stdin, stdout):
            gate = RequestGate(stdin, stdout)
            async with stdio_server(gate.lines, gate.writer) as (read, write):  # type: ignore[arg-type]
                with self.fact_indexing():
                    await self.server.run(read, write, self.server.create_initialization_options())

    def http_app(self, host: str = "127.0.0.1") -> Any:
        """The streamable HTTP app at `/mcp`, behind the bearer-token gate."""
        return BearerGate(self.server.streamable_http_app(host=host), self.registry)

    async def serve_http(self, host: str, port: int) -> None:
        import uvicorn

        config = uvicorn.Config(self.http_app(host), host=host, port=port, log_level="warning", lifespan="on")
        with self.fact_indexing():
            await uvicorn.Server(config).serve()


def tool_definitions(specs: list[ToolSpec]) -> list[types.Tool]:
    return [types.Tool(name=s.name, description=s.description, input_schema=s.input_schema,
                       output_schema=s.output_schema, annotations=s.annotations) for s in specs]


def list_tokens(definitions: list[types.Tool]) -> int:
    """What a `tools/list` of `definitions` costs an agent in every turn (chars/4 of its compact JSON)."""
    result = types.ListToolsResult(tools=definitions)
    return estimate_tokens(result.model_dump(mode="json", by_alias=True, exclude_none=True))


def render_tool_index() -> str:
    """tool_index.json: every tool's definition and whether it is core, from the tool modules (written by
    `python tools/cli_reference.py`; a test holds it current)."""
    entries = [{"core": spec.core, "tool": definition.model_dump(mode="json", by_alias=True, exclude_none=True)}
               for spec, definition in zip(discover().values(), tool_definitions(list(discover().values())))]
    return json.dumps({"tools": entries}, indent=1, ensure_ascii=False) + "\n"


def listed_definitions(tools: str) -> list[types.Tool]:
    """The `tools/list` of a `--tools` set, from tool_index.json (no tool module imported)."""
    entries = json.loads(TOOL_INDEX.read_text(encoding="utf-8"))["tools"]
    return [types.Tool.model_validate(e["tool"]) for e in entries if tools == "all" or e["core"]]


def tool_sets() -> dict[str, tuple[list[str], int]]:
    """Each `--tools` set: its tool names and what its `tools/list` costs (for `--help` and the docs)."""
    return {name: ([t.name for t in chosen], list_tokens(chosen))
            for name, chosen in ((name, listed_definitions(name)) for name in TOOL_SETS)}


def _wire_tokens(wire: types.CallToolResult) -> int:
    """What an answer costs the agent: chars/4 of everything it receives (text, notes, structured content)."""
    return estimate_tokens(wire.model_dump(mode="json", by_alias=True, exclude_none=True))


def _arguments_tokens(arguments: dict[str, Any]) -> int:
    """`estimate_tokens` of the arguments as sent, refused ones included (a lone surrogate counts as 3 bytes,
    a value too deep to serialise as 1 token)."""
    try:
        return max(1, len(compact_json(arguments).encode("utf-8", "surrogatepass")) // CHARS_PER_TOKEN)
    except (RecursionError, ValueError):
        return 1


def _wire(result: ToolResult, notes: Optional[list[str]] = None) -> types.CallToolResult:
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=result.text)]
    content += [types.TextContent(type="text", text=note) for note in notes or []]
    return types.CallToolResult(content=content, structured_content=result.structured, is_error=result.is_error)


class BearerGate:
    """ASGI middleware: with agent tokens configured, a request without a known bearer token gets 401
    (Crux's body) and never reaches the MCP session."""

    def __init__(self, app: Any, registry: AgentRegistry) -> None:
        self.app = app
        self.registry = registry

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.registry:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            if self.registry.authenticate(headers.get("authorization")) is None:
                body = json.dumps(UNAUTHORIZED).encode()
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b"Bearer"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
