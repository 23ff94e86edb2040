"""A small workspace the workspace tests index: a package, tests, docs, vendored code, junk to skip."""

from __future__ import annotations

import os
from pathlib import Path

CORE = '''"""Core HTTP helpers."""

import os
from typing import Tuple

MAX_HEADER = 8192


def parse_header(line: str) -> Tuple[str, str]:
    """Split one header line."""
    name, _, value = line.partition(":")
    return name.strip(), value.strip()


class HTTPClient:
    """A tiny client."""

    def __init__(self, host: str, port: int = 80) -> None:
        self.host = host
        self.port = port

    async def request(self, method: str, url: str) -> str:
        headers = [parse_header(h) for h in ("A: b",)]
        return f"{method} {url} {headers}"
'''

UTIL = '''from .core import parse_header


def header_names(lines):
    return [parse_header(line)[0] for line in lines]
'''

TEST_CORE = '''from pkg.core import parse_header
from pkg import util


def test_parse_header():
    assert parse_header("A: b") == ("A", "b")


def test_parse_header_spaces():
    assert parse_header(" A :  b ") == ("A", "b")
    assert parse_header("x:y") == ("x", "y")
    assert util.header_names(["A: b"]) == ["A"]
'''

GUIDE_SECTIONS = [
    ("# Guide", "This guide explains the client. It has several parts."),
    ("## Install", "Install it with pip. Then import it.\n\n```console\n$ pip install pkg\n```"),
    ("## Usage", "Call parse_header on each line. See [the API](api.md) and [missing](nope.md).\n\n"
                 "```python\nfrom pkg.core import parse_header\nparse_header('A: b')\n```"),
    ("### Advanced usage", "Clients reuse connections. Read [upstream](https://example.org/x)."),
    ("## FAQ", "Why? Because.\n\n```\n# not a heading in code\n```"),
]


def guide() -> str:
    filler = "\n".join(f"Line {i} of filler prose about headers and clients." for i in range(40))
    return "\n\n".join(f"{h}\n\n{body}\n\n{filler}" for h, body in GUIDE_SECTIONS) + "\n"


def build_workspace(root: Path, outside: Path) -> Path:
    """Write the workspace under root; `outside` receives a file a symlink points at."""
    files = {
        "pkg/__init__.py": '"""The package."""\n',
        "pkg/core.py": CORE,
        "pkg/util.py": UTIL,
        "pkg/broken.py": "def ok():\n    return 1\n\ndef broken(:\n    pass\n\nclass Later:\n    pass\n",
        "tests/test_core.py": TEST_CORE,
        "vendor/lib.py": "def vendored():\n    return 'parse_header parse_header parse_header'\n",
        "docs/guide.md": guide(),
        "docs/api.md": "# API\n\nparse_header(line) splits a header.\n",
        "web/app.js": "import { x } from './util';\n\nexport function render(node) {\n  return node;\n}\n\n"
                      "class View {\n  draw() {\n    return 1;\n  }\n}\n",
        "web/util.js": "export const x = (a) => a;\n",
        "pyproject.toml": "[project]\nname = \"pkg\"\n",
        ".gitignore": "build/\n*.log\n",
        "build/out.py": "def built():\n    pass\n",
        "debug.log": "parse_header log line\n",
        "poetry.lock": "lock\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0binary")
    (root / "data.csv").write_bytes(b"a,b\n" * 300_000)           # 1.2 MB: skipped as huge
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.py").write_text("SECRET = 1\n", encoding="utf-8")
    os.symlink(outside / "secret.py", root / "leak.py")
    return root
