"""Born-private and daemon-owned entity prefixes, the reserved-namespace guard, and the process-wide
privacy policy (Crux's crates/corecrux-memory/src/fact_privacy.rs).

The guard (Crux `generic_create_reserved_entity_prefix` / `daemon_owned_entity_prefix`, applied by
`store_fact`, `delete_fact` and the `supersedes` validation of crates/crux-mcp/src/tools/facts.rs) is
enforced by `Store` on every write path: a caller may never create a fact under a create-reserved
prefix, nor delete, supersede, clear, re-time, re-horizon or re-verify a fact whose policy entity (the
logical entity of an `__agent::NAME::` wrapped fact) is daemon-owned. The code that owns a namespace
writes through an explicit `NamespaceOwner`, which no agent surface passes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

from ..errors import CAPABILITY_DENIED, INVALID_PARAMS, CapabilityDenied, CruxsqlError, InvalidInput

DEFAULT_PRIVATE_PREFIXES: tuple[str, ...] = (
    "__action_enrichment_receipt__::", "__agent::", "__ops::", "__ops__::", "__ax__::", "__ax_session::",
    "__answer_replay_capsule__::", "__bootstrap__::", "__candidate_fact__::", "__consolidation_review__::",
    "__constraints__::", "__coord__::", "__dossier__::", "__engram__::", "__extension__::",
    "__extension_grant__::", "__gpu1_receipt__::", "__incident__::", "__legal_hold__::",
    "__legal_hold_receipt__::", "__memory_pin::", "__mint_request__::", "__orchestrator_receipt__::",
    "__passport__::", "__plane__::", "__plane_layer__::", "__project__::", "__project_layer__::",
    "__project_repo_link__::", "__rcx_publish__::", "__repo_codegraph_ids__::", "__repo_extdeps__::",
    "__repo_registry__::", "__repo_scan__::", "__result_envelope__::", "__result_envelope_incident__::",
    "__reverify_receipts__::", "__session_binding__::", "__storybook__::", "__sync__::",
    "__sync_tombstone__::", "__sync_wipe_receipt__::", "__tenant__::", "__tenant_metadata__::",
    "__tenant_mirror__::", "__work__::", "__work_comment__::", "__work_gate__::", "__work_transition__::",
    "__workbench__::", "__workspace__::", "__workspace_scan__::", "console:page:", "console:tileboard:",
    "console:tiledesign:", "console:workspace:", "__infra__::", "decisions::", "github::",
)


DAEMON_OWNED_ENTITY_PREFIXES: tuple[str, ...] = (
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
    "__work_transition__::", "__workbench__::", "__workspace_scan__::", "console:page:",
    "console:tileboard:", "console:tiledesign:", "console:workspace:",
)

# Namespaces cruxsql itself owns beside Crux's daemon-owned ones (erasure reports).
CRUXSQL_OWNED_ENTITY_PREFIXES: tuple[str, ...] = ("__erasure_report__::",)

AGENT_PRIVATE_ENTITY_PREFIX = "__agent::"
GENERIC_CREATE_RESERVED_PREFIXES: tuple[str, ...] = (AGENT_PRIVATE_ENTITY_PREFIX,)


ALWAYS_PRIVATE_ENV = "CORECRUXD_ALWAYS_PRIVATE_PREFIXES"
SHARE_OVERRIDE_ENV = "CORECRUXD_SHARE_PREFIXES_OVERRIDE"


def _env_prefixes(name: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in os.environ.get(name, "").split(",") if p.strip())


def daemon_owned_prefix(entity: str) -> Optional[str]:
    """The daemon-owned prefix `entity` starts with, if any."""
    if not entity.startswith(DAEMON_OWNED_ENTITY_PREFIXES):
        return None
    return next(p for p in DAEMON_OWNED_ENTITY_PREFIXES if entity.startswith(p))


def owned_prefix(entity: str) -> Optional[str]:
    """The daemon-owned (Crux) or cruxsql-owned prefix `entity` starts with, if any."""
    return daemon_owned_prefix(entity) or next(
        (p for p in CRUXSQL_OWNED_ENTITY_PREFIXES if entity.startswith(p)), None)


def create_reserved_prefix(entity: str) -> Optional[str]:
    """The prefix a caller may never create a fact under (owned, or `__agent::`), if any.

    Crux `generic_create_reserved_entity_prefix`, plus cruxsql's own `__erasure_report__::`."""
    return owned_prefix(entity) or (
        AGENT_PRIVATE_ENTITY_PREFIX if entity.startswith(AGENT_PRIVATE_ENTITY_PREFIX) else None
    )


def split_private_entity(entity: str) -> Optional[tuple[str, str]]:
    """`split_private_entity`: `__agent::<owner>::<logical>` -> (owner, logical), split at the first `::`."""
    if not entity.startswith(AGENT_PRIVATE_ENTITY_PREFIX):
        return None
    owner, sep, logical = entity[len(AGENT_PRIVATE_ENTITY_PREFIX):].partition("::")
    return (owner, logical) if sep else None


def agent_private_entity(agent: str, logical: str) -> str:
    """The stored entity of an agent-private fact: `__agent::<agent>::<logical>` (`private_entity_for_agent`)."""
    return f"{AGENT_PRIVATE_ENTITY_PREFIX}{agent}::{logical}"


def policy_entity(entity: str) -> str:
    """The entity the guard judges (`logical_entity_for_target_policy`): the logical entity of a wrapped
    `__agent::NAME::...` fact, else the stored entity."""
    split = split_private_entity(entity)
    return split[1] if split is not None else entity


# --- the reserved-namespace guard -------------------------------------------------------------------


@dataclass(frozen=True)
class NamespaceOwner:
    """Code that owns some reserved namespaces and may write into them (legal holds, erasure reports,
    bootstrap seeding). Pass it as `owner=` to a `Store` write; agent surfaces never do."""

    name: str
    prefixes: tuple[str, ...]

    def owns(self, prefix: str) -> bool:
        return prefix in self.prefixes


class ReservedNamespace(CruxsqlError):
    """A write into a reserved namespace. `code` is the JSON-RPC code Crux answers with, `crux_message`
    its exact message and `data` its error data; `str()` names the offending input for a CLI line."""

    code: int = INVALID_PARAMS

    def __init__(self, text: str, crux_message: str, data: dict[str, Any]) -> None:
        super().__init__(text)
        self.crux_message = crux_message
        self.data = data
        self.error_code = data["error_code"]


class ReservedEntityPrefix(ReservedNamespace, InvalidInput):
    """`store_fact` under a create-reserved prefix: -32602, `RESERVED_ENTITY_PREFIX`."""


class ReservedSupersedesTarget(ReservedNamespace, InvalidInput):
    """Superseding a daemon-owned control fact: -32602, `RESERVED_SUPERSEDES_TARGET`."""


class ReservedTarget(ReservedNamespace, CapabilityDenied):
    """Deleting (or otherwise changing) a daemon-owned fact: -32030, `RESERVED_ENTITY_PREFIX`."""

    code = CAPABILITY_DENIED


def _allowed(prefix: Optional[str], owner: Optional[NamespaceOwner]) -> bool:
    return prefix is None or (owner is not None and owner.owns(prefix))


def check_create(entity: str, owner: Optional[NamespaceOwner] = None) -> None:
    """Refuse creating a fact whose raw entity is under a create-reserved prefix (unless `owner` owns it)."""
    prefix = create_reserved_prefix(entity)
    if _allowed(prefix, owner):
        return
    raise ReservedEntityPrefix(
        f"entity {entity!r} uses create-reserved prefix `{prefix}`",
        f"entity uses create-reserved prefix `{prefix}`",
        {"error_code": "RESERVED_ENTITY_PREFIX", "param": "entity", "entity": entity, "reserved_prefix": prefix})


def check_target(fact_id: str, entity: str, action: str, owner: Optional[NamespaceOwner] = None) -> None:
    """Refuse changing an existing fact whose policy entity is owned (`delete_fact`'s guard)."""
    logical = policy_entity(entity)
    prefix = owned_prefix(logical)
    if _allowed(prefix, owner):
        return
    raise ReservedTarget(
        f"cannot {action} fact {fact_id}: it belongs to reserved daemon-owned prefix `{prefix}`",
        f"fact belongs to reserved daemon-owned prefix `{prefix}`",
        {"error_code": "RESERVED_ENTITY_PREFIX", "fact_id": fact_id, "entity": logical, "reserved_prefix": prefix})


def check_supersedes_target(fact_id: str, entity: str, owner: Optional[NamespaceOwner] = None) -> None:
    """Refuse superseding a fact whose policy entity is owned (`store_fact`'s `supersedes` validation)."""
    logical = policy_entity(entity)
    prefix = owned_prefix(logical)
    if _allowed(prefix, owner):
        return
    raise ReservedSupersedesTarget(
        f"cannot supersede fact {fact_id}: daemon-owned control facts (`{prefix}`) cannot be superseded",
        "daemon-owned control facts cannot be superseded through store_fact",
        {"error_code": "RESERVED_SUPERSEDES_TARGET", "param": "supersedes",
         "reserved_refs": [{"fact_id": fact_id, "entity": logical, "reserved_prefix": prefix}]})


@dataclass(frozen=True)
class PrivacyPolicy:
    """Which entities are forced private: born-private prefixes plus the env additions, minus overrides."""

    private_prefixes: tuple[str, ...]
    share_overrides: tuple[str, ...]

    @classmethod
    def from_env(cls) -> "PrivacyPolicy":
        return cls(DEFAULT_PRIVATE_PREFIXES + _env_prefixes(ALWAYS_PRIVATE_ENV), _env_prefixes(SHARE_OVERRIDE_ENV))

    def is_always_private(self, entity: str) -> bool:
        # Daemon-owned and agent-scoped entities cannot be declassified by an override (V-C).
        if entity.startswith(AGENT_PRIVATE_ENTITY_PREFIX) or entity.startswith(DAEMON_OWNED_ENTITY_PREFIXES):
            return True
        if not entity.startswith(self.private_prefixes):
            return False
        return not (self.share_overrides and entity.startswith(self.share_overrides))

    def enforce(self, entity: str, private: bool) -> bool:
        """`enforce_global`: the `private` flag after policy; it is never cleared."""
        return private or self.is_always_private(entity)


_policy: Optional[PrivacyPolicy] = None


def global_policy() -> PrivacyPolicy:
    """The process-wide policy, built from the environment at first use (like Crux's OnceLock)."""
    global _policy
    if _policy is None:
        _policy = PrivacyPolicy.from_env()
    return _policy


def install_global(policy: Optional[PrivacyPolicy]) -> None:
    """Replace the process-wide policy (None: rebuild from the environment at next use)."""
    global _policy
    _policy = policy
