"""The document lane's tenant rule: every ingest, read and erasure names one concrete tenant.

A tenant name is trimmed; an empty name or `*` (which means "all tenants" elsewhere) is refused with
InvalidInput before anything is read or written. Only the admin `search(tenant=None)` spans tenants.
"""

from __future__ import annotations

from ..errors import InvalidInput

DEFAULT_TENANT = "default"


def concrete_tenant(tenant: str) -> str:
    """`tenant` trimmed; InvalidInput unless it names one tenant."""
    name = tenant.strip()
    if not name or name == "*":
        raise InvalidInput(f"tenant {tenant!r} must name one concrete tenant")
    return name
