"""Token accounting for agents: per-agent usage in the `token_usage` view table, enforced session
budgets, and the savings holdout (retrieval spec §14-§15).

Modules: `usage` (the ledger and the budget standing of an agent), `holdout` (control-arm assignment,
sample rings and the `token_savings` statistics).
"""
