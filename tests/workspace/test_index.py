"""The workspace index: what is indexed or skipped, incremental reindex, freshness, path escapes."""

import os

import pytest

from cruxsql.errors import InvalidInput
from cruxsql.workspace import Workspace
from support.workspace_builders import build_workspace


def test_index_classes_and_skips(ws):
    rows = dict(ws.db.execute("SELECT path, path_class FROM files"))
    assert rows == {
        ".gitignore": "code", "docs/api.md": "docs", "docs/guide.md": "docs", "pkg/__init__.py": "code",
        "pkg/broken.py": "code", "pkg/core.py": "code", "pkg/util.py": "code", "pyproject.toml": "config",
        "tests/test_core.py": "test", "vendor/lib.py": "vendored", "web/app.js": "code", "web/util.js": "code"}
    skipped = dict(ws.db.execute("SELECT path, reason FROM skipped"))
    assert skipped == {"leak.py": "symlink pointing outside the workspace", "logo.png": "binary file (NUL byte)",
                       "poetry.lock": "lockfile", "data.csv": "huge file (1200000 bytes > 1048576)"}


def test_python_symbols_have_exact_spans_and_signatures(ws):
    rows = list(ws.db.execute("SELECT qualname, kind, start, end, signature, symbols.approx FROM symbols "
                              "JOIN files USING(file_id) WHERE path='pkg/core.py' ORDER BY start"))
    assert rows == [
        ("MAX_HEADER", "const", 6, 6, "MAX_HEADER = …", 0),
        ("parse_header", "function", 9, 12, "def parse_header(line: str) -> Tuple[str, str]", 0),
        ("HTTPClient", "class", 15, 24, "class HTTPClient", 0),
        ("HTTPClient.__init__", "method", 18, 20, "def __init__(self, host: str, port: int=80) -> None", 0),
        ("HTTPClient.request", "method", 22, 24, "async def request(self, method: str, url: str) -> str", 0)]


def test_imports_resolve_to_files(ws):
    rows = list(ws.db.execute("SELECT path, module, resolved FROM imports JOIN files USING(file_id) "
                              "WHERE resolved IS NOT NULL ORDER BY path, line"))
    assert rows == [("pkg/util.py", ".core:parse_header", "pkg/core.py"),
                    ("tests/test_core.py", "pkg.core:parse_header", "pkg/core.py"),
                    ("tests/test_core.py", "pkg:util", "pkg/util.py"),
                    ("web/app.js", "./util", "web/util.js")]


def test_syntax_error_falls_back_to_an_approximate_outline(ws):
    approx, = ws.db.execute("SELECT approx FROM files WHERE path='pkg/broken.py'").fetchone()
    assert approx == "syntax error at line 4: approximate regex outline"
    names = [r[0] for r in ws.db.execute("SELECT name FROM symbols JOIN files USING(file_id) "
                                          "WHERE path='pkg/broken.py' ORDER BY start")]
    assert names == ["ok", "broken", "Later"]


def test_reindex_is_incremental(ws):
    root = ws.root
    again = ws.index(root)
    assert (again.added, again.changed, again.rehashed_unchanged, again.unchanged, again.removed) == (0, 0, 0, 12, 0)
    core = root / "pkg/core.py"
    os.utime(core, ns=(core.stat().st_atime_ns, core.stat().st_mtime_ns + 10**9))   # mtime only
    (root / "pkg/util.py").write_text("VALUE = 2\n", encoding="utf-8")
    (root / "docs/api.md").unlink()
    (root / "new.py").write_text("def fresh():\n    pass\n", encoding="utf-8")
    report = ws.index(root)
    assert (report.added, report.changed, report.rehashed_unchanged, report.unchanged, report.removed) == \
        (1, 1, 1, 9, 1)
    assert ws.db.execute("SELECT count(*) FROM symbols JOIN files USING(file_id) WHERE path='pkg/util.py' "
                         "AND name='header_names'").fetchone()[0] == 0
    assert ws.db.execute("SELECT count(*) FROM postings JOIN files USING(file_id) WHERE path='docs/api.md'"
                         ).fetchone()[0] == 0


def test_a_file_changed_after_indexing_is_reread_not_served_stale(ws):
    (ws.root / "pkg/util.py").write_text("def renamed():\n    return 3\n", encoding="utf-8")
    hits = ws.call("s", "ctx_search", query="renamed", mode="paths")
    assert [f["path"] for f in hits.data["files"]] == ["pkg/util.py"]
    reply = ws.call("s", "ctx_read", path="pkg/util.py", mode="full")
    assert reply.text.split("\n", 1)[1] == "def renamed():\n    return 3\n"


@pytest.mark.parametrize("path", ["../outside/secret.py", "leak.py", "/etc/passwd", "pkg/../../outside/secret.py"])
def test_paths_outside_the_workspace_are_refused(ws, path):
    with pytest.raises(InvalidInput, match="outside the workspace"):
        ws.call("s", "ctx_read", path=path)


def test_the_index_is_a_view_delete_and_rebuild(tmp_path):
    root = build_workspace(tmp_path / "ws", tmp_path / "outside")
    with Workspace(tmp_path / "data") as ws:
        ws.index(root)
        first = ws.call("s", "ctx_search", query="parse_header").text
    for name in os.listdir(tmp_path / "data"):
        os.remove(tmp_path / "data" / name)
    with Workspace(tmp_path / "data") as ws:
        with pytest.raises(InvalidInput, match="no workspace is indexed"):
            ws.call("s", "ctx_search", query="parse_header")
        ws.index(root)
        assert ws.call("s", "ctx_search", query="parse_header").text == first


def test_gitignore_is_honoured(ws):
    paths = {p for (p,) in ws.db.execute("SELECT path FROM files UNION SELECT path FROM skipped")}
    assert not {"build/out.py", "debug.log"} & paths
