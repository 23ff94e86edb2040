"""Datasette's metadata for the console, generated from the schema contract and the dashboards.

Canned queries are not in it: the plugin offers them per request, so a query over a table another
feature has not created yet (token usage, curation views) appears once that table exists.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Optional

from ..recall.freshness import DecayPolicy
from .contract import AUDIT_RELATIONS, INTERNAL, VIEW_RELATIONS, Relation
from .dashboards import dashboards

VIEW_DB = "cruxsql"
AUDIT_DB = "audit"
OPERATOR_ACTOR = "operator"
LICENSE = "Apache-2.0"
LICENSE_URL = "https://www.apache.org/licenses/LICENSE-2.0"


NEWEST_FIRST = {"facts": "stored_at_ns", "live_facts": "stored_at_ns", "journal_events": "line_no",
                "journal_event_facts": "line_no", "journal_corrupt_lines": "line_no", "document_segments": "segment_seq",
                "consolidation_history": "line_no", "token_usage": "day", "events": "line_no", "event_facts": "line_no"}
"""The column a table page sorts by, descending, when the operator has not chosen one: newest first."""


def _tables(relations: tuple[Relation, ...], internal: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rel in relations:
        entry: dict[str, Any] = {"title": rel.title, "description": rel.description, "columns": dict(rel.columns)}
        if rel.units:
            entry["units"] = dict(rel.units)
        newest = NEWEST_FIRST.get(rel.name)
        if newest in rel.columns:   # the audit export's `facts` has no stored_at_ns
            entry["sort_desc"] = newest
        out[rel.name] = entry
    for name, text in internal.items():
        out[name] = {"description": f"Internal: {text}. Derived, rebuilt by replay.", "hidden": True}
    return out


def _table_guide(db: str, intro: str, relations: tuple[Relation, ...]) -> str:
    """The database page's description: the intro, then every documented table with its description."""
    items = "".join(f'<li><a href="/{db}/{rel.name}"><code>{rel.name}</code></a> ({rel.kind}): '
                    f"{html.escape(rel.description)}</li>" for rel in relations)
    return f'<p>{html.escape(intro)}</p><ul class="cruxsql-tables">{items}</ul>'


VIEW_INTRO = ("The materialised view of the fact journal and the document segments: read-only, rebuilt from the "
              "files by `cruxsql rebuild`. New writes appear on reload.")
AUDIT_INTRO = ("A standalone audit export (`cruxsql export audit --format sqlite`): the journal events that touched "
               "a selection of facts, in order, with a hash chain.")


def build_metadata(data_dir: Optional[Path], audit: Optional[Path], token_required: bool,
                   policy: Optional[DecayPolicy] = None) -> dict[str, Any]:
    """The whole metadata document: instance, one entry per served database, dashboards, access rule."""
    policy = policy or DecayPolicy.from_env()
    databases: dict[str, Any] = {}
    plugins: dict[str, Any] = {}
    if data_dir is not None:
        databases[VIEW_DB] = {
            "title": "cruxsql view",
            "description_html": _table_guide(VIEW_DB, VIEW_INTRO, VIEW_RELATIONS),
            "source": f"{data_dir}/facts.jsonl and {data_dir}/segments/",
            "tables": _tables(VIEW_RELATIONS, INTERNAL),
        }
        plugins["datasette-dashboards"] = dashboards(VIEW_DB, policy)
    if audit is not None:
        databases[AUDIT_DB] = {
            "title": "cruxsql audit export",
            "description_html": _table_guide(AUDIT_DB, AUDIT_INTRO, AUDIT_RELATIONS),
            "source": str(audit),
            "tables": _tables(AUDIT_RELATIONS, {}),
        }
    metadata: dict[str, Any] = {
        "title": "cruxsql console",
        "description": "Operators' read-only view of what the agents know. Files are the truth; this is the view.",
        "license": LICENSE,
        "license_url": LICENSE_URL,
        "databases": databases,
        "plugins": plugins,
    }
    if token_required:
        metadata["allow"] = {"id": OPERATOR_ACTOR}
    return metadata
