"""`cruxsql mcp`: serve the store to agents over the Model Context Protocol."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import click

from ..errors import InvalidInput
from .common import COUNT, fails_cleanly, open_store
from .options import agent_option, create_option, data_dir_option, json_flag, tenant_option

MISSING_SDK = "the MCP server needs the MCP SDK: pip install 'cruxsql[mcp]'"


def _tool_sets_help() -> str:
    """`--tools` help from the tools themselves: the core set and what each tools/list costs."""
    try:
        from ..mcp.server import tool_sets
    except ImportError:
        return "core: the most used tools (a cheaper tools/list)."
    sets = tool_sets()
    (core, core_tokens), (every, all_tokens) = sets["core"], sets["all"]
    return (f"core: {', '.join(core)} (tools/list ≈ {core_tokens:,} tokens; all {len(every)} tools: "
            f"≈ {all_tokens:,}).")


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInput(f"--http {text!r}: expected HOST:PORT or PORT (a port 1-65535)")
    return host or "127.0.0.1", int(port)


@click.command("mcp")
@data_dir_option
@agent_option("The agent calls act for (stdio, or HTTP without tokens). Without it: anonymous, "
               "which sees no private facts.")
@tenant_option("The tenant calls act in (HTTP tokens may name their own: name:token:tenant).", default="default")
@click.option("--http", "http", metavar="HOST:PORT",
              help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (host default 127.0.0.1). "
                   "Agents authenticate with bearer tokens from CRUX_AGENT_TOKENS=name:token[:tenant],...")
@click.option("--tools", type=click.Choice(["core", "all"]), default="all", show_default=True,
              help=_tool_sets_help())
@click.option("--session-budget", type=COUNT, metavar="TOKENS",
              help="Enforced per-agent session token limit (default: CORECRUXD_SESSION_TOKEN_BUDGET; "
                   "per agent: CRUXSQL_SESSION_BUDGETS=name:tokens,...; 0 = none).")
@click.option("--list-tools", is_flag=True, help="Print the tool list and its token size, then exit.")
@json_flag("With --list-tools: print the tools/list result as JSON.")
@create_option
@fails_cleanly
def mcp_command(data_dir: Path, agent: Optional[str], tenant: str, http: Optional[str], tools: str,
                session_budget: Optional[int], list_tools: bool, as_json: bool, create: bool) -> None:
    """Serve the store to agents over MCP (stdio by default).

    The agent and tenant come from the connection, never from a tool argument: on stdio from --agent and
    --tenant; over HTTP from each request's bearer token (a wrong or missing token gets 401). The server
    takes the same writer lock as the CLI, so both can work on one store at once.
    """
    try:
        import anyio

        from ..accounting.usage import BudgetPolicy
        from ..mcp.identity import AgentRegistry, Identity, check_agent_name
        from ..mcp.server import CruxServer
    except ImportError:
        raise InvalidInput(MISSING_SDK) from None
    if agent is not None:
        check_agent_name(agent, "--agent")
    address = _host_port(http) if http else None
    registry = AgentRegistry.from_env(default_tenant=tenant)
    budgets = BudgetPolicy.from_env(default=session_budget)
    store = open_store(data_dir, "read" if list_tools else "create" if create else "start", announce=True)
    try:
        server = CruxServer(store, identity=Identity(agent, tenant), registry=registry, tools=tools, budgets=budgets)
        if list_tools:
            if as_json:
                click.echo(json.dumps({"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True)
                                                 for t in server.tool_definitions()]}, indent=2))
            else:
                for spec in server.listed:
                    click.echo(f"{spec.name:22} {spec.description}")
                click.echo(f"-- {len(server.listed)} tools, tools/list ≈ {server.tools_list_tokens()} tokens")
            return
        if address is None:
            anyio.run(server.serve_stdio)
        else:
            click.echo(f"cruxsql mcp: serving http://{address[0]}:{address[1]}/mcp "
                       f"({'bearer tokens' if registry else 'no tokens: single-user mode'})", err=True)
            anyio.run(server.serve_http, *address)
    finally:
        store.close()


COMMANDS = (mcp_command,)
