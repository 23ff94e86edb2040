"""The schema contract: what every table, view and column of the view (and of an audit export) means.

One source of truth for two readers: the schema table of docs/sql.md is rendered from
`VIEW_RELATIONS` (`render_schema_table`; a test fails when the page drifts) and the console's
Datasette metadata (titles, descriptions, column descriptions, units) is built from the same
records. `INTERNAL` lists the derived bookkeeping tables operators do not query; the console hides them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Relation:
    """A documented table or view: what one row is, notes for docs/sql.md, and every column."""

    name: str
    kind: str  # "table" or "view"
    title: str
    one_row_per: str
    notes: str
    columns: dict[str, str]
    units: dict[str, str] = field(default_factory=dict)

    @property
    def description(self) -> str:
        """For Datasette: what a row is, then the notes docs/sql.md shows."""
        return f"One row per {self.one_row_per}." + (f" {self.notes[0].upper()}{self.notes[1:]}." if self.notes else "")


TEXT_TIME = "as the journal writes it (RFC 3339 text, UTC)"
NS_TIME = ("the same instant as integer nanoseconds since the Unix epoch (for sorting and ranges); an instant "
           "outside 1677-09-21..2262-04-11 is held at the nearer end of that range (the text column is exact)")

_FACT_COLUMNS: dict[str, str] = {
    "fact_id": "the fact's id (`f_` + 32 hex digits); primary key",
    "tenant_hash": "the tenant the fact belongs to (`default` when none was named)",
    "entity": "what the fact is about (`__agent::<agent>::...` for an agent's private facts)",
    "key": "the attribute of the entity",
    "value": "the attribute's value",
    "source_receipt": "the receipt or provenance the writer gave, if any",
    "confidence": "the writer's confidence, 0..1 (f32 as in the journal)",
    "stored_at": f"when the fact was stored, {TEXT_TIME}",
    "stored_at_ns": f"stored_at: {NS_TIME}",
    "tokens": "the fact's token estimate (what recall charges against a budget); at most 2^63-1 (see tokens_exact)",
    "deleted": "1 once a delete event removed it (its row stays until compaction)",
    "version": "position in its (tenant, entity, key) chain, from 1",
    "supersedes": "the fact_id this version replaced in its chain, if any",
    "private": "1 when the fact is private (born-private prefix or writer's flag)",
    "horizon_class": "freshness horizon: volatile, medium, stable or none",
    "reverified_at": f"when the fact was last re-verified, {TEXT_TIME}",
    "reverified_at_ns": f"reverified_at: {NS_TIME}",
    "superseded_by": "the fact_id that superseded this one, while it is superseded",
    "actor": "who wrote it (agent or operator), if recorded",
    "valid_from": f"start of the fact's valid time, {TEXT_TIME}",
    "valid_from_ns": f"valid_from: {NS_TIME}",
    "valid_to": f"end of the fact's valid time, {TEXT_TIME}",
    "valid_to_ns": f"valid_to: {NS_TIME}",
    "access_count": "recall access count carried in the journal (Crux's field; cruxsql never writes it)",
    "last_accessed_at": f"last recall access carried in the journal, {TEXT_TIME}",
    "last_accessed_at_ns": f"last_accessed_at: {NS_TIME}",
    "seq": "order in which replay inserted the fact (version-chain order)",
    "line_no": "the journal line (1-based) that stored it",
    "tokens_exact": "the journal's `tokens` in decimal when it is above 2^63-1 (a Crux usize; `tokens` then holds "
                    "2^63-1), else NULL",
    "confidence_exact": "'-0.0' when the journal's confidence is a negative zero (`confidence` holds 0.0), else NULL",
}

_FACT_NOTES = ("`fact_id` primary key; one column per Fact JSON key with the same name (`tenant_hash`, `entity`, "
               "`key`, `value`, `source_receipt`, `confidence`, `stored_at`, `tokens`, `deleted`, `version`, "
               "`supersedes`, `private`, `horizon_class`, `reverified_at`, `superseded_by`, `actor`, `valid_from`, "
               "`valid_to`, `access_count`, `last_accessed_at`); timestamps as the journal's text plus an integer "
               "`<name>_ns` (clamped outside 1677-2262); `tokens_exact` and `confidence_exact` hold what `tokens` and "
               "`confidence` cannot (above 2^63-1, -0.0); booleans 0/1; `seq` = replay order, `line_no` = the "
               "journal line that stored it")

VIEW_RELATIONS: tuple[Relation, ...] = (
    Relation("facts", "table", "Facts", "fact", _FACT_NOTES, _FACT_COLUMNS),
    Relation("live_facts", "view", "Live facts", "fact neither deleted nor superseded", "", _FACT_COLUMNS),
    Relation("fact_versions", "view", "Fact versions", "version of a (tenant, entity, key) chain", "in chain order",
             {c: _FACT_COLUMNS[c] for c in ("tenant_hash", "entity", "key", "version", "fact_id", "value",
                                            "stored_at", "deleted", "supersedes", "superseded_by")}),
    Relation("journal_events", "table", "Journal events", "applied journal line",
             "`line_no`, `byte_offset`, `byte_length`, `op`, `fact_id` (the event's main fact; a fact's events are "
             "found through `journal_event_facts`, which is indexed by fact), `event_at` (the event's own timestamp "
             "text), `applied` (0 when the V-C replay rules skipped it) and `skip_reason`",
             {"line_no": "the journal line (1-based); primary key",
              "byte_offset": "where the line starts in facts.jsonl",
              "byte_length": "the line's length, newline included",
              "op": "the event kind: store, store_batch, delete, supersede, set_validity, ...",
              "fact_id": "the event's main fact",
              "event_at": f"the event's own timestamp, {TEXT_TIME}",
              "applied": "0 when the replay rules skipped the event",
              "skip_reason": "why replay skipped it"},
             {"byte_offset": "B", "byte_length": "B"}),
    Relation("journal_event_facts", "table", "Facts named by journal events", "(line, fact, role)",
             "every fact an event names: stored, deleted, superseded, superseding, cleared, validity, horizon, "
             "reverified, canonical, source, restored, replaced",
             {"line_no": "the journal line (journal_events.line_no)",
              "fact_id": "a fact the event names",
              "role": "what the event did to it: stored, deleted, superseded, superseding, cleared, validity, "
                      "horizon, reverified, canonical, source, restored, replaced"}),
    Relation("journal_corrupt_lines", "table", "Corrupt journal lines", "undecodable line",
             "`line_no`, `byte_offset`, `reason`",
             {"line_no": "the journal line (1-based); primary key",
              "byte_offset": "where the line starts in facts.jsonl",
              "byte_length": "the line's length, newline included",
              "reason": "why it could not be decoded (bad JSON, unknown op, wrong types, invalid UTF-8)"},
             {"byte_offset": "B", "byte_length": "B"}),
    Relation("consolidation_sources", "table", "Consolidation sources", "consolidation edge",
             "canonical → sources, in recorded order",
             {"canonical_fact_id": "the canonical fact a consolidation produced",
              "position": "the source's position in the recorded order, from 0",
              "source_fact_id": "a fact consolidated into the canonical one"}),
    Relation("document_segments", "table", "Document segments", "sealed segment file",
             "file, BLAKE3 checksum, size and chunk count as in `segments/MANIFEST.json`",
             {"segment_seq": "the segment's order of sealing; primary key",
              "segment_id": "the segment's id",
              "file_name": "its file under segments/",
              "blake3": "BLAKE3 checksum of the file, as in MANIFEST.json",
              "byte_size": "the file's size",
              "chunk_count": "how many chunks (BM25 documents) it holds",
              "total_tokens": "sum of its chunks' BM25 token counts",
              "sealed_at": f"when it was sealed, {TEXT_TIME}",
              "tenants": "JSON array of the tenants its chunks belong to",
              "doc_lengths": "blob: uint32 little-endian BM25 token count per doc_id",
              "doc_tenants": "blob: uint32 little-endian index into tenants per doc_id"},
             {"byte_size": "B"}),
    Relation("document_chunks", "table", "Document chunks", "ingested chunk",
             "(`segment_seq`, `doc_id`) is its BM25 identity; `chunk_id` its idempotency key per tenant and corpus",
             {"segment_seq": "the segment holding it (document_segments.segment_seq)",
              "doc_id": "its position in the segment",
              "tenant_id": "the tenant it was ingested for",
              "corpus_id": "the corpus it belongs to",
              "document_id": "the caller's document id (Crux stream_id)",
              "chunk_id": "the chunk's id (Crux event_id): re-ingesting it is a no-op",
              "frame_offset": "byte offset of the chunk's line in the segment file",
              "doc_length_tokens": "its BM25 token count",
              "ingested_at": f"when it was ingested, {TEXT_TIME}"},
             {"frame_offset": "B"}),
    Relation("document_postings", "table", "Document postings", "(term, segment)",
             "doc ids and term frequencies as little-endian blobs",
             {"term": "an analyzed term",
              "segment_seq": "the segment (document_segments.segment_seq)",
              "doc_count": "how many of the segment's chunks contain the term",
              "doc_ids": "blob: ascending uint32 doc ids",
              "tfs": "blob: term frequency per doc id (uint16, or uint32 when one does not fit)"}),
    Relation("document_vectors", "table", "Document vectors", "segment with a vector sidecar",
             "the segment's .ccxv vectors and the embedder profile that wrote them",
             {"segment_seq": "the segment (document_segments.segment_seq)",
              "file_name": "the .ccxv file beside the segment",
              "blake3": "checksum of the .ccxv file, as in MANIFEST.json",
              "profile_hash": "BLAKE3 semantic profile hash of the embedder",
              "model": "embedder model id", "dimensions": "vector dimensions"}),
    Relation("document_links", "table", "Document links", "(chunk, linked document)",
             "markdown links between ingested documents (the graph lane's relation edges)",
             {"segment_seq": "the linking chunk's segment", "doc_id": "the linking chunk's doc id",
              "target_document_id": "the linked document's id"}),
    Relation("fact_embeddings", "table", "Fact embeddings", "(fact, embedder profile)",
             "derived vectors of \"{entity} {key} {value}\", dropped with their fact",
             {"fact_id": "the fact", "profile_hash": "BLAKE3 semantic profile hash of the embedder",
              "vector": "blob: float32 little-endian unit vector"}),
    Relation("document_terms", "view", "Document terms", "analyzed term", "with its BM25 document frequency",
             {"term": "an analyzed term", "df": "how many chunks contain it, over all segments",
              "segments": "how many segments contain it"}),
    Relation("fact_polarity", "view", "Fact polarity", "live, non-private fact",
             "its Crux polarity class (positive / negative / NULL) from 27 words",
             {**{c: _FACT_COLUMNS[c] for c in ("fact_id", "tenant_hash", "entity", "key", "value")},
              "polarity": "positive, negative, or NULL when the trimmed, lowercased value is none of the 27 words"}),
    Relation("contradiction_candidates", "view", "Contradiction candidates", "(tenant, entity, key) group holding "
             "both polarities", "Crux's `contradiction_candidates_v1`; advisory, never a mutation",
             {"tenant_hash": "the group's tenant", "entity": "the group's entity", "key": "the group's key",
              "reason": "why it is a candidate (opposite_polarity_same_entity_key)",
              "polarity_a": "the first polarity listed (negative)", "polarity_b": "the second (positive)",
              "fact_ids": "JSON array of the group's polar fact ids, negative first, then by fact_id",
              "values": "JSON array of their values, in the same order"}),
    Relation("duplicate_candidates", "view", "Duplicate candidates", "pair of live facts of one entity with equal "
             "values", "after lowercasing and trimming; `cruxsql curate duplicates` adds the near ones",
             {"tenant_hash": "the pair's tenant", "entity": "the pair's entity",
              "reason": "why it is a candidate (exact_duplicate)",
              "fact_id_a": "the lower fact_id", "fact_id_b": "the higher fact_id",
              "key_a": "fact a's key", "key_b": "fact b's key", "value_a": "fact a's value",
              "value_b": "fact b's value"}),
    Relation("actor_flip_flops", "view", "Actor flip-flops", "version-chain step where another actor changed "
             "the value within 24 hours", "",
             {"tenant_hash": "the chain's tenant", "entity": "the chain's entity", "key": "the chain's key",
              "from_fact_id": "the version replaced", "to_fact_id": "the version that replaced it",
              "from_actor": "who wrote the replaced version", "to_actor": "who replaced it",
              "from_value": "the replaced value", "to_value": "the new value",
              "seconds_apart": "seconds between the two stores"}),
    Relation("consolidation_history", "view", "Consolidation history", "consolidate, provenance or undo event",
             "with its canonical fact and sources",
             {"line_no": "the journal line", "op": "consolidate, consolidation_provenance or consolidate_undo",
              "event_at": f"the event's time, {TEXT_TIME}", "applied": "0 when the replay rules skipped it",
              "skip_reason": "why replay skipped it", "canonical_fact_id": "the canonical fact",
              "tenant_hash": "the canonical fact's tenant", "entity": "its entity", "key": "its key",
              "canonical_value": "its value", "canonical_deleted": "1 when it has been deleted (undone)",
              "source_fact_ids": "JSON array of the sources (or restored facts) the event names"}),
    Relation("active_consolidations", "view", "Active consolidations", "source of a consolidation in force",
             "canonical live, the source still superseded by it",
             {"canonical_fact_id": "the canonical fact", "tenant_hash": "its tenant", "entity": "its entity",
              "key": "its key", "canonical_value": "its value",
              "position": "the source's position in the recorded order", "source_fact_id": "the source",
              "source_value": "the source's value"}),
    Relation("token_usage", "table", "Token usage", "(agent, UTC day)",
             "MCP calls, `tokens_in`, `tokens_out`, `declared_budget_in`, `refused`; derived, not journaled",
             {"agent": "the connection's agent name, `__anon__` without one", "day": "the UTC date, YYYY-MM-DD",
              "calls": "tool calls that day, failed ones included",
              "tokens_in": "chars/4 estimate of the calls' arguments",
              "tokens_out": "chars/4 estimate of the results (or error messages)",
              "declared_budget_in": "sum of the calls' `token_budget` arguments",
              "refused": "calls refused by the enforced session budget"}),
    Relation("tool_errors", "table", "MCP tool errors", "(tool, internal)",
             "the latest error of each MCP tool, for `cruxsql doctor`; derived, not journaled",
             {"tool": "the tool's name, `(unknown tool)` for a name the server does not know",
              "internal": "1 for a failure inside the server (a bug or the environment), 0 for refused input",
              "agent": "the connection's agent name of the latest such error, `__anon__` without one",
              "at": "when the latest such error happened (RFC 3339)", "at_ns": "the same, epoch nanoseconds",
              "message": "the one line the agent saw", "errors": "how many such errors since the view was built"}),
    Relation("schema_migrations", "table", "Schema migrations", "applied migration", "",
             {"version": "the migration's number (migrations/NNNN_name.sql)", "name": "its file name",
              "applied_at": "when this view applied it"}),
)

INTERNAL: dict[str, str] = {
    "journal_checkpoint": "how far the view has replayed the journal, and the fingerprint of those bytes",
    "own_journal_positions": "how far the view has replayed cruxsql's own journals (cruxsql-fact-events.jsonl)",
    "recall_index_state": "which generation of the fact tables the recall index was built for",
    "recall_text": "per fact: agent scope split and lowercased text for recall's OR-match",
    "recall_grams": "trigram postings of recall's index",
    "recall_dirty": "facts whose text changed in place and must be re-indexed",
    "recall_terms": "word postings of the ranked recall, per tenant, owner, term and block of seqs",
    "recall_term_stats": "facts and summed field word counts per tenant and owner, for the ranked recall",
    "recall_salience": "opt-in recall access counters (never journaled)",
    "recall_timeline_state": "how far the transaction-time index has been built",
    "recall_event_times": "event times by journal line, for known_at recall",
    "recall_changes": "attribute changes by journal line, for known_at recall",
    "fact_norms": "live, non-private facts by normalised value, for duplicate_candidates (kept by replay)",
    "fact_norms_state": "which generation and journal line fact_norms reflects",
}

_STATE_COLUMNS: dict[str, str] = {
    **{c: _FACT_COLUMNS[c] for c in ("tenant_hash", "entity", "key", "value", "version", "deleted", "supersedes",
                                     "superseded_by", "private", "confidence", "stored_at", "horizon_class",
                                     "valid_from", "valid_to", "reverified_at", "actor", "source_receipt",
                                     "access_count", "last_accessed_at")},
}

AUDIT_RELATIONS: tuple[Relation, ...] = (
    Relation("events", "table", "Exported journal events", "journal event that touched the selection",
             "in journal order, with a BLAKE3 of the line and a running hash chain",
             {"line_no": "the journal line (1-based); primary key",
              "byte_offset": "where the line started in facts.jsonl",
              "byte_length": "the line's length, newline included",
              "op": "the event kind",
              "event_at": f"the event's time, {TEXT_TIME}",
              "event_at_ns": f"event_at: {NS_TIME}",
              "applied": "0 when the replay rules skipped the event",
              "skip_reason": "why replay skipped it",
              "line_blake3": "BLAKE3 of the journal line's bytes",
              "chain_blake3": "BLAKE3 of the previous event's chain_blake3 followed by this line_blake3"},
             {"byte_offset": "B", "byte_length": "B"}),
    Relation("facts", "table", "Exported facts", "selected fact", "its final state",
             {"fact_id": "the fact's id; primary key", **_STATE_COLUMNS}),
    Relation("event_facts", "table", "What each event did to each fact", "(event, fact, role)",
             "the fact's state after the event (all empty when the event removed it)",
             {"line_no": "the event (events.line_no)", "fact_id": "the fact (facts.fact_id)",
              "role": "what the event did to it", **_STATE_COLUMNS}),
    Relation("export_info", "table", "About this export", "export parameter",
             "the query, when it was exported, the journal size and view generation it saw",
             {"key": "parameter name", "value": "its value as JSON"}),
)


def render_schema_table(relations: tuple[Relation, ...] = VIEW_RELATIONS) -> str:
    """The markdown table docs/sql.md shows as the view's schema."""
    lines = ["| table / view | one row per | notes |", "|---|---|---|"]
    for rel in relations:
        name = f"`{rel.name}`" + (" (view)" if rel.kind == "view" else "")
        lines.append(f"| {name} | {rel.one_row_per} | {rel.notes} |".replace("|  |", "| |"))
    return "\n".join(lines) + "\n"
