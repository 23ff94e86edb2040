"""Conversations as memory: a conversation's turns stored verbatim, one ordinary fact per turn (turns.py).

`store_conversation` checks every turn first (a bad one refuses the whole call, naming its index and
field), then writes all of them as one `store_batch` journal line (one append, one fsync), numbered under
the writer lock after the last position the conversation holds, so a later call continues it and two
writers never take the same position. An idempotency key makes a retry return the first call's turns.

`turns_from_json` reads what agents and hooks hand over: a list of turns `{speaker, text, time?,
session?, id?}`, or of chat messages `{role, content}` (OpenAI / Anthropic style; `content` a string or
a list of parts, whose text parts are joined), or an object holding either list under `turns` or
`messages`. A message holding no text (a tool call, an image, blank content) is skipped.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

from ..errors import InvalidInput
from ..facts.codec import Fact
from ..facts.store import Store, StoreRequest
from .turns import Turn, conversation_entity, last_position, normalize_time, parse_turn, turn_fact, turn_key

MAX_TURNS = 10_000
MAX_TEXT_BYTES = 1024 * 1024
MAX_TOTAL_BYTES = 32 * 1024 * 1024     # escaped text of one journal line: well under Crux's 64 MiB ceiling
MAX_NAME_BYTES = 1024
MAX_LABEL_BYTES = 256                  # speaker, session, id
MAX_INPUT_CHARS = 4 * MAX_TOTAL_BYTES  # a file or stdin: a call's turns, JSON-escaped, with their labels
_TURN_KEYS = ("speaker", "text", "time", "session", "id")
_TEXT_PARTS = ("text", "input_text", "output_text")   # Chat Completions and Anthropic; OpenAI's Responses API


@dataclass(frozen=True)
class TurnInput:
    """One turn as a caller hands it over (time in any form `turns.normalize_time` reads)."""

    speaker: str
    text: str
    time: Optional[str] = None
    session: Optional[str] = None
    id: Optional[str] = None


@dataclass(frozen=True)
class StoredConversation:
    """What a `store_conversation` call stored (or, for a keyed retry, had stored the first time)."""

    conversation: str
    facts: list[Fact]
    turns: list[Turn]

    @property
    def positions(self) -> tuple[int, int]:
        return self.turns[0].position, self.turns[-1].position

    def text(self) -> str:
        first, last = self.positions
        span = f"#{first}" if first == last else f"#{first}-#{last}"
        return f"stored {len(self.turns)} turn(s) of {conversation_entity(self.conversation)} at {span} in one batch"

    def structured(self) -> dict[str, Any]:
        first, last = self.positions
        return {"stored": len(self.turns), "conversation": self.conversation, "first_position": first,
                "last_position": last, "fact_ids": [f.fact_id for f in self.facts]}


def store_conversation(store: Store, conversation: str, turns: Sequence[TurnInput], *, tenant: str = "default",
                       agent: Optional[str] = None, actor: Optional[str] = None, private: bool = False,
                       idempotency_key: Optional[str] = None) -> StoredConversation:
    """Store `turns` as the next turns of `conversation` (in list order), one journal append. `private`
    with `agent`: the agent's own turns (`__agent::<agent>::conversation:NAME`). InvalidInput names the
    first bad turn and field; nothing is stored then."""
    checked = check_conversation(conversation, turns)
    if private and agent is None:
        raise InvalidInput("private turns require an agent identity")
    requests = [_request(conversation, i, turn, tenant, agent, actor, private) for i, turn in enumerate(checked)]
    stored_tenant, stored_entity, _ = store.chain_key(requests[0])     # the tenant default and agent scope applied

    def place(given: list[StoreRequest]) -> list[StoreRequest]:
        last = last_position(store.db, stored_tenant, stored_entity)
        start = 0 if last is None else last + 1
        turn_key(start + len(given) - 1)           # refuses a conversation past its last position
        return [replace(r, key=turn_key(start + i)) for i, r in enumerate(given)]

    facts = store.store_batch(requests, idempotency_key=idempotency_key, place=place)
    read = [parse_turn(f.entity, f.key, f.value, f.source_receipt) for f in facts]
    return StoredConversation(conversation, facts, [t for t in read if t is not None])


def _request(conversation: str, index: int, turn: TurnInput, tenant: str, agent: Optional[str],
             actor: Optional[str], private: bool) -> StoreRequest:
    """The turn's store request, numbered by its index in the call (renumbered under the lock)."""
    fact = turn_fact(Turn(conversation, index, turn.speaker, turn.text, turn.time, turn.session, turn.id))
    return StoreRequest(fact.entity, fact.key, fact.value, tenant, fact.source_receipt, private=private,
                        actor=actor, agent=agent)


# --- checking ---------------------------------------------------------------------------------------

def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def check_conversation(conversation: str, turns: Sequence[TurnInput]) -> list[TurnInput]:
    """The name and turns checked (times normalised), as `store_conversation` checks them before storing:
    a surface calls it first to refuse bad input before it opens or creates anything."""
    _check_name(conversation)
    return _check_turns(turns)


def _check_name(conversation: Any) -> None:
    if not isinstance(conversation, str) or not conversation.strip():
        raise InvalidInput("conversation must be a non-empty name")
    if _size(conversation) > MAX_NAME_BYTES:
        raise InvalidInput(f"conversation is {_size(conversation)} bytes; the limit is {MAX_NAME_BYTES}")
    if _breaks_line(conversation):
        raise InvalidInput(f"conversation {conversation!r} must not hold control characters or line breaks")
    _check_utf8(conversation, "conversation")


def _check_turns(turns: Sequence[TurnInput]) -> list[TurnInput]:
    """The turns with their times normalised; InvalidInput `turns[i].field: ...` for the first bad one."""
    if not turns:
        raise InvalidInput("store_conversation needs at least one turn")
    if len(turns) > MAX_TURNS:
        raise InvalidInput(f"store_conversation takes at most {MAX_TURNS} turns per call, got {len(turns)}")
    checked = [_check_turn(turn, f"turns[{i}]") for i, turn in enumerate(turns)]
    total = sum(_size(json.dumps(t.text, ensure_ascii=False)) for t in checked)    # as the journal line holds it
    if total > MAX_TOTAL_BYTES:
        raise InvalidInput(f"the turns hold {total} bytes of text (JSON-escaped); the limit per call is "
                           f"{MAX_TOTAL_BYTES}")
    return checked


def _check_turn(turn: TurnInput, where: str) -> TurnInput:
    """The turn with its time normalised; InvalidInput `{where}.field: ...` for its first bad field."""
    _check_speaker(turn.speaker, f"{where}.speaker")
    _check_text(turn.text, f"{where}.text")
    _check_label(turn.session, f"{where}.session")
    _check_label(turn.id, f"{where}.id")
    return replace(turn, time=_checked_time(turn.time, f"{where}.time"))


def _check_speaker(speaker: Any, where: str) -> None:
    """The value is `speaker: text`, and the speaker shows on the turn's one answer line."""
    if not isinstance(speaker, str) or not speaker.strip():
        raise InvalidInput(f"{where}: must be a non-empty string")
    if ":" in speaker or _breaks_line(speaker) or _size(speaker) > MAX_LABEL_BYTES:
        raise InvalidInput(f"{where}: {speaker!r} must be a name of at most {MAX_LABEL_BYTES} bytes "
                           "without ':', control characters or line breaks")
    _check_utf8(speaker, where)


def _check_text(text: Any, where: str) -> None:
    if not isinstance(text, str):
        raise InvalidInput(f"{where}: must be a string")
    if _size(text) > MAX_TEXT_BYTES:
        raise InvalidInput(f"{where}: is {_size(text)} bytes; the limit is {MAX_TEXT_BYTES}")
    _check_utf8(text, where)


def _check_label(label: Any, where: str) -> None:
    """A session or the caller's turn id (shown on the answer line with ids): short, one line."""
    if label is None:
        return
    if not isinstance(label, str) or _size(label) > MAX_LABEL_BYTES or _breaks_line(label):
        raise InvalidInput(f"{where}: must be a string of at most {MAX_LABEL_BYTES} bytes "
                           "without control characters or line breaks")
    _check_utf8(label, where)


def _checked_time(time: Any, where: str) -> Optional[str]:
    if time is None:
        return None
    if not isinstance(time, str):
        raise InvalidInput(f"{where}: must be a string")
    try:
        return normalize_time(time)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}") from None


def _breaks_line(text: str) -> bool:
    """Whether `text` holds a control character (C0, DEL, C1) or a Unicode line or paragraph separator."""
    return any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in text)


def _check_utf8(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{where}: {text!r} is not valid UTF-8 text") from None


# --- reading what agents hand over -------------------------------------------------------------------

def read_turns(text: str) -> tuple[list[TurnInput], int]:
    """(turns, skipped messages) from JSON (`turns_from_json`) or JSONL (one turn or message a line)."""
    try:
        data = json.loads(text)
    except ValueError:   # JSONL: lines end at \n alone (a JSON string may hold U+2028 or a form feed raw)
        return _turns_from_items([(f"line {n}", _json_line(line, n)) for n, line in enumerate(text.split("\n"), 1)
                                 if line.strip()])
    if isinstance(data, dict) and "turns" not in data and "messages" not in data:
        return _turns_from_items([("line 1", data)])
    return turns_from_json(data)


def _json_line(line: str, n: int) -> Any:
    try:
        return json.loads(line)
    except ValueError as exc:
        raise InvalidInput(f"line {n}: invalid JSON: {exc}") from None


def turns_from_json(data: Any, where: str = "turns") -> tuple[list[TurnInput], int]:
    """(turns, messages skipped for holding no text) from a decoded JSON list of turns or messages, or an
    object holding one under `turns` or `messages`. InvalidInput names the bad item and field."""
    if isinstance(data, dict) and ("turns" in data or "messages" in data):
        name = "turns" if "turns" in data else "messages"
        return turns_from_json(data[name], name)
    if not isinstance(data, list):
        raise InvalidInput("expected a JSON list of turns or messages, or an object with `turns` or `messages`")
    return _turns_from_items([(f"{where}[{i}]", item) for i, item in enumerate(data)])


def _turns_from_items(items: Sequence[tuple[str, Any]]) -> tuple[list[TurnInput], int]:
    """(turns, skipped) from (where, decoded object) pairs: each a turn or a chat message."""
    turns = []
    for where, item in items:
        turn = _turn_from_obj(item, where)
        if turn is not None:
            turns.append(turn)
    return turns, len(items) - len(turns)


def _turn_from_obj(obj: Any, where: str) -> Optional[TurnInput]:
    """A turn `{speaker, text, time?, session?, id?}` (no other keys) or a chat message `{role, content,
    ...}` (other keys ignored; None when it holds no text)."""
    if not isinstance(obj, dict):
        raise InvalidInput(f"{where}: expected an object with speaker and text (or role and content)")
    if "role" in obj or "content" in obj:
        return _message_turn(obj, where)
    unknown = sorted(set(obj) - set(_TURN_KEYS))
    if unknown:
        raise InvalidInput(f"{where}: unknown key(s) {', '.join(unknown)} (turn keys: {', '.join(_TURN_KEYS)}; "
                           "or a message with role and content)")
    return _turn_input(obj, "speaker", obj.get("text"), where)


def _message_turn(message: dict, where: str) -> Optional[TurnInput]:
    """A chat message's turn: its `speaker` or `role`, its `text` or `content`; None when it holds no text."""
    field = "text" if message.get("text") is not None else "content"
    text = _content_text(message.get(field), f"{where}.{field}")
    if text is None:
        return None
    return _turn_input(message, "speaker" if "speaker" in message else "role", text, where)


def _turn_input(obj: dict, speaker_field: str, text: Any, where: str) -> TurnInput:
    speaker = obj.get(speaker_field)
    if not isinstance(speaker, str):
        raise InvalidInput(f"{where}.{speaker_field}: is required and must be a string")
    if not isinstance(text, str):
        raise InvalidInput(f"{where}.text: is required and must be a string")
    return TurnInput(speaker, text, _optional_text(obj, "time", where), _label(obj, "session", where),
                     _label(obj, "id", where))


def _content_text(content: Any, where: str) -> Optional[str]:
    """A message's text: the string, or its text parts joined by a line break; None when it holds none (a
    tool call, an image, an empty or blank content)."""
    if content is None or isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(_part_texts(content, where))
    else:
        raise InvalidInput(f"{where}: must be a string or a list of parts")
    return text if text is not None and text.strip() else None


def _part_texts(parts: list, where: str) -> list[str]:
    """The text of each text part (a string, or `{type, text}` of a `_TEXT_PARTS` type); others skipped."""
    texts = []
    for part in parts:
        if isinstance(part, dict) and part.get("type", "text") in _TEXT_PARTS:
            part = part.get("text")
            if not isinstance(part, str):
                raise InvalidInput(f"{where}: a text part must hold its text as a string")
        if isinstance(part, str):
            texts.append(part)
    return texts


def _optional_text(obj: dict, name: str, where: str) -> Optional[str]:
    value = obj.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidInput(f"{where}.{name}: must be a string")
    return value


def _label(obj: dict, name: str, where: str) -> Optional[str]:
    """A session or id: a string, or an integer taken as its decimal text."""
    value = obj.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _optional_text(obj, name, where)
