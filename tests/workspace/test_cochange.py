"""Git co-change on a real git repository: files changed with the defining file get a bounded boost."""

import os
import shutil
import subprocess

import pytest

from cruxsql.workspace import Workspace
from cruxsql.workspace.cochange import pairs

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_SYSTEM=os.devnull)


def commit(root, files, message):
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, env=GIT_ENV, capture_output=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", message], check=True, env=GIT_ENV, capture_output=True)


def test_cochange_boost_follows_shared_commits(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=GIT_ENV)
    commit(root, {"engine.py": "def ignite():\n    return 0\n", "partner.py": "# uses ignite\n",
                  "loner.py": "# ignite mentioned\n", "pair.py": "# ignite here too\n"}, "start")
    for i in range(8):                        # partner.py changes with engine.py 8 more times: 9 shared
        commit(root, {"engine.py": f"def ignite():\n    return {i + 1}\n", "partner.py": f"# uses ignite {i}\n"}, f"c{i}")
    for i in range(3):                        # pair.py: 1 + 3 = 4 shared commits
        commit(root, {"engine.py": f"def ignite():\n    return {i + 10}\n", "pair.py": f"# ignite here too {i}\n"}, f"p{i}")
    with Workspace(tmp_path / "data") as ws:
        ws.index(root)
        files = ws.call("s", "ctx_search", query="ignite", mode="paths").data["files"]
        factors = {f["path"]: f["why"]["cochange"] for f in files}
        assert factors == {"engine.py": 1.0, "partner.py": 1.25, "pair.py": pytest.approx(1 + 0.25 * 2 / 6),
                           "loner.py": 1.0}
        off = ws.call("s", "ctx_search", query="ignite", mode="paths", off=frozenset({"cochange"})).data["files"]
        assert {f["why"]["cochange"] for f in off} == {1.0}


def test_pairs_skip_large_commits_and_keep_top_partners():
    big = "\0h1\n" + "\n".join(f"f{i}.py" for i in range(33)) + "\n"
    small = "\0h2\na.py\nb.py\n\0h3\na.py\nb.py\nc.py\n"
    assert pairs(big + small) == {"a.py": [("b.py", 2), ("c.py", 1)], "b.py": [("a.py", 2), ("c.py", 1)],
                                  "c.py": [("a.py", 1), ("b.py", 1)]}


def test_a_folder_outside_git_has_no_cochange(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "x.py").write_text("def ignite():\n    pass\n", encoding="utf-8")
    with Workspace(tmp_path / "data") as ws:
        ws.index(tmp_path / "ws")
        assert ws.db.execute("SELECT count(*) FROM cochange").fetchone()[0] == 0
