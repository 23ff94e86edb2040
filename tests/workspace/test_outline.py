"""Bounded outlines: at most MAX_SIBLINGS headings under one parent, the rest one `+N more` line with
their span and size; a long changelog's outline is a small share of reading it whole."""

from __future__ import annotations

from pathlib import Path

from cruxsql.recall.tokens import estimate_tokens
from cruxsql.workspace import Workspace
from cruxsql.workspace.doc import MAX_SIBLINGS


def _workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    versions = "".join(f"## 4.{v}.0\n\n- fixed drill step {v} in the replay of queued orders\n- faster replay\n\n"
                       for v in range(120, 0, -1))
    (root / "CHANGELOG.md").write_text("# Changelog\n\n" + versions)
    (root / "GUIDE.md").write_text("# Guide\n\n" + "".join(f"## Part {i}\n\n{'words ' * 80}\n\n### Detail {i}\n\n"
                                                           f"{'more ' * 60}\n\n" for i in range(3)))
    workspace = Workspace(tmp_path / "data")
    workspace.index(root)
    return workspace


def test_a_changelog_outline_folds_its_versions(tmp_path: Path) -> None:
    with _workspace(tmp_path) as ws:
        outline = ws.call("s", "ctx_doc", path="CHANGELOG.md", view="outline")
        full = ws.call("s", "ctx_read", path="CHANGELOG.md", mode="full")
    lines = outline.text.splitlines()
    assert lines[1] == "L1 # Changelog (~" + lines[1].split("(~")[1]
    assert [line.split(" (~")[0] for line in lines[2:2 + MAX_SIBLINGS]] == \
        [f"  L{3 + 5 * i} ## 4.{120 - i}.0" for i in range(MAX_SIBLINGS)]
    assert lines[2 + MAX_SIBLINGS].startswith(f"  +{120 - MAX_SIBLINGS} more ## headings, L{3 + 5 * MAX_SIBLINGS}-")
    assert lines[-1] == "→ ctx_doc CHANGELOG.md --section PATTERN"
    folded = outline.data["sections"][-1]
    assert folded["more"] == 120 - MAX_SIBLINGS and folded["end"] == len(full.data["content"].splitlines())
    share = (estimate_tokens_of(outline)) / estimate_tokens_of(full)
    assert share <= 0.10, share


def test_a_short_outline_is_unchanged(tmp_path: Path) -> None:
    with _workspace(tmp_path) as ws:
        outline = ws.call("s", "ctx_doc", path="GUIDE.md", view="outline")
    heads = [line.split(" (~")[0].strip() for line in outline.text.splitlines()[1:-1]]
    assert heads == ["L1 # Guide"] + [h for i in range(3) for h in (f"L{3 + 8 * i} ## Part {i}",
                                                                    f"L{7 + 8 * i} ### Detail {i}")]
    assert all("more" not in s for s in outline.data["sections"])


def estimate_tokens_of(reply) -> int:
    """What the agent receives over MCP: the text and the structured data."""
    return estimate_tokens({"text": reply.text, "data": reply.data})
