"""Born-private and daemon-owned entity prefixes, and the process-wide privacy policy (spec §6)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

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


def create_reserved_prefix(entity: str) -> Optional[str]:
    """The prefix a caller may never create a fact under (daemon-owned or `__agent::`), if any."""
    return daemon_owned_prefix(entity) or (
        AGENT_PRIVATE_ENTITY_PREFIX if entity.startswith(AGENT_PRIVATE_ENTITY_PREFIX) else None
    )


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
