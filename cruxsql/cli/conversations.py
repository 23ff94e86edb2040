"""CLI command for conversations as memory: store-conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from ..errors import InvalidInput
from ..recall.conversations import (
    MAX_INPUT_CHARS,
    MAX_TOTAL_BYTES,
    MAX_TURNS,
    check_conversation,
    read_turns,
    store_conversation as store_turns,
)
from .common import echo_json, fails_cleanly, open_store
from .options import actor_option, data_dir_option, idempotency_key_option, json_flag, tenant_option


@click.command("store-conversation")
@click.argument("name")
@click.argument("file", type=click.File("r", encoding="utf-8"), default="-")
@tenant_option("Tenant (tenant_hash) of the turns.", default="default")
@actor_option("Who stored them.")
@json_flag("Print what was stored as JSON.")
@idempotency_key_option()
@data_dir_option
@fails_cleanly
def store_conversation(name: str, file, tenant: str, actor: Optional[str], as_json: bool,
                       idempotency_key: Optional[str], data_dir: Path) -> None:
    """Store the turns of FILE (JSON or JSONL; `-` or none for stdin) as the next turns of conversation
    NAME, verbatim and in order, in one journal append.

    \b
    FILE holds a list of turns {speaker, text, time?, session?, id?}, or of chat messages {role,
    content} (content a string or a list of text parts; a message without text is skipped), as a
    JSON array, an object with `turns` or `messages`, or one object a line. time: RFC 3339, a date,
    "2023-05-08 13:56" (UTC) or "1:56 pm on 8 May, 2023". Each turn is a fact of entity
    conversation:NAME, key turn:NNNNNN; `cruxsql recall` finds them. Nothing is stored if any turn is bad.
    """
    turns, skipped = read_turns(_read_input(file))
    if not turns:
        raise InvalidInput("no turns in the input" + (f" ({skipped} message(s) without text)" if skipped else ""))
    check_conversation(name, turns)            # refused before a store is opened or created
    with open_store(data_dir, "start") as s:
        stored = store_turns(s, name, turns, tenant=tenant, actor=actor, idempotency_key=idempotency_key)
    if as_json:
        echo_json({**stored.structured(), "skipped_messages": skipped})
        return
    click.echo(stored.text() + (f" ({skipped} message(s) without text skipped)" if skipped else ""))


def _read_input(file) -> str:
    """The whole input, refused past MAX_INPUT_CHARS before it is all held in memory."""
    text = file.read(MAX_INPUT_CHARS + 1)
    if len(text) > MAX_INPUT_CHARS:
        raise InvalidInput(f"the input is over {MAX_INPUT_CHARS} characters: store the conversation in several calls "
                           f"(at most {MAX_TURNS} turns and {MAX_TOTAL_BYTES} bytes of text each)")
    return text


COMMANDS = (store_conversation,)
