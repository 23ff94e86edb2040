"""Token accounting for agents: per-agent usage in the `token_usage` view table, enforced session
budgets, and the savings holdout (Crux's crates/crux-mcp/src/holdout.rs, token_accounting.rs).

Modules: `usage` (the ledger and the budget standing of an agent), `holdout` (control-arm assignment,
sample rings and the `token_savings` statistics).
"""
