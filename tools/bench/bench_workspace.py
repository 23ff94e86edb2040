"""Benchmark of the workspace verbs (seed 004, L1 retrieval): tokens saved against full reads, index times,
and a name-the-file recall check, on this repository and on a real sdist nobody here wrote.

    python tools/bench/bench_workspace.py [--sdist-dir DIR]

* Workspaces: this repository, and attrs 26.1.0 from PyPI (`pip download --no-binary :all: --no-deps
  attrs==26.1.0`, extracted into a temp dir; --sdist-dir reuses an extracted copy). attrs has Python code
  and markdown docs (docs/*.md, README.md, CHANGELOG.md).
* Tokens are the workspace estimator max(words × 1.3, chars / 4) (ctx-layer.md B6) for both sides; the
  baseline of every token figure is a full read of the same files, measured in the same process.
* ctx_read: mode=signatures and mode=map on every .py code file vs reading it whole (seed: −91%, outline
  vs read), and mode=auto (the default table: small files whole) for what an agent gets by default.
* ctx_doc: --outline, and --section of each doc's median-sized section, for markdown files ≥ 2 KB vs
  reading the file whole (seed: sections 12–53× smaller).
* ctx_search: the 30 identifier queries below (content mode, first page) vs reading the files the page
  points to (seed: −98%, symbol search vs read).
* Recall: for the same 30 queries, written down before the first run, the defining file must be in the
  top 3 of the ranking (goal ≥ 90%).
* Times: a fresh index build against the floor any index pays (read + SHA-256 of the same files), and
  incremental reindex with nothing changed / one file touched / one file edited.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from cruxsql.workspace import Workspace  # noqa: E402
from cruxsql.workspace.budget import estimate_tokens  # noqa: E402
from cruxsql.workspace.markdown import section_span, sections  # noqa: E402

SDIST = "attrs==26.1.0"
SEED = {"signatures": "−91%", "search": "−98%", "sections": "12–53×"}

# Written down before the first run: identifier → the file that defines it.
REPO_QUERIES = {
    "index_segment": "cruxsql/documents/postings.py", "Bm25Corpus": "cruxsql/documents/bm25.py",
    "split_words": "cruxsql/documents/analyzer.py", "decode_tfs": "cruxsql/documents/postings.py",
    "scan_within_budget": "cruxsql/documents/search.py", "ExpandedChunk": "cruxsql/documents/search.py",
    "rust_trim": "cruxsql/documents/chunking.py", "segments_dir": "cruxsql/documents/segments.py",
    "ChunkRecord": "cruxsql/documents/segments.py", "DocumentInput": "cruxsql/documents/lane.py",
    "read_checkpoint": "cruxsql/facts/view.py", "fsync_dir": "cruxsql/facts/journal.py",
    "PrivacyPolicy": "cruxsql/facts/privacy.py", "parse_ns": "cruxsql/facts/timestamps.py",
    "check_confidence": "cruxsql/facts/store.py", "ClearSupersedeEvent": "cruxsql/facts/codec.py",
    "format_f32": "cruxsql/facts/codec.py", "estimate_tokens_str": "cruxsql/recall/tokens.py",
    "legacy_fill": "cruxsql/recall/tokens.py", "salience_factor": "cruxsql/recall/freshness.py",
    "normalize_tenant": "cruxsql/recall/scope.py", "Timeline": "cruxsql/recall/fact_index.py",
    "tool_output_catalogue": "cruxsql/recall/crc_v1.py", "report_hash": "cruxsql/governance/erasure_proof.py",
    "needles_for": "cruxsql/governance/erasure_scan.py", "LegalHoldBlocked": "cruxsql/governance/compaction.py",
    "build_override_receipt": "cruxsql/governance/legal_holds.py",
    "iter_audit_events": "cruxsql/governance/audit_export.py", "progress_callback": "cruxsql/cli/common.py",
    "run_readonly_query": "cruxsql/sql_console.py",
}
ATTRS_QUERIES = {
    "cmp_using": "src/attr/_cmp.py", "get_generic_base": "src/attr/_compat.py",
    "set_run_validators": "src/attr/_config.py", "resolve_types": "src/attr/_funcs.py",
    "assoc": "src/attr/_funcs.py", "has": "src/attr/_funcs.py", "evolve": "src/attr/_make.py",
    "_ClassBuilder": "src/attr/_make.py", "_transform_attrs": "src/attr/_make.py",
    "make_class": "src/attr/_make.py", "_CountingAttr": "src/attr/_make.py", "fields_dict": "src/attr/_make.py",
    "_make_init_script": "src/attr/_make.py", "Factory": "src/attr/_make.py", "define": "src/attr/_next_gen.py",
    "inspect": "src/attr/_next_gen.py", "VersionInfo": "src/attr/_version_info.py",
    "default_if_none": "src/attr/converters.py", "to_bool": "src/attr/converters.py",
    "FrozenInstanceError": "src/attr/exceptions.py", "NotAnAttrsClassError": "src/attr/exceptions.py",
    "DefaultAlreadySetError": "src/attr/exceptions.py", "_split_what": "src/attr/filters.py",
    "instance_of": "src/attr/validators.py", "_MatchesReValidator": "src/attr/validators.py",
    "set_disabled": "src/attr/validators.py", "frozen": "src/attr/setters.py",
    "AttrsInstance": "src/attr/__init__.py", "_AnnotationExtractor": "src/attr/_compat.py",
    "_CacheHashWrapper": "src/attr/_make.py",
}


def fetch_sdist(target: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps", SDIST,
                    "-d", str(target)], check=True, capture_output=True)
    archive = next(target.glob("*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return next(p for p in target.iterdir() if p.is_dir())


def pct(ours: int, base: int) -> str:
    return f"{(ours - base) / base * 100:+.1f}%" if base else "-"


def row(label: str, ours: str, base: str, ratio: str, seed: str = "") -> None:
    print(f"  {label:<44} {ours:>14} {base:>14} {ratio:>10} {seed:>8}")


def bench(name: str, root: Path, queries: dict[str, str], data: Path, verbose: bool = False) -> dict[str, float]:
    print(f"\n== {name}: {root}")
    row("figure", "ctx verbs", "full read", "ratio", "seed")
    results: dict[str, float] = {}
    with Workspace(data) as ws:
        started = time.perf_counter()
        report = ws.index(root)
        build = time.perf_counter() - started
        files = [p for (p,) in ws.db.execute("SELECT path FROM files ORDER BY path")]
        started = time.perf_counter()
        for rel in files:
            hashlib.sha256((root / rel).read_bytes()).hexdigest()
        floor = time.perf_counter() - started
        s = "session-bench"

        code = [p for (p,) in ws.db.execute("SELECT path FROM files WHERE path LIKE '%.py' AND path_class='code' "
                                             "ORDER BY path")]
        full = sum(ws.db.execute("SELECT tokens FROM files WHERE path=?", (rel,)).fetchone()[0] for rel in code)
        for mode in ("signatures", "map", "auto"):
            spent = 0
            per_file = []
            for rel in code:
                reply = ws.call(s, "ctx_read", path=rel, mode=mode)
                whole = ws.db.execute("SELECT tokens FROM files WHERE path=?", (rel,)).fetchone()[0]
                spent += estimate_tokens(reply.text)
                per_file.append(estimate_tokens(reply.text) / max(1, whole))
            row(f"ctx_read mode={mode} ({len(code)} .py files)", f"{spent:,}", f"{full:,}", pct(spent, full),
                SEED["signatures"] if mode != "auto" else "")
            row(f"  median per file ({mode})", f"{statistics.median(per_file):.1%}", "100%", "", "")
            results[mode] = (spent - full) / full

        docs = [(p, t) for p, t in ws.db.execute("SELECT path, tokens FROM files WHERE lang='markdown' AND bytes >= 2048 "
                                                 "ORDER BY path")]
        outline_sum = section_sum = docs_full = 0
        ratios = []
        for rel, whole in docs:
            outline = ws.call(s, "ctx_doc", path=rel, view="outline")
            text = (root / rel).read_text(encoding="utf-8")
            found = sections(text)
            outline_sum += estimate_tokens(outline.text)
            docs_full += whole
            if not found:
                continue
            lines = text.splitlines()
            sized = sorted(found, key=lambda sec: (estimate_tokens("\n".join(
                lines[section_span(found, sec, len(lines))[0] - 1:section_span(found, sec, len(lines))[1]])), sec.start))
            median = sized[len(sized) // 2]
            section = ws.call(s, "ctx_doc", path=rel, view="section", pattern=f"L{median.start}")
            section_sum += estimate_tokens(section.text)
            ratios.append(whole / estimate_tokens(section.text))
            if verbose:
                print(f"    {rel}: {whole:,} tok, {len(found)} sections, median section "
                      f"{estimate_tokens(section.text):,} tok → {ratios[-1]:.1f}x")
        if docs:
            row(f"ctx_doc --outline ({len(docs)} .md ≥ 2 KB)", f"{outline_sum:,}", f"{docs_full:,}",
                pct(outline_sum, docs_full), "")
            ratios.sort()
            row("ctx_doc --section (median section)", f"{section_sum:,}", f"{docs_full:,}",
                f"{docs_full / max(1, section_sum):.1f}x", SEED["sections"])
            quart = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
            row("  per doc full/section: min·q1·median·q3·max", f"{ratios[0]:.0f}·{quart[0]:.0f}·{quart[1]:.0f}·"
                f"{quart[2]:.0f}·{ratios[-1]:.0f}x", "", "", "")
            results["section_ratio"] = docs_full / max(1, section_sum)

        found_top3 = 0
        search_sum = pointed_sum = 0
        misses = []
        for query, expected in queries.items():
            paths = ws.call(s, "ctx_search", query=query, mode="paths").data["files"]
            top = [f["path"] for f in paths[:3]]
            if expected in top:
                found_top3 += 1
            else:
                misses.append(f"{query} → {top}")
            reply = ws.call(s, "ctx_search", query=query)
            search_sum += estimate_tokens(reply.text)
            pointed_sum += sum(ws.db.execute("SELECT tokens FROM files WHERE path=?", (p,)).fetchone()[0]
                               for p in reply.files)
        row(f"ctx_search, first page ({len(queries)} queries)", f"{search_sum:,}", f"{pointed_sum:,}",
            pct(search_sum, pointed_sum), SEED["search"])
        row("recall: defining file in top 3", f"{found_top3}/{len(queries)}", "", f"{found_top3 / len(queries):.0%}",
            "≥90%")
        for miss in misses:
            print(f"    miss: {miss}")
        results["search"] = (search_sum - pointed_sum) / pointed_sum
        results["recall"] = found_top3 / len(queries)

        row(f"index build ({report.files} files)", f"{build:.2f}s", f"{floor:.3f}s", f"{build / floor:.0f}x", "")
        started = time.perf_counter()
        again = ws.index(root)
        idle = time.perf_counter() - started
        row("reindex, nothing changed", f"{idle:.3f}s", f"{build:.2f}s", f"{idle / build:.2f}x", "")
        assert again.unchanged == report.files
        target = root / (code[len(code) // 2])
        original = target.read_bytes()
        stat = target.stat()
        try:
            import os
            os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
            started = time.perf_counter()
            touched = ws.index(root)
            row("reindex, one file touched (same hash)", f"{time.perf_counter() - started:.3f}s", f"{build:.2f}s", "", "")
            assert touched.rehashed_unchanged == 1
            target.write_bytes(original + b"\n# edited by bench_workspace\n")
            started = time.perf_counter()
            edited = ws.index(root)
            row("reindex, one file edited", f"{time.perf_counter() - started:.3f}s", f"{build:.2f}s", "", "")
            assert edited.changed == 1
        finally:
            target.write_bytes(original)
            os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        savings = ws.db.execute("SELECT calls, returned_tokens, full_read_tokens, saved_share FROM ledger_savings "
                                "WHERE session=?", (s,)).fetchone()
        print(f"  ledger ({s}): {savings[0]} calls, {savings[1]:,} tok returned vs {savings[2]:,} tok of full "
              f"reads (saved {savings[3]:.1%})")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sdist-dir", type=Path, help="An extracted attrs sdist to reuse instead of downloading.")
    parser.add_argument("--verbose", action="store_true", help="One line per markdown file measured.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        sdist = args.sdist_dir or fetch_sdist(tmp_path / "sdist")
        bench("this repository", REPO, REPO_QUERIES, tmp_path / "data-repo", args.verbose)
        bench(f"{SDIST} (PyPI sdist)", sdist, ATTRS_QUERIES, tmp_path / "data-sdist", args.verbose)


if __name__ == "__main__":
    main()
