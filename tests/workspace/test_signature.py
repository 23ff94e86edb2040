"""Outline signatures: exact when short, shortened in two announced steps when long, never cut mid-list."""

import pytest

from cruxsql.workspace import Workspace
from cruxsql.workspace.signature import shorten
from support.workspace_builders import build_workspace

LONG = ("def query(db: apsw.Connection, text: str, *, tenant: str='default', limit: int=10, "
        "config: RankingConfig=RankingConfig(), budget: Optional[int]=None) -> list[Hit]")


@pytest.mark.parametrize("signature", [
    "def parse_header(line: str) -> Tuple[str, str]",
    "@tool(…) async def ctx_read(call: Call, path: str, mode: Optional[str]=None) -> ToolResult",
    "class Store(Base)",
])
def test_a_signature_that_fits_is_exact(signature):
    assert shorten(signature) == signature


def test_defaults_lose_their_annotation_and_long_values_first():
    assert shorten(LONG, width=110) == ("def query(db: apsw.Connection, text: str, *, tenant='default', limit=10, "
                                        "config=…, budget=None) -> list[Hit]")


def test_then_every_annotation_goes_but_names_markers_decorators_and_return_stay():
    signature = ("@lru_cache(…) @…+1 async def scan(source: Iterable[tuple[str, bytes]], "
                 "target: Mapping[str, Path], /, extra: int, *paths: str | Path, strict: bool=False, "
                 "**options: dict[str, Any]) -> Report")
    assert shorten(signature) == ("@lru_cache(…) @…+1 async def scan(source, target, /, extra, *paths, "
                                  "strict=False, **options) -> Report")


@pytest.fixture
def wide(tmp_path):
    root = build_workspace(tmp_path / "ws", tmp_path / "outside")
    helpers = "".join(f"\n\ndef helper_{i}(x: int) -> int:\n    return x + {i}\n" for i in range(3))
    constants = "RETRIES = 3\nLIMITS = {\n    'a': 1,\n}\n"
    (root / "pkg/wide.py").write_text(f"{constants}\n\n{LONG}:\n    return []\n{helpers}", encoding="utf-8")
    with Workspace(tmp_path / "data") as ws:
        ws.index(root)
        yield ws


def test_the_outline_shows_every_parameter_of_a_long_signature_and_points_at_the_exact_one(wide):
    lines = wide.call("s", "ctx_read", path="pkg/wide.py", mode="signatures").text.splitlines()
    assert lines[1:] == [
        "constants: RETRIES L1, LIMITS L2-4",
        "def query(db, text, *, tenant='default', limit=10, config=…, budget=None) -> list[Hit]  L7-8",
        "def helper_0(x: int) -> int  L11-12", "def helper_1(x: int) -> int  L15-16",
        "def helper_2(x: int) -> int  L19-20",
        "→ bodies and exact signatures: ctx_read pkg/wide.py mode=lines:7-8"]


def test_context_definitions_show_the_shortened_signature(wide):
    text = wide.call("s", "ctx_context", task="what does query return", token_budget=2000).text
    assert ("pkg/wide.py:7 def query(db, text, *, tenant='default', limit=10, config=…, budget=None) -> list[Hit]"
            "  L7-8  pkg/wide.py#query@L7") in text.splitlines()


def test_an_approximate_outline_keeps_its_source_lines(wide):
    ruby = "def configure(name, options = {}, retries = 3, timeout = 30, verbose = false, logger = nil, hooks = [])"
    (wide.root / "pkg/tool.rb").write_text(f"{ruby}\n  name\nend\n", encoding="utf-8")
    wide.index(wide.root)
    lines = wide.call("s", "ctx_read", path="pkg/tool.rb", mode="signatures").text.splitlines()
    assert lines[1:3] == ["(approximate regex outline)", f"{ruby}  L1-3"]


def test_context_definitions_keep_an_approximate_outlines_source_line(wide):
    ruby = "def configure(name, options = {}, retries = 3, timeout = 30, verbose = false, logger = nil, hooks = [])"
    (wide.root / "pkg/tool.rb").write_text(f"{ruby}\n  name\nend\n", encoding="utf-8")
    wide.index(wide.root)
    text = wide.call("s", "ctx_context", task="what does configure do", token_budget=2000).text
    assert f"pkg/tool.rb:1 {ruby}  L1-3  pkg/tool.rb#configure@L1" in text.splitlines()
