"""The compacted journal's `store` lines, built by SQLite from the view's rows.

A live fact's line is `{"op":"store","fact":` + `Fact.to_json()` + `}`, byte for byte as the codec
writes it. The view keeps every field the line needs as the text the journal had (timestamps as
`format_fact_time` wrote them, whatever the year; a `tokens` above 2^63-1 and a -0.0 confidence in
`tokens_exact` and `confidence_exact`), so SQLite can concatenate the line in C: strings go through
`json_quote`, whose escaping equals serde_json's and Python's `encode_basestring` for every code point
(`"`, `\\`, the short escapes `\\b \\t \\n \\f \\r`, other controls as `\\u00xx`, everything else raw),
and the f32 confidence through `codec.format_f32` (registered on the connection, computed once per
distinct value). Tests hold every line equal to the codec's encoding of the same fact, for facts with
every optional field, control characters, quotes and non-ASCII text.

Built in Python, each of 750k lines cost a 27-column row tuple and a join of ~40 pieces (~3 s of a 1M-event
compaction); built here, a row is its line (UTF-8 bytes, ready to write) and the four columns compaction's
bookkeeping needs.
"""

from __future__ import annotations

from typing import Iterator

import apsw

from ..facts import codec

_F32_FUNCTION = "cruxsql_format_f32"
_F32_TEXT: dict[float, str] = {}

# One `concat()` (absent optional fields are NULL, which it skips): a chain of `||` copied the growing
# line at every step (~0.4 s more at 750k lines). `json_quote(NULL)` is `null`, as the codec writes a
# null source_receipt.
LINE_SQL = (
    """CAST(concat('{"op":"store","fact":{"fact_id":', json_quote(fact_id), ',"tenant_hash":', json_quote(tenant_hash),"""
    """ ',"entity":', json_quote(entity), ',"key":', json_quote(key), ',"value":', json_quote(value),"""
    """ ',"source_receipt":', json_quote(source_receipt), ',"confidence":', coalesce(confidence_exact, """ + _F32_FUNCTION + """(confidence)),"""
    """ ',"stored_at":"', stored_at, '","tokens":', coalesce(tokens_exact, tokens), ',"deleted":', iif(deleted, 'true', 'false'),"""
    """ ',"version":', version,"""
    """ CASE WHEN supersedes IS NOT NULL THEN concat(',"supersedes":', json_quote(supersedes)) END,"""
    """ ',"private":', iif(private, 'true', 'false'), ',"horizon_class":"', horizon_class, '"',"""
    """ CASE WHEN reverified_at IS NOT NULL THEN concat(',"reverified_at":"', reverified_at, '"') END,"""
    """ CASE WHEN superseded_by IS NOT NULL THEN concat(',"superseded_by":', json_quote(superseded_by)) END,"""
    """ CASE WHEN actor IS NOT NULL THEN concat(',"actor":', json_quote(actor)) END,"""
    """ CASE WHEN valid_from IS NOT NULL THEN concat(',"valid_from":"', valid_from, '"') END,"""
    """ CASE WHEN valid_to IS NOT NULL THEN concat(',"valid_to":"', valid_to, '"') END,"""
    """ CASE WHEN access_count THEN concat(',"access_count":', access_count) END,"""
    """ CASE WHEN last_accessed_at IS NOT NULL THEN concat(',"last_accessed_at":"', last_accessed_at, '"') END,"""
    """ '}}') AS BLOB)"""
)

_LINE_COLUMNS = f"{LINE_SQL}, fact_id, stored_at, stored_at_ns, seq"
_ORDER_COLUMNS = "fact_id, stored_at, stored_at_ns, seq"
_FIRST_CHUNK = "SELECT {} FROM facts WHERE deleted = 0 ORDER BY stored_at_ns, fact_id LIMIT ?"
_NEXT_CHUNK = ("SELECT {} FROM facts WHERE deleted = 0 AND (stored_at_ns, fact_id) > (?, ?) "
               "ORDER BY stored_at_ns, fact_id LIMIT ?")


def _f32_text(value: float) -> str:
    text = _F32_TEXT.get(value) if value else None  # 0.0 and -0.0 are one dict key: never cached
    if text is None:
        text = codec.format_f32(value)
        if value and len(_F32_TEXT) < 65536:
            _F32_TEXT[value] = text
    return text


def register(db: apsw.Connection) -> None:
    """Make the connection able to run `LINE_SQL` (idempotent)."""
    # apsw types a scalar function as taking any SQLite value; LINE_SQL calls this one on confidence (a float)
    db.createscalarfunction(_F32_FUNCTION, _f32_text, 1, deterministic=True)  # type: ignore[arg-type]


def live_chunks(db: apsw.Connection, batch: int) -> Iterator[list[tuple[bytes, str, str, int, int]]]:
    """The live facts in the compacted journal's order (`stored_at`, `fact_id`), `batch` at a time, as
    (line without its newline, fact_id, stored_at, stored_at_ns, seq); keyset-paginated, so no statement
    stays open across a chunk."""
    register(db)
    return _chunks(db, _LINE_COLUMNS, batch, 3, 1)


def live_order_chunks(db: apsw.Connection, batch: int) -> Iterator[list[tuple[str, str, int, int]]]:
    """`live_chunks` without the lines: (fact_id, stored_at, stored_at_ns, seq), in the same order."""
    return _chunks(db, _ORDER_COLUMNS, batch, 2, 0)


def live_lines_of(db: apsw.Connection, fact_ids: list[str]) -> dict[str, tuple[bytes, str, str, int, int]]:
    """The `live_chunks` row of each of `fact_ids` that is live, by fact_id."""
    register(db)
    rows = db.execute(f"SELECT {_LINE_COLUMNS} FROM facts WHERE deleted = 0 AND fact_id IN carray(?)",
                      (apsw.carray(tuple(fact_ids)),)) if fact_ids else ()
    return {row[1]: row for row in rows}


def _chunks(db: apsw.Connection, columns: str, batch: int, ns_at: int, id_at: int) -> Iterator[list[tuple]]:
    first, following = _FIRST_CHUNK.format(columns), _NEXT_CHUNK.format(columns)
    last = None
    while True:
        rows = db.execute(first, (batch,)).fetchall() if last is None else \
            db.execute(following, (*last, batch)).fetchall()
        if not rows:
            return
        last = (rows[-1][ns_at], rows[-1][id_at])
        yield rows


def total_bytes(db: apsw.Connection) -> int:
    """The bytes the live facts' store lines take, newlines included."""
    register(db)
    return db.execute(f"SELECT coalesce(sum(length({LINE_SQL}) + 1), 0) FROM facts WHERE deleted = 0").get
