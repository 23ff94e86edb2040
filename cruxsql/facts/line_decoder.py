"""The bulk path's line decoder: one journal line straight into view rows, or "let the codec decide".

msgspec's compiled decoder checks each line against typed shapes of the fast-path events (serde's types
and ranges, unknown keys refused), and Python only fills serde's defaults, checks the times and the f32
and counts the keys. Anything unusual (a possible duplicate key, a time not in chrono's own format, a
type error...) raises `_Slow` and is handed to `codec.decode_event`, so a line is accepted, or rejected
with the same reason, exactly as the codec does (tests/facts/test_bulk_replay.py fuzzes and sweeps lines
against it). The applier that writes the rows is `bulk.py`'s.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Annotated, Any, Iterator, Literal, Optional, Union

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from . import codec, timestamps, view
from .codec import CorruptLine
from .journal import MAX_RECORD_BYTES

_U32_MAX = 2**32 - 1
_QUOTE_THEN_SPACE = re.compile(rb'"[ \t\r\n]')


class _Slow(Exception):
    """The fast decoder is not sure: let `codec.decode_event` decide (and give the exact reason)."""


def _fact_time(text: object) -> tuple[str, int]:
    """(text, `*_ns` column) of a fact time already in chrono's canonical form, else `_Slow`."""
    ns = timestamps.canonical_fact_time_ns(text)
    if ns is None:
        raise _Slow
    return text, timestamps.column_ns(ns)  # type: ignore[return-value]  # canonical_fact_time_ns: None for a non-str


@lru_cache(maxsize=4096)
def _finite_f32(x: float) -> Optional[float]:
    value = codec.to_f32(x)
    return value if math.isfinite(value) else None


def _opt_fact_time(text: object) -> tuple[Optional[str], Optional[int]]:
    return (None, None) if text is None else _fact_time(text)


def _f32(x: float) -> float:
    """The confidence as the codec reads it (an f32), or `_Slow` for anything it would reject."""
    # 0.0 and -0.0 are one key to a cache but two f32s
    value = _finite_f32(x) if x else codec.to_f32(x)
    if value is None:
        raise _Slow
    return value


# The shapes msgspec (a compiled decoder) checks a line against: serde's types, with every field serde
# defaults marked UNSET when absent, so that the keys an object had can be counted (`decode_fast`).
# Unknown keys are refused (such a line goes to the codec), so nothing nests beyond these shapes.
_Text = Union[str, None, UnsetType]
_U32 = Annotated[int, Meta(ge=0, le=_U32_MAX)]


class _Fact(Struct, kw_only=True, forbid_unknown_fields=True):
    """A Fact object (crates/corecrux-memory/src/fact_store.rs), fields in declaration order."""

    fact_id: str
    tenant_hash: Union[str, UnsetType] = UNSET
    entity: str
    key: str
    value: str
    source_receipt: _Text = UNSET
    confidence: float
    stored_at: str
    tokens: Annotated[int, Meta(ge=0)]  # a usize: at most codec.USIZE_MAX (checked in `_fact_values`, as
    # msgspec's bounds stop at int64)
    deleted: bool
    version: Union[_U32, UnsetType] = UNSET
    supersedes: _Text = UNSET
    private: Union[bool, UnsetType] = UNSET
    horizon_class: Union[Literal["volatile", "medium", "stable", "none"], UnsetType] = UNSET
    reverified_at: _Text = UNSET
    superseded_by: _Text = UNSET
    actor: _Text = UNSET
    valid_from: _Text = UNSET
    valid_to: _Text = UNSET
    access_count: Union[_U32, UnsetType] = UNSET
    last_accessed_at: _Text = UNSET


_FACT_KEYS = len(_Fact.__struct_fields__)
# What serde puts in each field when its key is absent: one {UNSET: default} per field, so that
# `map(dict.get, _FACT_DEFAULTS, values, values)` fills the defaults in C.
_FACT_DEFAULTS = tuple({UNSET: {"tenant_hash": "default", "version": 1, "private": False, "horizon_class": "none",
                                "access_count": 0}.get(name)} for name in _Fact.__struct_fields__)


class _Event(Struct, tag_field="op", forbid_unknown_fields=True):
    pass


class _Store(_Event, tag="store"):
    fact: _Fact


class _StoreBatch(_Event, tag="store_batch"):
    facts: list[_Fact]


class _Delete(_Event, tag="delete"):
    fact_id: str
    deleted_at: str


class _Supersede(_Event, tag="supersede"):
    fact_id: str
    by_fact_id: str
    superseded_at: str


class _ClearSupersede(_Event, tag="clear_supersede"):
    fact_id: str
    cleared_at: str


class _SetValidity(_Event, tag="set_validity", kw_only=True):
    fact_id: str
    valid_from: _Text = UNSET
    valid_to: _Text = UNSET
    set_at: str


class _SetHorizon(_Event, tag="set_horizon"):
    fact_id: str
    horizon_class: Literal["volatile", "medium", "stable", "none"]
    set_at: str


class _Reverify(_Event, tag="reverify"):
    fact_id: str
    reverified_at: str


_FAST_EVENTS = Union[_Store, _StoreBatch, _Delete, _Supersede, _ClearSupersede, _SetValidity, _SetHorizon, _Reverify]
_decoder = msgspec.json.Decoder(_FAST_EVENTS)
_values = msgspec.structs.astuple


def _fact_values(f: _Fact, keys: list[int]) -> tuple:
    """The first `view.VALUE_COLUMNS` of a decoded fact, as the journal wrote it (before privacy and the
    tenant default), checked like `codec.fact_from_obj`; `_Slow` on any doubt. Adds to `keys[0]` how many
    keys the fact object had (each field once: msgspec keeps the last of a repeated key)."""
    values = _values(f)
    keys[0] += _FACT_KEYS - values.count(UNSET)
    fields: Iterator[Any] = map(dict.get, _FACT_DEFAULTS, values, values)
    (fact_id, tenant, entity, key, value, receipt, confidence, stored_at, tokens, deleted, version, supersedes,
     private, horizon, reverified_at, superseded_by, actor, valid_from, valid_to, access_count, accessed_at) = fields
    stored_at, stored_ns = _fact_time(stored_at)
    reverified_at, reverified_ns = _opt_fact_time(reverified_at)
    valid_from, valid_from_ns = _opt_fact_time(valid_from)
    valid_to, valid_to_ns = _opt_fact_time(valid_to)
    accessed_at, accessed_ns = _opt_fact_time(accessed_at)
    confidence = _f32(confidence)
    if tokens > codec.USIZE_MAX:
        raise _Slow
    tokens, tokens_exact = view.tokens_columns(tokens)
    return (fact_id, tenant, entity, key, value, receipt, confidence, stored_at, stored_ns, tokens, int(deleted),
            version, supersedes, int(private), horizon, reverified_at, reverified_ns, superseded_by, actor,
            valid_from, valid_from_ns, valid_to, valid_to_ns, access_count, accessed_at, accessed_ns, tokens_exact,
            view.confidence_exact(confidence))


def decode_fast(raw: bytes) -> tuple[str, object]:
    """(op, payload) of a line the fast path can take, or `_Slow`. Payloads: `store` / `store_batch`:
    a list of `_fact_values`; `delete` (id, at); `supersede` (id, by, at); `clear_supersede` (id, at);
    `set_validity` (id, from text, from ns, to text, to ns, at); `set_horizon` (id, horizon, at);
    `reverify` (id, text, ns).

    msgspec checks the JSON (UTF-8, escapes, lone surrogates, numbers, no NaN) and serde's types and
    ranges; what it does not judge as the codec does goes to the codec: a repeated key (msgspec keeps the
    last one, serde refuses a repeated field), a time not in chrono's own form, a confidence beyond f32."""
    # after a quote followed by whitespace, keys cannot be counted by their `":` (below)
    if _QUOTE_THEN_SPACE.search(raw):
        raise _Slow
    try:
        event = _decoder.decode(raw)
    except msgspec.DecodeError:  # a ValidationError too
        raise _Slow from None
    keys = [1]  # "op"
    if isinstance(event, _Store):
        op = "store"
        payload: object = [_fact_values(event.fact, keys)]
        keys[0] += 1
    elif isinstance(event, _StoreBatch):
        op = "store_batch"
        payload = [_fact_values(f, keys) for f in event.facts]
        keys[0] += 1
    elif isinstance(event, _Delete):
        op, payload, keys[0] = "delete", (event.fact_id, event.deleted_at), 3
    elif isinstance(event, _Supersede):
        op, payload, keys[0] = "supersede", (event.fact_id, event.by_fact_id, event.superseded_at), 4
    elif isinstance(event, _ClearSupersede):
        op, payload, keys[0] = "clear_supersede", (event.fact_id, event.cleared_at), 3
    elif isinstance(event, _SetValidity):
        op = "set_validity"
        start, end = (None if v is UNSET else v for v in (event.valid_from, event.valid_to))
        payload = (event.fact_id, *_opt_fact_time(start), *_opt_fact_time(end), event.set_at)
        keys[0] = 5 - (event.valid_from is UNSET) - (event.valid_to is UNSET)
    elif isinstance(event, _SetHorizon):
        op, payload, keys[0] = "set_horizon", (event.fact_id, event.horizon_class, event.set_at), 4
    else:
        op, payload, keys[0] = "reverify", (event.fact_id, *_fact_time(event.reverified_at)), 3
    # No key repeated (serde rejects a repeated field): with no quote followed by whitespace,
    # each key is a string directly followed by `:`, so the line has as many `":` as keys, more if a key
    # repeated (or a string holds `":`).
    if raw.count(b'":') != keys[0]:
        raise _Slow
    return op, payload


def decode_record(raw: bytes) -> tuple[Optional[str], object]:
    """One journal line (without its newline) as the bulk path takes it: `decode_fast`'s (op, payload), or
    (None, the codec's event) for a line only the codec judges; CorruptLine for one replay records so."""
    if len(raw) > MAX_RECORD_BYTES:
        raise CorruptLine(f"record exceeds the {MAX_RECORD_BYTES}-byte replay ceiling")
    try:
        return decode_fast(raw)
    except _Slow:
        return None, codec.decode_event(raw)
