"""A package's public names, each imported from the module that defines it on first use (PEP 562), so that
importing one module of a package never loads the others (`cruxsql --help` loads no numpy)."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_attributes(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`: `exports` maps each public name to its module (relative to
    the package); a name once imported is kept in the package, so this runs once a name."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{exports[name]}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
