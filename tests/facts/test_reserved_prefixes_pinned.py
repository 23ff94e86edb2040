"""The reserved namespaces as literal values, copied from Crux's `DAEMON_OWNED_ENTITY_PREFIXES` and
`GENERIC_CREATE_RESERVED_PREFIXES` (fact_privacy.rs) and not read back from cruxsql's code, so a typo
or a dropped entry in `facts/privacy.py` fails here: every one is refused, and names itself."""

from __future__ import annotations

import pytest

from cruxsql.facts import privacy
from cruxsql.facts.store import Store

DAEMON_OWNED = (
    "__action_enrichment_receipt__::", "__ops::", "__ops__::", "__answer_replay_capsule__::",
    "__bootstrap__::", "__candidate_fact__::", "__consolidation_review__::", "__constraints__::",
    "__coord__::", "__dossier__::", "__engram__::", "__extension__::", "__extension_grant__::",
    "__gpu1_receipt__::", "__incident__::", "__legal_hold__::", "__legal_hold_receipt__::", "__memory_pin::",
    "__mint_request__::", "__orchestrator_receipt__::", "__passport__::", "__plane__::", "__plane_layer__::",
    "__project__::", "__project_layer__::", "__project_repo_link__::", "__rcx_publish__::",
    "__repo_codegraph_ids__::", "__repo_extdeps__::", "__repo_registry__::", "__repo_scan__::",
    "__result_envelope__::", "__result_envelope_incident__::", "__reverify_receipts__::",
    "__session_binding__::", "__storybook__::", "__sync__::", "__sync_tombstone__::",
    "__sync_wipe_receipt__::", "__tenant_metadata__::", "__work__::", "__work_comment__::", "__work_gate__::",
    "__work_transition__::", "__workbench__::", "__workspace_scan__::", "console:page:", "console:tileboard:",
    "console:tiledesign:", "console:workspace:",
)
CREATE_RESERVED = ("__agent::",)
CRUXSQL_OWNED = ("__erasure_report__::",)
# Crux's own lookalikes (daemon_owned_prefixes_are_write_protected_at_client_boundaries): not reserved.
NOT_RESERVED = ("__legal_hold__lookalike::x", "project::incident", "__infra__::machines", "__benchmark__::latency",
                "__agent:alice", "console:pages")


def test_the_lists_hold_exactly_the_pinned_prefixes() -> None:
    assert len(DAEMON_OWNED) == 50
    assert privacy.DAEMON_OWNED_ENTITY_PREFIXES == DAEMON_OWNED
    assert privacy.GENERIC_CREATE_RESERVED_PREFIXES == CREATE_RESERVED
    assert privacy.CRUXSQL_OWNED_ENTITY_PREFIXES == CRUXSQL_OWNED


@pytest.mark.parametrize("prefix", DAEMON_OWNED + CREATE_RESERVED + CRUXSQL_OWNED)
def test_every_pinned_prefix_is_refused_naming_itself(store: Store, prefix: str) -> None:
    entity = f"{prefix}owned"
    with pytest.raises(privacy.ReservedEntityPrefix) as info:
        store.store(entity, "state", "attacker")
    assert info.value.data["reserved_prefix"] == prefix
    assert str(info.value) == f"entity {entity!r} uses create-reserved prefix `{prefix}`"
    assert not (store.data_dir / "facts.jsonl").exists()


@pytest.mark.parametrize("entity", NOT_RESERVED)
def test_lookalikes_are_stored(store: Store, entity: str) -> None:
    assert store.store(entity, "state", "fine").entity == entity
