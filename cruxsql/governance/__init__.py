"""Governance: compaction with its legal-hold guard, legal holds, retention, erasure and its proof, audit.

Modules: `compaction` (crash-atomic journal rewrite), `legal_holds`, `retention` (reports and runs),
`erasure` (select, delete, compact, scrub), `erasure_scan` (needles and the byte scanner),
`erasure_proof` (hash-chained reports and `verify --erasure`), `audit_export`, `durations`.
"""
