"""Curation: contradictions, consolidation with undo, near-duplicates, and the memory panel's writes.

Everything here that finds something (contradictions, disagreements, duplicates) is read-only and
recomputed from the view on every call: candidates are advisory and never journaled. What changes
memory (consolidation, undo, edit, pin) appends through `Store.commit`, one append per operation.
"""
