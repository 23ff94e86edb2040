"""The MCP reference memory server's knowledge graph (`memory.jsonl`) as facts, and back.

Each line of that file is `{"type": "entity", "name", "entityType", "observations": [...]}` or
`{"type": "relation", "from", "to", "relationType"}`. The mapping (documented in docs/operations.md):

| graph | fact (entity, key, value) |
|---|---|
| entity `name` of type T | (`name`, `entity_type`, T) |
| each observation O of `name` | (`name`, `observation:<first 12 hex of BLAKE3(O)>`, O) |
| relation `from` -R-> `to` | (`from`, `relation:<R>:<to>`, `to`) |

Keys are derived from the content, so importing the same graph twice stores nothing new, and two
observations of one entity never supersede each other.
"""

from __future__ import annotations

import json
from typing import Iterable, Iterator

import blake3

from ..errors import InvalidInput
from ..facts import json_input
from ..facts.codec import Fact
from ..facts.store import StoreRequest

FORMAT = "mcp-memory"


def observation_key(text: str) -> str:
    return "observation:" + blake3.blake3(text.encode("utf-8")).hexdigest()[:12]


def _text(obj: dict, name: str, where: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{where}: `{name}` must be a non-empty string")
    return value


def parse(lines: Iterable[json_input.Text], source: str, tenant: str = "default", private: bool = False,
          actor: str = "import:mcp-memory") -> Iterator[StoreRequest]:
    """StoreRequests for every entity, observation and relation of a memory.jsonl file."""
    for line_no, where, obj in json_input.read_lines(lines, source):
        if not isinstance(obj, dict):
            raise InvalidInput(f"{where}: expected a JSON object")

        def request(entity: str, key: str, value: str) -> StoreRequest:
            return StoreRequest(entity=entity, key=key, value=value, tenant_hash=tenant,
                                source_receipt=f"{FORMAT}:{source}#L{line_no}", private=private, actor=actor)  # noqa: B023 (called within this line's iteration only)

        kind = obj.get("type")
        if kind == "entity":
            name = _text(obj, "name", where)
            yield request(name, "entity_type", _text(obj, "entityType", where))
            observations = obj.get("observations", [])
            if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
                raise InvalidInput(f"{where}: `observations` must be a list of strings")
            for text in observations:
                if text.strip():
                    yield request(name, observation_key(text), text)
        elif kind == "relation":
            src, dst = _text(obj, "from", where), _text(obj, "to", where)
            yield request(src, f"relation:{_text(obj, 'relationType', where)}:{dst}", dst)
        else:
            raise InvalidInput(f"{where}: `type` must be \"entity\" or \"relation\", not {kind!r}")


def export_lines(facts: Iterable[Fact]) -> Iterator[str]:
    """Live facts as a memory.jsonl graph: one entity per fact entity, relations from `relation:` keys."""
    entities: dict[str, dict] = {}
    relations = []
    for fact in facts:
        node = entities.setdefault(fact.entity, {"type": "entity", "name": fact.entity, "entityType": "fact",
                                                 "observations": []})
        if fact.key == "entity_type":
            node["entityType"] = fact.value
        elif fact.key.startswith("relation:") and fact.key.count(":") >= 2:
            relation_type = fact.key.split(":", 2)[1]
            relations.append({"type": "relation", "from": fact.entity, "to": fact.value,
                              "relationType": relation_type})
        elif fact.key.startswith("observation:"):
            node["observations"].append(fact.value)
        else:
            node["observations"].append(f"{fact.key}: {fact.value}")
    for node in entities.values():
        yield json.dumps(node, ensure_ascii=False)
    for relation in relations:
        yield json.dumps(relation, ensure_ascii=False)
