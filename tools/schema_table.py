"""Rewrite the schema table of docs/sql.md from the schema contract (cruxsql/console/contract.py).

    python tools/schema_table.py          # rewrite docs/sql.md in place
    python tools/schema_table.py --check  # exit 1 when docs/sql.md disagrees with the contract
"""

from __future__ import annotations

import sys
from pathlib import Path

from cruxsql.console.contract import render_schema_table

PAGE = Path(__file__).resolve().parents[1] / "docs" / "sql.md"
BEGIN = "<!-- schema table: generated from cruxsql/console/contract.py by tools/schema_table.py -->\n"
END = "<!-- end of schema table -->\n"


def with_table(text: str) -> str:
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + render_schema_table() + END + tail


def main() -> int:
    text = PAGE.read_text(encoding="utf-8")
    wanted = with_table(text)
    if "--check" in sys.argv[1:]:
        if wanted != text:
            print("docs/sql.md's schema table differs from cruxsql/console/contract.py: "
                  "run python tools/schema_table.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
