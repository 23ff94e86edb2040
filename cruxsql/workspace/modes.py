"""The typed read-mode enum, its byte-stable text form, and the mode-default table with its guard.

`ReadMode.parse(text)` and `str(mode)` round-trip byte for byte (`lines:10-20`, `signatures`, …);
a malformed mode is rejected with the accepted syntax, never silently read as `full`.

No-lossy-override: markdown, docs and config files default to `full`; an automatic suggestion may
choose a *more* faithful mode than the static default, never a lossier one.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Optional

from ..errors import InvalidInput

SMALL_CODE_TOKENS = 400       # lean-ctx: code at or under ~400 tokens is cheaper read whole


class ModeKind(enum.Enum):
    FULL = "full"
    LINES = "lines"
    SECTIONS = "sections"
    SIGNATURES = "signatures"
    MAP = "map"
    AUTO = "auto"


# Higher is more faithful: full is verbatim, lines is verbatim but partial, the rest are summaries.
FIDELITY = {ModeKind.FULL: 4, ModeKind.LINES: 3, ModeKind.SECTIONS: 2, ModeKind.SIGNATURES: 1, ModeKind.MAP: 0}
_LINES = re.compile(r"lines:(\d+)-(\d+)")


@dataclass(frozen=True)
class ReadMode:
    kind: ModeKind
    start: int = 0
    end: int = 0

    @classmethod
    def parse(cls, text: str) -> "ReadMode":
        if text.startswith("lines"):
            match = _LINES.fullmatch(text)
            if not match:
                raise InvalidInput(f"mode {text!r} is malformed: expected lines:START-END (dash), e.g. lines:72-92")
            start, end = int(match.group(1)), int(match.group(2))
            if start < 1 or end < start:
                raise InvalidInput(f"mode {text!r}: need 1 <= START <= END")
            return cls(ModeKind.LINES, start, end)
        try:
            kind = ModeKind(text)
        except ValueError:
            names = ", ".join(k.value for k in ModeKind if k is not ModeKind.LINES)
            raise InvalidInput(f"mode {text!r} is unknown: expected one of {names} or lines:START-END") from None
        return cls(kind)

    def __str__(self) -> str:
        return f"lines:{self.start}-{self.end}" if self.kind is ModeKind.LINES else self.kind.value

    @property
    def lossy(self) -> bool:
        """A summary rather than verbatim bytes: such a read starts with `mode=<m> (full ≈ N tok)`."""
        return self.kind in {ModeKind.SECTIONS, ModeKind.SIGNATURES, ModeKind.MAP}

    @property
    def fidelity(self) -> int:
        return FIDELITY[self.kind]


FULL = ReadMode(ModeKind.FULL)


def static_default(path_class: str, lang: str, tokens: int) -> ReadMode:
    """The mode-default table: markdown/docs/config are never compressed; small code is read whole."""
    if path_class in {"docs", "config"} or lang in {"markdown", "text", "toml", "json", "yaml", "config"}:
        return FULL
    if lang == "other" or tokens <= SMALL_CODE_TOKENS:
        return FULL
    return ReadMode(ModeKind.SIGNATURES)


def resolve_auto(path_class: str, lang: str, tokens: int, suggestion: Optional[ReadMode] = None) -> ReadMode:
    """`auto`: the static default, unless a suggestion is at least as faithful (never lossier)."""
    default = static_default(path_class, lang, tokens)
    if suggestion is not None and suggestion.kind is not ModeKind.AUTO and suggestion.fidelity >= default.fidelity:
        return suggestion
    return default
