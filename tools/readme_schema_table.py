"""Rewrite the README's schema table from the schema contract (cruxsql/console/contract.py).

    python tools/readme_schema_table.py          # rewrite README.md in place
    python tools/readme_schema_table.py --check  # exit 1 when README.md disagrees with the contract
"""

from __future__ import annotations

import sys
from pathlib import Path

from cruxsql.console.contract import render_readme_table

README = Path(__file__).resolve().parents[1] / "README.md"
BEGIN = "<!-- schema table: generated from cruxsql/console/contract.py by tools/readme_schema_table.py -->\n"
END = "<!-- end of schema table -->\n"


def with_table(text: str) -> str:
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + render_readme_table() + END + tail


def main() -> int:
    text = README.read_text(encoding="utf-8")
    wanted = with_table(text)
    if "--check" in sys.argv[1:]:
        if wanted != text:
            print("README.md's schema table differs from cruxsql/console/contract.py: "
                  "run python tools/readme_schema_table.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
