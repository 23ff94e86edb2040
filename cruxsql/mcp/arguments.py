"""Argument types the tools share, checked before a tool runs (a bad value is refused in one line).

`Contract`: the response contract of the CRC-v1 tools, one of the names the CLI's `--contract` takes
(case-insensitive, trimmed) plus Crux's negotiated `v1`; anything else is refused instead of being
answered silently in the default format.
"""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from ..recall.crc_v1 import CONTRACT, LEGACY_CONTRACTS

CONTRACT_NAMES = (CONTRACT, "v1", *LEGACY_CONTRACTS)


def _contract(value: str) -> str:
    if value.strip().lower() not in CONTRACT_NAMES:
        raise PydanticCustomError("contract", "{value} is not one of " + ", ".join(CONTRACT_NAMES),
                                  {"value": repr(value)})
    return value


Contract = Annotated[Optional[str], AfterValidator(lambda v: v if v is None else _contract(v))]
