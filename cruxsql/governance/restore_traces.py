"""What a `restore` leaves while it runs, looked for cheaply: every command checks for it before it opens a
store (`restore.finish_interrupted` completes or rolls back a killed restore), and most find nothing, so
this module imports nothing of restore's own."""

from __future__ import annotations

import glob
from pathlib import Path

MARKER_NAME = ".cruxsql-restore.json"   # in a staging directory and, once it went live, in the target
SIDE_KINDS = ("restore", "replaced")    # TARGET.restore-<hex>: staging; TARGET.replaced-<hex>: set aside


def traces_beside(target: Path) -> bool:
    """Whether a restore into `target` may have been cut short: its marker in `target`, or a staging or
    set-aside directory beside it (named so; `restore` decides whether it really made one)."""
    if (target / MARKER_NAME).exists():
        return True
    name = glob.escape(target.name)
    return any(next(target.parent.glob(f"{name}.{kind}-*"), None) is not None for kind in SIDE_KINDS)
