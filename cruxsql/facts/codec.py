"""The Fact record and the journal events, read and written exactly as the Rust daemon does.

Wire rules (Crux's corecrux-memory/src/fact_store.rs): `op` first, then fields in declaration order; skip-if-None
fields omitted, `source_receipt` always present (null when absent); compact separators and raw UTF-8;
confidence is an f32 printed in its shortest round-trip form; fact times end in `Z`, event times in
`+00:00`. Reading follows serde: unknown keys are ignored, defaults fill optional keys, and any type
error rejects the whole line (reported as a `CorruptLine`).
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import accumulate
from json.encoder import encode_basestring as _jstr
from typing import Any, ClassVar, Literal, Optional, Union

from ..errors import CruxsqlError, InvalidInput
from . import timestamps

HORIZON_CLASSES = ("volatile", "medium", "stable", "none")
_HORIZONS = frozenset(HORIZON_CLASSES)
_U32_MAX = 2**32 - 1
USIZE_MAX = 2**64 - 1  # `tokens` is a usize in Crux's Fact (crates/corecrux-memory/src/fact_store.rs)


def parse_horizon(text: str) -> str:
    """`HorizonClass::parse`: trim and ASCII-lowercase one of volatile/medium/stable/none."""
    word = text.strip().lower() if isinstance(text, str) else None
    if word not in _HORIZONS:
        raise InvalidInput(f"invalid horizon class {text!r} (expected one of {', '.join(HORIZON_CLASSES)})")
    return word


def default_horizon_for_entity(entity: str) -> str:
    """`HorizonClass::default_for_entity` (crates/corecrux-memory/src/fact_store.rs): first matching prefix wins."""
    if entity.startswith("__ops::"):
        return "volatile"
    if entity.startswith(("bench:", "__bootstrap__::")):
        return "stable"
    if entity.startswith(("execplan:", "incident:", "__candidate_fact__::")):
        return "medium"
    return "none"


def to_f32(x: float) -> float:
    """Round a number to the nearest f32 (as Rust's `as f32`), returned as a Python float."""
    try:
        return struct.unpack("<f", struct.pack("<f", float(x)))[0]
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def format_f32(x: float) -> str:
    """serde_json's (ryu) rendering of an f32: shortest round-trip digits, `.0` on integers."""
    if not math.isfinite(x):
        return "null"
    if x == 0:  # before the cache: 0.0 and -0.0 are one key to it
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    return _format_nonzero_f32(x)


@lru_cache(maxsize=4096)  # a batch's facts share a few confidences; each costs up to 9 trial roundings
def _format_nonzero_f32(x: float) -> str:
    for precision in range(1, 10):
        sci = "%.*e" % (precision - 1, x)
        if to_f32(float(sci)) == x:
            break
    mantissa, exp_text = sci.split("e")
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    exp = int(exp_text)
    point = exp + 1  # position of the decimal point relative to the digit string
    if 0 < point <= 13:
        if len(digits) <= point:
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    if -6 < point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    body = digits if len(digits) == 1 else f"{digits[0]}.{digits[1:]}"
    return f"{sign}{body}e{exp}"


def token_cost(value: str) -> int:
    """`tokens` of a fact: ceil(UTF-8 byte length / 4)."""
    return (len(value.encode("utf-8")) + 3) // 4


@dataclass(slots=True)
class Fact:
    """One fact, as in the journal. Timestamps are UTC epoch nanoseconds."""

    fact_id: str
    entity: str
    key: str
    value: str
    confidence: float
    stored_at: int
    tokens: int
    deleted: bool = False
    tenant_hash: str = "default"
    source_receipt: Optional[str] = None
    version: int = 1
    supersedes: Optional[str] = None
    private: bool = False
    horizon_class: str = "none"
    reverified_at: Optional[int] = None
    superseded_by: Optional[str] = None
    actor: Optional[str] = None
    valid_from: Optional[int] = None
    valid_to: Optional[int] = None
    access_count: int = 0
    last_accessed_at: Optional[int] = None

    def to_json(self) -> str:
        """The fact object exactly as serde_json writes it."""
        parts = [
            '{"fact_id":', _jstr(self.fact_id),
            ',"tenant_hash":', _jstr(self.tenant_hash),
            ',"entity":', _jstr(self.entity),
            ',"key":', _jstr(self.key),
            ',"value":', _jstr(self.value),
            ',"source_receipt":', "null" if self.source_receipt is None else _jstr(self.source_receipt),
            ',"confidence":', format_f32(self.confidence),
            ',"stored_at":"', timestamps.format_fact_time(self.stored_at),
            '","tokens":', str(self.tokens),
            ',"deleted":', "true" if self.deleted else "false",
            ',"version":', str(self.version),
        ]
        if self.supersedes is not None:
            parts += (',"supersedes":', _jstr(self.supersedes))
        parts += (',"private":', "true" if self.private else "false",
                  ',"horizon_class":"', self.horizon_class, '"')
        if self.reverified_at is not None:
            parts += (',"reverified_at":"', timestamps.format_fact_time(self.reverified_at), '"')
        if self.superseded_by is not None:
            parts += (',"superseded_by":', _jstr(self.superseded_by))
        if self.actor is not None:
            parts += (',"actor":', _jstr(self.actor))
        if self.valid_from is not None:
            parts += (',"valid_from":"', timestamps.format_fact_time(self.valid_from), '"')
        if self.valid_to is not None:
            parts += (',"valid_to":"', timestamps.format_fact_time(self.valid_to), '"')
        if self.access_count:
            parts += (',"access_count":', str(self.access_count))
        if self.last_accessed_at is not None:
            parts += (',"last_accessed_at":"', timestamps.format_fact_time(self.last_accessed_at), '"')
        parts.append("}")
        return "".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The fact as a plain JSON-ready dict (same keys and order as the journal)."""
        return json.loads(self.to_json())

    def valid_at(self, instant_ns: int) -> bool:
        """Half-open validity interval [valid_from, valid_to)."""
        return (self.valid_from is None or instant_ns >= self.valid_from) and (
            self.valid_to is None or instant_ns < self.valid_to
        )

    def copy(self, **changes: Any) -> "Fact":
        return replace(self, **changes)


# --- events -------------------------------------------------------------------------------------


@dataclass(slots=True)
class StoreEvent:
    fact: Fact
    op: ClassVar[Literal["store"]] = "store"


@dataclass(slots=True)
class ReplaceLatestEvent:
    fact: Fact
    replaced_fact_ids: list[str]
    op: ClassVar[Literal["replace_latest"]] = "replace_latest"


@dataclass(slots=True)
class StoreBatchEvent:
    facts: list[Fact]
    op: ClassVar[Literal["store_batch"]] = "store_batch"


@dataclass(slots=True)
class DeleteEvent:
    fact_id: str
    deleted_at: str
    op: ClassVar[Literal["delete"]] = "delete"


@dataclass(slots=True)
class SupersedeEvent:
    fact_id: str
    by_fact_id: str
    superseded_at: str
    op: ClassVar[Literal["supersede"]] = "supersede"


@dataclass(slots=True)
class ClearSupersedeEvent:
    fact_id: str
    cleared_at: str
    op: ClassVar[Literal["clear_supersede"]] = "clear_supersede"


@dataclass(slots=True)
class SetValidityEvent:
    fact_id: str
    valid_from: Optional[int]
    valid_to: Optional[int]
    set_at: str
    op: ClassVar[Literal["set_validity"]] = "set_validity"


@dataclass(slots=True)
class ConsolidateEvent:
    canonical: Fact
    superseded_fact_ids: list[str]
    consolidated_at: str
    op: ClassVar[Literal["consolidate"]] = "consolidate"


@dataclass(slots=True)
class ConsolidationProvenanceEvent:
    canonical_fact_id: str
    source_fact_ids: list[str]
    tenant_hash: str
    recorded_at: str
    op: ClassVar[Literal["consolidation_provenance"]] = "consolidation_provenance"


@dataclass(slots=True)
class ConsolidateUndoEvent:
    canonical_fact_id: str
    restored_fact_ids: list[str]
    undone_at: str
    op: ClassVar[Literal["consolidate_undo"]] = "consolidate_undo"


@dataclass(slots=True)
class SetHorizonEvent:
    """cruxsql extension: a journaled horizon change (a Crux daemon skips this line)."""

    fact_id: str
    horizon_class: str
    set_at: str
    op: ClassVar[Literal["set_horizon"]] = "set_horizon"


@dataclass(slots=True)
class ReverifyEvent:
    """cruxsql extension: a journaled re-verification (a Crux daemon skips this line)."""

    fact_id: str
    reverified_at: int
    op: ClassVar[Literal["reverify"]] = "reverify"


Event = Union[
    StoreEvent, ReplaceLatestEvent, StoreBatchEvent, DeleteEvent, SupersedeEvent,
    ClearSupersedeEvent, SetValidityEvent, ConsolidateEvent, ConsolidationProvenanceEvent,
    ConsolidateUndoEvent, SetHorizonEvent, ReverifyEvent,
]

CRUX_OPS = (
    "store", "replace_latest", "store_batch", "delete", "supersede", "clear_supersede",
    "set_validity", "consolidate", "consolidation_provenance", "consolidate_undo",
)
EXTENSION_OPS = ("set_horizon", "reverify")
ExtensionEvent = Union[SetHorizonEvent, ReverifyEvent]  # the events of EXTENSION_OPS
ALL_OPS = CRUX_OPS + EXTENSION_OPS


def _ids(ids: list[str]) -> str:
    return "[" + ",".join(_jstr(i) for i in ids) + "]"


def encode_event(event: Event) -> str:
    """One journal line (without the newline) exactly as the Rust daemon writes it."""
    op = event.op
    head = '{"op":"' + op + '"'
    if event.op == "store":
        return head + ',"fact":' + event.fact.to_json() + "}"
    if event.op == "replace_latest":
        return head + ',"fact":' + event.fact.to_json() + ',"replaced_fact_ids":' + _ids(event.replaced_fact_ids) + "}"
    if event.op == "store_batch":
        return head + ',"facts":[' + ",".join(f.to_json() for f in event.facts) + "]}"
    if event.op == "delete":
        return head + ',"fact_id":' + _jstr(event.fact_id) + ',"deleted_at":' + _jstr(event.deleted_at) + "}"
    if event.op == "supersede":
        return (head + ',"fact_id":' + _jstr(event.fact_id) + ',"by_fact_id":' + _jstr(event.by_fact_id)
                + ',"superseded_at":' + _jstr(event.superseded_at) + "}")
    if event.op == "clear_supersede":
        return head + ',"fact_id":' + _jstr(event.fact_id) + ',"cleared_at":' + _jstr(event.cleared_at) + "}"
    if event.op == "set_validity":
        out = head + ',"fact_id":' + _jstr(event.fact_id)
        if event.valid_from is not None:
            out += ',"valid_from":"' + timestamps.format_fact_time(event.valid_from) + '"'
        if event.valid_to is not None:
            out += ',"valid_to":"' + timestamps.format_fact_time(event.valid_to) + '"'
        return out + ',"set_at":' + _jstr(event.set_at) + "}"
    if event.op == "consolidate":
        return (head + ',"canonical":' + event.canonical.to_json() + ',"superseded_fact_ids":'
                + _ids(event.superseded_fact_ids) + ',"consolidated_at":' + _jstr(event.consolidated_at) + "}")
    if event.op == "consolidation_provenance":
        return (head + ',"canonical_fact_id":' + _jstr(event.canonical_fact_id) + ',"source_fact_ids":'
                + _ids(event.source_fact_ids) + ',"tenant_hash":' + _jstr(event.tenant_hash)
                + ',"recorded_at":' + _jstr(event.recorded_at) + "}")
    if event.op == "consolidate_undo":
        return (head + ',"canonical_fact_id":' + _jstr(event.canonical_fact_id) + ',"restored_fact_ids":'
                + _ids(event.restored_fact_ids) + ',"undone_at":' + _jstr(event.undone_at) + "}")
    if event.op == "set_horizon":
        return (head + ',"fact_id":' + _jstr(event.fact_id) + ',"horizon_class":"' + event.horizon_class
                + '","set_at":' + _jstr(event.set_at) + "}")
    if event.op == "reverify":
        return (head + ',"fact_id":' + _jstr(event.fact_id) + ',"reverified_at":"'
                + timestamps.format_fact_time(event.reverified_at) + '"}')
    raise InvalidInput(f"unknown journal op {op!r}")


# --- decoding -----------------------------------------------------------------------------------


class CorruptLine(CruxsqlError, ValueError):
    """A journal line that serde would reject; the reason names the problem."""


# How the reason of an `UnrepresentableLine` starts (in `journal_corrupt_lines.reason` too).
UNREPRESENTABLE = "Crux reads this line, cruxsql cannot represent it: "


class UnrepresentableLine(CorruptLine):
    """A line serde reads but the view cannot hold (a confidence that overflows f32 to infinity):
    replay records it with the corrupt lines, and a compaction carries it over byte for byte instead of
    dropping it (governance/compaction.py)."""

    def __init__(self, reason: str) -> None:
        super().__init__(UNREPRESENTABLE + reason)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-JSON number {name}")


class _DuplicateKeys(dict):
    """A decoded object that repeated some keys (`duplicates`, in order of first repeat). serde rejects a
    repeated *known* field of the struct it fills and ignores repeated unknown keys, so the check waits
    until the object is read as a struct (`_check_duplicates`)."""

    duplicates: tuple[str, ...] = ()


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    marked = _DuplicateKeys(obj)
    marked.duplicates = tuple(dict.fromkeys(k for k, _ in pairs if k in seen or seen.add(k)))  # type: ignore[func-returns-value]  # add() is None: the first sight is falsy
    return marked


# The fields serde knows for each struct (a repeat of one of these is an error).
_FACT_FIELDS = frozenset((
    "fact_id", "tenant_hash", "entity", "key", "value", "source_receipt", "confidence", "stored_at", "tokens",
    "deleted", "version", "supersedes", "private", "horizon_class", "reverified_at", "superseded_by", "actor",
    "valid_from", "valid_to", "access_count", "last_accessed_at"))
_EVENT_FIELDS = {op: frozenset(fields) for op, fields in {
    "store": ("fact",), "store_batch": ("facts",), "delete": ("fact_id", "deleted_at"),
    "supersede": ("fact_id", "by_fact_id", "superseded_at"), "clear_supersede": ("fact_id", "cleared_at"),
    "set_validity": ("fact_id", "valid_from", "valid_to", "set_at"),
    "replace_latest": ("fact", "replaced_fact_ids"),
    "consolidate": ("canonical", "superseded_fact_ids", "consolidated_at"),
    "consolidation_provenance": ("canonical_fact_id", "source_fact_ids", "tenant_hash", "recorded_at"),
    "consolidate_undo": ("canonical_fact_id", "restored_fact_ids", "undone_at"),
    "set_horizon": ("fact_id", "horizon_class", "set_at"), "reverify": ("fact_id", "reverified_at"),
}.items()}


def _check_duplicates(obj: dict, fields: frozenset[str], where: str) -> None:
    """serde's `duplicate field` error for a repeated known field; repeated unknown keys are ignored."""
    for name in getattr(obj, "duplicates", ()):
        if name in fields:
            raise CorruptLine(f"{where}: duplicate field `{name}`")


_decoder = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_object)
# serde_json's Deserializer starts with remaining_depth = 128 and fails when entering an array or
# object brings it to 0: a text nested 128 levels deep is rejected, 127 is the deepest it reads.
MAX_NESTING = 127


# A JSON string as `_nesting_depth` skips it: a quote, then escaped or plain bytes, up to the closing quote
# (or the end of the text: an unterminated string runs to the end).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_DEPTH_STEP = {0x5B: 1, 0x7B: 1, 0x5D: -1, 0x7D: -1}


def _nesting_depth(raw: bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON text (strings skipped). Strings are cut out
    and the other bytes dropped in C, so Python only counts the brackets: a 1,000-fact `store_batch`
    line (300 KB) takes ~2 ms instead of ~20 ms byte by byte."""
    # without backslashes, every other quote-separated piece is outside a string
    outside = b"".join(raw.split(b'"')[::2]) if b"\\" not in raw else _STRING.sub(b"", raw)
    brackets = outside.translate(None, _NOT_BRACKETS)
    return max(0, max(accumulate(_DEPTH_STEP[b] for b in brackets), default=0))


def _req(obj: dict, name: str, where: str) -> Any:
    try:
        return obj[name]
    except KeyError:
        raise CorruptLine(f"{where}: missing field `{name}`") from None


def _string(v: Any, name: str, where: str) -> str:
    if type(v) is not str:
        raise CorruptLine(f"{where}: `{name}` must be a string")
    return v


def _opt_string(v: Any, name: str, where: str) -> Optional[str]:
    if v is None:
        return None
    return _string(v, name, where)


def _bool(v: Any, name: str, where: str) -> bool:
    if type(v) is not bool:
        raise CorruptLine(f"{where}: `{name}` must be a boolean")
    return v


def _uint(v: Any, name: str, where: str, limit: int) -> int:
    if type(v) is not int or v < 0 or v > limit:
        raise CorruptLine(f"{where}: `{name}` must be an unsigned integer")
    return v


def _time(v: Any, name: str, where: str) -> int:
    if type(v) is not str:
        raise CorruptLine(f"{where}: `{name}` must be an RFC 3339 string")
    try:
        return timestamps.parse_ns(v)
    except InvalidInput as exc:
        raise CorruptLine(f"{where}: `{name}`: {exc}") from None


def _opt_time(v: Any, name: str, where: str) -> Optional[int]:
    return None if v is None else _time(v, name, where)


def _id_list(v: Any, name: str, where: str) -> list[str]:
    if type(v) is not list or any(type(i) is not str for i in v):
        raise CorruptLine(f"{where}: `{name}` must be an array of strings")
    return v


def fact_from_obj(obj: Any, where: str = "fact") -> Fact:
    """Build a Fact from a decoded JSON object with serde's defaults and type rules."""
    if not isinstance(obj, dict):
        raise CorruptLine(f"{where}: expected an object")
    _check_duplicates(obj, _FACT_FIELDS, where)
    g = obj.get
    confidence = _req(obj, "confidence", where)
    if type(confidence) not in (int, float):
        raise CorruptLine(f"{where}: `confidence` must be a number")
    confidence = to_f32(confidence)
    if not math.isfinite(confidence):
        # serde holds an infinity (and would write it as an unreadable `null`: docs/crux-compatibility.md)
        raise UnrepresentableLine(f"{where}: `confidence` is outside the f32 range")
    horizon = g("horizon_class", "none")
    if type(horizon) is not str or horizon not in _HORIZONS:
        raise CorruptLine(f"{where}: unknown horizon_class {horizon!r}")
    tenant = g("tenant_hash", "default")
    return Fact(
        fact_id=_string(_req(obj, "fact_id", where), "fact_id", where),
        tenant_hash=_string(tenant, "tenant_hash", where),
        entity=_string(_req(obj, "entity", where), "entity", where),
        key=_string(_req(obj, "key", where), "key", where),
        value=_string(_req(obj, "value", where), "value", where),
        source_receipt=_opt_string(g("source_receipt"), "source_receipt", where),
        confidence=confidence,
        stored_at=_time(_req(obj, "stored_at", where), "stored_at", where),
        tokens=_uint(_req(obj, "tokens", where), "tokens", where, USIZE_MAX),
        deleted=_bool(_req(obj, "deleted", where), "deleted", where),
        version=_uint(g("version", 1), "version", where, _U32_MAX),
        supersedes=_opt_string(g("supersedes"), "supersedes", where),
        private=_bool(g("private", False), "private", where),
        horizon_class=horizon,
        reverified_at=_opt_time(g("reverified_at"), "reverified_at", where),
        superseded_by=_opt_string(g("superseded_by"), "superseded_by", where),
        actor=_opt_string(g("actor"), "actor", where),
        valid_from=_opt_time(g("valid_from"), "valid_from", where),
        valid_to=_opt_time(g("valid_to"), "valid_to", where),
        access_count=_uint(g("access_count", 0), "access_count", where, _U32_MAX),
        last_accessed_at=_opt_time(g("last_accessed_at"), "last_accessed_at", where),
    )


def _has_lone_surrogate(obj: Any) -> bool:
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(obj, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in obj.items())
    if isinstance(obj, list):
        return any(_has_lone_surrogate(v) for v in obj)
    return False


def decode_event(raw: bytes) -> Event:
    """Decode one journal record (without its newline) or raise CorruptLine saying why."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptLine(f"invalid UTF-8 at byte {exc.start}") from None
    if raw.count(b"[") + raw.count(b"{") > MAX_NESTING and _nesting_depth(raw) > MAX_NESTING:
        raise CorruptLine(f"invalid JSON: nested deeper than {MAX_NESTING} levels")
    try:
        obj = _decoder.decode(text)
    except (ValueError, RecursionError) as exc:
        raise CorruptLine(f"invalid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise CorruptLine("expected a JSON object")
    if b"\\u" in raw and _has_lone_surrogate(obj):
        raise CorruptLine("invalid JSON: lone surrogate in a \\u escape")
    op = obj.get("op")
    if type(op) is not str:
        raise CorruptLine("missing field `op`")
    # the internally tagged enum: a repeated `op` tag is an error, then the variant's own fields
    _check_duplicates(obj, _EVENT_FIELDS.get(op, frozenset()) | {"op"}, op)
    w = op
    if op == "store":
        return StoreEvent(fact_from_obj(_req(obj, "fact", w), "store.fact"))
    if op == "store_batch":
        facts = _req(obj, "facts", w)
        if type(facts) is not list:
            raise CorruptLine("store_batch: `facts` must be an array")
        return StoreBatchEvent([fact_from_obj(f, "store_batch.facts") for f in facts])
    if op == "delete":
        return DeleteEvent(_string(_req(obj, "fact_id", w), "fact_id", w),
                           _string(_req(obj, "deleted_at", w), "deleted_at", w))
    if op == "supersede":
        return SupersedeEvent(_string(_req(obj, "fact_id", w), "fact_id", w),
                              _string(_req(obj, "by_fact_id", w), "by_fact_id", w),
                              _string(_req(obj, "superseded_at", w), "superseded_at", w))
    if op == "clear_supersede":
        return ClearSupersedeEvent(_string(_req(obj, "fact_id", w), "fact_id", w),
                                   _string(_req(obj, "cleared_at", w), "cleared_at", w))
    if op == "set_validity":
        return SetValidityEvent(_string(_req(obj, "fact_id", w), "fact_id", w),
                                _opt_time(obj.get("valid_from"), "valid_from", w),
                                _opt_time(obj.get("valid_to"), "valid_to", w),
                                _string(_req(obj, "set_at", w), "set_at", w))
    if op == "replace_latest":
        return ReplaceLatestEvent(fact_from_obj(_req(obj, "fact", w), "replace_latest.fact"),
                                  _id_list(_req(obj, "replaced_fact_ids", w), "replaced_fact_ids", w))
    if op == "consolidate":
        return ConsolidateEvent(fact_from_obj(_req(obj, "canonical", w), "consolidate.canonical"),
                                _id_list(_req(obj, "superseded_fact_ids", w), "superseded_fact_ids", w),
                                _string(_req(obj, "consolidated_at", w), "consolidated_at", w))
    if op == "consolidation_provenance":
        return ConsolidationProvenanceEvent(
            _string(_req(obj, "canonical_fact_id", w), "canonical_fact_id", w),
            _id_list(_req(obj, "source_fact_ids", w), "source_fact_ids", w),
            _string(_req(obj, "tenant_hash", w), "tenant_hash", w),
            _string(_req(obj, "recorded_at", w), "recorded_at", w))
    if op == "consolidate_undo":
        return ConsolidateUndoEvent(_string(_req(obj, "canonical_fact_id", w), "canonical_fact_id", w),
                                    _id_list(_req(obj, "restored_fact_ids", w), "restored_fact_ids", w),
                                    _string(_req(obj, "undone_at", w), "undone_at", w))
    if op == "set_horizon":
        horizon = _req(obj, "horizon_class", w)
        if type(horizon) is not str or horizon not in _HORIZONS:
            raise CorruptLine(f"set_horizon: unknown horizon_class {horizon!r}")
        return SetHorizonEvent(_string(_req(obj, "fact_id", w), "fact_id", w), horizon,
                               _string(_req(obj, "set_at", w), "set_at", w))
    if op == "reverify":
        return ReverifyEvent(_string(_req(obj, "fact_id", w), "fact_id", w),
                             _time(_req(obj, "reverified_at", w), "reverified_at", w))
    raise CorruptLine(f"unknown op {op!r}")


def event_facts(event: Event) -> list[Fact]:
    """The facts an event carries (store, replace_latest, store_batch, consolidate)."""
    if event.op in ("store", "replace_latest"):
        return [event.fact]
    if event.op == "store_batch":
        return list(event.facts)
    if event.op == "consolidate":
        return [event.canonical]
    return []


def event_time_text(event: Event) -> Optional[str]:
    """The event's own timestamp as written in the journal (a fact's stored_at for stores)."""
    if event.op in ("store", "replace_latest"):
        return timestamps.format_fact_time(event.fact.stored_at)
    if event.op == "store_batch":
        return timestamps.format_fact_time(event.facts[0].stored_at) if event.facts else None
    if event.op == "consolidate":
        return event.consolidated_at
    if event.op == "reverify":
        return timestamps.format_fact_time(event.reverified_at)
    for attr in ("deleted_at", "superseded_at", "cleared_at", "set_at", "recorded_at", "undone_at"):
        value = getattr(event, attr, None)
        if value is not None:
            return value
    return None

