"""The six ctx_* verbs on a small built workspace: modes, pagination, handles, budgets, determinism."""

import pytest

from cruxsql.errors import InvalidInput, NotFound
from cruxsql.workspace import Workspace
from cruxsql.workspace.budget import estimate_tokens
from support.workspace_builders import CORE, guide


# ---- ctx_search -----------------------------------------------------------------------------------

def test_search_ranks_the_defining_file_first_and_groups_lines(ws):
    reply = ws.call("s", "ctx_search", query="parse_header", limit=2)
    assert reply.text == "\n".join([
        'ctx_search "parse_header" · 6 files / ~38 occurrences · ranked · files 1-2',
        "pkg/core.py (2) defines parse_header",
        "   9: def parse_header(line: str) -> Tuple[str, str]:",
        "  23: headers = [parse_header(h) for h in (\"A: b\",)]  ∈ HTTPClient.request",
        "pkg/util.py (2)",
        "  5: return [parse_header(line)[0] for line in lines]  ∈ header_names",
        "  imports: L1",
        'more: 4 files (~27 occurrences) — ctx_search "parse_header" offset=2 · exhaustive=true lists all',
        "→ ctx_read pkg/core.py"])


def test_search_pages_by_offset_and_paths_mode_labels_classes(ws):
    page = ws.call("s", "ctx_search", query="parse_header", mode="paths", offset=2)
    assert page.text.splitlines()[1:] == [
        "tests/test_core.py (13) [test]", "docs/api.md (3) [docs]", "vendor/lib.py (4) [vendored]",
        "docs/guide.md (7) [docs]", "→ ctx_read tests/test_core.py"]
    assert page.data["next_offset"] is None


def test_search_count_and_exhaustive(ws):
    count = ws.call("s", "ctx_search", query="parse_header", mode="count")
    assert count.text.splitlines()[0] == \
        'ctx_search "parse_header" · 6 files · 38 occurrences (2 code, 2 docs, 1 test, 1 vendored)'
    every = ws.call("s", "ctx_search", query="parse_header", exhaustive=True)
    heads = [line for line in every.text.splitlines() if not line.startswith(" ")]
    assert heads[0].endswith("exhaustive (path order) · files 1-6")
    assert [h.split(" ")[0] for h in heads[1:-1]] == [
        "docs/api.md", "docs/guide.md", "pkg/core.py", "pkg/util.py", "tests/test_core.py", "vendor/lib.py"]
    assert "more:" not in every.text


def test_search_flags_weak_matches_and_missing_terms(ws):
    reply = ws.call("s", "ctx_search", query="header zebra", mode="paths")
    assert reply.text.splitlines()[0].endswith("· weak: no file holds 'zebra'")
    assert reply.data["missing_terms"] == ["zebra"]


def test_same_call_same_bytes(ws):
    first = ws.call("a", "ctx_search", query="client request")
    ws.db.execute("DELETE FROM result_cache")
    assert ws.call("b", "ctx_search", query="client request").text == first.text


def test_ranking_signals_switch_off_and_change_the_cache_key(ws):
    ranked = ws.call("s", "ctx_search", query="client", mode="paths")
    flat = ws.call("s", "ctx_search", query="client", mode="paths",
                   off=frozenset({"defines_first", "path_priors", "eponymy", "saturation", "graph_distance"}))
    assert [f["path"] for f in ranked.data["files"]] == ["pkg/core.py", "docs/guide.md"]
    assert [f["path"] for f in flat.data["files"]] == ["docs/guide.md", "pkg/core.py"]
    assert ws.db.execute("SELECT count(*) FROM result_cache").fetchone()[0] == 2
    with pytest.raises(InvalidInput, match="ranking signal 'loud' is unknown"):
        ws.call("s", "ctx_search", query="x", off=frozenset({"loud"}))


# ---- ctx_read -----------------------------------------------------------------------------------

def test_full_is_verbatim_and_lines_is_exact(ws):
    full = ws.call("s", "ctx_read", path="pkg/core.py", mode="full")
    header, body = full.text.split("\n", 1)
    assert header.startswith("pkg/core.py · 24L · sha ") and header.endswith(" · mode=full")
    assert body == CORE
    lines = ws.call("s", "ctx_read", path="pkg/core.py", mode="lines:9-12")
    assert lines.text.splitlines()[1:] == CORE.splitlines()[8:12] + ["→ rest: ctx_read pkg/core.py mode=lines:13-24"]


def test_signatures_are_the_default_for_larger_code_and_say_they_are_lossy(ws):
    (ws.root / "pkg/big.py").write_text(CORE * 6, encoding="utf-8")
    ws.index(ws.root)
    reply = ws.call("s", "ctx_read", path="pkg/big.py")
    tokens = ws.db.execute("SELECT tokens FROM files WHERE path='pkg/big.py'").fetchone()[0]
    assert reply.text.splitlines()[0].endswith(f"· mode=signatures (full ≈ {tokens:,} tok)")
    assert reply.text.splitlines()[1:3] == [
        "constants: " + ", ".join(f"MAX_HEADER L{6 + 24 * copy}" for copy in range(6)),
        "def parse_header(line: str) -> Tuple[str, str]  L9-12"]
    assert "  async def request(method: str, url: str) -> str  L22-24" in reply.text.splitlines()
    assert ws.call("s", "ctx_read", path="pkg/big.py", mode="map").text.splitlines()[1:4] == [
        "imports: os, typing", "def parse_header(line: str) -> Tuple[str, str]  L9-12", "class HTTPClient  L15-24"]


def test_map_names_each_module_of_a_from_dot_import(ws):
    (ws.root / "pkg/both.py").write_text("from . import core, util\nfrom .core import parse_header\n\n\n"
                                         "def both():\n    return core, util, parse_header\n", encoding="utf-8")
    ws.index(ws.root)
    assert ws.call("s", "ctx_read", path="pkg/both.py", mode="map").text.splitlines()[1] == "imports: .core, .util"


def test_markdown_and_config_are_never_compressed_by_default(ws):
    for path in ("docs/guide.md", "pyproject.toml"):
        reply = ws.call("s", "ctx_read", path=path)
        assert reply.data["mode"] == "full"
        assert reply.text.split("\n", 1)[1] == (ws.root / path).read_text(encoding="utf-8")


def test_if_hash_short_circuits_only_on_the_current_sha(ws):
    sha = ws.call("s", "ctx_read", path="pkg/core.py").data["sha"]
    assert ws.call("s", "ctx_read", path="pkg/core.py", if_hash=sha[:8]).text == f"pkg/core.py · unchanged:{sha[:8]}"
    (ws.root / "pkg/core.py").write_text(CORE + "\n# edited\n", encoding="utf-8")
    assert "unchanged" not in ws.call("s", "ctx_read", path="pkg/core.py", if_hash=sha[:8]).text


@pytest.mark.parametrize("mode, message", [("lines:10:20", "expected lines:START-END"),
                                           ("lines:20-10", "START <= END"), ("loud", "is unknown")])
def test_malformed_modes_are_refused(ws, mode, message):
    with pytest.raises(InvalidInput, match=message):
        ws.call("s", "ctx_read", path="pkg/core.py", mode=mode)


def test_a_syntax_error_reads_as_an_approximate_outline(ws):
    reply = ws.call("s", "ctx_read", path="pkg/broken.py", mode="signatures")
    assert reply.text.splitlines()[1] == "(syntax error at line 4: approximate regex outline)"


def test_sections_mode_lists_markdown_sections(ws):
    reply = ws.call("s", "ctx_read", path="docs/guide.md", mode="sections")
    assert [line.split("  L")[0].strip() for line in reply.text.splitlines()[1:-1]] == [
        "# Guide", "## Install", "## Usage", "### Advanced usage", "## FAQ"]


# ---- ctx_doc ------------------------------------------------------------------------------------

def test_doc_outline_section_code_links_skeleton(ws):
    outline = ws.call("s", "ctx_doc", path="docs/guide.md", view="outline").text.splitlines()
    assert outline[0].startswith("docs/guide.md · ") and "mode=outline (full ≈ " in outline[0]
    lines = guide().splitlines()
    at = {title: lines.index(title) + 1 for title in ("## Install", "## Usage", "### Advanced usage", "## FAQ")}
    assert [line.split(" (~")[0] for line in outline[1:-1]] == [
        "L1 # Guide", f"  L{at['## Install']} ## Install", f"  L{at['## Usage']} ## Usage",
        f"    L{at['### Advanced usage']} ### Advanced usage", f"  L{at['## FAQ']} ## FAQ"]
    section = ws.call("s", "ctx_doc", path="docs/guide.md", view="section", pattern="install")
    assert section.text.split("\n", 1)[1] == "\n".join(
        lines[at["## Install"] - 1:at["## Usage"] - 1] + [f"in 'Guide' L1 · next 'Usage' L{at['## Usage']}"])
    code = ws.call("s", "ctx_doc", path="docs/guide.md", view="code", pattern="python").text.splitlines()
    fence = lines.index("```python") + 1
    assert code[1:] == [f"L{fence}-{fence + 3} ```python", "from pkg.core import parse_header", "parse_header('A: b')", "```"]
    links = ws.call("s", "ctx_doc", path="docs/guide.md", view="links").text.splitlines()
    usage = next(n for n, line in enumerate(lines, 1) if line.startswith("Call parse_header"))
    advanced = next(n for n, line in enumerate(lines, 1) if line.startswith("Clients reuse"))
    assert links[1:] == [f"L{usage} [the API] → api.md", f"L{usage} [missing] → nope.md (missing)",
                         f"L{advanced} [upstream] → https://example.org/x"]
    skeleton = ws.call("s", "ctx_doc", path="docs/guide.md", view="skeleton").text.splitlines()
    assert skeleton[1:3] == ["# Guide  L1", "  This guide explains the client."]


def test_a_section_with_large_subsections_shows_its_own_text_and_one_line_per_subsection(ws):
    lines = guide().splitlines()
    usage, advanced, faq = (lines.index(title) + 1 for title in ("## Usage", "### Advanced usage", "## FAQ"))
    section = ws.call("s", "ctx_doc", path="docs/guide.md", view="section", pattern="usa")
    header, rest = section.text.split("\n", 1)
    assert header.endswith(f" · section 'Usage' L{usage}-{advanced - 1} (~"
                           f"{estimate_tokens(chr(10).join(lines[usage - 1:advanced - 1]))} tok) · "
                           f"its subsections L{advanced}-{faq - 1} one line each")
    assert rest == "\n".join(lines[usage - 1:advanced - 1] + [
        f"  ### Advanced usage  L{advanced}-{faq - 1} "
        f"~{estimate_tokens(chr(10).join(lines[advanced - 1:faq - 1]))} tok",
        f"→ all of it: ctx_read docs/guide.md mode=lines:{usage}-{faq - 1} · "
        f"one: ctx_doc docs/guide.md --section L{advanced}",
        f"in 'Guide' L1 · prev 'Install' L{lines.index('## Install') + 1} · next 'FAQ' L{faq}",
        f"also matching: 'Advanced usage' L{advanced}"])
    assert (section.data["start"], section.data["end"], section.data["subsections"]) == \
        (usage, advanced - 1, [{"level": 3, "title": "Advanced usage", "start": advanced}])
    top = ws.call("s", "ctx_doc", path="docs/guide.md", view="section", pattern="Guide").text.splitlines()
    assert [line.split("  L")[0] for line in top if line.startswith("  #")] == \
        ["  ## Install", "  ## Usage", "  ## FAQ"]


def test_a_section_whose_subsections_are_small_comes_back_whole(ws):
    text = ("# Notes\n\n" + "Filler prose about the client.\n" * 80
            + "\n## Small\n\nA few words.\n\n### Tiny\n\nMore.\n")
    (ws.root / "docs/notes.md").write_text(text, encoding="utf-8")
    section = ws.call("s", "ctx_doc", path="docs/notes.md", view="section", pattern="Small")
    lines = text.splitlines()
    small = lines.index("## Small") + 1
    assert section.text.split("\n", 1)[1] == "\n".join(lines[small - 1:] + ["in 'Notes' L1"])
    assert section.data["subsections"] == []


def test_small_docs_come_back_whole(ws):
    reply = ws.call("s", "ctx_doc", path="docs/api.md", view="outline")
    assert reply.text == "docs/api.md · 3L · sha " + reply.data["sha"][:8] + \
        " · whole file (under 2048 bytes)\n# API\n\nparse_header(line) splits a header.\n"


def test_doc_errors_name_the_input(ws):
    with pytest.raises(NotFound, match="no section of docs/guide.md matches 'nothing here'"):
        ws.call("s", "ctx_doc", path="docs/guide.md", view="section", pattern="nothing here")
    with pytest.raises(InvalidInput, match="ctx_doc reads markdown; pkg/core.py is python"):
        ws.call("s", "ctx_doc", path="pkg/core.py")


# ---- ctx_impact ---------------------------------------------------------------------------------

def test_impact_of_a_file_and_of_a_symbol(ws):
    reply = ws.call("s", "ctx_impact", target="pkg/core.py")
    assert reply.text.splitlines() == [
        "ctx_impact pkg/core.py · approximate: static imports + name matches · depth≤3",
        "deps (0): -  (+2 outside the workspace: os, typing)",
        "dependents (2): pkg/util.py, tests/test_core.py",
        "transitive dependents (0): -",
        "tests: covered by 1 tests — tests/test_core.py · 1 non-test files affected",
        "→ ctx_read pkg/util.py"]
    symbol = ws.call("s", "ctx_impact", target="parse_header")
    assert symbol.data["defined_in"] == ["pkg/core.py"]
    assert [(u["path"], u["line"]) for u in symbol.data["uses"]] == [
        ("pkg/core.py", 23), ("pkg/util.py", 5), ("tests/test_core.py", 6), ("tests/test_core.py", 10),
        ("tests/test_core.py", 11)]
    method = ws.call("s", "ctx_impact", target="HTTPClient.request")
    assert method.data["defined_in"] == ["pkg/core.py"] and method.data["uses"] == []
    with pytest.raises(NotFound, match="'nowhere_defined' is neither"):
        ws.call("s", "ctx_impact", target="nowhere_defined")


# ---- ctx_context and ctx_expand -----------------------------------------------------------------

@pytest.mark.parametrize("budget", [100, 150, 250, 400, 1500])
def test_context_never_exceeds_its_budget_and_is_never_empty(ws, budget):
    reply = ws.call("s", "ctx_context", task="why does parse_header strip the value in HTTPClient",
                    token_budget=budget)
    assert estimate_tokens(reply.text) <= budget
    assert reply.data["terms"] == ["parse_header", "HTTPClient", "strip", "value"]
    assert "parse_header" in reply.text.split("\n", 2)[2]


def test_context_from_an_all_lowercase_task_and_expandable_omissions(ws):
    reply = ws.call("s", "ctx_context", task="the client request headers", token_budget=100)
    assert reply.data["terms"] == ["request", "headers", "client"]
    markers = [line for line in reply.text.splitlines() if line.startswith(("[omitted", "[downgraded"))]
    assert markers == ["[downgraded: definitions ~59 tok → ctx_expand @h:390a583f]"]
    handle = markers[0].rsplit(" ", 1)[1].rstrip("]")
    expanded = ws.call("s", "ctx_expand", handle=handle)
    assert expanded.text.startswith(f"{handle} · content\ndefinitions:\npkg/core.py:22 async def request(")


def test_symbolic_handles_round_trip_and_report_moves(ws):
    handle = "pkg/core.py#HTTPClient.request@L22"
    reply = ws.call("s", "ctx_expand", handle=handle)
    assert reply.text.splitlines()[1:] == CORE.splitlines()[21:24]
    (ws.root / "pkg/core.py").write_text("# one\n# two\n" + CORE, encoding="utf-8")
    moved = ws.call("s", "ctx_expand", handle=handle)
    assert moved.text.splitlines()[0].endswith("· moved: was L22, now L24")
    assert moved.data["content"] == reply.data["content"]
    with pytest.raises(InvalidInput, match="handle 'bogus' is malformed"):
        ws.call("s", "ctx_expand", handle="bogus")
    with pytest.raises(NotFound, match="@h:00000000"):
        ws.call("s", "ctx_expand", handle="@h:00000000")


# ---- governor and ledger ------------------------------------------------------------------------

def test_third_identical_call_in_the_window_is_nudged(ws):
    replies = [ws.call("agent", "ctx_search", query="parse_header", mode="paths") for _ in range(3)]
    assert replies[0].text == replies[1].text
    assert replies[2].text.splitlines()[-1] == (
        "nudge: same ctx_search call 3x in the last 3 calls — try ctx_read the top file (after two searches, "
        "read) or ctx_context for a task-shaped block")
    other = ws.call("other-session", "ctx_search", query="parse_header", mode="paths")
    assert "nudge" not in other.text
    for _ in range(6):      # the repeats slide out of the 8-call window
        ws.call("agent", "ctx_expand", handle="pkg/core.py#parse_header@L9")
    assert "nudge" not in ws.call("agent", "ctx_search", query="parse_header", mode="paths").text


def test_ledger_is_queryable_with_sql(ws):
    read = ws.call("s1", "ctx_read", path="pkg/core.py", mode="signatures")
    ws.call("s1", "ctx_read", path="pkg/core.py", mode="full")
    full = ws.db.execute("SELECT tokens FROM files WHERE path='pkg/core.py'").fetchone()[0]
    rows = list(ws.db.execute("SELECT verb, returned_tokens, full_read_tokens FROM ledger WHERE session='s1' "
                              "ORDER BY seq"))
    assert rows[0] == ("ctx_read", estimate_tokens(read.text), full)
    assert rows[1][2] == full
    savings = ws.db.execute("SELECT calls, full_read_tokens, nudges FROM ledger_savings WHERE session='s1'").fetchone()
    assert savings == (2, 2 * full, 0)


def test_a_changed_ranking_constant_never_serves_a_cached_result(ws, tmp_path):
    from cruxsql.workspace.ranking import RankingConfig

    default = ws.call("s", "ctx_search", query="parse_header", mode="paths")
    assert [f["path"] for f in default.data["files"]][:3] == ["pkg/core.py", "pkg/util.py", "tests/test_core.py"]
    with Workspace(tmp_path / "data", RankingConfig(test_prior=5.0)) as tuned:
        reply = tuned.call("s", "ctx_search", query="parse_header", mode="paths")
    assert [f["path"] for f in reply.data["files"]][:3] == ["pkg/core.py", "tests/test_core.py", "pkg/util.py"]


def test_pack_admits_by_value_emits_in_order_and_marks_omissions():
    from cruxsql.workspace.budget import Part, pack

    parts = [Part("snippets", 4, 3, "snippets: " + "word " * 40, "", "@h:0000000a"),
             Part("terms", 0, 0, "terms: a, b"),
             Part("definitions", 2, 1, "definitions:\n" + "def f(x): return x\n" * 10, "definitions: f", "@h:0000000b")]
    text, omitted = pack(parts, 30)
    assert text.splitlines()[0] == "terms: a, b"
    assert estimate_tokens(text) <= 30
    assert text.splitlines() == ["terms: a, b", "definitions: f",
                                 "[downgraded: definitions ~55 tok → ctx_expand @h:0000000b]"]
    assert omitted == []          # the snippets marker itself did not fit
    text, omitted = pack(parts, 45)
    assert omitted == ["[omitted: snippets ~55 tok → ctx_expand @h:0000000a]"]
    assert text.splitlines()[-1] == omitted[0] and estimate_tokens(text) <= 45
