"""How the console's pages are laid out: data first.

A table page opens on its rows: the column documentation (Datasette lists it above the table, ~1,600 px
of it for `facts`) is folded into one `<details>` that a click opens. Canned queries hide their SQL
(their metadata says `hide_sql`; `(show)` unfolds it), and tables sort newest first (the metadata's
`sort_desc`). This plugin only adds that script; it reads and changes no data.
"""

from __future__ import annotations

from typing import Any

from datasette import hookimpl

FOLD_COLUMN_DOCS = """
document.querySelectorAll("dl.column-descriptions").forEach(function (list) {
  var fold = document.createElement("details");
  fold.className = "cruxsql-column-docs";
  var summary = document.createElement("summary");
  summary.textContent = "Column documentation (" + list.querySelectorAll("dt").length + " columns)";
  list.parentNode.insertBefore(fold, list);
  fold.appendChild(summary);
  fold.appendChild(list);
});
"""


class LayoutPlugin:
    """The console's page-layout hooks."""

    def __init__(self) -> None:
        self.__name__ = __name__  # Datasette lists plugins by module name

    @hookimpl
    def extra_body_script(self, view_name: str, **_: Any) -> str:
        return FOLD_COLUMN_DOCS if view_name == "table" else ""
